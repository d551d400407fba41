"""The ATen -> StableHLO lowering table.

One entry per ATen overload, keyed by its full name ("aten.addmm.default"),
registered with `@lowering(...)` where the lowering is defined (family
modules `ops_*.py`). An entry holds:
  * `lower(ctx, *args, **kwargs)`: emits StableHLO through `ctx.b` (a
    `mlir.FunctionBuilder`); fx-node arguments arrive as `mlir.Value`s,
    everything else as given in the graph; returns a Value or a list of them;
  * `check(node)`: the op's own dtype / attribute checks, run before any
    lowering; it returns None when the node is supported and a reason
    otherwise. The generic checks (static shapes, supported dtypes) are in
    `support.py`.

This module is a leaf: the family modules import it, never the reverse
(`ops.load()` imports them).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import support


class LoweringError(support.UnimplementedError):
  """An ATen op (or one of its attribute values) has no lowering."""

  def __init__(self, op: str, reason: str):
    super().__init__(f"{op}: {reason}")
    self.op = op
    self.reason = reason


@dataclasses.dataclass(frozen=True)
class Lowering:
  name: str
  lower: Callable[..., Any]
  check: Callable[[Any], str | None] | None = None


_TABLE: dict[str, Lowering] = {}


def lowering(*names: str, check: Callable[[Any], str | None] | None = None):
  """Registers the decorated function as the lowering of each of `names`."""

  def register(fn):
    for name in names:
      if name in _TABLE:
        raise support.AlreadyExistsError(
            f"a lowering of {name} is already registered "
            f"({_TABLE[name].lower.__module__})")
      _TABLE[name] = Lowering(name, fn, check)
    return fn

  return register


def lookup(name: str) -> Lowering | None:
  return _TABLE.get(name)


def names() -> list[str]:
  return sorted(_TABLE)
