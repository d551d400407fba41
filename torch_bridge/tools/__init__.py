"""Command-line tools of the PyTorch bridge."""
