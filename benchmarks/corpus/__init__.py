"""Loopwright's own bug corpus: small repositories with one real bug each, and their judges."""
