"""MLIR attributes as used by StableHLO programs.

Attributes are immutable value objects. Dense elements keep their values as a
numpy array (with ml_dtypes dtypes for narrow floats / ints) plus the tensor
type; they are compared by type and bit pattern.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np

from stablehlo._src.ir import types as t


class Attribute:
  __slots__ = ()


@dataclasses.dataclass(frozen=True)
class UnitAttr(Attribute):
  pass


@dataclasses.dataclass(frozen=True)
class BoolAttr(Attribute):
  value: bool


@dataclasses.dataclass(frozen=True)
class IntegerAttr(Attribute):
  value: int
  type: t.Type = t.i64


@dataclasses.dataclass(frozen=True)
class FloatAttr(Attribute):
  value: float
  type: t.Type = t.f32


@dataclasses.dataclass(frozen=True)
class StringAttr(Attribute):
  value: str
  # MLIR allows a typed string (`"foo" : tensor<3xf32>`); None when untyped.
  type: Optional[t.Type] = None


@dataclasses.dataclass(frozen=True)
class TypeAttr(Attribute):
  value: t.Type


@dataclasses.dataclass(frozen=True)
class ArrayAttr(Attribute):
  elements: tuple[Attribute, ...]


@dataclasses.dataclass(frozen=True)
class DictionaryAttr(Attribute):
  # Ordered (name, attribute) pairs; MLIR keeps dictionaries sorted by name.
  entries: tuple[tuple[str, Attribute], ...]

  def get(self, name: str, default: Any = None) -> Any:
    for k, v in self.entries:
      if k == name:
        return v
    return default


@dataclasses.dataclass(frozen=True)
class DenseArrayAttr(Attribute):
  """`array<i64: 1, 2>` (MLIR DenseArrayAttr)."""

  element_type: t.Type
  values: tuple


@dataclasses.dataclass(frozen=True)
class SymbolRefAttr(Attribute):
  """`@root::@nested` symbol reference."""

  root: str
  nested: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, eq=False)
class DenseElementsAttr(Attribute):
  """`dense<...> : tensor<...>`: a numpy array of the tensor's shape.

  For complex element types the array is complex64/complex128; for quantized
  element types it holds the storage integers. `splat` records that the source
  was a single value (the printer reproduces it).
  """

  type: t.Type
  array: np.ndarray
  splat: bool = False

  def _key(self):
    a = np.ascontiguousarray(self.array)
    return (self.type, a.shape, a.dtype.str, a.tobytes())

  def __eq__(self, other):
    return isinstance(other, DenseElementsAttr) and self._key() == other._key()

  def __hash__(self):
    return hash(self._key())


@dataclasses.dataclass(frozen=True)
class DenseResourceAttr(Attribute):
  """`dense_resource<name> : tensor<...>`; the blob lives in the module's
  `dialect_resources` under the same key."""

  type: t.Type
  key: str


@dataclasses.dataclass(frozen=True)
class OpaqueAttr(Attribute):
  """An attribute kept verbatim as text (`#dialect.name<...>` we do not model
  structurally). `text` is exactly what is printed."""

  text: str


@dataclasses.dataclass(frozen=True)
class DialectAttr(Attribute):
  """A structured dialect attribute such as `#stablehlo.gather<...>`,
  `#stablehlo<comparison_direction EQ>`, `#stablehlo.conv<...>`.

  `name` is the full mnemonic (e.g. "stablehlo.gather" or
  "stablehlo.comparison_direction"); `params` holds its fields in order.
  """

  name: str
  params: tuple[tuple[str, Any], ...] = ()
  # True for the `#dialect<mnemonic VALUE>` spelling of enum attributes
  # (e.g. `#stablehlo<comparison_direction EQ>`); printing detail only.
  short_form: bool = dataclasses.field(default=False, compare=False)

  def get(self, key: str, default: Any = None) -> Any:
    for k, v in self.params:
      if k == key:
        return v
    return default


@dataclasses.dataclass(frozen=True)
class Location:
  """A source location. `kind` is one of: unknown, file, name, callsite,
  fused, opaque. `text` is the verbatim `loc(...)` body for printing.

  A "file" location with `end_line` / `end_col` set is a range
  (`"f":line:col to end_line:end_col`, MLIR's FileLineColRange); both None
  is a plain `"f":line:col`.
  """

  kind: str = "unknown"
  filename: Optional[str] = None
  line: int = 0
  col: int = 0
  text: Optional[str] = None
  end_line: Optional[int] = None
  end_col: Optional[int] = None


UNKNOWN_LOC = Location()


_FILE_LOCATION_FIELDS = {"kind": "file", "filename": None, "line": 0,
                         "col": 0, "text": None, "end_line": None,
                         "end_col": None}


def file_location(filename: str, line: int, col: int, text: str) -> Location:
  """`Location("file", filename, line, col, text=text)`, built without the
  frozen dataclass's field-by-field __init__: the text parser makes one per
  operation."""
  loc = object.__new__(Location)
  fields = loc.__dict__
  fields.update(_FILE_LOCATION_FIELDS)
  fields["filename"] = filename
  fields["line"] = line
  fields["col"] = col
  fields["text"] = text
  return loc
