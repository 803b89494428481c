"""One mission from start to verdict: fix and build share the run skeleton in base."""
