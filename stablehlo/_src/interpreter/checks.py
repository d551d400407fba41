"""The `check` and `interpreter` dialects of the conformance corpora, and the
`@check.*` custom-call targets of the `testdata/` programs, with upstream's
semantics (see the corpus README):

  check.expect_eq[_const]         exact; floats by IEEE `==` (NaN != NaN,
                                  -0 == +0)
  check.expect_almost_eq[_const]  |a - b| <= tolerance (default 1e-4);
                                  two NaNs are equal; complex parts apart
  check.expect_close              ULP distance <= max_ulp_difference (and
                                  >= min_ulp_difference); two NaNs equal
  check.expect_serialized_eq      equal to what `interpreter.probe` saved
  @check.expect_close             ULP <= 3
  @check.expect_eq                exact
  @check.expect_almost_eq         |a - b| <= 1e-3
  @check.eq                       returns i1: ints exact, floats 1e-4

A failing check raises `CheckFailure` with the op's location. `@check.eq`
returns its verdict as upstream does and also records a failure in
`Interpreter.soft_failures`, so runners can count it.
"""

from __future__ import annotations

import os

import numpy as np

from stablehlo._src.interpreter import evaluator
from stablehlo._src.interpreter import printing
from stablehlo._src.interpreter import program
from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.text import ssa_names
from stablehlo._src.ops import registry

DEFAULT_TOLERANCE = 1e-4
TESTDATA_ALMOST_EQ_TOLERANCE = 1e-3
TESTDATA_MAX_ULP = 3


def _as_float64(x: np.ndarray) -> np.ndarray:
  return x.astype(np.float64)


def _mismatch(op, what: str, actual, expected, bad: np.ndarray, ty):
  idx = np.argwhere(bad)
  first = tuple(int(i) for i in idx[0]) if idx.size else ()
  et = t.element_type_of(ty) if ty is not None else None
  act = np.asarray(actual)[first] if np.ndim(actual) else actual
  exp = np.asarray(expected)[first] if np.ndim(expected) else expected
  total = int(np.asarray(bad).size)
  n = int(np.count_nonzero(bad))
  name = op.name
  if name == "stablehlo.custom_call":
    name = "custom_call @" + op.attr("call_target_name").value
  return evaluator.CheckFailure(
      f"{evaluator.location_of(op)}: error: {name} failed: {n} of "
      f"{total} elements differ ({what}); first at index "
      f"{list(first)}: actual {printing._scalar(act, et)}, expected "
      f"{printing._scalar(exp, et)}")


def _kind(x: np.ndarray) -> str:
  dt = x.dtype
  if dt.kind == "c":
    return "complex"
  if dt.kind in "biu":
    return "int"
  return "float"


def eq_mask(x, y) -> np.ndarray:
  """True where the elements differ under exact (IEEE ==) comparison."""
  x, y = np.asarray(x), np.asarray(y)
  if _kind(x) == "float":
    return ~(_as_float64(x) == _as_float64(y))
  return ~(x == y)


def almost_eq_mask(x, y, tol: float) -> np.ndarray:
  x, y = np.asarray(x), np.asarray(y)
  k = _kind(x)
  if k == "int":
    return ~(x == y)
  if k == "complex":
    return (almost_eq_mask(x.real, y.real, tol) |
            almost_eq_mask(x.imag, y.imag, tol))
  xf, yf = _as_float64(x), _as_float64(y)
  both_nan = np.isnan(xf) & np.isnan(yf)
  same = xf == yf  # infinities of the same sign
  with np.errstate(invalid="ignore"):
    close = np.abs(xf - yf) <= tol
  return ~(both_nan | same | close)


def ulp_distance(x, y) -> np.ndarray:
  """Elementwise ULP distance between same-typed float arrays, as a float64
  array: the number of representable values between them. Two NaNs are at
  distance 0, a NaN and a number at infinity, +0 and -0 at 0."""
  x, y = np.asarray(x), np.asarray(y)
  width = x.dtype.itemsize * 8
  u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[
      x.dtype.itemsize]
  bx = np.ascontiguousarray(x).view(u).astype(np.uint64)
  by = np.ascontiguousarray(y).view(u).astype(np.uint64)
  sign = np.uint64(1 << (width - 1))
  mx, my = bx & (sign - np.uint64(1)), by & (sign - np.uint64(1))
  same_sign = (bx & sign) == (by & sign)
  # Sign-magnitude: same sign -> |mx - my|; opposite -> mx + my (< 2^64).
  diff = np.where(mx >= my, mx - my, my - mx)
  d = np.where(same_sign, diff, mx + my).astype(np.float64)
  xf, yf = _as_float64(x), _as_float64(y)
  nx, ny = np.isnan(xf), np.isnan(yf)
  d = np.where(nx & ny, 0.0, d)
  d = np.where(nx ^ ny, np.inf, d)
  return d


def close_mask(x, y, max_ulp: int, min_ulp: int = 0) -> np.ndarray:
  x, y = np.asarray(x), np.asarray(y)
  k = _kind(x)
  if k == "int":
    return ~(x == y)
  if k == "complex":
    return (close_mask(x.real, y.real, max_ulp, min_ulp) |
            close_mask(x.imag, y.imag, max_ulp, min_ulp))
  d = ulp_distance(x, y)
  return (d > max_ulp) | (d < min_ulp)


def _float_attr(op, name, default):
  v = op.attr(name)
  if isinstance(v, (a.FloatAttr, a.IntegerAttr)):
    return float(v.value)
  return default


def _int_attr(op, name, default):
  v = op.attr(name)
  if isinstance(v, a.IntegerAttr):
    return int(v.value)
  return default


def _check(op, mask, what, actual, expected):
  if np.any(mask):
    raise _mismatch(op, what, actual, expected, mask, op.operands[0].type)
  return []


@registry.interpreter_kernel("check.expect_eq")
def _expect_eq(ctx, op, args):
  return _check(op, eq_mask(args[0], args[1]), "exact", args[0], args[1])


@registry.interpreter_kernel("check.expect_eq_const")
def _expect_eq_const(ctx, op, args):
  exp = runtime.from_attr(op.attr("value"), ctx.module)
  return _check(op, eq_mask(args[0], exp), "exact", args[0], exp)


@registry.interpreter_kernel("check.expect_almost_eq")
def _expect_almost_eq(ctx, op, args):
  tol = _float_attr(op, "tolerance", DEFAULT_TOLERANCE)
  return _check(op, almost_eq_mask(args[0], args[1], tol),
                f"tolerance {tol:g}", args[0], args[1])


@registry.interpreter_kernel("check.expect_almost_eq_const")
def _expect_almost_eq_const(ctx, op, args):
  tol = _float_attr(op, "tolerance", DEFAULT_TOLERANCE)
  exp = runtime.from_attr(op.attr("value"), ctx.module)
  return _check(op, almost_eq_mask(args[0], exp, tol), f"tolerance {tol:g}",
                args[0], exp)


@registry.interpreter_kernel("check.expect_close")
def _expect_close(ctx, op, args):
  hi = _int_attr(op, "max_ulp_difference", 0)
  lo = _int_attr(op, "min_ulp_difference", 0)
  return _check(op, close_mask(args[0], args[1], hi, lo),
                f"ULP distance in [{lo}, {hi}]", args[0], args[1])


def _probe_key(op) -> str:
  v = op.attr("probe_id")
  return v.value if isinstance(v, a.StringAttr) else str(v)


@registry.interpreter_kernel("interpreter.probe")
def _probe(ctx, op, args):
  """interpreter.probe: records the value under its probe id (one record
  per execution), and writes it to --probe-output-dir when set."""
  key = _probe_key(op)
  x = np.array(args[0], copy=True)
  with ctx.interp.print_lock:
    records = ctx.interp.probes.setdefault(key, [])
    records.append(x)
    n = len(records) - 1
  if ctx.options.probe_dir:
    path = os.path.join(ctx.options.probe_dir, f"{key}_{n}.npy")
    np.save(path, x)
  return args[0]


@registry.interpreter_kernel("check.expect_serialized_eq")
def _expect_serialized_eq(ctx, op, args):
  key = _probe_key(op)
  it = _int_attr(op, "iteration", _int_attr(op, "iter", 0))
  records = ctx.interp.probes.get(key, [])
  if it >= len(records):
    raise evaluator.CheckFailure(
        f"{evaluator.location_of(op)}: error: {op.name}: no probe "
        f"'{key}' iteration {it} was recorded")
  exp = records[it]
  return _check(op, eq_mask(args[0], exp), f"probe '{key}'", args[0], exp)


def _printed_name(ctx, op, value):
  """The name upstream's printer gives `value` in its function (`0`,
  `arg1`, `cst`), as `interpreter.print` prefixes its output with it."""
  fn = op
  while fn is not None and fn.name != "func.func":
    block = fn.parent
    region = block.parent if block is not None else None
    fn = region.parent if region is not None else None
  if fn is None:
    return value.name_hint
  cache = ctx.interp.print_names
  with ctx.interp.print_lock:
    state = cache.get(id(fn))
    if state is None:
      state = ssa_names.NameState().run(fn)
      cache[id(fn)] = state
  return state.values.get(id(value), value.name_hint)


@registry.interpreter_kernel("interpreter.print")
def _print(ctx, op, args):
  ty = op.operands[0].type
  name = _printed_name(ctx, op, op.operands[0])
  text = printing.format_value(args[0], ty, ctx.options.print_dense)
  prefix = f"%{name} = " if name else ""
  out = ctx.options.out
  with ctx.interp.print_lock:
    if out is None:
      import sys
      out = sys.stdout
    out.write(prefix + text + "\n")
  return []


# --- @check.* custom calls of testdata/ ------------------------------------


def _cc_expect_close(ctx, op, args):
  return _check(op, close_mask(args[0], args[1], TESTDATA_MAX_ULP),
                f"ULP distance <= {TESTDATA_MAX_ULP}", args[0], args[1])


def _cc_expect_eq(ctx, op, args):
  return _check(op, eq_mask(args[0], args[1]), "exact", args[0], args[1])


def _cc_expect_almost_eq(ctx, op, args):
  tol = TESTDATA_ALMOST_EQ_TOLERANCE
  return _check(op, almost_eq_mask(args[0], args[1], tol),
                f"tolerance {tol:g}", args[0], args[1])


def _cc_eq(ctx, op, args):
  x = np.asarray(args[0])
  if _kind(x) == "int":
    bad = eq_mask(x, args[1])
  else:
    bad = almost_eq_mask(x, args[1], DEFAULT_TOLERANCE)
  ok = not np.any(bad)
  if not ok:
    err = _mismatch(op, "check.eq", args[0], args[1], bad,
                    op.operands[0].type)
    with ctx.interp.print_lock:
      ctx.interp.soft_failures.append(str(err))
  return np.asarray(ok, dtype=np.bool_)


program.register_custom_call("check.expect_close", _cc_expect_close)
program.register_custom_call("check.expect_eq", _cc_expect_eq)
program.register_custom_call("check.expect_almost_eq", _cc_expect_almost_eq)
program.register_custom_call("check.eq", _cc_eq)
