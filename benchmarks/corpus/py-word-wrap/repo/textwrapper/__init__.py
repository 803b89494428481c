"""Wrap text for fixed-width terminals and plain-text emails."""
