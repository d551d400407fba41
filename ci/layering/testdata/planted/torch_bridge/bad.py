"""Planted: the bridge may not use the compiler directly."""
from xla.service import hlo  # noqa
