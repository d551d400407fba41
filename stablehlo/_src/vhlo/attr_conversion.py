"""Attributes: our StableHLO IR attributes <-> VHLO attributes.

This is the generic conversion both ways (StableHLO's `convertGeneric` in
`StablehloLegalizeToVhlo.cpp` / `VhloLegalizeToStablehlo.cpp`): builtin
arrays, dictionaries, numbers, strings, types, dense elements and flat
symbol references, plus the StableHLO enum and struct attributes that have a
VHLO twin. Op-specific rules (channel handles, dimension numbers, defaults)
live in `legalize.py` / `unlegalize.py`.

StableHLO dialect attributes are built by printing their canonical upstream
spelling and parsing it with our text parser, so a deserialized module holds
exactly what parsing the upstream printout would give.
"""

from __future__ import annotations

import re

import numpy as np

from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import vhlo_codec
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_parser
from stablehlo._src.text import dense
from stablehlo._src.text import diagnostics
from stablehlo._src.text import lexer as lx
from stablehlo._src.vhlo import sdy_conversion
from stablehlo._src.vhlo import type_conversion as tc

ConversionError = tc.ConversionError
DIALECT = "vhlo"

# StableHLO enum attribute -> (VHLO attribute kind, upstream spelling).
# Spelling "short" is `#stablehlo<name VALUE>`, "long" `#stablehlo.name<VALUE>`.
ENUMS = {
    "stablehlo.comparison_direction": ("ComparisonDirectionV1Attr", "short"),
    "stablehlo.comparison_type": ("ComparisonTypeV1Attr", "short"),
    "stablehlo.fft_type": ("FftTypeV1Attr", "short"),
    "stablehlo.precision": ("PrecisionV1Attr", "short"),
    "stablehlo.rng_algorithm": ("RngAlgorithmV1Attr", "short"),
    "stablehlo.rng_distribution": ("RngDistributionV1Attr", "short"),
    "stablehlo.transpose": ("TransposeV1Attr", "short"),
    "stablehlo.result_accuracy_mode": ("ResultAccuracyModeV1Attr", "long"),
}
_ENUM_BY_KIND = {kind: name for name, (kind, _) in ENUMS.items()}
_ENUM_VALUES = {kind: {s: v for v, s in names.items()}
                for kind, names in vhlo_codec.ENUM_NAMES.items()}


def va(kind: str, *fields) -> tree.Attr:
  return tree.Attr(DIALECT, kind, tuple(fields))


_STRINGS: dict = {}


def string(value: str) -> tree.Attr:
  """One object per string (bounded), as builtin_conversion.string."""
  attr = _STRINGS.get(value)
  if attr is None:
    attr = _remember(_STRINGS, value, va("StringV1Attr", value), 4096)
  return attr


_BOOLEANS = {}


def boolean(value: bool) -> tree.Attr:
  flag = 1 if value else 0
  attr = _BOOLEANS.get(flag)
  if attr is None:
    attr = _BOOLEANS[flag] = va("BooleanV1Attr", flag)
  return attr


def integer(value: int, width: int = 64) -> tree.Attr:
  return va("IntegerV1Attr", tc.vt(f"IntegerSI{width}V1Type"),
            int(value) & ((1 << width) - 1))


def array(items) -> tree.Attr:
  return va("ArrayV1Attr", tuple(items))


def enum(kind: str, symbol: str) -> tree.Attr:
  return va(kind, _ENUM_VALUES[kind][symbol])


def i64_tensor(values, shape=None) -> tree.Attr:
  """A `#vhlo.tensor_v1` of i64 (what StableHLO stores dims lists as)."""
  arr = np.asarray(list(values) if shape is None else values, dtype=np.int64)
  if shape is not None:
    arr = arr.reshape(shape)
  return dense_to_vhlo(t.RankedTensorType(arr.shape, t.i64), arr)


def none_type_attr() -> tree.Attr:
  return va("TypeV1Attr", tc.vt("NoneV1Type"))


_ATTR_TEXTS: dict = {}  # text -> the immutable attribute it parses to


def parse_attr_text(text: str) -> a.Attribute:
  """Parses an attribute spelled as MLIR text (the whole string)."""
  attr = _ATTR_TEXTS.get(text)
  if attr is None:
    attr = _parse_attr_text(text)
    if _immutable(attr):
      _remember(_ATTR_TEXTS, text, attr, 4096)
  return attr


def _parse_attr_text(text: str) -> a.Attribute:
  p = attr_parser.AttrParser(text, "<attribute>")
  try:
    attr = p.parse_attribute()
    if p.peek().kind != lx.EOF:
      raise p.error("trailing characters after attribute")
  except diagnostics.ParseError as e:
    raise ConversionError(f"cannot parse attribute {text!r}: {e}") from e
  return attr


# --- dense elements ---------------------------------------------------------------


def _element_bytes(arr: np.ndarray) -> bytes:
  return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"),
                                           copy=False).tobytes()


def dense_blob(ty: t.Type, array: np.ndarray, splat: bool = False) -> bytes:
  """The raw data MLIR keeps for a dense elements attribute of `ty`.

  A tensor whose elements are all bitwise equal is a splat and stores one
  element; booleans are bit-packed (a splat is 0x00 / 0xFF). An empty tensor
  written as a splat (`dense<0.0> : tensor<0xf32>`) keeps one element in
  MLIR; our IR does not keep its value, so a zero is stored (`splat` says
  the source was a splat).
  """
  if not isinstance(ty, t.RankedTensorType) or not ty.has_static_shape:
    raise ConversionError("dense elements need a statically shaped tensor "
                          f"type, got {ty!r}")
  et = ty.element_type
  dtype = dense.numpy_dtype(et)
  if dtype is None or (isinstance(et, t.FloatType) and et.name == "tf32"):
    raise ConversionError(f"dense elements of element type {et!r} cannot be "
                          "stored in a portable artifact")
  arr = np.asarray(array).astype(dtype, copy=False).reshape(-1)
  n = arr.size
  if n == 0:
    if not splat:
      return b""
    arr = np.zeros(1, dtype)
    n = 1
  # All elements bitwise equal iff the bytes equal themselves shifted by
  # one element (see dense_from_vhlo).
  data = np.ascontiguousarray(arr).tobytes()
  width = arr.dtype.itemsize
  splat = n > 1 and data[width:] == data[:-width]
  if dtype == np.bool_:
    if splat:
      return b"\xff" if arr[0] else b"\x00"
    return np.packbits(arr.astype(np.uint8), bitorder="little").tobytes()
  if splat:
    return _element_bytes(arr[:1])
  return _element_bytes(arr)


def dense_to_vhlo(ty: t.Type, array: np.ndarray,
                  splat: bool = False) -> tree.Attr:
  return va("TensorV1Attr", type_to_vhlo(ty), dense_blob(ty, array, splat))


def dense_from_vhlo(attr: tree.Attr) -> a.DenseElementsAttr:
  ty = type_from_vhlo(attr.fields[0])
  if not isinstance(ty, t.RankedTensorType):
    raise ConversionError("a #vhlo.tensor_v1 needs a ranked tensor type")
  dtype = dense.numpy_dtype(ty.element_type)
  if dtype is None:
    raise ConversionError(
        f"dense elements of element type {ty.element_type!r} unsupported")
  try:
    values = vhlo_codec.tensor_values(attr)
  except (ValueError, TypeError) as e:
    raise ConversionError(f"malformed #vhlo.tensor_v1 data: {e}") from e
  if values.size > 1 and not any(values.strides):
    # A stored splat (a broadcast view): one element converted, no scan.
    first = values.reshape(-1)[:1] if values.ndim == 0 else values[
        (0,) * values.ndim].reshape(1)
    if first.dtype == np.bool_ or dtype == np.bool_:
      first = first.astype(dtype)
    elif first.dtype.itemsize == dtype.itemsize:
      first = first.view(dtype)
    else:
      first = first.astype(dtype)
    return a.DenseElementsAttr(
        ty, np.broadcast_to(first.reshape(()), ty.shape), splat=True)
  if values.dtype == np.bool_ or dtype == np.bool_:
    arr = values.astype(dtype)
  else:
    arr = values.view(dtype) if values.dtype.itemsize == dtype.itemsize \
        else values.astype(dtype)
  arr = np.ascontiguousarray(arr).reshape(ty.shape)
  flat = arr.reshape(-1)
  # Every element holds the first one's bytes iff the bytes equal
  # themselves shifted by one element (a memcmp that stops at the first
  # difference, where non-splat data usually differs at once).
  data = flat.tobytes()
  width = flat.dtype.itemsize
  splat = flat.size >= 1 and data[width:] == data[:-width]
  if flat.size == 0 and attr.fields[1]:
    splat = True  # An empty tensor stored as a splat.
  return a.DenseElementsAttr(ty, arr, splat=splat)


# --- encodings (tensor type extensions) -----------------------------------------


def encoding_to_vhlo(attr) -> tree.Attr:
  if isinstance(attr, a.DialectAttr) and attr.name in (
      "stablehlo.bounds", "stablehlo.type_extensions"):
    bounds = attr.get("bounds", ())
    return va("TypeExtensionsV1Attr",
              tuple(tc.DYNAMIC if b is None else int(b) for b in bounds))
  raise ConversionError(f"tensor encoding {_describe_ours(attr)} has no VHLO "
                        "counterpart (only #stablehlo.bounds does)")


def encoding_from_vhlo(attr) -> a.Attribute:
  if isinstance(attr, tree.Attr) and attr.kind == "TypeExtensionsV1Attr":
    bounds = ", ".join("?" if b == tc.DYNAMIC else str(b)
                       for b in attr.fields[0])
    return parse_attr_text(f"#stablehlo.bounds<{bounds}>")
  raise ConversionError(f"tensor encoding {_describe(attr)} has no StableHLO "
                        "counterpart")


# Types are immutable values on both sides, and a module names few distinct
# ones many times: conversions are kept (bounded), as MLIR's context keeps
# each type once.
_TO_VHLO_TYPES: dict = {}
_FROM_VHLO_TYPES: dict = {}
_TYPE_CACHE_LIMIT = 1 << 14


def _remember(cache: dict, key, value, limit: int = _TYPE_CACHE_LIMIT):
  """Adds an entry to one of this module's caches, which are emptied when
  they reach `limit` entries; returns `value`."""
  if len(cache) >= limit:
    cache.clear()
  cache[key] = value
  return value


def type_to_vhlo(ty: t.Type) -> tree.Type:
  try:
    hit = _TO_VHLO_TYPES.get(ty)
  except TypeError:  # an unhashable encoding
    return tc.to_vhlo(ty, encoding_to_vhlo)
  if hit is None:
    hit = tc.to_vhlo(ty, encoding_to_vhlo)
    _remember(_TO_VHLO_TYPES, ty, hit)
  return hit


def type_from_vhlo(ty) -> t.Type:
  try:
    hit = _FROM_VHLO_TYPES.get(ty)
  except TypeError:
    return tc.from_vhlo(ty, encoding_from_vhlo)
  if hit is None:
    hit = tc.from_vhlo(ty, encoding_from_vhlo)
    _remember(_FROM_VHLO_TYPES, ty, hit)
  return hit


# --- StableHLO -> VHLO ------------------------------------------------------------


def _width(ty: t.Type) -> int:
  if isinstance(ty, t.IndexType):
    return 64
  if isinstance(ty, t.IntegerType):
    return ty.width
  raise ConversionError(f"integer attribute of non-integer type {ty!r}")


# Our attributes are immutable except for the numpy arrays of dense
# elements; the parser shares one object among equal attributes it has seen
# (attribute dictionaries, strings, types), so a conversion is kept by the
# identity of the attribute converted (which it keeps alive, so the id stays
# its own). The converted entries are then shared as well, and the writer
# finds them by identity too. Bounded, as the type caches are.
_TO_VHLO_BY_ID: dict = {}
# id(attr) -> (attr, to_vhlo(attr)) of the attributes to_vhlo_shared kept:
# callers converting many attributes may look here first.
TO_VHLO_SHARED = _TO_VHLO_BY_ID
_SCALAR_ATTRS = (a.StringAttr, a.IntegerAttr, a.BoolAttr, a.FloatAttr,
                 a.TypeAttr, a.SymbolRefAttr, a.UnitAttr, a.DenseArrayAttr)


_PLAIN_VALUES = (str, int, float, bool, type(None))


def _immutable(attr) -> bool:
  cls = attr.__class__
  if cls in _SCALAR_ATTRS:
    return True
  if cls is a.DictionaryAttr:
    return all(_immutable(v) for _, v in attr.entries)
  if cls is a.ArrayAttr:
    return all(_immutable(v) for v in attr.elements)
  if cls is a.DialectAttr:
    return all(_immutable_param(v) for _, v in attr.params)
  return False


def _immutable_param(value) -> bool:
  if isinstance(value, _PLAIN_VALUES):
    return True
  if value.__class__ is tuple:
    return all(_immutable_param(v) for v in value)
  return isinstance(value, a.Attribute) and _immutable(value)


# id(attr) -> (attr, its array, the array's dtype, shape and bytes then,
# to_vhlo(attr)) of the small dense elements attributes converted before.
_DENSE_BY_ID: dict = {}
_DENSE_KEPT_MAX_BYTES = 1 << 10
_DENSE_KEPT_LIMIT = 1 << 12  # entries
_DENSE_KINDS = frozenset("biufc")  # dtypes whose bytes are the values


def _dense_shared(attr) -> tree.Attr:
  """`to_vhlo` of a dense elements attribute, kept for the next conversion
  of the same object while its array (which may change in place) holds
  what it held: the same array object, dtype, shape and bytes."""
  arr = attr.array
  hit = _DENSE_BY_ID.get(id(attr))
  if (hit is not None and hit[0] is attr and hit[1] is arr and
      hit[2] == arr.dtype and hit[3] == arr.shape and
      hit[4] == arr.tobytes()):
    return hit[5]
  converted = to_vhlo(attr)
  if (arr.__class__ is np.ndarray and arr.dtype.kind in _DENSE_KINDS and
      arr.nbytes <= _DENSE_KEPT_MAX_BYTES):
    _remember(_DENSE_BY_ID, id(attr),
              (attr, arr, arr.dtype, arr.shape, arr.tobytes(), converted),
              _DENSE_KEPT_LIMIT)
  return converted


def to_vhlo_shared(attr) -> tree.Attr:
  """`to_vhlo(attr)`, kept for the next conversion of the same object when
  that object cannot change (a dense elements attribute: while its array
  holds the same bytes)."""
  hit = _TO_VHLO_BY_ID.get(id(attr))
  if hit is not None and hit[0] is attr:
    return hit[1]
  if attr.__class__ is a.DenseElementsAttr:
    return _dense_shared(attr)
  converted = to_vhlo(attr)
  if _immutable(attr):
    _remember(_TO_VHLO_BY_ID, id(attr), (attr, converted))
  return converted


def to_vhlo(attr) -> tree.Attr:
  """The VHLO attribute for one of our attributes (generic rules). Shardy
  attributes keep their own encoding (mixed serialization)."""
  if isinstance(attr, sdy.SdyAttr) or sdy_conversion.is_sdy_text(attr):
    return sdy_conversion.to_tree(attr)
  if isinstance(attr, a.BoolAttr):
    return boolean(attr.value)
  if isinstance(attr, a.IntegerAttr):
    ty = attr.type
    if isinstance(ty, t.IntegerType) and ty.width == 1 and not ty.unsigned \
        and not ty.signed:
      return boolean(bool(attr.value))
    return va("IntegerV1Attr", type_to_vhlo(ty),
              int(attr.value) & ((1 << _width(ty)) - 1))
  if isinstance(attr, a.FloatAttr):
    if not isinstance(attr.type, t.FloatType) or \
        dense.numpy_dtype(attr.type) is None or attr.type.name == "tf32":
      raise ConversionError(f"float attribute of type {attr.type!r} "
                            "unsupported in portable artifacts")
    return va("FloatV1Attr", type_to_vhlo(attr.type),
              dense.float_to_bits(attr.value, attr.type))
  if isinstance(attr, a.StringAttr):
    if attr.type is not None:
      raise ConversionError(f"typed string attribute {attr.value!r} has no "
                            "VHLO counterpart")
    return string(attr.value)
  if isinstance(attr, a.TypeAttr):
    return va("TypeV1Attr", type_to_vhlo(attr.value))
  if isinstance(attr, a.ArrayAttr):
    return array(to_vhlo(e) for e in attr.elements)
  if isinstance(attr, a.DictionaryAttr):
    # MLIR dictionaries are sorted by name.
    return va("DictionaryV1Attr", tuple(
        (string(k), to_vhlo(v)) for k, v in sorted(attr.entries,
                                                   key=lambda e: e[0])))
  if isinstance(attr, a.DenseElementsAttr):
    return dense_to_vhlo(attr.type, attr.array, attr.splat)
  if isinstance(attr, a.DenseArrayAttr):
    et = attr.element_type
    if isinstance(et, t.IntegerType) and et.width in (1, 64) and \
        not et.unsigned:
      return dense_to_vhlo(t.RankedTensorType((len(attr.values),), et),
                           np.array(attr.values, dense.numpy_dtype(et)))
    raise ConversionError(f"dense array of {et!r} has no VHLO counterpart "
                          "(only i64 and i1 arrays do)")
  if isinstance(attr, a.SymbolRefAttr):
    if attr.nested:
      raise ConversionError(f"nested symbol reference @{attr.root} has no "
                            "VHLO counterpart")
    return string(attr.root)
  if isinstance(attr, a.DialectAttr):
    return _dialect_to_vhlo(attr)
  if isinstance(attr, a.OpaqueAttr):
    return _opaque_to_vhlo(attr)
  raise ConversionError(f"attribute {_describe_ours(attr)} has no VHLO "
                        "counterpart")


def _dialect_to_vhlo(attr: a.DialectAttr) -> tree.Attr:
  name = attr.name
  if name in ENUMS:
    kind = ENUMS[name][0]
    symbol = attr.get("value")
    if symbol not in _ENUM_VALUES[kind]:
      raise ConversionError(f"#{name} has no value {symbol!r}")
    return enum(kind, symbol)
  if name == "stablehlo.output_operand_alias":
    return va("OutputOperandAliasV1Attr",
              tuple(attr.get("output_tuple_indices", ())),
              int(attr.get("operand_index", 0)),
              tuple(attr.get("operand_tuple_indices", ())))
  if name == "stablehlo.result_accuracy":
    mode = attr.get("mode")
    if mode is None:
      mode = a.DialectAttr("stablehlo.result_accuracy_mode",
                           (("value", "DEFAULT"),))
    return result_accuracy(float(attr.get("atol", 0.0)),
                           float(attr.get("rtol", 0.0)),
                           int(attr.get("ulps", 0)), to_vhlo(mode))
  if name == "stablehlo.axis_ref":
    sub = attr.get("sub_axis_info")
    return va("AxisRefV1Attr", to_vhlo(attr.get("name")),
              None if sub is None else to_vhlo(sub))
  if name == "stablehlo.sub_axis_info":
    return va("SubAxisInfoV1Attr", int(attr.get("pre_size")),
              int(attr.get("size")))
  if name == "stablehlo.mesh_axis":
    return va("MeshAxisV1Attr", to_vhlo(attr.get("name")),
              int(attr.get("size")))
  if name == "stablehlo.replica_group_mesh_axes":
    mesh = attr.get("mesh")
    axes = attr.get("axes", ())
    return va("ReplicaGroupMeshAxesV1Attr", to_vhlo(mesh),
              array(to_vhlo(x) for x in axes))
  raise ConversionError(f"attribute #{name} has no VHLO counterpart here")


def result_accuracy(atol: float, rtol: float, ulps: int,
                    mode: tree.Attr) -> tree.Attr:
  return va("ResultAccuracyV1Attr", tc.f64_bits(atol),
            tc.f64_bits(rtol), int(ulps), mode)


def default_result_accuracy() -> tree.Attr:
  return result_accuracy(0.0, 0.0, 0, enum("ResultAccuracyModeV1Attr",
                                           "DEFAULT"))


_AXIS_REF_RE = re.compile(
    r'^#stablehlo\.axis_ref<\s*name\s*=\s*"((?:[^"\\]|\\.)*)"\s*'
    r'(?:,\s*sub_axis_info\s*=\s*\(\s*(-?[0-9]+)\s*\)\s*(-?[0-9]+)\s*)?>$')
_RESULT_ACCURACY_RE = re.compile(
    r"^#stablehlo\.result_accuracy<\s*atol\s*=\s*([^,]+),\s*rtol\s*=\s*"
    r"([^,]+),\s*ulps\s*=\s*(-?[0-9]+)\s*,\s*mode\s*=\s*(.+)>$", re.S)


def _opaque_to_vhlo(attr: a.OpaqueAttr) -> tree.Attr:
  text = attr.text.strip()
  m = _AXIS_REF_RE.match(text)
  if m is not None:
    name = lx.unescape_string(m.group(1)) if "\\" in m.group(1) else m.group(1)
    sub = None
    if m.group(2) is not None:
      sub = va("SubAxisInfoV1Attr", int(m.group(2)), int(m.group(3)))
    return va("AxisRefV1Attr", string(name), sub)
  m = _RESULT_ACCURACY_RE.match(text)
  if m is not None:
    mode = parse_attr_text(m.group(4).strip())
    return result_accuracy(float(m.group(1)), float(m.group(2)),
                           int(m.group(3)), to_vhlo(mode))
  raise ConversionError(f"attribute {text} has no VHLO counterpart")


# --- VHLO -> StableHLO ------------------------------------------------------------


def _signed(value: int, width: int) -> int:
  value &= (1 << width) - 1
  if width > 1 and value >> (width - 1):
    value -= 1 << width
  return value


_FROM_VHLO_BY_ID: dict = {}


def from_vhlo_shared(attr) -> a.Attribute:
  """`from_vhlo(attr)`, kept (by the identity of `attr`, which it keeps
  alive) when the result cannot change: the reader makes one object per
  entry of a file, which ops of that file share, and so do their
  conversions then."""
  hit = _FROM_VHLO_BY_ID.get(id(attr))
  if hit is not None and hit[0] is attr:
    return hit[1]
  converted = from_vhlo(attr)
  if _immutable(converted):
    _remember(_FROM_VHLO_BY_ID, id(attr), (attr, converted))
  return converted


def from_vhlo(attr) -> a.Attribute:
  """Our attribute for a VHLO attribute (generic rules), or for a Shardy
  attribute kept in its own encoding."""
  if sdy_conversion.is_sdy(attr):
    return sdy_conversion.from_tree(attr)
  if not isinstance(attr, tree.Attr) or attr.dialect != DIALECT:
    raise ConversionError(f"expected a VHLO attribute, got {_describe(attr)}")
  kind, f = attr.kind, attr.fields
  if kind == "ArrayV1Attr":
    return a.ArrayAttr(tuple(from_vhlo(x) for x in f[0]))
  if kind == "BooleanV1Attr":
    return a.BoolAttr(bool(f[0]))
  if kind == "StringV1Attr":
    return a.StringAttr(f[0])
  if kind == "DictionaryV1Attr":
    entries = []
    for key, value in f[0]:
      k = from_vhlo(key)
      if not isinstance(k, a.StringAttr):
        raise ConversionError("dictionary keys must be strings")
      entries.append((k.value, from_vhlo(value)))
    return a.DictionaryAttr(tuple(entries))
  if kind == "IntegerV1Attr":
    ty = type_from_vhlo(f[0])
    if isinstance(ty, t.IntegerType) and ty.unsigned:
      return a.IntegerAttr(f[1] & ((1 << ty.width) - 1), ty)
    return a.IntegerAttr(_signed(f[1], _width(ty)), ty)
  if kind == "FloatV1Attr":
    ty = type_from_vhlo(f[0])
    if not isinstance(ty, t.FloatType) or dense.numpy_dtype(ty) is None:
      raise ConversionError(f"float attribute of type {ty!r} unsupported")
    return a.FloatAttr(float(dense.float_from_bits(f[1], ty)), ty)
  if kind == "TensorV1Attr":
    return dense_from_vhlo(attr)
  if kind == "TypeV1Attr":
    return a.TypeAttr(type_from_vhlo(f[0]))
  if kind in _ENUM_BY_KIND:
    name = _ENUM_BY_KIND[kind]
    symbol = vhlo_codec.enum_name(attr)
    if ENUMS[name][1] == "short":
      return parse_attr_text(f"#stablehlo<{name.split('.', 1)[1]} {symbol}>")
    return parse_attr_text(f"#{name}<{symbol}>")
  if kind == "CustomCallApiVersionV1Attr":
    return a.IntegerAttr(f[0], t.i32)
  if kind == "OutputOperandAliasV1Attr":
    return parse_attr_text(
        "#stablehlo.output_operand_alias<output_tuple_indices = "
        f"{_dims(f[0])}, operand_index = {f[1]}, operand_tuple_indices = "
        f"{_dims(f[2])}>")
  if kind == "ResultAccuracyV1Attr":
    atol, rtol = tc.f64_value(f[0]), tc.f64_value(f[1])
    mode = vhlo_codec.enum_name(f[3])
    return parse_attr_text(
        f"#stablehlo.result_accuracy<atol = {dense.format_float(atol, t.f64)}"
        f", rtol = {dense.format_float(rtol, t.f64)}, ulps = {f[2]}, "
        f"mode = #stablehlo.result_accuracy_mode<{mode}>>")
  if kind in ("AxisRefV1Attr", "SubAxisInfoV1Attr", "MeshAxisV1Attr",
              "ReplicaGroupMeshAxesV1Attr"):
    return parse_attr_text(_sharding_text(attr))
  if kind == "TypeExtensionsV1Attr":
    return encoding_from_vhlo(attr)
  raise ConversionError(f"VHLO attribute {kind} has no StableHLO counterpart")


def _dims(values) -> str:
  return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _quote(s: str) -> str:
  return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _name_of(attr) -> str:
  if isinstance(attr, tree.Attr) and attr.kind == "StringV1Attr":
    return attr.fields[0]
  raise ConversionError(f"expected a #vhlo.string_v1 name, got "
                        f"{_describe(attr)}")


def _sharding_text(attr: tree.Attr) -> str:
  kind, f = attr.kind, attr.fields
  if kind == "SubAxisInfoV1Attr":
    return f"#stablehlo.sub_axis_info<({f[0]}){f[1]}>"
  if kind == "AxisRefV1Attr":
    text = f"#stablehlo.axis_ref<name = {_quote(_name_of(f[0]))}"
    if f[1] is not None:
      sub = f[1].fields
      text += f", sub_axis_info = ({sub[0]}){sub[1]}"
    return text + ">"
  if kind == "MeshAxisV1Attr":
    return f"#stablehlo.mesh_axis<name = {_quote(_name_of(f[0]))}, " \
           f"size = {f[1]}>"
  mesh = f[0]
  if isinstance(mesh, tree.Attr) and mesh.kind == "StringV1Attr":
    mesh_text = "@" + _symbol(mesh.fields[0])
  else:
    raise ConversionError("replica_group_mesh_axes with an inline mesh is "
                          "not supported")
  axes = ", ".join(_sharding_text(x) for x in f[1].fields[0])
  return f"#stablehlo.replica_group_mesh_axes<mesh = {mesh_text}, " \
         f"axes = [{axes}]>"


def _symbol(name: str) -> str:
  if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name):
    return name
  return _quote(name)


def _describe(x) -> str:
  if isinstance(x, (tree.Type, tree.Attr)):
    return f"{x.dialect}.{x.kind}"
  return type(x).__name__


def _describe_ours(attr) -> str:
  if isinstance(attr, a.DialectAttr):
    return f"#{attr.name}"
  if isinstance(attr, a.OpaqueAttr):
    return attr.text
  return type(attr).__name__
