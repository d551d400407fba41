"""Planted: imports the private _src of another component."""
from stablehlo._src.ir import core  # another component's _src
