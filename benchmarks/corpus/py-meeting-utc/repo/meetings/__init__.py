"""Meeting scheduling across time zones."""
