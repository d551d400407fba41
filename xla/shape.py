"""Shapes (xla/shape.h): arrays, tuples, tokens, opaque and buffer values.

A `Shape` is an immutable value. Arrays have an element type, dimension sizes
(each an exact size, an upper bound `<=N` when dynamic, or `?` when unbounded)
and an optional layout; tuples have element shapes; token / opaque have
neither. Text forms, as XLA prints them:

    f32[4,2]{1,0}      f32[]      (f32[2], s32[])      token[]
    f32[<=4]           f32[?]     b(f32[4])            opaque[]

Construct shapes with the helpers of `xla.shape_util` or the classmethods
here. `==` compares everything including layouts; use
`shape_util.compatible` / `equal_ignoring_layout` for weaker notions.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Optional, Sequence

import support
from xla import primitive_util
from xla.layout import Layout
from xla.xla_data import PrimitiveType

# Dimension size of an unbounded dynamic dimension (Shape::kUnboundedSize).
UNBOUNDED_SIZE = -(2**63)


@dataclasses.dataclass(frozen=True)
class Shape:
  """See the module docstring."""

  element_type: PrimitiveType
  dimensions: tuple[int, ...] = ()
  dynamic_dimensions: tuple[bool, ...] = ()
  tuple_shapes: tuple["Shape", ...] = ()
  layout: Optional[Layout] = None

  def __post_init__(self):
    et = self.element_type
    if type(et) is not PrimitiveType:  # pylint: disable=unidiomatic-typecheck
      et = PrimitiveType(et)
      object.__setattr__(self, "element_type", et)
    dims = tuple(map(int, self.dimensions))
    object.__setattr__(self, "dimensions", dims)
    dyn = tuple(map(bool, self.dynamic_dimensions))
    if not dyn:
      dyn = (False,) * len(dims)
    object.__setattr__(self, "dynamic_dimensions", dyn)
    object.__setattr__(self, "tuple_shapes", tuple(self.tuple_shapes))
    if len(dyn) != len(dims):
      raise support.InvalidArgumentError(
          f"shape has {len(dims)} dimensions but {len(dyn)} dynamic flags")
    if et == PrimitiveType.TUPLE:
      if dims:
        raise support.InvalidArgumentError("a tuple shape has no dimensions")
    elif et == PrimitiveType.BUFFER:
      if dims or len(self.tuple_shapes) != 1:
        raise support.InvalidArgumentError(
            "a buffer shape wraps exactly one array shape")
    elif self.tuple_shapes:
      raise support.InvalidArgumentError(
          f"only tuple shapes have element shapes, not "
          f"{primitive_util.lowercase_name(et)}")
    elif et in (PrimitiveType.TOKEN, PrimitiveType.OPAQUE_TYPE) and dims:
      raise support.InvalidArgumentError(
          f"{primitive_util.lowercase_name(et)} shapes have no dimensions")
    elif et == PrimitiveType.PRIMITIVE_TYPE_INVALID:
      raise support.InvalidArgumentError("invalid primitive type in shape")
    for i, (d, is_dyn) in enumerate(zip(dims, dyn)):
      if d == UNBOUNDED_SIZE:
        if not is_dyn:
          raise support.InvalidArgumentError(
              f"dimension {i} is unbounded but not marked dynamic")
      elif d < 0:
        raise support.InvalidArgumentError(
            f"dimension {i} has negative size {d}")
    if self.layout is not None:
      if not self.is_array():
        raise support.InvalidArgumentError(
            "only array shapes carry a layout")
      if len(self.layout.minor_to_major) != len(dims):
        raise support.InvalidArgumentError(
            f"layout {self.layout.to_string()} does not match rank "
            f"{len(dims)}")
      if sorted(self.layout.minor_to_major) != list(range(len(dims))):
        raise support.InvalidArgumentError(
            f"layout {self.layout.to_string()} is not a permutation of the "
            f"dimensions")

  # -- constructors ------------------------------------------------------------

  @classmethod
  def array(cls, element_type: PrimitiveType, dimensions: Sequence[int] = (),
            layout: Optional[Layout | Sequence[int]] = None,
            dynamic_dimensions: Sequence[bool] = ()) -> "Shape":
    """An array shape; `layout` may be a Layout or a minor_to_major list."""
    if layout is not None and not isinstance(layout, Layout):
      layout = Layout(minor_to_major=tuple(layout))
    return cls(element_type, tuple(dimensions), tuple(dynamic_dimensions),
               (), layout)

  @classmethod
  def tuple_of(cls, shapes: Iterable["Shape"]) -> "Shape":
    return cls(PrimitiveType.TUPLE, tuple_shapes=tuple(shapes))

  @classmethod
  def token(cls) -> "Shape":
    return cls(PrimitiveType.TOKEN)

  @classmethod
  def opaque(cls) -> "Shape":
    return cls(PrimitiveType.OPAQUE_TYPE)

  @classmethod
  def buffer(cls, array_shape: "Shape") -> "Shape":
    return cls(PrimitiveType.BUFFER, tuple_shapes=(array_shape,))

  # -- predicates --------------------------------------------------------------

  def is_array(self) -> bool:
    return primitive_util.is_array_type(self.element_type)

  def is_tuple(self) -> bool:
    return self.element_type == PrimitiveType.TUPLE

  def is_token(self) -> bool:
    return self.element_type == PrimitiveType.TOKEN

  def is_opaque(self) -> bool:
    return self.element_type == PrimitiveType.OPAQUE_TYPE

  def is_buffer(self) -> bool:
    return self.element_type == PrimitiveType.BUFFER

  def is_scalar(self) -> bool:
    return self.is_array() and not self.dimensions

  def is_dynamic(self) -> bool:
    """True if any dimension (of any leaf) is dynamic."""
    if self.is_tuple():
      return any(s.is_dynamic() for s in self.tuple_shapes)
    return any(self.dynamic_dimensions)

  def is_unbounded_dynamic(self) -> bool:
    if self.is_tuple():
      return any(s.is_unbounded_dynamic() for s in self.tuple_shapes)
    return any(d == UNBOUNDED_SIZE for d in self.dimensions)

  def has_layout(self) -> bool:
    """True if every array leaf carries a layout."""
    if self.is_tuple():
      return all(s.has_layout() for s in self.tuple_shapes)
    if self.is_array():
      return self.layout is not None
    return True

  @property
  def rank(self) -> int:
    return len(self.dimensions)

  # -- derived shapes ----------------------------------------------------------

  # Shapes are immutable: the derived-shape methods below return `self`
  # when nothing would change (building a shape is not cheap, and the HLO
  # passes ask for layout-free shapes of layout-free shapes all the time).

  def with_layout(self, layout: Optional[Layout | Sequence[int]]) -> "Shape":
    if layout is not None and not isinstance(layout, Layout):
      layout = Layout(minor_to_major=tuple(layout))
    if layout == self.layout:
      return self
    return dataclasses.replace(self, layout=layout)

  def without_layout(self) -> "Shape":
    """This shape with every layout (of every leaf) removed."""
    if self.is_tuple() or self.is_buffer():
      shapes = tuple(s.without_layout() for s in self.tuple_shapes)
      if self.layout is None and all(
          a is b for a, b in zip(shapes, self.tuple_shapes)):
        return self
      return dataclasses.replace(self, tuple_shapes=shapes)
    if self.layout is None:
      return self
    # Asked for again and again of the same shape (CSE keys, shape
    # comparisons in passes): made once, without validating again what
    # this shape's construction validated.
    found = self.__dict__.get("_without_layout")
    if found is None:
      found = object.__new__(Shape)
      fields = found.__dict__
      fields.update(self.__dict__)
      fields["layout"] = None
      object.__setattr__(self, "_without_layout", found)
    return found

  def with_element_type(self, element_type: PrimitiveType) -> "Shape":
    return dataclasses.replace(self, element_type=element_type)

  # -- text --------------------------------------------------------------------

  def to_string(self, print_layout: bool = False) -> str:
    """XLA's human string, e.g. `f32[4,2]` (or `f32[4,2]{1,0}`)."""
    if self.is_tuple():
      # Like XLA, every fifth element is annotated with its index.
      return "(" + ", ".join(
          (f"/*index={i}*/" if i and i % 5 == 0 else "") +
          s.to_string(print_layout)
          for i, s in enumerate(self.tuple_shapes)) + ")"
    if self.is_buffer():
      return f"b({self.tuple_shapes[0].to_string(print_layout)})"
    dims = []
    for d, dyn in zip(self.dimensions, self.dynamic_dimensions):
      if d == UNBOUNDED_SIZE:
        dims.append("?")
      else:
        dims.append(f"<={d}" if dyn else str(d))
    text = (f"{primitive_util.lowercase_name(self.element_type)}"
            f"[{','.join(dims)}]")
    # Like XLA, scalars never print their (necessarily empty) layout.
    if print_layout and self.layout is not None and self.dimensions:
      text += self.layout.to_string()
    return text

  def __str__(self) -> str:
    return self.to_string(print_layout=True)


@dataclasses.dataclass(frozen=True)
class ProgramShape:
  """The signature of a computation: parameter shapes and the result shape."""

  parameters: tuple[Shape, ...]
  result: Shape
  parameter_names: tuple[str, ...] = ()

  def to_string(self, print_layout: bool = False) -> str:
    names = self.parameter_names or tuple(
        f"p{i}" for i in range(len(self.parameters)))
    params = ", ".join(f"{n}: {s.to_string(print_layout)}"
                       for n, s in zip(names, self.parameters))
    return f"({params}) -> {self.result.to_string(print_layout)}"
