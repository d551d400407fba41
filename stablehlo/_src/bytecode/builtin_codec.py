"""The builtin dialect's attribute, type and location encodings.

Kind codes and field orders are those of MLIR's
`mlir/include/mlir/IR/BuiltinDialectBytecode.td` (the order of its
`BuiltinDialectAttributes` / `BuiltinDialectTypes` lists is the code).
"""

from __future__ import annotations

import math

from stablehlo._src.bytecode import codec
from stablehlo._src.bytecode import tree

DIALECT = "builtin"

# Widths of builtin float types written with a dedicated kind.
_FLOAT_WIDTHS = {"BFloat16Type": 16, "Float16Type": 16, "Float32Type": 32,
                 "Float64Type": 64, "Float80Type": 80, "Float128Type": 128}
# Float types builtin writes in textual form: width by asm name prefix.
_ASM_FLOAT_WIDTHS = (("tf32", 19), ("f8", 8), ("f6", 6), ("f4", 4),
                     ("bf16", 16), ("f16", 16), ("f32", 32), ("f64", 64),
                     ("f80", 80), ("f128", 128))


def type_bit_width(type_) -> int | None:
  """Bit width of a builtin integer/index/float type (None if not one)."""
  if isinstance(type_, tree.Type) and type_.dialect == DIALECT:
    if type_.kind == "IntegerType":
      return type_.fields[0] >> 2
    if type_.kind == "IndexType":
      return 64
    return _FLOAT_WIDTHS.get(type_.kind)
  if isinstance(type_, tree.AsmType) and type_.dialect == DIALECT:
    text = type_.text.decode("utf-8", "replace")
    for prefix, width in _ASM_FLOAT_WIDTHS:
      if text.startswith(prefix):
        return width
  return None


def num_elements(type_) -> int | None:
  if isinstance(type_, tree.Type) and type_.kind in (
      "RankedTensorType", "VectorType", "MemRefType"):
    shape = type_.fields[0]
    if any(d < 0 for d in shape):
      return None
    return math.prod(shape)
  return None


def _apint_width(fields):
  return type_bit_width(fields[0])


def _dense_string_count(fields):
  n = num_elements(fields[0])
  if n is None:
    return 0
  return 1 if fields[1] else n


_ATTRS = {
    0: ("ArrayAttr", (("value", "attrs"),)),
    1: ("DictionaryAttr", (("value", "attr_pairs"),)),
    2: ("StringAttr", (("value", "string"),)),
    3: ("StringAttrWithType", (("value", "string"), ("type", "type"))),
    4: ("FlatSymbolRefAttr", (("rootReference", "attr"),)),
    5: ("SymbolRefAttr", (("rootReference", "attr"),
                          ("nestedReferences", "attrs"))),
    6: ("TypeAttr", (("value", "type"),)),
    7: ("UnitAttr", ()),
    8: ("IntegerAttr", (("type", "type"), ("value", "apint:width"))),
    9: ("FloatAttr", (("type", "type"), ("value", "apint:width"))),
    10: ("CallSiteLoc", (("callee", "attr"), ("caller", "attr"))),
    11: ("FileLineColLoc", (("filename", "attr"), ("line", "varint"),
                           ("column", "varint"))),
    12: ("FusedLoc", (("locations", "attrs"),)),
    13: ("FusedLocWithMetadata", (("locations", "attrs"),
                                  ("metadata", "attr"))),
    14: ("NameLoc", (("name", "attr"), ("childLoc", "attr"))),
    15: ("UnknownLoc", ()),
    16: ("DenseResourceElementsAttr", (("type", "type"),
                                       ("rawHandle", "resource"))),
    17: ("DenseArrayAttr", (("elementType", "type"), ("size", "varint"),
                            ("rawData", "blob"))),
    18: ("DenseIntOrFPElementsAttr", (("type", "type"), ("rawData", "blob"))),
    19: ("DenseStringElementsAttr", (("type", "type"), ("isSplat", "varint"),
                                     ("rawStringData", "strings:strings"))),
    20: ("SparseElementsAttr", (("type", "type"), ("indices", "attr"),
                                ("values", "attr"))),
    21: ("DistinctAttr", (("referencedAttr", "attr"),)),
    # A `file:line:col to line:col` range; MLIR writes 0-4 numbers: none,
    # [line], [line, col], [line, col, end col] (same line) or
    # [line, col, end line, end col].
    22: ("FileLineColRange", (("filename", "attr"), ("rawLocData", "varints"))),
}

_TYPES = {
    0: ("IntegerType", (("widthAndSignedness", "varint"),)),
    1: ("IndexType", ()),
    2: ("FunctionType", (("inputs", "types"), ("results", "types"))),
    3: ("BFloat16Type", ()),
    4: ("Float16Type", ()),
    5: ("Float32Type", ()),
    6: ("Float64Type", ()),
    7: ("Float80Type", ()),
    8: ("Float128Type", ()),
    9: ("ComplexType", (("elementType", "type"),)),
    10: ("MemRefType", (("shape", "svarints"), ("elementType", "type"),
                        ("layout", "attr"))),
    11: ("MemRefTypeWithMemSpace", (("memorySpace", "attr"),
                                    ("shape", "svarints"),
                                    ("elementType", "type"),
                                    ("layout", "attr"))),
    12: ("NoneType", ()),
    13: ("RankedTensorType", (("shape", "svarints"), ("elementType", "type"))),
    14: ("RankedTensorTypeWithEncoding", (("encoding", "attr"),
                                          ("shape", "svarints"),
                                          ("elementType", "type"))),
    15: ("TupleType", (("types", "types"),)),
    16: ("UnrankedMemRefType", (("elementType", "type"),)),
    17: ("UnrankedMemRefTypeWithMemSpace", (("memorySpace", "attr"),
                                            ("elementType", "type"))),
    18: ("UnrankedTensorType", (("elementType", "type"),)),
    19: ("VectorType", (("shape", "svarints"), ("elementType", "type"))),
    20: ("VectorTypeWithScalableDims", (("scalableDims", "svarints"),
                                        ("shape", "svarints"),
                                        ("elementType", "type"))),
}

CODEC = codec.register(codec.DialectCodec(
    dialect=DIALECT,
    attrs=_ATTRS,
    types=_TYPES,
    functions={"width": _apint_width, "strings": _dense_string_count},
    # ModuleOp: OptionalAttr sym_name, OptionalAttr sym_visibility.
    properties={"builtin.module": ("opt_attr", "opt_attr")},
))


# Convenience constructors used by tests and by later conversion steps.
def string(value: str) -> tree.Attr:
  return tree.Attr(DIALECT, "StringAttr", (value,))


def unknown_loc() -> tree.Attr:
  return tree.Attr(DIALECT, "UnknownLoc", ())


def dictionary(items) -> tree.Attr:
  """A DictionaryAttr from (name str, Attr) pairs, sorted by name."""
  pairs = sorted(((string(k), v) for k, v in items), key=lambda p: p[0].fields[0])
  return tree.Attr(DIALECT, "DictionaryAttr", (tuple(pairs),))


def is_unknown_loc(attr) -> bool:
  return (isinstance(attr, tree.Attr) and attr.dialect == DIALECT and
          attr.kind == "UnknownLoc")
