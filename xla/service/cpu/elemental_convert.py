"""Element-type changes for the CPU elemental emitter: `convert`,
`bitcast-convert` (same width), `reduce-precision`, and the bf16 rounding
that keeps BF16 values (computed in f32) exactly representable.

Semantics follow XLA / the HLO evaluator (kernels_elementwise_common.
convert_array): float -> int truncates toward zero, saturates at the
destination's range and maps NaN to 0 (LLVM's `fptosi.sat` / `fptoui.sat`
do exactly that); int -> float and float -> narrower float round once to
nearest even. Conversions into BF16 never round twice: a double is first
rounded *to odd* to f32 (truncate and make the last bit sticky), which keeps
the final f32 -> bf16 rounding correct; 64-bit integers reach double through
the same sticky-bit trick.
"""

from __future__ import annotations

from llvmlite import ir

import support
from xla import primitive_util
from xla.service.cpu import elemental_util as u
from xla.xla_data import PrimitiveType

P = PrimitiveType

NARROW_INTS = {P.S2: 2, P.S4: 4, P.U2: 2, P.U4: 4}
_F8 = frozenset(t for t in P if t.name.startswith(("F8", "F4")))


def kind(et: PrimitiveType) -> str:
  """'pred', 'sint', 'uint', 'float' or 'complex'."""
  if et == P.PRED:
    return "pred"
  if primitive_util.is_signed_integral(et):
    return "sint"
  if primitive_util.is_unsigned_integral(et):
    return "uint"
  if primitive_util.is_complex(et):
    return "complex"
  if primitive_util.is_floating_point(et):
    return "float"
  raise support.UnimplementedError(
      f"CPU codegen: element type {primitive_util.lowercase_name(et)} is not "
      "supported")


def bit_width(et: PrimitiveType) -> int:
  return primitive_util.bit_width(et)


def component_type(et: PrimitiveType) -> PrimitiveType:
  return P.F32 if et == P.C64 else P.F64


def compute_scalar_type(et: PrimitiveType) -> ir.Type:
  """The LLVM type elementwise values of `et` are computed in (scalar)."""
  et = P(et)
  if et == P.PRED:
    return u.I1
  if et in NARROW_INTS:
    return u.I8
  if et in (P.S8, P.U8):
    return u.I8
  if et in (P.S16, P.U16):
    return u.I16
  if et in (P.S32, P.U32):
    return u.I32
  if et in (P.S64, P.U64):
    return u.I64
  if et == P.F16:
    return u.F16
  if et in (P.BF16, P.F32):
    return u.F32
  if et == P.F64:
    return u.F64
  if et == P.C64:
    return ir.LiteralStructType([u.F32, u.F32])
  if et == P.C128:
    return ir.LiteralStructType([u.F64, u.F64])
  raise support.UnimplementedError(
      f"CPU codegen: element type {primitive_util.lowercase_name(et)} is not "
      "supported by the elemental emitter")


# --- integers held in a wider register ------------------------------------


def normalize_int(b: ir.IRBuilder, v: ir.Value, et: PrimitiveType) -> ir.Value:
  """Wraps an i8 holding an S2/S4/U2/U4 result back to the sign- / zero-
  extended value of its `width` low bits; other types are returned as is."""
  w = NARROW_INTS.get(et)
  if w is None:
    return v
  if kind(et) == "sint":
    s = u.const(v.type, 8 - w)
    return b.ashr(b.shl(v, s), s)
  return b.and_(v, u.const(v.type, (1 << w) - 1))


# --- bf16 -------------------------------------------------------------------


def round_to_bf16(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """An f32 (scalar/vector) rounded to the nearest bf16 value (ties to even),
  returned as f32; NaN stays NaN (quieted)."""
  bits = u.to_bits(b, x)
  ty = bits.type
  lsb = b.and_(b.lshr(bits, u.const(ty, 16)), u.const(ty, 1))
  r = b.add(b.add(bits, u.const(ty, 0x7FFF)), lsb)
  nan_bits = b.or_(bits, u.const(ty, 0x00400000))
  r = b.select(u.is_nan(b, x), nan_bits, r)
  r = b.and_(r, u.const(ty, 0xFFFF0000))
  return b.bitcast(r, x.type)


def bf16_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  """The bf16 bit pattern (i16) of an f32, rounded to nearest even."""
  r = u.to_bits(b, round_to_bf16(b, x))
  return b.trunc(b.lshr(r, u.const(r.type, 16)), u.like(r.type, u.I16))


def bf16_from_bits(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
  """The f32 value of a bf16 bit pattern (i16)."""
  w = b.zext(bits, u.like(bits.type, u.I32))
  w = b.shl(w, u.const(w.type, 16))
  return b.bitcast(w, u.like(bits.type, u.F32))


def double_to_float_odd(b: ir.IRBuilder, d: ir.Value) -> ir.Value:
  """f64 -> f32 rounded to odd: truncation toward zero with the last bit
  set when inexact. Rounding the result again to <= 22 significant bits
  gives the correctly rounded value of `d`."""
  f32 = u.like(d.type, u.F32)
  f = b.fptrunc(d, f32)
  back = b.fpext(f, d.type)
  inexact = b.fcmp_ordered("!=", back, d)
  bits = u.to_bits(b, f)
  too_big = b.fcmp_ordered(">", u.fabs(b, back), u.fabs(b, d))
  bits = b.select(too_big, b.sub(bits, u.const(bits.type, 1)), bits)
  bits = b.select(inexact, b.or_(bits, u.const(bits.type, 1)), bits)
  return b.bitcast(bits, f32)


def double_to_bf16_value(b: ir.IRBuilder, d: ir.Value) -> ir.Value:
  return round_to_bf16(b, double_to_float_odd(b, d))


def _int_to_double(b: ir.IRBuilder, v: ir.Value, signed: bool) -> ir.Value:
  """An integer as f64; 64-bit magnitudes >= 2^53 keep a sticky bit in bit
  11 (exact in f64), so a later rounding to <= 40 bits stays correct."""
  f64 = u.like(v.type, u.F64)
  if u.int_width(v.type) < 64:
    return b.sitofp(v, f64) if signed else b.uitofp(v, f64)
  ty = v.type
  if signed:
    neg = b.icmp_signed("<", v, u.const(ty, 0))
    mag = b.select(neg, b.neg(v), v)  # INT64_MIN stays 2^63 unsigned
  else:
    neg, mag = None, v
  low = b.and_(mag, u.const(ty, 0x7FF))
  sticky = b.select(b.icmp_unsigned("!=", low, u.const(ty, 0)),
                    u.const(ty, 0x800), u.const(ty, 0))
  big = b.icmp_unsigned(">=", mag, u.const(ty, 1 << 53))
  folded = b.or_(b.and_(mag, u.const(ty, ~0x7FF)), sticky)
  mag = b.select(big, folded, mag)
  d = b.uitofp(mag, f64)
  if neg is not None:
    d = b.select(neg, b.fneg(d), d)
  return d


# --- convert ----------------------------------------------------------------


def convert(b: ir.IRBuilder, v: ir.Value, src: PrimitiveType,
            dst: PrimitiveType) -> ir.Value:
  """`v` (compute type of `src`) converted to the compute type of `dst`."""
  src, dst = P(src), P(dst)
  sk, dk = kind(src), kind(dst)
  for et in (src, dst):
    if et in _F8:
      raise support.UnimplementedError(
          "CPU codegen: convert with element type "
          f"{primitive_util.lowercase_name(et)} is not supported")
  if sk == "complex":
    if dk == "complex":
      inner_s, inner_d = component_type(src), component_type(dst)
      re = convert(b, b.extract_value(v, 0), inner_s, inner_d)
      im = convert(b, b.extract_value(v, 1), inner_s, inner_d)
      out = ir.Constant(compute_scalar_type(dst), ir.Undefined)
      return b.insert_value(b.insert_value(out, re, 0), im, 1)
    return convert(b, b.extract_value(v, 0), component_type(src), dst)
  if dk == "complex":
    inner = component_type(dst)
    re = convert(b, v, src, inner)
    out = ir.Constant(compute_scalar_type(dst), ir.Undefined)
    out = b.insert_value(out, re, 0)
    return b.insert_value(out, ir.Constant(re.type, 0.0), 1)
  if src == dst:
    return v
  dty = u.like(v.type, compute_scalar_type(dst))
  if dk == "pred":
    if sk == "float":
      return b.fcmp_unordered("!=", v, u.const(v.type, 0.0))
    return b.icmp_unsigned("!=", v, u.const(v.type, 0))
  if dk in ("sint", "uint"):
    if sk == "pred":
      return b.zext(v, dty)
    if sk in ("sint", "uint"):
      return normalize_int(b, _resize_int(b, v, dty, sk == "sint"), dst)
    return _float_to_int(b, v, dst, dty)
  # dk == "float"
  if sk in ("pred", "sint", "uint"):
    signed = sk == "sint"
    if dst == P.BF16:
      return double_to_bf16_value(b, _int_to_double(b, v, signed))
    if sk == "pred":
      return b.uitofp(v, dty)
    return b.sitofp(v, dty) if signed else b.uitofp(v, dty)
  return _float_to_float(b, v, src, dst, dty)


def _resize_int(b, v, dty, signed):
  sw, dw = u.int_width(v.type), u.int_width(dty)
  if sw == dw:
    return v
  if sw > dw:
    return b.trunc(v, dty)
  return b.sext(v, dty) if signed else b.zext(v, dty)


def _float_to_int(b, v, dst, dty):
  if isinstance(u.element_of(v.type), ir.HalfType):
    v = b.fpext(v, u.like(v.type, u.F32))
  signed = kind(dst) == "sint"
  w = NARROW_INTS.get(dst)
  name = "fptosi.sat" if signed else "fptoui.sat"
  r = u.intrinsic(b, name, [v], ret=dty, overload=[dty, v.type])
  if w is None:
    return r
  lo, hi = ((-(1 << (w - 1)), (1 << (w - 1)) - 1) if signed
            else (0, (1 << w) - 1))
  if signed:
    return u.smin(b, u.smax(b, r, u.const(dty, lo)), u.const(dty, hi))
  return u.umin(b, r, u.const(dty, hi))


def _float_to_float(b, v, src, dst, dty):
  sty = v.type
  sw = u.element_of(sty)
  if dst == P.BF16:
    if isinstance(sw, ir.DoubleType):
      return double_to_bf16_value(b, v)
    if isinstance(sw, ir.HalfType):
      v = b.fpext(v, dty)
    return round_to_bf16(b, v)
  order = {ir.HalfType: 0, ir.FloatType: 1, ir.DoubleType: 2}
  ds, dd = order[type(sw)], order[type(u.element_of(dty))]
  if ds == dd:
    return v
  if ds < dd:
    return b.fpext(v, dty)
  return b.fptrunc(v, dty)


# --- bitcast-convert --------------------------------------------------------


def _as_bits(b, v, et):
  """The raw bit pattern of a compute value of `et` as an integer of the
  type's width (narrow ints: i8 with the low bits)."""
  k = kind(et)
  if et == P.BF16:
    bits = u.to_bits(b, v)
    return b.trunc(b.lshr(bits, u.const(bits.type, 16)),
                   u.like(v.type, u.I16))
  if k == "float":
    return u.to_bits(b, v)
  w = NARROW_INTS.get(et)
  if w is not None:
    return b.and_(v, u.const(v.type, (1 << w) - 1))
  return v


def bitcast_convert(b: ir.IRBuilder, v: ir.Value, src: PrimitiveType,
                    dst: PrimitiveType) -> ir.Value:
  src, dst = P(src), P(dst)
  if src == dst:
    return v  # Same type (pred included): the bits are the value.
  if (bit_width(src) != bit_width(dst) or kind(src) in ("pred", "complex") or
      kind(dst) in ("pred", "complex") or src in _F8 or dst in _F8):
    raise support.UnimplementedError(
        "CPU codegen: bitcast-convert from "
        f"{primitive_util.lowercase_name(src)} to "
        f"{primitive_util.lowercase_name(dst)} (only same-width int/float "
        "element types are supported)")
  bits = _as_bits(b, v, src)
  if dst == P.BF16:
    return bf16_from_bits(b, bits)
  if kind(dst) == "float":
    return b.bitcast(bits, u.like(v.type, compute_scalar_type(dst)))
  return normalize_int(b, bits, dst)


# --- reduce-precision -------------------------------------------------------

_FLOAT_FORMAT = {  # compute type -> (total bits, mantissa bits)
    P.F16: (16, 10), P.BF16: (32, 23), P.F32: (32, 23), P.F64: (64, 52)}


def reduce_precision(b: ir.IRBuilder, v: ir.Value, et: PrimitiveType,
                     exponent_bits: int, mantissa_bits: int) -> ir.Value:
  """Rounds the significand to `mantissa_bits` (ties to even) and flushes
  exponents outside an `exponent_bits` range to signed zero / infinity, on
  the bit pattern; NaN stays NaN, or becomes +inf when no mantissa bits
  remain (as the HLO evaluator). BF16 runs on its f32 value: both formats
  have 8 exponent bits and a bf16 value's low 16 f32 bits are zero, so the
  result is the same."""
  fmt = _FLOAT_FORMAT.get(P(et))
  if fmt is None:
    raise support.UnimplementedError(
        "CPU codegen: reduce-precision on "
        f"{primitive_util.lowercase_name(et)}")
  w, src_m = fmt
  src_e = w - src_m - 1
  x = u.to_bits(b, v)
  ty = x.type
  if mantissa_bits < src_m:
    d = src_m - mantissa_bits
    last = 1 << d
    x_last = b.and_(b.lshr(x, u.const(ty, d)), u.const(ty, 1))
    x = b.add(b.add(x, x_last), u.const(ty, (1 << (d - 1)) - 1))
    x = b.and_(x, u.const(ty, ~(last - 1)))
  if exponent_bits < src_e:
    sign_mask = 1 << (w - 1)
    exp_mask = ((1 << src_e) - 1) << src_m
    bias = (1 << (src_e - 1)) - 1
    reduced_bias = (1 << (exponent_bits - 1)) - 1
    max_e = (bias + reduced_bias) << src_m
    min_e = max(bias - reduced_bias, 0) << src_m
    xe = b.and_(x, u.const(ty, exp_mask))
    signed_zero = b.and_(x, u.const(ty, sign_mask))
    signed_inf = b.or_(signed_zero, u.const(ty, exp_mask))
    x = b.select(b.icmp_unsigned(">", xe, u.const(ty, max_e)), signed_inf, x)
    if bias - reduced_bias >= 0:
      x = b.select(b.icmp_unsigned("<=", xe, u.const(ty, min_e)),
                   signed_zero, x)
  r = b.bitcast(x, v.type)
  fill = v if mantissa_bits > 0 else u.const(v.type, float("inf"))
  return b.select(u.is_nan(b, v), fill, r)
