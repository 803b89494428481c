"""Human-friendly durations for the scheduler configuration."""
