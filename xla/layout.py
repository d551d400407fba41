"""Array layouts (xla/layout.h): how an array's elements lie in memory.

A layout is an immutable value. Its text form is XLA's:

    {1,0}                       minor_to_major only
    {1,0:T(8,128)(2,1)S(1)}     with tiles and a memory space

after the colon, in this order: D(dim level types) T(tiles) L(tail padding
alignment) #(index type) *(pointer type) E(element size in bits)
S(memory space) SC(split configs) P(physical shape) M(dynamic shape metadata
prefix bytes); each part is printed only when it differs from its default.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from xla import primitive_util
from xla.xla_data import PrimitiveType

# A tile dimension that combines the dimensions it covers (printed `*`).
COMBINE_DIMENSION = -(2**63)


@dataclasses.dataclass(frozen=True)
class DimLevel:
  """One entry of a sparse layout's dimension level types.

  kind is "D" (dense), "C" (compressed), "S" (singleton) or
  "H" (loose compressed); `+` marks non-unique, `~` non-ordered.
  """

  kind: str = "D"
  unique: bool = True
  ordered: bool = True

  def to_string(self) -> str:
    return (self.kind + ("" if self.unique else "+") +
            ("" if self.ordered else "~"))


@dataclasses.dataclass(frozen=True)
class SplitConfig:
  dimension: int
  split_indices: tuple[int, ...]

  def to_string(self) -> str:
    return f"({self.dimension}:{','.join(map(str, self.split_indices))})"


def tile_to_string(tile: tuple[int, ...]) -> str:
  return "(" + ",".join("*" if d == COMBINE_DIMENSION else str(d)
                        for d in tile) + ")"


@dataclasses.dataclass(frozen=True)
class Layout:
  """A dense (or sparse) array layout; see the module docstring."""

  minor_to_major: tuple[int, ...] = ()
  dim_level_types: tuple[DimLevel, ...] = ()
  tiles: tuple[tuple[int, ...], ...] = ()
  tail_padding_alignment_in_elements: int = 1
  index_primitive_type: PrimitiveType = PrimitiveType.PRIMITIVE_TYPE_INVALID
  pointer_primitive_type: PrimitiveType = PrimitiveType.PRIMITIVE_TYPE_INVALID
  element_size_in_bits: int = 0
  memory_space: int = 0
  split_configs: tuple[SplitConfig, ...] = ()
  # A `xla.shape.Shape` (typed loosely: shape.py imports this module).
  physical_shape: Optional[Any] = None
  dynamic_shape_metadata_prefix_bytes: int = 0

  def __post_init__(self):
    object.__setattr__(self, "minor_to_major",
                       tuple(int(d) for d in self.minor_to_major))
    object.__setattr__(self, "tiles",
                       tuple(tuple(int(d) for d in t) for t in self.tiles))

  def to_string(self) -> str:
    extras = []
    if self.dim_level_types:
      extras.append(
          "D(" + ",".join(d.to_string() for d in self.dim_level_types) + ")")
    if self.tiles:
      extras.append("T" + "".join(tile_to_string(t) for t in self.tiles))
    if self.tail_padding_alignment_in_elements != 1:
      extras.append(f"L({self.tail_padding_alignment_in_elements})")
    if self.index_primitive_type != PrimitiveType.PRIMITIVE_TYPE_INVALID:
      extras.append(
          f"#({primitive_util.lowercase_name(self.index_primitive_type)})")
    if self.pointer_primitive_type != PrimitiveType.PRIMITIVE_TYPE_INVALID:
      extras.append(
          f"*({primitive_util.lowercase_name(self.pointer_primitive_type)})")
    if self.element_size_in_bits:
      extras.append(f"E({self.element_size_in_bits})")
    if self.memory_space:
      extras.append(f"S({self.memory_space})")
    if self.split_configs:
      extras.append("SC" + "".join(s.to_string() for s in self.split_configs))
    if self.physical_shape is not None:
      extras.append(f"P({self.physical_shape.to_string(print_layout=True)})")
    if self.dynamic_shape_metadata_prefix_bytes:
      extras.append(f"M({self.dynamic_shape_metadata_prefix_bytes})")
    body = ",".join(str(d) for d in self.minor_to_major)
    if extras:
      body += ":" + "".join(extras)
    return "{" + body + "}"

  def __str__(self) -> str:
    return self.to_string()

  def is_default_for_rank(self) -> bool:
    """True if this is the plain row-major layout {r-1,...,0}."""
    rank = len(self.minor_to_major)
    return (self == default_layout(rank))


def default_layout(rank: int) -> Layout:
  """The row-major layout: the last dimension is the most minor."""
  return Layout(minor_to_major=tuple(range(rank - 1, -1, -1)))
