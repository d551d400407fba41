"""Types: our StableHLO IR types <-> VHLO types of the bytecode tree.

The mapping is StableHLO's `VhloTypeConverter` (builtin/StableHLO types to
`!vhlo.*_v1` and back): `i1` is `bool_v1`, signless integers are `iN_v1`,
unsigned ones `uiN_v1`, tensor encodings are `#vhlo.type_extensions_v1`,
`memref` is `buffer_v1`, `!stablehlo.future` is `future_v1`. Types that have
no VHLO counterpart raise `InvalidArgumentError` naming the type.
"""

from __future__ import annotations

import re
import struct

import support
from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import vhlo_codec
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_parser
from stablehlo._src.text import attr_printer
from stablehlo._src.text import diagnostics
from stablehlo._src.text import lexer as lx

DIALECT = "vhlo"
# MLIR's `ShapedType::kDynamic`, how VHLO stores a `?` dimension or bound.
DYNAMIC = -(1 << 63)

_FLOAT_KINDS = {name: kind for kind, (name, _) in vhlo_codec.ELEMENT_TYPES.items()
                if kind.startswith("Float")}
_FLOAT_NAMES = {kind: name for name, kind in _FLOAT_KINDS.items()}
_INT_WIDTHS = (2, 4, 8, 16, 32, 64)


class ConversionError(support.InvalidArgumentError):
  """A type or attribute with no VHLO (or StableHLO) counterpart."""


def vt(kind: str, *fields) -> tree.Type:
  return tree.Type(DIALECT, kind, tuple(fields))


def _dims_to_vhlo(shape) -> tuple:
  return tuple(DYNAMIC if d is None else int(d) for d in shape)


def _dims_from_vhlo(shape) -> tuple:
  return tuple(None if d == DYNAMIC else int(d) for d in shape)


def parse_type_text(text: str) -> t.Type:
  """Parses one MLIR type spelled as text (whole string)."""
  p = attr_parser.AttrParser(text, "<type>")
  try:
    ty = p.parse_type()
    if p.peek().kind != lx.EOF:
      raise p.error("trailing characters after type")
  except diagnostics.ParseError as e:
    raise ConversionError(f"cannot parse type {text!r}: {e}") from e
  return ty


# --- StableHLO -> VHLO ----------------------------------------------------------


def to_vhlo(ty: t.Type, encode_attr=None) -> tree.Type:
  """The VHLO type of `ty`. `encode_attr` converts tensor encodings."""
  if isinstance(ty, t.IntegerType):
    if ty.signed:
      raise ConversionError(f"signed integer type si{ty.width} has no VHLO "
                            "counterpart (use signless i{ty.width})")
    if ty.width == 1 and not ty.unsigned:
      return vt("BooleanV1Type")
    if ty.width not in _INT_WIDTHS:
      raise ConversionError(f"integer type of width {ty.width} has no VHLO "
                            "counterpart")
    return vt(f"Integer{'UI' if ty.unsigned else 'SI'}{ty.width}V1Type")
  if isinstance(ty, t.FloatType):
    kind = _FLOAT_KINDS.get(ty.name)
    if kind is None:
      raise ConversionError(f"float type {ty.name} has no VHLO counterpart")
    return vt(kind)
  if isinstance(ty, t.IndexType):
    return vt("IndexV1Type")
  if isinstance(ty, t.NoneType):
    return vt("NoneV1Type")
  if isinstance(ty, t.ComplexType):
    return vt("ComplexV1Type", to_vhlo(ty.element_type, encode_attr))
  if isinstance(ty, t.TokenType):
    return vt("TokenV1Type")
  if isinstance(ty, t.RankedTensorType):
    element = to_vhlo(ty.element_type, encode_attr)
    shape = _dims_to_vhlo(ty.shape)
    if ty.encoding is None:
      return vt("RankedTensorV1Type", shape, element)
    if encode_attr is None:
      raise ConversionError(f"tensor encoding {ty.encoding!r} not supported")
    return vt("RankedTensorV1TypeWithEncoding", encode_attr(ty.encoding),
              shape, element)
  if isinstance(ty, t.UnrankedTensorType):
    return vt("UnrankedTensorV1Type", to_vhlo(ty.element_type, encode_attr))
  if isinstance(ty, t.TupleType):
    return vt("TupleV1Type", tuple(to_vhlo(x, encode_attr) for x in ty.types))
  if isinstance(ty, t.FunctionType):
    return vt("FunctionV1Type",
              tuple(to_vhlo(x, encode_attr) for x in ty.inputs),
              tuple(to_vhlo(x, encode_attr) for x in ty.results))
  if isinstance(ty, t.QuantizedType):
    return _quant_to_vhlo(ty)
  if isinstance(ty, t.OpaqueType):
    return _opaque_to_vhlo(ty, encode_attr)
  raise ConversionError(f"type {ty!r} has no VHLO counterpart")


def _quant_storage_range(width: int, signed: bool) -> tuple:
  if signed:
    return -(1 << (width - 1)), (1 << (width - 1)) - 1
  return 0, (1 << width) - 1


def f64_bits(value: float) -> int:
  """The IEEE double bit pattern of `value` (how APFloat params are kept)."""
  return struct.unpack("<Q", struct.pack("<d", float(value)))[0]


def f64_value(bits: int) -> float:
  return struct.unpack("<d", struct.pack("<Q", bits & ((1 << 64) - 1)))[0]


def _quant_to_vhlo(q: t.QuantizedType) -> tree.Type:
  width = q.storage_type.width
  signed = not (q.storage_unsigned or q.storage_type.unsigned)
  # Quantized storage is a signless integer; signedness lives in the flags.
  storage = vt(f"IntegerSI{width}V1Type")
  expressed = to_vhlo(q.expressed_type)
  lo, hi = _quant_storage_range(width, signed)
  smin = lo if q.storage_min is None else int(q.storage_min)
  smax = hi if q.storage_max is None else int(q.storage_max)
  flags = 1 if signed else 0
  if q.quantized_dimension is None:
    return vt("UniformQuantizedV1Type", flags, storage, expressed,
              f64_bits(q.scales[0]), int(q.zero_points[0]), smin, smax)
  return vt("UniformQuantizedPerAxisV1Type", flags, storage, expressed,
            int(q.quantized_dimension), smin, smax,
            tuple(f64_bits(s) for s in q.scales),
            tuple(int(z) for z in q.zero_points))


_MEMREF_RE = re.compile(r"^memref<((?:(?:[0-9]+|\?)x)*)(.*)>$", re.S)


def _split_top_level(text: str) -> list:
  """Splits `text` at commas outside <>, (), [], {}."""
  parts, depth, start = [], 0, 0
  for i, ch in enumerate(text):
    if ch in "<([{":
      depth += 1
    elif ch in ">)]}":
      depth -= 1
    elif ch == "," and depth == 0:
      parts.append(text[start:i])
      start = i + 1
  parts.append(text[start:])
  return [p.strip() for p in parts if p.strip()]


def _opaque_to_vhlo(ty: t.OpaqueType, encode_attr) -> tree.Type:
  body = ty.body.strip()
  if ty.dialect == "builtin" and body.startswith("memref<"):
    m = _MEMREF_RE.match(body)
    if m is None:
      raise ConversionError(f"memref type '{body}' has no VHLO counterpart "
                            "(only ranked memrefs do)")
    dims = [d for d in m.group(1).split("x") if d]
    parts = _split_top_level(m.group(2))
    if len(parts) != 1:
      raise ConversionError(f"memref type '{body}' with a layout or memory "
                            "space has no VHLO counterpart")
    element = to_vhlo(parse_type_text(parts[0]), encode_attr)
    shape = tuple(DYNAMIC if d == "?" else int(d) for d in dims)
    return vt("RankedBufferV1Type", shape, element)
  if ty.dialect == "stablehlo" and body.startswith("future<") and \
      body.endswith(">"):
    inner = _split_top_level(body[len("future<"):-1])
    return vt("FutureV1Type", tuple(to_vhlo(parse_type_text(p), encode_attr)
                                    for p in inner))
  if ty.dialect == "shape" and body == "witness":
    return vt("WitnessV1Type")
  raise ConversionError(
      f"type '{attr_printer.format_type(ty)}' has no VHLO counterpart")


# --- VHLO -> StableHLO ----------------------------------------------------------


def from_vhlo(ty, decode_attr=None) -> t.Type:
  """Our IR type for a VHLO type. `decode_attr` converts encodings."""
  if not isinstance(ty, tree.Type) or ty.dialect != DIALECT:
    raise ConversionError(f"expected a VHLO type, got {_describe(ty)}")
  kind, f = ty.kind, ty.fields
  if kind == "BooleanV1Type":
    return t.IntegerType(1)
  m = re.fullmatch(r"Integer(SI|UI)([0-9]+)V1Type", kind)
  if m:
    return t.IntegerType(int(m.group(2)), unsigned=m.group(1) == "UI")
  if kind in _FLOAT_NAMES:
    return t.FloatType(_FLOAT_NAMES[kind])
  if kind == "IndexV1Type":
    return t.IndexType()
  if kind == "NoneV1Type":
    return t.NoneType()
  if kind == "TokenV1Type":
    return t.TokenType()
  if kind == "ComplexV1Type":
    return t.ComplexType(from_vhlo(f[0], decode_attr))
  if kind == "RankedTensorV1Type":
    return t.RankedTensorType(_dims_from_vhlo(f[0]),
                              from_vhlo(f[1], decode_attr))
  if kind == "RankedTensorV1TypeWithEncoding":
    if decode_attr is None:
      raise ConversionError("tensor encodings are not supported here")
    return t.RankedTensorType(_dims_from_vhlo(f[1]),
                              from_vhlo(f[2], decode_attr),
                              decode_attr(f[0]))
  if kind == "UnrankedTensorV1Type":
    return t.UnrankedTensorType(from_vhlo(f[0], decode_attr))
  if kind == "TupleV1Type":
    return t.TupleType(tuple(from_vhlo(x, decode_attr) for x in f[0]))
  if kind == "FunctionV1Type":
    return t.FunctionType(tuple(from_vhlo(x, decode_attr) for x in f[0]),
                          tuple(from_vhlo(x, decode_attr) for x in f[1]))
  if kind in ("UniformQuantizedV1Type", "UniformQuantizedPerAxisV1Type"):
    return _quant_from_vhlo(ty)
  if kind == "RankedBufferV1Type":
    dims = "".join(("?" if d is None else str(d)) + "x"
                   for d in _dims_from_vhlo(f[0]))
    element = attr_printer.format_type(from_vhlo(f[1], decode_attr))
    return t.OpaqueType("builtin", f"memref<{dims}{element}>")
  if kind == "FutureV1Type":
    inner = ", ".join(attr_printer.format_type(from_vhlo(x, decode_attr))
                      for x in f[0])
    return t.OpaqueType("stablehlo", f"future<{inner}>")
  if kind == "WitnessV1Type":
    return t.OpaqueType("shape", "witness")
  raise ConversionError(f"VHLO type {kind} has no StableHLO counterpart")


def _quant_from_vhlo(ty: tree.Type) -> t.QuantizedType:
  f = ty.fields
  flags, storage, expressed = f[0], from_vhlo(f[1]), from_vhlo(f[2])
  if not isinstance(storage, t.IntegerType) or \
      not isinstance(expressed, t.FloatType):
    raise ConversionError(f"malformed quantized type {ty!r}")
  signed = bool(flags & 1)
  width = storage.width
  storage = t.IntegerType(width, unsigned=not signed)
  lo, hi = _quant_storage_range(width, signed)
  if ty.kind == "UniformQuantizedV1Type":
    _, _, _, scale, zp, smin, smax = f
    scales, zps, axis = (f64_value(scale),), (int(zp),), None
  else:
    _, _, _, axis, smin, smax, scale_bits, zps = f
    scales = tuple(f64_value(s) for s in scale_bits)
    zps = tuple(int(z) for z in zps)
  if (smin, smax) == (lo, hi):
    smin = smax = None
  return t.QuantizedType(storage, expressed, scales, zps, axis, smin, smax,
                         storage_unsigned=not signed)


def _describe(x) -> str:
  if isinstance(x, (tree.Type, tree.Attr)):
    return f"{x.dialect}.{x.kind}"
  return type(x).__name__
