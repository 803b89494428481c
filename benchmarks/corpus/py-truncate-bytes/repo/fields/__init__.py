"""Fit text into byte-limited protocol fields."""
