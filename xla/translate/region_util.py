"""Helpers on StableHLO regions shared by the importer and the lowerings of
region-carrying ops."""

from __future__ import annotations

from typing import Sequence

from stablehlo import ir as core


def free_values(regions: Sequence[core.Region]) -> list[core.Value]:
  """Values used inside `regions` but defined outside them, in first-use
  order."""
  inside: set[int] = set()
  ops = []
  for region in regions:
    for block in region.blocks:
      inside.add(id(block))
      for op in block.operations:
        for nested in op.walk():
          inside.add(id(nested))
          ops.append(nested)
          for r in nested.regions:
            for b in r.blocks:
              inside.add(id(b))
  seen: set[int] = set()
  result = []
  for op in ops:
    for v in op.operands:
      if id(v.owner) not in inside and id(v) not in seen:
        seen.add(id(v))
        result.append(v)
  return result
