"""Planted: registers into table.py, which imports this module."""
from xla.cycle.table import register  # an import cycle with table.py
