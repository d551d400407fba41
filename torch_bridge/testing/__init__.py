"""Test models and eager comparisons of the PyTorch bridge."""
