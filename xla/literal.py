"""Literals (xla/literal.h): constant values of a shape, backed by numpy.

An array literal holds a numpy array in logical (row-major index) order; its
shape's layout is metadata only. A tuple literal holds element literals.

Text forms follow XLA's `Literal::ToString`:

    f32[2]{0} {1, 2}          f32[] 1.5            pred[] true
    pred[2]{0} {1, 0}         c64[] (1, 2)         (f32[], s32[]) ( 1, 2 )
    f32[2,2]{1,0} {
      { 1, 2 },
      { 3, 4 }
    }

Floats print as XLA's RoundTripFpToString does: f32 / f64 with `%g` at
digits10 precision when that reads back exactly, otherwise (and for every
narrower type) at max_digits10; NaNs print as `nan` / `-nan`, with the
payload `nan(0x...)` when it is not the plain quiet NaN.

A literal parsed from elided text (`{...}`) is marked `elided` and prints back
as `{...}`; its values are zeros and must not be used.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import ml_dtypes
import numpy as np

import support
from xla import primitive_util
from xla import shape_util
from xla.shape import Shape
from xla.xla_data import PrimitiveType

P = PrimitiveType


class Literal:
  """A shaped constant; see the module docstring."""

  __slots__ = ("shape", "_array", "_elements", "elided")

  def __init__(self, shape: Shape, array: Optional[np.ndarray] = None,
               elements: Sequence["Literal"] = (), elided: bool = False):
    if shape.is_tuple():
      if len(elements) != len(shape.tuple_shapes):
        raise support.InvalidArgumentError(
            f"tuple literal of shape {shape.to_string()} needs "
            f"{len(shape.tuple_shapes)} elements, got {len(elements)}")
      for i, (e, s) in enumerate(zip(elements, shape.tuple_shapes)):
        if not shape_util.compatible(e.shape, s):
          raise support.InvalidArgumentError(
              f"tuple literal element {i} has shape {e.shape.to_string()}, "
              f"expected {s.to_string()}")
      self._array = None
      self._elements = tuple(elements)
    elif shape.is_token():
      self._array = None
      self._elements = ()
    elif shape.is_array():
      if shape.is_dynamic():
        raise support.UnimplementedError(
            f"Unimplemented: literal of dynamic shape {shape.to_string()}")
      dtype = primitive_util.numpy_dtype(shape.element_type)
      if array is None:
        array = np.zeros(shape.dimensions, dtype)
      array = np.asarray(array)
      if array.dtype != dtype:
        raise support.InvalidArgumentError(
            f"literal of shape {shape.to_string()} needs dtype {dtype}, "
            f"got {array.dtype}")
      if array.shape != shape.dimensions:
        raise support.InvalidArgumentError(
            f"literal of shape {shape.to_string()} got array of shape "
            f"{array.shape}")
      self._array = array
      self._elements = ()
    else:
      raise support.UnimplementedError(
          f"Unimplemented: literal of shape {shape.to_string()}")
    self.shape = shape
    self.elided = elided

  # -- construction ------------------------------------------------------------

  @classmethod
  def from_array(cls, array, element_type: Optional[PrimitiveType] = None
                 ) -> "Literal":
    """A literal of `array` (converted to `element_type` if given), with the
    default layout."""
    array = np.asarray(array)
    if element_type is None:
      element_type = primitive_util.from_numpy_dtype(array.dtype)
    array = array.astype(primitive_util.numpy_dtype(element_type), copy=False)
    shape = shape_util.make_shape_with_default_layout(element_type,
                                                      array.shape)
    return cls(shape, array)

  @classmethod
  def scalar(cls, value, element_type: PrimitiveType) -> "Literal":
    return cls.from_array(np.asarray(value), element_type)

  @classmethod
  def tuple_of(cls, elements: Sequence["Literal"]) -> "Literal":
    shape = shape_util.make_tuple_shape([e.shape for e in elements])
    return cls(shape, elements=elements)

  @classmethod
  def token(cls) -> "Literal":
    return cls(Shape.token())

  # -- access ------------------------------------------------------------------

  @property
  def array(self) -> np.ndarray:
    if self._array is None:
      raise support.InvalidArgumentError(
          f"literal of shape {self.shape.to_string()} has no array")
    return self._array

  @property
  def elements(self) -> tuple["Literal", ...]:
    return self._elements

  def is_tuple(self) -> bool:
    return self.shape.is_tuple()

  def to_numpy(self) -> np.ndarray:
    return self.array

  def get(self, *index) -> object:
    return self.array[tuple(index)].item()

  def with_shape(self, shape: Shape) -> "Literal":
    """The same values under a compatible shape (e.g. another layout)."""
    if not shape_util.compatible(shape, self.shape):
      raise support.InvalidArgumentError(
          f"cannot relabel literal of shape {self.shape.to_string()} as "
          f"{shape.to_string()}")
    if self.is_tuple():
      return Literal(shape, elements=[
          e.with_shape(s) for e, s in zip(self._elements, shape.tuple_shapes)])
    return Literal(shape, self._array, elided=self.elided)

  def __eq__(self, other) -> bool:
    if not isinstance(other, Literal):
      return NotImplemented
    if not shape_util.equal_ignoring_layout(self.shape, other.shape):
      return False
    if self.is_tuple():
      return self._elements == other._elements
    if self._array is None:
      return other._array is None
    # Bitwise comparison: NaNs with equal bits compare equal, -0 != 0.
    a, b = self._array, other._array
    return a.tobytes() == b.tobytes()

  def __hash__(self):
    return hash((self.shape.without_layout(),
                 None if self._array is None else self._array.tobytes()))

  def __repr__(self) -> str:
    return f"Literal({self.to_string(oneline=True)})"

  # -- text --------------------------------------------------------------------

  def to_string(self, print_shape: bool = True, print_layout: bool = True,
                oneline: bool = False) -> str:
    """See the module docstring."""
    pieces: list[str] = []
    _print(self, print_shape, print_layout, oneline, pieces)
    return "".join(pieces)

  def to_string_without_shape(self, oneline: bool = True) -> str:
    return self.to_string(print_shape=False, oneline=oneline)

  def __str__(self) -> str:
    return self.to_string()


# -- element formatting --------------------------------------------------------


def _float_info(dtype: np.dtype):
  if dtype in (np.float16, np.float32, np.float64):
    return np.finfo(dtype)
  return ml_dtypes.finfo(dtype)


def _max_digits10(dtype: np.dtype) -> int:
  """std::numeric_limits<T>::max_digits10: 2 + digits * log10(2)."""
  digits = _float_info(dtype).nmant + 1
  return 2 + digits * 30103 // 100000


# Types whose NaNs carry a payload worth printing (IEEE-like encodings).
_PAYLOAD_TYPES = ("float16", "bfloat16", "float32", "float64",
                  "float8_e5m2", "float8_e4m3", "float8_e3m4")


def _nan_text(value, dtype: np.dtype) -> str:
  """`nan` / `-nan`, plus `(0x<payload>)` when not the plain quiet NaN."""
  sign = "-" if np.signbit(value) else ""
  if dtype.name in _PAYLOAD_TYPES:
    nmant = _float_info(dtype).nmant
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[
        dtype.itemsize]
    bits = int(np.asarray(value, dtype).view(uint))
    payload = bits & ((1 << nmant) - 1)
    if payload != 1 << (nmant - 1):
      return f"{sign}nan(0x{payload:x})"
  return f"{sign}nan"


def format_float(value, dtype) -> str:
  """XLA's RoundTripFpToString: `%g` with digits10 digits when that reads
  back exactly (f32 and f64 only), else with max_digits10 digits."""
  dtype = np.dtype(dtype)
  value = np.asarray(value, dtype)[()]
  f = float(value)
  if math.isnan(f):
    return _nan_text(value, dtype)
  if math.isinf(f):
    return "-inf" if f < 0 else "inf"
  if dtype in (np.float32, np.float64):
    digits10 = 6 if dtype == np.float32 else 15
    text = "%.*g" % (digits10, f)
    if np.asarray(float(text)).astype(dtype) == value:
      return text
  return "%.*g" % (_max_digits10(dtype), f)


def format_element(value, element_type: PrimitiveType,
                   dense_pred: bool = False) -> str:
  """One element as XLA prints it (pred: true/false, or 1/0 in arrays)."""
  if element_type == P.PRED:
    if dense_pred:
      return "1" if value else "0"
    return "true" if value else "false"
  if primitive_util.is_integral(element_type):
    return str(int(value))
  dtype = primitive_util.numpy_dtype(element_type)
  if primitive_util.is_complex(element_type):
    part = primitive_util.numpy_dtype(
        primitive_util.component_type(element_type))
    return (f"({format_float(np.real(value), part)}, "
            f"{format_float(np.imag(value), part)})")
  return format_float(value, dtype)


def _print(lit: Literal, print_shape: bool, print_layout: bool, oneline: bool,
           out: list[str]) -> None:
  shape = lit.shape
  if shape.is_tuple():
    if print_shape:
      out.append(shape.to_string(print_layout) + " ")
    sep = " " if oneline else "\n"
    out.append("(" + sep)
    for i, e in enumerate(lit.elements):
      if i:
        out.append("," + sep)
      _print(e, print_shape, print_layout, oneline, out)
    out.append(sep + ")")
    return
  if shape.is_token():
    out.append(shape.to_string() + " " if print_shape else "")
    out.append("token")
    return
  if print_shape:
    out.append(shape.to_string(print_layout) + " ")
  if lit.elided:
    out.append("{...}")
    return
  arr = lit.array
  et = shape.element_type
  if arr.ndim == 0:
    out.append(format_element(arr.item() if et == P.PRED else arr[()], et))
    return
  _print_dense(arr, et, oneline, out)


def _print_dense(arr: np.ndarray, et: PrimitiveType, oneline: bool,
                 out: list[str]) -> None:
  """Nested braces, as XLA's dense printer lays them out."""
  rank = arr.ndim
  flat = arr.reshape(-1)
  strings = [format_element(flat[i], et, dense_pred=True)
             for i in range(flat.size)]
  newline = " " if oneline else "\n"

  def rec(dims: tuple[int, ...], offset: int) -> str:
    if not dims:
      return strings[offset]
    stride = math.prod(dims[1:])
    parts = [rec(dims[1:], offset + i * stride) for i in range(dims[0])]
    if rank == 1:
      return "{" + ", ".join(parts) + "}"
    if len(dims) == 1:
      # Innermost row of a 2D+ array: `{ a, b }`, or `{a}` when short.
      pad = "" if dims[0] <= 1 else " "
      lead = "" if oneline else "  "
      return lead + "{" + pad + ", ".join(parts) + pad + "}"
    inner = ("," + newline).join(parts)
    return "{" + newline + inner + newline + "}"

  out.append(rec(arr.shape, 0))
