"""Command-line tools of the xla package."""
