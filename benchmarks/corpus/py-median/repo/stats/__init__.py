"""Descriptive statistics for response-time dashboards."""
