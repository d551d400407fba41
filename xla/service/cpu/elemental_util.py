"""Small llvmlite helpers shared by the elemental emitters and the math
library: splat constants, LLVM intrinsic calls with mangled names, and the
scalar <-> vector type plumbing that lets every emitter work unchanged on a
scalar value or on an LLVM vector `<W x T>` of the same element type.
"""

from __future__ import annotations

from typing import Sequence

from llvmlite import ir

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()


def element_of(ty: ir.Type) -> ir.Type:
  """The element type of a vector type; a scalar type itself."""
  return ty.element if isinstance(ty, ir.VectorType) else ty


def lanes(ty: ir.Type) -> int:
  """The vector width of `ty` (1 for scalars)."""
  return ty.count if isinstance(ty, ir.VectorType) else 1


def like(ty: ir.Type, element: ir.Type) -> ir.Type:
  """`element`, or a vector of it with as many lanes as `ty` has."""
  if isinstance(ty, ir.VectorType):
    return ir.VectorType(element, ty.count)
  return element


def is_float(ty: ir.Type) -> bool:
  return isinstance(element_of(ty), (ir.HalfType, ir.FloatType,
                                     ir.DoubleType))


def int_width(ty: ir.Type) -> int:
  return element_of(ty).width


def const(ty: ir.Type, value) -> ir.Constant:
  """A constant of `ty`; for a vector type, `value` splatted to every lane.
  Integer values are taken modulo 2^width (so -1 is all ones)."""
  el = element_of(ty)
  if isinstance(el, ir.IntType):
    value = int(value) & ((1 << el.width) - 1)
  else:
    value = float(value)
  c = ir.Constant(el, value)
  if isinstance(ty, ir.VectorType):
    return ir.Constant(ty, [c] * ty.count)
  return c


def mangle(ty: ir.Type) -> str:
  """LLVM's overloaded-intrinsic suffix for `ty` (f32, v16f32, i8, ...)."""
  el = element_of(ty)
  if isinstance(el, ir.IntType):
    s = f"i{el.width}"
  elif isinstance(el, ir.HalfType):
    s = "f16"
  elif isinstance(el, ir.FloatType):
    s = "f32"
  elif isinstance(el, ir.DoubleType):
    s = "f64"
  else:
    raise TypeError(f"no intrinsic mangling for {ty}")
  if isinstance(ty, ir.VectorType):
    return f"v{ty.count}{s}"
  return s


def declare(module: ir.Module, name: str, ret: ir.Type,
            args: Sequence[ir.Type]) -> ir.Function:
  """Returns the function `name` of `module`, declaring it if needed."""
  fn = module.globals.get(name)
  if fn is None:
    fn = ir.Function(module, ir.FunctionType(ret, list(args)), name)
  return fn


def intrinsic(b: ir.IRBuilder, name: str, args: Sequence[ir.Value],
              ret: ir.Type | None = None,
              overload: Sequence[ir.Type] | None = None) -> ir.Value:
  """Calls `llvm.<name>.<mangled overload types>`; by default the overload
  is the first argument's type and the result has that type too."""
  ret = ret if ret is not None else args[0].type
  overload = overload if overload is not None else [args[0].type]
  full = "llvm." + name + "".join("." + mangle(t) for t in overload)
  fn = declare(b.module, full, ret, [a.type for a in args])
  return b.call(fn, list(args))


def bits_type(ty: ir.Type) -> ir.Type:
  """The integer type (scalar or vector) as wide as the float type `ty`."""
  el = element_of(ty)
  width = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(el)]
  return like(ty, ir.IntType(width))


def to_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  return b.bitcast(x, bits_type(x.type))


def is_nan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  return b.fcmp_unordered("uno", x, x)


def fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
  return intrinsic(b, "fabs", [x])


def fma(b: ir.IRBuilder, x, y, z) -> ir.Value:
  """x * y + z rounded once (llvm.fma; a single instruction with FMA3 /
  AVX-512)."""
  return intrinsic(b, "fma", [x, y, z])


def smin(b, x, y):
  return b.select(b.icmp_signed("<", x, y), x, y)


def smax(b, x, y):
  return b.select(b.icmp_signed(">", x, y), x, y)


def umin(b, x, y):
  return b.select(b.icmp_unsigned("<", x, y), x, y)


def libm_call(b: ir.IRBuilder, name: str, args: Sequence[ir.Value]
              ) -> ir.Value:
  """Calls the C library's double function `name` (e.g. "erf") on double
  scalars, or once per lane on vectors of doubles."""
  fn = declare(b.module, name, F64, [F64] * len(args))
  n = lanes(args[0].type)
  if n == 1:
    return b.call(fn, list(args))
  out = ir.Constant(args[0].type, ir.Undefined)
  for i in range(n):
    idx = ir.Constant(I32, i)
    r = b.call(fn, [b.extract_element(a, idx) for a in args])
    out = b.insert_element(out, r, idx)
  return out
