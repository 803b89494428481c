"""Application settings: defaults, per-environment overrides, loading."""
