"""Elementwise HLO opcodes for the HLO evaluator, with XLA's semantics.

The math is shared with the StableHLO reference interpreter
(stablehlo/_src/interpreter/kernels_elementwise*.py): its helpers take a
StableHLO element type, so `sh_type` maps an XLA PrimitiveType to one.
Integer arithmetic wraps, x / 0 = -1 and x % 0 = x for integers, INT_MIN /
-1 = INT_MIN, float -> int conversion saturates (NaN -> 0), max / min
propagate NaN. Float math runs in double precision and is rounded once to
the result type.

Each kernel, fn(instruction, *operand arrays), is registered for its
opcode in `evaluator_registry` with `@elementwise_kernel(opcode)` where it
is defined; the kernels a factory builds are registered at the end.
"""

from __future__ import annotations

import numpy as np

from stablehlo import types as t
from stablehlo.interpreter import kernels_elementwise as ke
from stablehlo.interpreter import kernels_elementwise_common as C
from stablehlo.interpreter import kernels_elementwise_convert as kc
from stablehlo.interpreter import kernels_elementwise_special as ks
import support
from xla import primitive_util
from xla.hlo.evaluator import evaluator_registry
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.xla_data import PrimitiveType

P = PrimitiveType
O = HloOpcode

_FLOAT_NAMES = {name.lower(): name for name in t.FLOAT_TYPES}


def sh_type(pt: PrimitiveType) -> t.Type:
  """The StableHLO element type with the same values as `pt`."""
  if pt == P.PRED:
    return t.IntegerType(1)
  if primitive_util.is_signed_integral(pt):
    return t.IntegerType(primitive_util.bit_width(pt))
  if primitive_util.is_unsigned_integral(pt):
    return t.IntegerType(primitive_util.bit_width(pt), unsigned=True)
  if pt == P.C64:
    return t.ComplexType(t.f32)
  if pt == P.C128:
    return t.ComplexType(t.f64)
  if primitive_util.is_floating_point(pt):
    name = _FLOAT_NAMES.get(primitive_util.lowercase_name(pt))
    if name is not None:
      return t.FloatType(name)
  raise support.UnimplementedError(
      f"element type {primitive_util.lowercase_name(pt)} is not supported by "
      "the HLO evaluator")


def dtype(pt: PrimitiveType) -> np.dtype:
  return primitive_util.numpy_dtype(pt)


def _kind(pt) -> str:
  return C.kind(sh_type(pt))


def _arith(np_fn, bool_fn=None, complex_ok=True):
  """A binary arithmetic kernel: wrapping ints, rounded floats."""

  def fn(instr, x, y):
    et = sh_type(instr.shape.element_type)
    k = C.kind(et)
    if k == C.BOOL:
      if bool_fn is None:
        raise _unsupported(instr)
      return bool_fn(x, y)
    if k in (C.SINT, C.UINT):
      return C.finish_int(np_fn(C.as_wide_int(x, et), C.as_wide_int(y, et)),
                          et)
    if C.native_float(et) or k == C.COMPLEX:
      if k == C.COMPLEX and not complex_ok:
        raise _unsupported(instr)
      return np.asarray(np_fn(x, y)).astype(x.dtype, copy=False)
    return C.float_map2(x, y, et, np_fn)

  return fn


def _unsupported(instr) -> support.UnimplementedError:
  return support.UnimplementedError(
      f"{instr.opcode.value} on element type "
      f"{primitive_util.lowercase_name(instr.shape.element_type)} "
      f"({instr.name})")


def _operand_et(instr, i=0):
  return sh_type(instr.operand(i).shape.element_type)


def _result_et(instr):
  return sh_type(instr.shape.element_type)


def _float_unary(real_fn, complex_fn=None):

  def fn(instr, x):
    et = _result_et(instr)
    if C.kind(et) not in (C.FLOAT, C.COMPLEX):
      raise _unsupported(instr)
    return C.float_map(x, et, real_fn, complex_fn)

  return fn


@evaluator_registry.elementwise_kernel(O.kDivide)
def _divide(instr, x, y):
  et = _result_et(instr)
  k = C.kind(et)
  if k in (C.SINT, C.UINT):
    return ke.int_div_rem(x, y, et)[0]
  if k == C.COMPLEX:
    return C.float_map2(x, y, et, None, np.divide)
  if k == C.FLOAT:
    return np.divide(x, y) if C.native_float(et) else C.float_map2(
        x, y, et, np.divide)
  raise _unsupported(instr)


@evaluator_registry.elementwise_kernel(O.kRemainder)
def _remainder(instr, x, y):
  et = _result_et(instr)
  k = C.kind(et)
  if k in (C.SINT, C.UINT):
    return ke.int_div_rem(x, y, et)[1]
  if k == C.FLOAT:
    return C.float_map2(x, y, et, np.fmod)
  raise _unsupported(instr)


@evaluator_registry.elementwise_kernel(O.kPower)
def _power(instr, x, y):
  et = _result_et(instr)
  k = C.kind(et)
  if k in (C.SINT, C.UINT):
    return ke.int_power(x, y, et)
  if k == C.BOOL:
    return np.logical_or(x, np.logical_not(y))  # x^0 = 1, 0^1 = 0
  return C.float_map2(x, y, et, np.power, np.power)


def _max_min(is_max):

  def fn(instr, x, y):
    return ke.max_min(x, y, _result_et(instr), is_max)

  return fn


@evaluator_registry.elementwise_kernel(O.kNegate)
def _negate(instr, x):
  et = _result_et(instr)
  k = C.kind(et)
  if k in (C.SINT, C.UINT):
    return C.finish_int(-C.as_wide_int(x, et), et)
  if k == C.BOOL:
    return x.copy()
  return np.negative(x)


@evaluator_registry.elementwise_kernel(O.kAbs)
def _abs(instr, x):
  et = _operand_et(instr)
  k = C.kind(et)
  if k == C.COMPLEX:
    return C.round_float(np.abs(C.upcast(x, et)), _result_et(instr))
  if k == C.SINT:
    return C.finish_int(np.abs(C.as_wide_int(x, et)), et)
  if k in (C.UINT, C.BOOL):
    return x.copy()
  return np.abs(x)


@evaluator_registry.elementwise_kernel(O.kSign)
def _sign(instr, x):
  et = _result_et(instr)
  k = C.kind(et)
  if k == C.COMPLEX:
    z = x.astype(np.complex128)
    mag = np.abs(z)
    return np.where(mag == 0, 0, z / np.where(mag == 0, 1, mag)).astype(
        x.dtype)
  if k in (C.SINT, C.UINT):
    return C.finish_int(np.sign(C.as_wide_int(x, et)), et)
  if k == C.BOOL:
    return x.copy()
  v = C.upcast(x, et)
  r = np.where(np.isnan(v), v, np.where(v == 0, v, np.sign(v)))
  return C.round_float(r, et)


def _bitwise(np_fn):

  def fn(instr, x, y):
    et = _result_et(instr)
    if C.kind(et) == C.BOOL:
      return np_fn(x, y)
    if C.kind(et) not in (C.SINT, C.UINT):
      raise _unsupported(instr)
    return C.finish_int(np_fn(C.as_wide_int(x, et), C.as_wide_int(y, et)),
                        et)

  return fn


@evaluator_registry.elementwise_kernel(O.kNot)
def _not(instr, x):
  et = _result_et(instr)
  if C.kind(et) == C.BOOL:
    return np.logical_not(x)
  if C.kind(et) not in (C.SINT, C.UINT):
    raise _unsupported(instr)
  return C.finish_int(np.invert(C.as_wide_int(x, et)), et)


def _shift(how):

  def fn(instr, x, y):
    et = _result_et(instr)
    if C.kind(et) not in (C.SINT, C.UINT):
      raise _unsupported(instr)
    return ke.shift(x, y, et, how)

  return fn


@evaluator_registry.elementwise_kernel(O.kPopulationCount)
def _popcnt(instr, x):
  et = _result_et(instr)
  if C.kind(et) not in (C.SINT, C.UINT):
    raise _unsupported(instr)
  n = np.bitwise_count(C.to_bits(x, et)).astype(np.int64)
  return C.finish_int(n, et)


@evaluator_registry.elementwise_kernel(O.kClz)
def _clz(instr, x):
  et = _result_et(instr)
  if C.kind(et) not in (C.SINT, C.UINT):
    raise _unsupported(instr)
  n = C.width(et) - ke.bit_length(C.to_bits(x, et))
  return C.finish_int(n, et)


@evaluator_registry.elementwise_kernel(O.kCompare)
def compare(instr, x, y):
  et = _operand_et(instr)
  direction = instr.comparison_direction.name
  ctype = instr.comparison_type
  ctype = getattr(ctype, "value", ctype)
  return np.asarray(ke.compare(x, y, et, direction,
                               "TOTALORDER" if ctype == "TOTALORDER" else
                               None))


@evaluator_registry.elementwise_kernel(O.kSelect)
def _select(instr, p, a, b):
  return np.where(p, a, b)


@evaluator_registry.elementwise_kernel(O.kClamp)
def _clamp(instr, lo, x, hi):
  et = _result_et(instr)
  return ke.max_min(ke.max_min(x, lo, et, True), hi, et, False)


@evaluator_registry.elementwise_kernel(O.kComplex)
def _complex(instr, re, im):
  re, im = np.broadcast_arrays(re, im)
  out = np.empty(re.shape, dtype(instr.shape.element_type))
  out.real = re
  out.imag = im
  return out


@evaluator_registry.elementwise_kernel(O.kReal)
def _real(instr, x):
  return np.real(x).astype(dtype(instr.shape.element_type))


@evaluator_registry.elementwise_kernel(O.kImag)
def _imag(instr, x):
  if C.kind(_operand_et(instr)) != C.COMPLEX:
    return np.zeros(x.shape, dtype(instr.shape.element_type))
  return np.imag(x).astype(dtype(instr.shape.element_type))


@evaluator_registry.elementwise_kernel(O.kIsFinite)
def _is_finite(instr, x):
  return np.isfinite(C.upcast(x, _operand_et(instr)))


@evaluator_registry.elementwise_kernel(O.kConvert)
def convert(instr, x):
  return C.convert_array(x, _operand_et(instr), _result_et(instr))


@evaluator_registry.elementwise_kernel(O.kBitcastConvert)
def _bitcast_convert(instr, x):
  return kc.bitcast_array(x, _operand_et(instr), _result_et(instr))


@evaluator_registry.elementwise_kernel(O.kReducePrecision)
def _reduce_precision(instr, x):
  return kc.reduce_precision_array(x, _result_et(instr),
                                   instr.exponent_bits,
                                   instr.mantissa_bits)


@evaluator_registry.elementwise_kernel(O.kRoundNearestEven)
def _round_even(instr, x):
  return C.float_map(x, _result_et(instr), np.rint)


def _rsqrt(v):
  return 1.0 / np.sqrt(v)


def _logistic(v):
  return 1.0 / (1.0 + np.exp(-v))


@evaluator_registry.elementwise_kernel(O.kMulhi)
def _mulhi(instr, x, y):
  et = _result_et(instr)
  w = C.width(et)
  if C.kind(et) not in (C.SINT, C.UINT):
    raise _unsupported(instr)
  if w <= 32:
    wide = (x.astype(np.int64) * y.astype(np.int64)) >> w
    return C.finish_int(wide, et)
  big = [(int(a) * int(b)) >> w for a, b in zip(x.ravel(), y.ravel())]
  return C.finish_int(np.array(
      [v & ((1 << 64) - 1) for v in big], np.uint64).view(
          np.int64 if C.kind(et) == C.SINT else np.uint64).reshape(x.shape),
                      et)


@evaluator_registry.elementwise_kernel(O.kAtan2)
def _atan2(instr, y, x):
  return C.float_map2(y, x, _result_et(instr), np.arctan2, ke.atan2_complex)


@evaluator_registry.elementwise_kernel(O.kCopy)
def _copy(instr, x):
  return x.copy()


def _expm1_complex(z):
  return C.fix_complex_expm1(z, ke.expm1_complex(z))


def _log1p_complex(z):
  return C.fix_complex_log1p(z, ke.log1p_complex(z))


def _register(opcode: HloOpcode, fn) -> None:
  evaluator_registry.register_kernel(opcode, fn, elementwise=True)


# The kernels the factories above build.
_register(O.kAcos, _float_unary(np.arccos, np.arccos))
_register(O.kAcosh, _float_unary(np.arccosh, np.arccosh))
_register(O.kAdd, _arith(np.add, np.logical_or))
_register(O.kAnd, _bitwise(np.bitwise_and))
_register(O.kAsin, _float_unary(np.arcsin, np.arcsin))
_register(O.kAsinh, _float_unary(np.arcsinh, np.arcsinh))
_register(O.kAtan, _float_unary(np.arctan, np.arctan))
_register(O.kAtanh, _float_unary(np.arctanh, np.arctanh))
_register(O.kCbrt, _float_unary(np.cbrt))
_register(O.kCeil, _float_unary(np.ceil))
_register(O.kCos, _float_unary(np.cos, C.complex_cos))
_register(O.kCosh, _float_unary(np.cosh, np.cosh))
_register(O.kErf, _float_unary(ks.erf))
_register(O.kExp, _float_unary(np.exp, C.complex_exp))
_register(O.kExpm1, _float_unary(np.expm1, _expm1_complex))
_register(O.kFloor, _float_unary(np.floor))
_register(O.kLog, _float_unary(np.log, C.complex_log))
_register(O.kLog1p, _float_unary(np.log1p, _log1p_complex))
_register(O.kLogistic, _float_unary(_logistic, _logistic))
_register(O.kMaximum, _max_min(True))
_register(O.kMinimum, _max_min(False))
_register(O.kMultiply, _arith(np.multiply, np.logical_and))
_register(O.kOr, _bitwise(np.bitwise_or))
_register(O.kRoundNearestAfz, _float_unary(ke.round_afz))
_register(O.kRsqrt, _float_unary(_rsqrt, _rsqrt))
_register(O.kShiftLeft, _shift("left"))
_register(O.kShiftRightArithmetic, _shift("arithmetic"))
_register(O.kShiftRightLogical, _shift("logical"))
_register(O.kSin, _float_unary(np.sin, C.complex_sin))
_register(O.kSinh, _float_unary(np.sinh, np.sinh))
_register(O.kSqrt, _float_unary(np.sqrt, C.complex_sqrt))
_register(O.kSubtract, _arith(np.subtract, np.logical_xor))
_register(O.kTan, _float_unary(np.tan, C.complex_tan))
_register(O.kTanh, _float_unary(np.tanh, C.complex_tanh))
_register(O.kXor, _bitwise(np.bitwise_xor))
