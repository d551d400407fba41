"""Elementwise HLO math in LLVM IR for the CPU backend.

Every elementwise opcode becomes straight-line IR on values in *compute
type* (see `compute_type`): PRED -> i1, integers -> iN of their width (S2 /
S4 / U2 / U4 -> i8 holding the sign- / zero-extended value), F16 -> half,
BF16 -> float (always holding a value that is exactly a bf16; rounded to
nearest even after every operation), F32 -> float, F64 -> double, C64 /
C128 -> {float, float} / {double, double}. A value may be an LLVM vector
`<W x T>` of its compute type (never for complex): every emitter here uses
`select` instead of branches, so the loop vectorizer can widen loops over
it and callers may also emit vector code directly.

The semantics are XLA's (and the HLO evaluator's, xla/hlo/evaluator/
elementwise.py): integer arithmetic wraps; x / 0 = -1 (all ones when
unsigned) and x % 0 = x; INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0; shift
amounts are read unsigned and amounts >= the width give 0 (or the sign
fill); float maximum / minimum propagate NaN and order -0 < +0; compare
uses IEEE predicates (NE is unordered) or, with type=TOTALORDER, the IEEE
totalOrder; convert: see `elemental_convert`. Transcendental functions use
the vectorizable polynomials of `polynomial_approximations`; half-precision
inputs are computed in f32 and rounded once.

`emit_scalar_computation` turns a scalar HLO computation (a reducer,
comparator, map body) into an `alwaysinline` LLVM function over pointers.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from llvmlite import ir

import support
from xla import primitive_util
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import elemental_complex as cx
from xla.service.cpu import elemental_convert as ec
from xla.service.cpu import elemental_util as u
from xla.service.cpu import kernel_api
from xla.service.cpu import math_routines
from xla.service.cpu import polynomial_approximations as pa
from xla.xla_data import PrimitiveType

P = PrimitiveType
O = HloOpcode

# --- types, loads and stores -----------------------------------------------


def compute_type(element_type: PrimitiveType) -> ir.Type:
  """The LLVM type elementwise values of `element_type` are computed in."""
  return ec.compute_scalar_type(element_type)


def _vector_ptr(b: ir.IRBuilder, ptr: ir.Value, storage: ir.Type,
                width: int) -> ir.Value:
  return b.bitcast(ptr, ir.VectorType(storage, width).as_pointer())


def _storage_align(storage: ir.Type) -> int:
  if isinstance(storage, ir.IntType):
    return max(1, storage.width // 8)
  return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}.get(
      type(storage), 8)


def load_element(b: ir.IRBuilder, ptr: ir.Value, element_type: PrimitiveType,
                 width: int = 1) -> ir.Value:
  """Loads one element (or `width` consecutive ones as a vector) from `ptr`
  (a pointer to the storage type) and returns it in compute type."""
  et = P(element_type)
  storage = kernel_api.llvm_storage_type(et)
  k = ec.kind(et)
  if width > 1:
    if k == "complex":
      raise support.UnimplementedError(
          "CPU codegen: complex values are never vectorized")
    ptr = _vector_ptr(b, ptr, storage, width)
  raw = b.load(ptr, align=_storage_align(storage) if k != "complex" else None)
  if et == P.PRED:
    return b.icmp_unsigned("!=", raw, u.const(raw.type, 0))
  if et == P.BF16:
    return ec.bf16_from_bits(b, raw)
  if et in ec.NARROW_INTS:
    return ec.normalize_int(b, raw, et)
  return raw


def store_element(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value,
                  element_type: PrimitiveType) -> None:
  """Stores a compute-type value (scalar or vector) at `ptr`."""
  et = P(element_type)
  storage = kernel_api.llvm_storage_type(et)
  n = u.lanes(value.type)
  if et == P.PRED:
    value = b.zext(value, u.like(value.type, u.I8))
  elif et == P.BF16:
    value = ec.bf16_bits(b, value)
  elif et in ec.NARROW_INTS:
    value = b.and_(value, u.const(value.type, (1 << ec.NARROW_INTS[et]) - 1))
  if n > 1:
    ptr = _vector_ptr(b, ptr, storage, n)
  k = ec.kind(et)
  b.store(value, ptr, align=_storage_align(storage) if k != "complex" else
          None)


# --- helpers ----------------------------------------------------------------


def _unsupported(instr, et=None) -> support.UnimplementedError:
  et = et if et is not None else instr.shape.element_type
  return support.UnimplementedError(
      f"CPU codegen: {instr.opcode.value} on element type "
      f"{primitive_util.lowercase_name(et)} is not supported ({instr.name})")


def _zero(ty):
  return u.const(ty, 0.0 if u.is_float(ty) else 0)


def _int_ops(signed: bool):
  return (lambda b, x, y: b.icmp_signed("<", x, y)) if signed else (
      lambda b, x, y: b.icmp_unsigned("<", x, y))


def float_max(b, x, y):
  """IEEE maximum: NaN if either is NaN; +0 > -0."""
  return u.intrinsic(b, "maximum", [x, y])


def float_min(b, x, y):
  return u.intrinsic(b, "minimum", [x, y])


def _max_min(b, et, x, y, is_max):
  k = ec.kind(et)
  if k == "pred":
    return b.or_(x, y) if is_max else b.and_(x, y)
  if k in ("sint", "uint"):
    lt = _int_ops(k == "sint")(b, x, y)
    return b.select(lt, y, x) if is_max else b.select(lt, x, y)
  if k == "float":
    return float_max(b, x, y) if is_max else float_min(b, x, y)
  return cx.max_min(b, x, y, is_max)


# --- integer division -------------------------------------------------------


def _int_div_rem(b, et, x, y, want_rem):
  ty = x.type
  signed = ec.kind(et) == "sint"
  zero = b.icmp_unsigned("==", y, u.const(ty, 0))
  bad = zero
  if signed:
    w = u.int_width(ty)
    overflow = b.and_(b.icmp_signed("==", x, u.const(ty, -(1 << (w - 1)))),
                      b.icmp_signed("==", y, u.const(ty, -1)))
    bad = b.or_(zero, overflow)
  safe = b.select(bad, u.const(ty, 1), y)
  if want_rem:
    r = b.srem(x, safe) if signed else b.urem(x, safe)
    # x % 0 = x; INT_MIN % -1 = INT_MIN % 1 = 0 already.
    return b.select(zero, x, r)
  q = b.sdiv(x, safe) if signed else b.udiv(x, safe)
  # x / 0 = -1 (all ones); INT_MIN / -1 = INT_MIN / 1 = INT_MIN already.
  return ec.normalize_int(b, b.select(zero, u.const(ty, -1), q), et)


def _int_power(b, et, x, y):
  """x^y by squaring, unrolled over every exponent bit; a negative exponent
  gives 0 unless |x| = 1 (XLA's definition)."""
  ty = x.type
  w = ec.NARROW_INTS.get(et, u.int_width(ty))
  signed = ec.kind(et) == "sint"
  e = y
  if signed:
    neg = b.icmp_signed("<", y, u.const(ty, 0))
    e = b.select(neg, b.neg(y), y)
  e = b.and_(e, u.const(ty, (1 << w) - 1))
  result = u.const(ty, 1)
  base = x
  one = u.const(ty, 1)
  for i in range(w):
    bit = b.icmp_unsigned("!=", b.and_(b.lshr(e, u.const(ty, i)), one),
                          u.const(ty, 0))
    result = b.select(bit, b.mul(result, base), result)
    if i + 1 < w:
      base = b.mul(base, base)
  if signed:
    unit = b.or_(b.icmp_signed("==", x, one),
                 b.icmp_signed("==", x, u.const(ty, -1)))
    result = b.select(b.and_(neg, b.not_(unit)), u.const(ty, 0), result)
  return ec.normalize_int(b, result, et)


# --- shifts and bit counts --------------------------------------------------


def _shift(b, et, x, y, how):
  ty = x.type
  w = ec.NARROW_INTS.get(et, u.int_width(ty))
  full = u.int_width(ty)
  mask = u.const(ty, (1 << w) - 1)
  amount = b.and_(y, mask) if w < full else y
  big = b.icmp_unsigned(">=", amount, u.const(ty, w))
  safe = b.select(big, u.const(ty, 0), amount)
  if how == "left":
    r = b.select(big, u.const(ty, 0), b.shl(x, safe))
  elif how == "logical":
    bits = b.and_(x, mask) if w < full else x
    r = b.select(big, u.const(ty, 0), b.lshr(bits, safe))
  else:
    v = x
    if w < full:  # sign-extend the w-bit pattern (also for U2 / U4)
      s = u.const(ty, full - w)
      v = b.ashr(b.shl(x, s), s)
    amt = b.select(big, u.const(ty, w - 1), amount)
    r = b.ashr(v, amt)
  return ec.normalize_int(b, r, et)


def _popcnt(b, et, x):
  w = ec.NARROW_INTS.get(et)
  v = b.and_(x, u.const(x.type, (1 << w) - 1)) if w else x
  return ec.normalize_int(b, u.intrinsic(b, "ctpop", [v]), et)


def _mulhi(b, et, x, y):
  """The high half of the double-width product (HLO mulhi): both operands
  widened (sign- or zero-extended as `et` is signed or not) to twice the
  compute width, multiplied, and shifted right by the type's logical width
  (4 for s4 held in i8)."""
  full = u.int_width(x.type)
  w = ec.NARROW_INTS.get(et) or full
  wide_el = ir.IntType(2 * full)
  wide = (ir.VectorType(wide_el, x.type.count)
          if isinstance(x.type, ir.VectorType) else wide_el)
  signed = primitive_util.is_signed_integral(et)
  ext = b.sext if signed else b.zext
  prod = b.mul(ext(x, wide), ext(y, wide))
  hi = (b.ashr if signed else b.lshr)(prod, u.const(wide, w))
  return ec.normalize_int(b, b.trunc(hi, x.type), et)


def _clz(b, et, x):
  w = ec.NARROW_INTS.get(et)
  full = u.int_width(x.type)
  v = b.and_(x, u.const(x.type, (1 << w) - 1)) if w else x
  n = u.intrinsic(b, "ctlz", [v, ir.Constant(u.I1, 0)])
  if w:
    n = b.sub(n, u.const(x.type, full - w))
  return ec.normalize_int(b, n, et)


# --- compare ----------------------------------------------------------------

_SIGNED_PRED = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">",
                "GE": ">="}


def _total_order_key(b, x):
  """Signed integers ordered as IEEE totalOrder of the floats `x`."""
  bits = u.to_bits(b, x)
  w = u.int_width(bits.type)
  sign = b.ashr(bits, u.const(bits.type, w - 1))
  return b.xor(bits, b.lshr(sign, u.const(bits.type, 1)))


def compare(b: ir.IRBuilder, et: PrimitiveType, direction: str, x, y,
            total_order: bool = False) -> ir.Value:
  """Compares two compute values of `et`; returns i1 (or <W x i1>)."""
  pred = _SIGNED_PRED[direction]
  k = ec.kind(et)
  if k == "float":
    if total_order:
      return b.icmp_signed(pred, _total_order_key(b, x),
                           _total_order_key(b, y))
    if direction == "NE":
      return b.fcmp_unordered("!=", x, y)
    return b.fcmp_ordered(pred, x, y)
  if k == "sint":
    return b.icmp_signed(pred, x, y)
  if k in ("uint", "pred"):
    return b.icmp_unsigned(pred, x, y)
  return cx.compare(b, direction, x, y)


# --- the opcode table -------------------------------------------------------


class _Ctx:
  """Per-instruction facts handed to the opcode emitters."""

  def __init__(self, instr):
    self.instr = instr
    self.et = P(instr.shape.element_type)
    self.k = ec.kind(self.et)

  def operand_et(self, i=0) -> PrimitiveType:
    return P(self.instr.operand(i).shape.element_type)


def _arith(int_fn, float_fn, pred_fn=None, complex_fn=None):

  def emit(b, c: _Ctx, x, y):
    if c.k == "pred":
      if pred_fn is None:
        raise _unsupported(c.instr)
      return pred_fn(b, x, y)
    if c.k in ("sint", "uint"):
      return ec.normalize_int(b, int_fn(b, x, y), c.et)
    if c.k == "float":
      return float_fn(b, x, y)
    if complex_fn is None:
      raise _unsupported(c.instr)
    return complex_fn(b, x, y)

  return emit


# opcode -> scalar emitter(b, ctx, *operands): each registers where it is
# defined (`_emits`), or, when a factory builds it, in the block of
# `_register` calls below the definitions.
_EMITTERS: dict[HloOpcode, Callable] = {}


def _register(opcode: HloOpcode, emit: Callable) -> Callable:
  if opcode in _EMITTERS:
    raise support.InternalError(
        f"two elemental emitters for {opcode.value}")
  _EMITTERS[opcode] = emit
  return emit


def _emits(*opcodes: HloOpcode):
  def register(fn):
    for op in opcodes:
      _register(op, fn)
    return fn
  return register


@_emits(O.kDivide)
def _divide(b, c, x, y):
  if c.k in ("sint", "uint"):
    return _int_div_rem(b, c.et, x, y, False)
  if c.k == "float":
    return b.fdiv(x, y)
  if c.k == "complex":
    return cx.divide(b, x, y)
  raise _unsupported(c.instr)


@_emits(O.kRemainder)
def _remainder(b, c, x, y):
  if c.k in ("sint", "uint"):
    return _int_div_rem(b, c.et, x, y, True)
  if c.k == "float":
    return b.frem(x, y)
  raise _unsupported(c.instr)


@_emits(O.kNegate)
def _negate(b, c, x):
  if c.k == "pred":
    return x
  if c.k in ("sint", "uint"):
    return ec.normalize_int(b, b.neg(x), c.et)
  if c.k == "float":
    return b.fneg(x)
  return cx.negate(b, x)


@_emits(O.kAbs)
def _abs(b, c, x):
  ok = ec.kind(c.operand_et())
  if ok in ("pred", "uint"):
    return x
  if ok == "sint":
    neg = b.icmp_signed("<", x, u.const(x.type, 0))
    return ec.normalize_int(b, b.select(neg, b.neg(x), x), c.et)
  if ok == "float":
    return u.fabs(b, x)
  return cx.abs_(b, x)


@_emits(O.kSign)
def _sign(b, c, x):
  ty = x.type
  if c.k == "pred" or c.k == "uint":
    if c.k == "uint":
      return b.select(b.icmp_unsigned("!=", x, u.const(ty, 0)),
                      u.const(ty, 1), x)
    return x
  if c.k == "sint":
    pos = b.icmp_signed(">", x, u.const(ty, 0))
    neg = b.icmp_signed("<", x, u.const(ty, 0))
    return b.select(pos, u.const(ty, 1),
                    b.select(neg, u.const(ty, -1), u.const(ty, 0)))
  if c.k == "float":
    pos = b.fcmp_ordered(">", x, u.const(ty, 0.0))
    neg = b.fcmp_ordered("<", x, u.const(ty, 0.0))
    return b.select(pos, u.const(ty, 1.0),
                    b.select(neg, u.const(ty, -1.0), x))
  return cx.sign(b, x)


def _bitwise(op_name):

  def emit(b, c, x, y):
    if c.k not in ("pred", "sint", "uint"):
      raise _unsupported(c.instr)
    return ec.normalize_int(b, getattr(b, op_name)(x, y), c.et)

  return emit


@_emits(O.kNot)
def _not(b, c, x):
  if c.k not in ("pred", "sint", "uint"):
    raise _unsupported(c.instr)
  return ec.normalize_int(b, b.not_(x), c.et)


def _int_only(fn):

  def emit(b, c, *args):
    if c.k not in ("sint", "uint"):
      raise _unsupported(c.instr)
    return fn(b, c.et, *args)

  return emit


@_emits(O.kCompare)
def _compare(b, c, x, y):
  instr = c.instr
  direction = instr.comparison_direction.name
  ctype = instr.comparison_type
  ctype = getattr(ctype, "value", ctype)
  return compare(b, c.operand_et(0), direction, x, y,
                 total_order=ctype == "TOTALORDER")


@_emits(O.kSelect)
def _select(b, c, p, x, y):
  # A scalar predicate over vector operands is valid IR too.
  return b.select(p, x, y)


@_emits(O.kClamp)
def _clamp(b, c, lo, x, hi):
  return _max_min(b, c.et, _max_min(b, c.et, x, lo, True), hi, False)


@_emits(O.kConvert)
def _convert(b, c, x):
  return ec.convert(b, x, c.operand_et(), c.et)


@_emits(O.kBitcastConvert)
def _bitcast_convert(b, c, x):
  return ec.bitcast_convert(b, x, c.operand_et(), c.et)


@_emits(O.kReducePrecision)
def _reduce_precision(b, c, x):
  if c.k != "float":
    raise _unsupported(c.instr)
  return ec.reduce_precision(b, x, c.et, c.instr.exponent_bits,
                             c.instr.mantissa_bits)


@_emits(O.kIsFinite)
def _is_finite(b, c, x):
  if ec.kind(c.operand_et()) != "float":
    raise _unsupported(c.instr, c.operand_et())
  return b.fcmp_ordered("<", u.fabs(b, x), u.const(x.type, float("inf")))


@_emits(O.kPower)
def _power(b, c, x, y):
  if c.k == "pred":
    return b.or_(x, b.not_(y))  # x^0 = 1, 0^1 = 0
  if c.k in ("sint", "uint"):
    return _int_power(b, c.et, x, y)
  if c.k == "float":
    return _float_math(pa.power)(b, c, x, y)
  return cx.power(b, x, y)


def _float_math(fn, complex_fn=None, name=None):
  """A float function of `polynomial_approximations` applied in f32 / f64
  (half inputs widened to f32 and the result rounded back once)."""

  def emit(b, c, *args):
    if c.k == "complex":
      if complex_fn is None:
        raise _unsupported(c.instr)
      return complex_fn(b, *args)
    if c.k != "float":
      raise _unsupported(c.instr)
    ty = args[0].type
    if isinstance(u.element_of(ty), ir.HalfType):
      wide = [b.fpext(a, u.like(ty, u.F32)) for a in args]
      return b.fptrunc(_math_call(b, fn, wide), ty)
    return _math_call(b, fn, args)

  return emit


def _math_call(b, fn, args):
  """fn(b, *args), through its library routine where it has one."""
  out = math_routines.call(b, fn, *args)
  return fn(b, *args) if out is None else out


def _llvm_unary(name):

  def fn(b, x):
    return u.intrinsic(b, name, [x])

  return fn


def _rsqrt(b, x):
  """1 / sqrt(x) computed in double and rounded once for f32 / f16 (within
  half an ulp but for rare double-rounding ties); f64 is 1 / sqrt(x) with
  two roundings, as the HLO evaluator computes it."""
  ty = x.type
  if isinstance(u.element_of(ty), ir.FloatType):
    d = b.fpext(x, u.like(ty, u.F64))
    r = b.fdiv(u.const(d.type, 1.0), u.intrinsic(b, "sqrt", [d]))
    return b.fptrunc(r, ty)
  return b.fdiv(u.const(ty, 1.0), u.intrinsic(b, "sqrt", [x]))


@_emits(O.kReal)
def _real(b, c, x):
  if ec.kind(c.operand_et()) == "complex":
    return b.extract_value(x, 0)
  return x


@_emits(O.kImag)
def _imag(b, c, x):
  if ec.kind(c.operand_et()) == "complex":
    return b.extract_value(x, 1)
  return _zero(x.type)


@_emits(O.kComplex)
def _complex(b, c, re, im):
  out = ir.Constant(compute_type(c.et), ir.Undefined)
  return b.insert_value(b.insert_value(out, re, 0), im, 1)


@_emits(O.kStochasticConvert)
def _stochastic_convert(b, c, x, r):
  raise _unsupported(c.instr, c.operand_et())


# A program's multiplies and adds / subtracts may fuse into FMAs, as XLA CPU
# allows ("always allow FMA fusion", its target options): the fused result
# rounds once, so it is at least as precise, and programs see the same
# rounding as on XLA. JAX's incomplete beta function iterates until
# |c * d - 1| < eps / 2 for every element, which the exact residual of an
# FMA reaches and a rounded product may never: without it the loop ran all
# of its 600 iterations where XLA stops after 8 (10x slower betainc). The
# math-function approximations (polynomial_approximations) keep their own
# rounding, unflagged.
FMA_CONTRACT = ("contract",)

# Emitters built by factories (one per opcode, in opcode order).
_register(O.kAcos, _float_math(pa.acos))
_register(O.kAcosh, _float_math(pa.acosh))
_register(O.kAsin, _float_math(pa.asin))
_register(O.kAsinh, _float_math(pa.asinh))
_register(O.kAtan, _float_math(pa.atan))
_register(O.kAtanh, _float_math(pa.atanh))
_register(O.kCosh, _float_math(pa.cosh))
_register(O.kSinh, _float_math(pa.sinh))
_register(O.kAdd, _arith(lambda b, x, y: b.add(x, y),
                   lambda b, x, y: b.fadd(x, y, flags=FMA_CONTRACT),
                   lambda b, x, y: b.or_(x, y), cx.add))
_register(O.kAnd, _bitwise("and_"))
_register(O.kAtan2, _float_math(pa.atan2))
_register(O.kCbrt, _float_math(pa.cbrt))
_register(O.kCeil, _float_math(_llvm_unary("ceil")))
_register(O.kClz, _int_only(_clz))
_register(O.kCos, _float_math(pa.cos, cx.cos))
_register(O.kErf, _float_math(pa.erf))
_register(O.kExp, _float_math(pa.exp, cx.exp))
_register(O.kExpm1, _float_math(pa.expm1, cx.expm1))
_register(O.kFloor, _float_math(_llvm_unary("floor")))
_register(O.kLog, _float_math(pa.log, cx.log))
_register(O.kLog1p, _float_math(pa.log1p, cx.log1p))
_register(O.kLogistic, _float_math(pa.logistic))
_register(O.kMaximum, lambda b, c, x, y: _max_min(b, c.et, x, y, True))
_register(O.kMinimum, lambda b, c, x, y: _max_min(b, c.et, x, y, False))
_register(O.kMulhi, _int_only(_mulhi))
_register(O.kMultiply, _arith(lambda b, x, y: b.mul(x, y),
                        lambda b, x, y: b.fmul(x, y, flags=FMA_CONTRACT),
                        lambda b, x, y: b.and_(x, y), cx.multiply))
_register(O.kOr, _bitwise("or_"))
_register(O.kPopulationCount, _int_only(_popcnt))
_register(O.kRoundNearestAfz, _float_math(_llvm_unary("round")))
_register(O.kRoundNearestEven, _float_math(_llvm_unary("roundeven")))
_register(O.kRsqrt, _float_math(_rsqrt, cx.rsqrt))
_register(O.kShiftLeft, _int_only(lambda b, et, x, y: _shift(b, et, x, y, "left")))
_register(O.kShiftRightArithmetic, _int_only(
        lambda b, et, x, y: _shift(b, et, x, y, "arithmetic")))
_register(O.kShiftRightLogical, _int_only(
        lambda b, et, x, y: _shift(b, et, x, y, "logical")))
_register(O.kSin, _float_math(pa.sin, cx.sin))
_register(O.kSqrt, _float_math(_llvm_unary("sqrt"), cx.sqrt))
_register(O.kSubtract, _arith(lambda b, x, y: b.sub(x, y),
                        lambda b, x, y: b.fsub(x, y, flags=FMA_CONTRACT),
                        lambda b, x, y: b.xor(x, y), cx.subtract))
_register(O.kTan, _float_math(pa.tan, cx.tan))
_register(O.kTanh, _float_math(pa.tanh, cx.tanh))
_register(O.kXor, _bitwise("xor"))

# Opcodes whose result is exact in the operand's precision: a BF16 result
# needs no rounding after them.
_EXACT_FOR_BF16 = frozenset((
    O.kAbs, O.kNegate, O.kSelect, O.kClamp, O.kMaximum, O.kMinimum,
    O.kConvert, O.kBitcastConvert, O.kReal, O.kImag, O.kComplex, O.kCeil,
    O.kFloor, O.kRoundNearestAfz, O.kRoundNearestEven, O.kSign,
    O.kReducePrecision))

SUPPORTED_OPCODES = frozenset(_EMITTERS) - {O.kStochasticConvert}


def opcode_emitter(opcode: HloOpcode) -> Optional[Callable]:
  """The scalar emitter of an elementwise `opcode`; None if it has none."""
  return _EMITTERS.get(opcode)


def emit_elementwise(b: ir.IRBuilder, instr,
                     operands: Sequence[ir.Value]) -> ir.Value:
  """The value of elementwise `instr` applied to `operands` (compute type,
  all scalars or all vectors of one width; a select / clamp may mix a
  scalar predicate / bound with vectors only where LLVM allows it)."""
  fn = _EMITTERS.get(instr.opcode)
  if fn is None:
    raise support.UnimplementedError(
        f"CPU codegen: no elemental emitter for {instr.opcode.value} "
        f"({instr.name})")
  c = _Ctx(instr)
  operands = _splat_scalars(b, instr, list(operands))
  result = fn(b, c, *operands)
  if c.et == P.BF16 and instr.opcode not in _EXACT_FOR_BF16:
    result = ec.round_to_bf16(b, result)
  return result


def _splat_scalars(b, instr, operands):
  """Broadcasts scalar operands of clamp (bounds) to the vector width of the
  others, so every operand has the same shape."""
  n = max(u.lanes(v.type) for v in operands)
  if n == 1 or instr.opcode == O.kSelect:
    return operands
  out = []
  for v in operands:
    if u.lanes(v.type) == 1 and not isinstance(v.type, ir.LiteralStructType):
      v = splat(b, v, n)
    out.append(v)
  return out


def splat(b: ir.IRBuilder, v: ir.Value, width: int) -> ir.Value:
  """A `<width x T>` vector with `v` in every lane."""
  vty = ir.VectorType(v.type, width)
  one = b.insert_element(ir.Constant(vty, ir.Undefined), v,
                         ir.Constant(u.I32, 0))
  mask = ir.Constant(ir.VectorType(u.I32, width), [0] * width)
  return b.shuffle_vector(one, ir.Constant(vty, ir.Undefined), mask)


# --- scalar computations ----------------------------------------------------


def constant_value(literal) -> ir.Value:
  """A scalar literal as a compute-type LLVM constant."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  et = P(literal.shape.element_type)
  if literal.shape.dimensions:
    raise support.UnimplementedError(
        "CPU codegen: non-scalar constant in a scalar computation")
  v = np.asarray(literal.array).reshape(())[()]
  ty = compute_type(et)
  k = ec.kind(et)
  if k == "pred":
    return ir.Constant(ty, int(bool(v)))
  if k in ("sint", "uint"):
    return u.const(ty, int(v))
  if k == "float":
    return ir.Constant(ty, float(v))
  return ir.Constant(ty, [ir.Constant(ty.elements[0], float(v.real)),
                          ir.Constant(ty.elements[1], float(v.imag))])


def emit_computation_values(b: ir.IRBuilder, computation,
                            params: Sequence) -> object:
  """Emits a scalar computation inline on `params` (compute values, or
  Python tuples of them for tuple parameters); returns the root's value (a
  tuple for tuple roots)."""
  values: dict[int, object] = {}
  for instr in computation.make_instruction_post_order():
    op = instr.opcode
    if op == O.kParameter:
      val = params[instr.parameter_number]
    elif op == O.kConstant:
      val = constant_value(instr.literal)
    elif op == O.kTuple:
      val = tuple(values[id(o)] for o in instr.operands)
    elif op == O.kGetTupleElement:
      val = values[id(instr.operand(0))][instr.tuple_index]
    elif op == O.kCall:
      val = emit_computation_values(
          b, instr.to_apply, [values[id(o)] for o in instr.operands])
    elif op in (O.kCopy, O.kBitcast, O.kReshape, O.kBroadcast) and \
        not instr.shape.is_tuple() and not instr.shape.dimensions:
      val = values[id(instr.operand(0))]
    elif op in _EMITTERS:
      if instr.shape.dimensions:
        raise support.UnimplementedError(
            f"CPU codegen: non-scalar {op.value} in a scalar computation "
            f"({instr.name})")
      val = emit_elementwise(b, instr,
                             [values[id(o)] for o in instr.operands])
    else:
      raise support.UnimplementedError(
          f"CPU codegen: {op.value} in a scalar computation ({instr.name} in "
          f"{computation.name})")
    values[id(instr)] = val
  return values[id(computation.root_instruction)]


def _flatten(value, out):
  if isinstance(value, tuple):
    for v in value:
      _flatten(v, out)
  else:
    out.append(value)
  return out


def _unflatten(shape, it):
  if shape.is_tuple():
    return tuple(_unflatten(s, it) for s in shape.tuple_shapes)
  return next(it)


def emit_scalar_computation(module: ir.Module, computation,
                            name: str) -> ir.Function:
  """`void name(T0* p0, ..., Tn* pn, R0* out0, ...)` computing the scalar
  `computation`: parameters and outputs are pointers to single elements in
  storage type, tuple parameters / roots flattened into their leaves depth
  first. The function is `alwaysinline`."""
  params = sorted(computation.parameter_instructions,
                  key=lambda p: p.parameter_number)
  param_leaves = [kernel_api.array_leaves(p.shape) for p in params]
  root = computation.root_instruction
  out_leaves = kernel_api.array_leaves(root.shape)
  for leaf in [l for ls in param_leaves for l in ls] + out_leaves:
    if leaf.dimensions:
      raise support.UnimplementedError(
          f"CPU codegen: scalar computation {computation.name} has a "
          f"non-scalar parameter or result {leaf.to_string()}")
  arg_types = [kernel_api.llvm_storage_type(l.element_type).as_pointer()
               for ls in param_leaves for l in ls]
  arg_types += [kernel_api.llvm_storage_type(l.element_type).as_pointer()
                for l in out_leaves]
  fn = ir.Function(module, ir.FunctionType(ir.VoidType(), arg_types), name)
  fn.attributes.add("alwaysinline")
  fn.attributes.add("nounwind")
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  args = iter(fn.args)
  values = []
  for p, leaves in zip(params, param_leaves):
    loaded = [load_element(b, next(args), l.element_type) for l in leaves]
    values.append(_unflatten(p.shape, iter(loaded)))
  result = _flatten(emit_computation_values(b, computation, values), [])
  for v, leaf in zip(result, out_leaves):
    store_element(b, v, next(args), leaf.element_type)
  b.ret_void()
  return fn


kernel_api.set_scalar_computation_emitter(emit_scalar_computation)
