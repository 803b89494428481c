"""Request throttling for the public API."""
