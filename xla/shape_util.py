"""Shape helpers (xla/shape_util.h, xla/layout_util.h).

Construction (`make_shape`, `make_tuple_shape`, `scalar`), comparison
(`compatible`, `equal_ignoring_layout`, `same_dimensions`), sizes
(`element_count`, `byte_size_of`), tuple navigation by shape index
(`get_subshape`, `leaf_shapes`) and layout defaults.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterator, Sequence

import support
from xla import primitive_util
from xla.layout import default_layout
from xla.layout import Layout
from xla.shape import Shape
from xla.xla_data import PrimitiveType

ShapeIndex = tuple[int, ...]


def make_shape(element_type: PrimitiveType, dimensions: Sequence[int] = (),
               dynamic_dimensions: Sequence[bool] = ()) -> Shape:
  """An array shape without a layout."""
  return Shape(element_type, tuple(dimensions), tuple(dynamic_dimensions))


def make_shape_with_layout(element_type: PrimitiveType,
                           dimensions: Sequence[int],
                           minor_to_major: Sequence[int]) -> Shape:
  return Shape.array(element_type, dimensions, tuple(minor_to_major))


def make_shape_with_default_layout(element_type: PrimitiveType,
                                   dimensions: Sequence[int] = ()) -> Shape:
  return Shape.array(element_type, dimensions,
                     default_layout(len(dimensions)))


def scalar(element_type: PrimitiveType) -> Shape:
  return Shape(element_type)


def make_tuple_shape(shapes: Sequence[Shape]) -> Shape:
  return Shape.tuple_of(shapes)


# -- comparison ----------------------------------------------------------------


def compatible(a: Shape, b: Shape) -> bool:
  """Same structure, element types and sizes (dynamic-ness and layouts are
  ignored), as ShapeUtil::Compatible."""
  if a.is_tuple() or b.is_tuple():
    return (a.is_tuple() and b.is_tuple() and
            len(a.tuple_shapes) == len(b.tuple_shapes) and
            all(compatible(x, y) for x, y in zip(a.tuple_shapes,
                                                 b.tuple_shapes)))
  if a.is_buffer() or b.is_buffer():
    return (a.is_buffer() and b.is_buffer() and
            compatible(a.tuple_shapes[0], b.tuple_shapes[0]))
  return a.element_type == b.element_type and a.dimensions == b.dimensions


def compatible_ignoring_element_type(a: Shape, b: Shape) -> bool:
  if a.is_tuple() or b.is_tuple():
    return (a.is_tuple() and b.is_tuple() and
            len(a.tuple_shapes) == len(b.tuple_shapes) and
            all(compatible_ignoring_element_type(x, y)
                for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
  if a.is_array() != b.is_array():
    return False
  if not a.is_array():
    return a.element_type == b.element_type
  return a.dimensions == b.dimensions


def equal_ignoring_layout(a: Shape, b: Shape) -> bool:
  """Equal including dynamic dimensions, but not layouts."""
  return a.without_layout() == b.without_layout()


def same_dimensions(a: Shape, b: Shape) -> bool:
  return a.dimensions == b.dimensions


def same_element_type(a: Shape, b: Shape) -> bool:
  return a.element_type == b.element_type


# -- sizes ---------------------------------------------------------------------


def element_count(shape: Shape) -> int:
  """Elements of an array shape (upper bounds for dynamic dimensions)."""
  if not shape.is_array():
    raise support.InvalidArgumentError(
        f"element_count of non-array shape {shape.to_string()}")
  if shape.is_unbounded_dynamic():
    raise support.InvalidArgumentError(
        f"element_count of unbounded shape {shape.to_string()}")
  return math.prod(shape.dimensions)


def byte_size_of(shape: Shape, pointer_size: int = 8) -> int:
  """Bytes of a dense unpadded buffer of `shape` (tuples: a pointer each)."""
  if shape.is_tuple():
    return pointer_size * len(shape.tuple_shapes)
  if shape.is_token() or shape.is_opaque():
    return 0
  if shape.is_buffer():
    return byte_size_of(shape.tuple_shapes[0], pointer_size)
  bits = primitive_util.bit_width(shape.element_type)
  count = element_count(shape)
  if bits < 8:
    return (count * bits + 7) // 8
  return count * primitive_util.byte_width(shape.element_type)


# -- tuples and shape indices --------------------------------------------------


def get_subshape(shape: Shape, index: ShapeIndex) -> Shape:
  """The subshape at `index` ({} is the shape itself)."""
  for i in index:
    if not shape.is_tuple() or not 0 <= i < len(shape.tuple_shapes):
      raise support.InvalidArgumentError(
          f"invalid shape index {{{','.join(map(str, index))}}} for "
          f"{shape.to_string()}")
    shape = shape.tuple_shapes[i]
  return shape


def is_valid_index(shape: Shape, index: ShapeIndex) -> bool:
  for i in index:
    if not shape.is_tuple() or not 0 <= i < len(shape.tuple_shapes):
      return False
    shape = shape.tuple_shapes[i]
  return True


def subshapes(shape: Shape,
              prefix: ShapeIndex = ()) -> Iterator[tuple[ShapeIndex, Shape]]:
  """Every (index, subshape) in pre-order, the shape itself first."""
  yield prefix, shape
  if shape.is_tuple():
    for i, s in enumerate(shape.tuple_shapes):
      yield from subshapes(s, prefix + (i,))


def leaf_shapes(shape: Shape) -> list[tuple[ShapeIndex, Shape]]:
  """The non-tuple subshapes, in pre-order."""
  return [(i, s) for i, s in subshapes(shape) if not s.is_tuple()]


def leaf_count(shape: Shape) -> int:
  return len(leaf_shapes(shape))


def tuple_element_count(shape: Shape) -> int:
  if not shape.is_tuple():
    raise support.InvalidArgumentError(
        f"{shape.to_string()} is not a tuple shape")
  return len(shape.tuple_shapes)


def is_empty_tuple(shape: Shape) -> bool:
  return shape.is_tuple() and not shape.tuple_shapes


def is_nested_tuple(shape: Shape) -> bool:
  return shape.is_tuple() and any(s.is_tuple() for s in shape.tuple_shapes)


# -- layouts -------------------------------------------------------------------


def with_default_layouts(shape: Shape, replace: bool = False) -> Shape:
  """Gives every array leaf lacking a layout (all, if `replace`) the default
  row-major layout; scalars get the empty layout."""
  if shape.is_tuple() or shape.is_buffer():
    return dataclasses.replace(
        shape, tuple_shapes=tuple(with_default_layouts(s, replace)
                                  for s in shape.tuple_shapes))
  if shape.is_array() and (replace or shape.layout is None):
    return shape.with_layout(default_layout(shape.rank))
  return shape


def has_default_layout(shape: Shape) -> bool:
  return all(s.layout is None or s.layout == default_layout(s.rank)
             for _, s in leaf_shapes(shape) if s.is_array())


def minor_to_major(shape: Shape) -> tuple[int, ...]:
  """The shape's minor_to_major, defaulting to row-major."""
  layout = shape.layout or default_layout(shape.rank)
  return layout.minor_to_major


def layout_or_default(shape: Shape) -> Layout:
  return shape.layout or default_layout(shape.rank)


# -- array helpers -------------------------------------------------------------


def change_element_type(shape: Shape, element_type: PrimitiveType) -> Shape:
  if shape.is_tuple():
    return make_tuple_shape([change_element_type(s, element_type)
                             for s in shape.tuple_shapes])
  return shape.with_element_type(element_type)


def permute_dimensions(permutation: Sequence[int], shape: Shape) -> Shape:
  """The shape whose dimension i is the input's dimension permutation[i]."""
  dims = tuple(shape.dimensions[p] for p in permutation)
  dyn = tuple(shape.dynamic_dimensions[p] for p in permutation)
  return Shape(shape.element_type, dims, dyn)


def human_string(shape: Shape) -> str:
  return shape.to_string(print_layout=False)


def shape_index_to_string(index: ShapeIndex) -> str:
  return "{" + ",".join(str(i) for i in index) + "}"
