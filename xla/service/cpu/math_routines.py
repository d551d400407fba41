"""Transcendental functions as library routines that loops vectorize over.

The approximations of `polynomial_approximations` are straight-line code
of 30 to 150 instructions each. Inlined into every fusion that uses them,
LLVM optimises and vectorises that code again in every kernel of every
program: a fusion holding one f64 `log1p` cost ~24 ms of LLVM time, and the
f64 special-function programs JAX emits (scipy.stats, scipy.special) hold
dozens of such fusions, so LLVM was most of their compile.

Here each function is a library routine (runtime_library), compiled once
and kept in the disk cache, in a scalar form and in vector forms of 2 to 16
lanes. A kernel calls the scalar form; its declaration carries LLVM's
vector-function ABI mapping ("vector-function-abi-variant"), so the loop
vectorizer widens the loop as before and calls the vector form, one call
per vector of elements. The routine computes exactly what the inlined code
computed (the same IR on the same types), so results do not change.

Functions that call the C library per element (f64 erf, trigonometry and
the hyperbolic functions) are not routines: that call is already out of
line. Half-precision inputs are widened to f32 before the call, as before.
"""

from __future__ import annotations

from typing import Callable, Optional

from llvmlite import ir

import support
from xla.service.cpu import jit as jit_lib
from xla.service.cpu import polynomial_approximations as pa
from xla.service.cpu import runtime_library

_F32 = ir.FloatType()
_F64 = ir.DoubleType()

# Name -> (function, arity, the element types it is a routine for).
_BOTH = (_F32, _F64)
_FUNCTIONS: dict[str, tuple[Callable, int, tuple]] = {
    "exp": (pa.exp, 1, _BOTH),
    "expm1": (pa.expm1, 1, _BOTH),
    "log": (pa.log, 1, _BOTH),
    "log1p": (pa.log1p, 1, _BOTH),
    "tanh": (pa.tanh, 1, _BOTH),
    "logistic": (pa.logistic, 1, _BOTH),
    "cbrt": (pa.cbrt, 1, _BOTH),
    # f32 only: on f64 these call the C library per element.
    "erf": (pa.erf, 1, (_F32,)),
    "power": (pa.power, 2, (_F32,)),
    "sin": (pa.sin, 1, (_F32,)),
    "cos": (pa.cos, 1, (_F32,)),
    "tan": (pa.tan, 1, (_F32,)),
    "atan": (pa.atan, 1, (_F32,)),
    "atan2": (pa.atan2, 2, (_F32,)),
    "asin": (pa.asin, 1, (_F32,)),
    "acos": (pa.acos, 1, (_F32,)),
    "sinh": (pa.sinh, 1, (_F32,)),
    "cosh": (pa.cosh, 1, (_F32,)),
    "asinh": (pa.asinh, 1, (_F32,)),
    "acosh": (pa.acosh, 1, (_F32,)),
    "atanh": (pa.atanh, 1, (_F32,)),
}

# Vector forms, by element type: the widths the loop vectorizer may pick
# (up to one 512-bit register).
_WIDTHS = {_F32: (4, 8, 16), _F64: (2, 4, 8)}
_SUFFIX = {_F32: "f32", _F64: "f64"}

INLINE_MATH = support.flags.define_bool(
    "xla_cpu_inline_math", False,
    "Inline the polynomial approximations of transcendental functions into "
    "every kernel instead of calling their library routines (more LLVM "
    "time per kernel; for comparisons).")

_BY_FUNCTION = {fn: name for name, (fn, _, _) in _FUNCTIONS.items()}


def routine_name(name: str, et: ir.Type, width: int = 1) -> str:
  base = f"{jit_lib.LIBRARY_PREFIX}math_{name}_{_SUFFIX[et]}"
  return base if width == 1 else f"{base}_v{width}"


def _register() -> None:
  for name, (fn, arity, types) in _FUNCTIONS.items():
    for et in types:
      for width in (1,) + _WIDTHS[et]:
        ty = et if width == 1 else ir.VectorType(et, width)

        def build(f, fn=fn):
          b = ir.IRBuilder(f.append_basic_block("entry"))
          b.ret(fn(b, *f.args))

        runtime_library.routine(routine_name(name, et, width),
                                ir.FunctionType(ty, [ty] * arity))(build)


_register()


def _declare(module: ir.Module, name: str, et: ir.Type, arity: int):
  scalar = routine_name(name, et)
  fn = module.globals.get(scalar)
  if fn is not None:
    return fn
  fn = runtime_library.declare(module, scalar)
  variants = []
  for width in _WIDTHS[et]:
    vector = runtime_library.declare(module, routine_name(name, et, width))
    variants.append(f"_ZGV_LLVM_N{width}{'v' * arity}_{scalar}({vector.name})")
  # Pure: calls may be hoisted, merged and vectorised.
  for attr in ("readnone", "nounwind", "willreturn"):
    set.add(fn.attributes, attr)
  set.add(fn.attributes,
          f'"{jit_lib.VECTOR_VARIANT_ATTRIBUTE}"="{",".join(variants)}"')
  return fn


def call(b: ir.IRBuilder, fn: Callable, *args: ir.Value) -> Optional[ir.Value]:
  """`fn(b, *args)` (a function of polynomial_approximations) as a call of
  its routine, or None where it has none for the arguments' type."""
  name = _BY_FUNCTION.get(fn)
  if name is None or INLINE_MATH.value:
    return None
  _, arity, types = _FUNCTIONS[name]
  ty = args[0].type
  if isinstance(ty, ir.VectorType):
    et, width = ty.element, ty.count
    if et not in types or width not in _WIDTHS[et]:
      return None
    vector = runtime_library.declare(b.module, routine_name(name, et, width))
    return b.call(vector, list(args))
  if ty not in types:
    return None
  return b.call(_declare(b.module, name, ty, arity), list(args))
