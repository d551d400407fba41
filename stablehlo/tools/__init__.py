"""Command-line tools of the StableHLO component."""
