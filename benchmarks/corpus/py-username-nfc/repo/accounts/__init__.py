"""User accounts: registration and lookup by username."""
