"""Loads the lowering families, which register themselves in `registry`."""

from __future__ import annotations

import importlib

_FAMILIES = (
    "torch_bridge._src.ops_elementwise",
    "torch_bridge._src.ops_shape",
    "torch_bridge._src.ops_reduce",
    "torch_bridge._src.ops_linalg",
    "torch_bridge._src.ops_nn",
)

_loaded = False


def load() -> None:
  global _loaded
  if not _loaded:
    for name in _FAMILIES:
      importlib.import_module(name)
    _loaded = True
