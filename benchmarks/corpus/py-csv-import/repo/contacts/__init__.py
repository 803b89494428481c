"""Import contacts from CSV exports."""
