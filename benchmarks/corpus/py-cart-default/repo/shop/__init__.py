"""A shopping cart for the checkout service."""
