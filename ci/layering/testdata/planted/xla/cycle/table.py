"""Planted: a registration table that imports the modules registering into it."""
from xla.cycle import family  # an import cycle with family.py
