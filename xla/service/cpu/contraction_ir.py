"""IR helpers shared by the dot and convolution emitters.

- array strides from a shape's layout (in elements);
- loops (`for_range`), entry-block allocas, index decomposition;
- the *accumulator* model of XLA's dot / convolution: every operand element
  is converted to the accumulation type of the result, products are summed
  there, and the sum is converted once to the result type at the end:
    F16 / BF16 / F32 results accumulate in f32, F64 in f64;
    integer results accumulate in the result's width, wrapping (the same
    value modulo 2^bits as the evaluator's int64 sum); S4/U4/S2/U2 results
    are read from (and stored to) the low bits of their byte, as ml_dtypes
    holds them; PRED results sum 0/1 in i64 and
    store `sum != 0`;
    C64 / C128 results accumulate in a (re, im) pair of f32 / f64.
  This mirrors xla/hlo/evaluator/structural.py (`_compute_dtype`, `_finish`).

These conversions are written here rather than taken from the elemental
emitter because the contraction's accumulation rules (widen once, round once,
wrap in the result width) are specific to it and small.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from llvmlite import ir

import support
from xla import primitive_util
from xla import xla_data
from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter
from xla.shape import Shape

PrimitiveType = xla_data.PrimitiveType
P = PrimitiveType
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()

FLOAT_FLAGS = ("reassoc", "contract")


def i64(v: int) -> ir.Constant:
  return ir.Constant(I64, v)


def strides(shape: Shape) -> list[int]:
  """Element strides of each dimension of a dense array in its layout."""
  dims = list(shape.dimensions)
  if shape.layout is not None and shape.layout.minor_to_major:
    order = list(shape.layout.minor_to_major)
  else:
    order = list(range(len(dims) - 1, -1, -1))
  out = [0] * len(dims)
  step = 1
  for d in order:
    out[d] = step
    step *= dims[d]
  return out


def num_elements(shape: Shape) -> int:
  n = 1
  for d in shape.dimensions:
    n *= d
  return n


# --- control flow -------------------------------------------------------------


def for_range(b: ir.IRBuilder, start, stop, name: str = "i", step: int = 1):
  """`loop_emitter.for_range` in its test-first form (with `nsw`); a
  context manager yielding iv (i64)."""
  return loop_emitter.for_range(b, start, stop, name, step, test_first=True)


def entry_alloca(b: ir.IRBuilder, ty: ir.Type, count: int = 1,
                 name: str = "") -> ir.Value:
  """An alloca in the function's entry block (so it is allocated once)."""
  with b.goto_entry_block():
    slot = b.alloca(ty, size=i64(count) if count != 1 else None, name=name)
  return slot


def decompose(b: ir.IRBuilder, linear, sizes: Sequence[int]) -> list:
  """Row-major indices of `linear` over `sizes` (outer first)."""
  idx = [None] * len(sizes)
  rest = linear
  for d in range(len(sizes) - 1, -1, -1):
    if d == 0:
      idx[d] = rest
    else:
      idx[d] = b.urem(rest, i64(sizes[d]))
      rest = b.udiv(rest, i64(sizes[d]))
  return idx


def linear_offset(b: ir.IRBuilder, idx: Sequence, strides_: Sequence[int],
                  base=None):
  """base + sum(idx[i] * strides_[i]) as i64 (constants folded)."""
  acc = base if base is not None else i64(0)
  for v, s in zip(idx, strides_):
    if s == 0:
      continue
    term = v if s == 1 else b.mul(v, i64(s), flags=["nsw"])
    acc = b.add(acc, term, flags=["nsw"])
  return acc


def floordiv(b: ir.IRBuilder, a, d: int):
  """floor(a / d) for i64 `a` and a positive constant `d`."""
  if d == 1:
    return a
  q = b.sdiv(a, i64(d))
  r = b.srem(a, i64(d))
  neg = b.icmp_signed("<", r, i64(0))
  return b.sub(q, b.zext(neg, I64))


def imax(b, x, y):
  return b.select(b.icmp_signed(">", x, y), x, y)


def imin(b, x, y):
  return b.select(b.icmp_signed("<", x, y), x, y)


# --- accumulation -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Acc:
  """How a contraction with result type `result` accumulates."""
  result: PrimitiveType
  kind: str  # "float", "int", "complex"
  ty: ir.Type  # scalar accumulator type (the component type for complex)

  @property
  def is_float(self):
    return self.kind == "float"


_SUB_BYTE = {P.S4: 4, P.U4: 4, P.S2: 2, P.U2: 2}


def accumulator(result: PrimitiveType,
                operands: Sequence[PrimitiveType] = (),
                opcode: str = "dot") -> Acc:
  """The accumulator for a dot / convolution; Unimplemented for types (or
  operand/result type mixes) it does not handle."""
  result = PrimitiveType(result)
  pu = primitive_util
  ops = [PrimitiveType(t) for t in operands]
  if result in (P.F16, P.BF16, P.F32):
    acc = Acc(result, "float", F32)
  elif result == P.F64:
    acc = Acc(result, "float", F64)
  elif result == P.C64:
    acc = Acc(result, "complex", F32)
  elif result == P.C128:
    acc = Acc(result, "complex", F64)
  elif result == P.PRED:
    acc = Acc(result, "int", I64)
  elif pu.is_integral(result) and result in _SUB_BYTE:
    acc = Acc(result, "int", I8)
  elif pu.is_integral(result):
    acc = Acc(result, "int", ir.IntType(pu.bit_width(result)))
  else:
    raise support.UnimplementedError(
        f"CPU {opcode}: result element type {pu.lowercase_name(result)} is "
        "not supported")
  for t in ops:
    ok = (t == P.PRED or pu.is_integral(t) or t in (P.F16, P.BF16, P.F32, P.F64)
          or pu.is_complex(t))
    if not ok:
      raise support.UnimplementedError(
          f"CPU {opcode}: operand element type {pu.lowercase_name(t)} is not "
          "supported")
    if acc.kind == "int" and not (t == P.PRED or pu.is_integral(t)):
      raise support.UnimplementedError(
          f"CPU {opcode}: {pu.lowercase_name(t)} operands with an integer "
          f"result ({pu.lowercase_name(result)}) are not supported")
    if acc.kind == "float" and pu.is_complex(t):
      raise support.UnimplementedError(
          f"CPU {opcode}: complex operands with a real result are not "
          "supported")
  return acc


def _is_signed(t: PrimitiveType) -> bool:
  return primitive_util.is_signed_integral(t)


def load_real(b: ir.IRBuilder, ptr, et: PrimitiveType, ty: ir.Type):
  """Loads one element of type `et` at `ptr` (storage-typed) as real `ty`."""
  raw = b.load(ptr)
  return convert_real(b, raw, et, ty)


def elem(ty: ir.Type) -> ir.Type:
  """The element type of a vector type, or `ty` itself."""
  return ty.element if isinstance(ty, ir.VectorType) else ty


def like(scalar: ir.Type, ref: ir.Type) -> ir.Type:
  """`scalar`, or a vector of it as long as `ref` when `ref` is a vector."""
  if isinstance(ref, ir.VectorType):
    return ir.VectorType(scalar, ref.count)
  return scalar


def convert_real(b: ir.IRBuilder, raw, et: PrimitiveType, ty: ir.Type):
  """Converts a stored value (scalar or vector) of element type `et` to the
  accumulator type `ty` (a vector type as long as `raw`'s for vectors)."""
  et = PrimitiveType(et)
  t = raw.type
  if et == P.BF16:
    wide = b.zext(raw, like(I32, t))
    f = b.bitcast(b.shl(wide, ir.Constant(wide.type, 16)), like(F32, t))
    return _fconv(b, f, ty)
  if et in (P.F16, P.F32, P.F64):
    return _fconv(b, raw, ty)
  # integers and pred
  bits = _SUB_BYTE.get(et)
  if bits is not None:  # the low `bits` bits of the byte hold the value
    if _is_signed(et):
      sh = ir.Constant(t, 8 - bits)
      raw = b.ashr(b.shl(raw, sh), sh)
    else:
      raw = b.and_(raw, ir.Constant(t, (1 << bits) - 1))
  if isinstance(elem(ty), ir.IntType):
    w, tw = elem(t).width, elem(ty).width
    if w == tw:
      return raw
    if w > tw:
      return b.trunc(raw, ty)
    return b.sext(raw, ty) if _is_signed(et) else b.zext(raw, ty)
  return b.sitofp(raw, ty) if _is_signed(et) else b.uitofp(raw, ty)


_FBITS = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}


def _fconv(b, v, ty):
  if v.type == ty:
    return v
  if _FBITS[type(elem(v.type))] < _FBITS[type(elem(ty))]:
    return b.fpext(v, ty)
  return b.fptrunc(v, ty)


def load_complex(b: ir.IRBuilder, ptr, et: PrimitiveType, ty: ir.Type):
  """(re, im) of the element at `ptr`; real elements get im = 0."""
  et = PrimitiveType(et)
  if primitive_util.is_complex(et):
    re = b.load(b.gep(ptr, [i32(0), i32(0)]))
    im = b.load(b.gep(ptr, [i32(0), i32(1)]))
    return _fconv(b, re, ty), _fconv(b, im, ty)
  return load_real(b, ptr, et, ty), ir.Constant(ty, 0.0)


def i32(v: int) -> ir.Constant:
  return ir.Constant(I32, v)


def load_acc(b: ir.IRBuilder, ptr, et: PrimitiveType, acc: Acc):
  if acc.kind == "complex":
    return load_complex(b, ptr, et, acc.ty)
  return load_real(b, ptr, et, acc.ty)


def zero(acc: Acc):
  if acc.kind == "complex":
    z = ir.Constant(acc.ty, 0.0)
    return (z, z)
  if acc.kind == "float":
    return ir.Constant(acc.ty, 0.0)
  return ir.Constant(acc.ty, 0)


def mul_add(b: ir.IRBuilder, acc: Acc, s, x, y, reassoc: bool = False):
  """s + x * y in the accumulator. Products may be fused (contract);
  `reassoc` also lets LLVM reorder the sum (XLA fixes no summation order
  for dot / convolution), which it needs to vectorize a reduction loop. Not
  wanted where the vector loop runs across independent sums: there LLVM
  would vectorize the reduction dim instead, with gathers."""
  f = FLOAT_FLAGS if reassoc else ("contract",)
  if acc.kind == "float":
    return b.fadd(s, b.fmul(x, y, flags=f), flags=f)
  if acc.kind == "int":
    return b.add(s, b.mul(x, y))
  (sr, si), (xr, xi), (yr, yi) = s, x, y
  re = b.fsub(b.fmul(xr, yr, flags=f), b.fmul(xi, yi, flags=f), flags=f)
  im = b.fadd(b.fmul(xr, yi, flags=f), b.fmul(xi, yr, flags=f), flags=f)
  return b.fadd(sr, re, flags=f), b.fadd(si, im, flags=f)


def acc_slot_type(acc: Acc) -> ir.Type:
  if acc.kind == "complex":
    return ir.LiteralStructType([acc.ty, acc.ty])
  return acc.ty


def slot_load(b: ir.IRBuilder, acc: Acc, ptr):
  if acc.kind == "complex":
    return (b.load(b.gep(ptr, [i32(0), i32(0)])),
            b.load(b.gep(ptr, [i32(0), i32(1)])))
  return b.load(ptr)


def slot_store(b: ir.IRBuilder, acc: Acc, value, ptr):
  if acc.kind == "complex":
    b.store(value[0], b.gep(ptr, [i32(0), i32(0)]))
    b.store(value[1], b.gep(ptr, [i32(0), i32(1)]))
  else:
    b.store(value, ptr)


def store_result(b: ir.IRBuilder, acc: Acc, value, ptr) -> None:
  """Converts an accumulated value (scalar, or a vector for real types) to
  the result type and stores it at `ptr` (a pointer to the storage type, or
  to a vector of it)."""
  et = acc.result
  if acc.kind == "complex":
    part = kernel_api.llvm_storage_type(et).elements[0]
    b.store(_fconv(b, value[0], part), b.gep(ptr, [i32(0), i32(0)]))
    b.store(_fconv(b, value[1], part), b.gep(ptr, [i32(0), i32(1)]))
    return
  b.store(to_storage(b, acc, value), ptr)


def to_storage(b: ir.IRBuilder, acc: Acc, value):
  """A real accumulated value (scalar or vector) as the result's storage."""
  et = acc.result
  t = value.type
  if et == P.BF16:
    return f32_to_bf16(b, _fconv(b, value, like(F32, t)))
  if acc.kind == "float":
    return _fconv(b, value, like(kernel_api.llvm_storage_type(et), t))
  if et == P.PRED:
    nz = b.icmp_unsigned("!=", value, ir.Constant(t, 0))
    return b.zext(nz, like(I8, t))
  bits = _SUB_BYTE.get(et)
  if bits is not None:  # stored as ml_dtypes does: the low bits only
    return b.and_(value, ir.Constant(t, (1 << bits) - 1))
  return value


def f32_to_bf16(b: ir.IRBuilder, f) -> ir.Value:
  """Round-to-nearest-even f32 -> bf16 bits (NaN stays a quiet NaN); works
  on scalars and vectors."""
  it = like(I32, f.type)
  c = lambda v: ir.Constant(it, v)
  bits = b.bitcast(f, it)
  lsb = b.and_(b.lshr(bits, c(16)), c(1))
  rounded = b.lshr(b.add(b.add(bits, c(0x7FFF)), lsb), c(16))
  quiet = b.or_(b.lshr(bits, c(16)), c(0x40))
  isnan = b.fcmp_unordered("uno", f, f)
  return b.trunc(b.select(isnan, quiet, rounded), like(I16, f.type))


def element_ptr(b: ir.IRBuilder, base, offset):
  return b.gep(base, [offset])


def load_args(b: ir.IRBuilder, fn: ir.Function,
              types: Sequence[PrimitiveType]) -> list:
  return [kernel_api.KernelContext.arg_pointer(b, fn, i, t)
          for i, t in enumerate(types)]
