"""Invoice arithmetic for a small shop."""

from invoice.totals import Line, invoice_total, line_total

__all__ = ["Line", "invoice_total", "line_total"]
