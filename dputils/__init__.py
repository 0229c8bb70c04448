"""dputils."""
