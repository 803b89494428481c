"""Fetch many pages concurrently for the link checker."""
