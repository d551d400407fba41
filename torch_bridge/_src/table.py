"""The public view of the lowering table."""

from __future__ import annotations

from torch_bridge._src import ops
from torch_bridge._src import registry


def lowered_ops() -> list[str]:
  """The ATen overloads ("aten.addmm.default") that have a lowering."""
  ops.load()
  return registry.names()
