"""Planted: what the bridge may use."""
import pjrt  # noqa
import stablehlo  # noqa
import support  # noqa
from torch_bridge import backend  # noqa
