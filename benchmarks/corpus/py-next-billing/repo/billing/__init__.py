"""Subscription billing dates."""
