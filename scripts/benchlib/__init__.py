"""podfs benchmark: the package behind scripts/bench (whose docstring is the spec)."""
