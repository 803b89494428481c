"""Warehouse stock and order intake."""
