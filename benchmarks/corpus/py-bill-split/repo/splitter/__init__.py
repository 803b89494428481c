"""Split restaurant bills between diners."""
