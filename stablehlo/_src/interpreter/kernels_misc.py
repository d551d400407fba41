"""Interpreter kernels for the misc family: tuples (tuple,
get_tuple_element) and random numbers (rng, rng_bit_generator). The
family's other ops, constant, custom_call and composite, run in `program`,
which also handles calls and custom-call targets.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.interpreter import prng
from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import types as t
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support


def _attr(op, name):
  v = op.attr(name)
  if v is None:
    raise support.InvalidArgumentError(f"missing attribute '{name}'")
  return v


# --- tuples -------------------------------------------------------------------


@registry.interpreter_kernel("stablehlo.tuple")
def _tuple(ctx, op, args):
  """spec: tuple - a tuple of the operands."""
  return tuple(args)


@registry.interpreter_kernel("stablehlo.get_tuple_element")
def _get_tuple_element(ctx, op, args):
  """spec: get_tuple_element - element `index` of the operand tuple."""
  tup = args[0]
  index = tu.int_value(_attr(op, "index"))
  if not isinstance(tup, tuple) or not 0 <= index < len(tup):
    raise support.InvalidArgumentError(
        f"index {index} is out of range for a tuple of "
        f"{len(tup) if isinstance(tup, tuple) else 'non-tuple'} elements")
  return tup[index]


# --- random numbers -----------------------------------------------------------

_RNG = np.random.default_rng()


@registry.interpreter_kernel("stablehlo.rng")
def _rng(ctx, op, args):
  """Spec "rng": UNIFORM draws from [a, b), NORMAL from N(a, b^2). The spec
  leaves the stream implementation-defined; ours is numpy's default
  generator (not reproducible across runs)."""
  a, b, shape = args
  ty = op.results[0].type
  et = runtime.element_type(ty)
  dt = runtime.numpy_dtype(ty)
  shape = tuple(int(v) for v in np.asarray(shape).reshape(-1))
  dist = tu.enum_value(op.attr("rng_distribution"))
  if dist == "NORMAL":
    lo, sd = float(np.asarray(a, np.float64)), float(np.asarray(b, np.float64))
    return _RNG.normal(lo, sd, size=shape).astype(dt)
  if dist != "UNIFORM":
    raise support.UnimplementedError(f"rng: unknown distribution {dist}")
  if isinstance(et, t.IntegerType):
    lo, hi = int(np.asarray(a).astype(np.int64)), int(
        np.asarray(b).astype(np.int64))
    if et.unsigned and et.width > 1:
      lo, hi = int(np.asarray(a).astype(np.uint64)), int(
          np.asarray(b).astype(np.uint64))
    if hi <= lo:
      return np.full(shape, lo).astype(np.int64).astype(dt) if et.width > 1 \
          else np.full(shape, bool(lo))
    vals = _RNG.integers(lo, hi, size=shape, dtype=np.int64 if hi < 2**63
                         else np.uint64)
    return runtime.wrap_to(vals, et)
  lo, hi = float(np.asarray(a, np.float64)), float(np.asarray(b, np.float64))
  vals = lo + (hi - lo) * _RNG.random(size=shape)
  out = vals.astype(dt)
  # Rounding to a narrow type may reach b; keep the interval half-open.
  if hi > lo:
    out = np.where(out.astype(np.float64) >= hi, np.asarray(lo).astype(dt),
                   out)
  return out


@registry.interpreter_kernel("stablehlo.rng_bit_generator")
def _rng_bit_generator(ctx, op, args):
  """Spec "rng_bit_generator" with XLA's bit streams (see `prng`)."""
  (state,) = args
  algo = tu.enum_value(op.attr("rng_algorithm")) or "DEFAULT"
  out_ty = op.results[1].type
  et = runtime.element_type(out_ty)
  dt = runtime.numpy_dtype(out_ty)
  shape = runtime.static_shape(out_ty)
  bits = tu.bitwidth(et)
  if bits not in (8, 16, 32, 64):
    raise support.UnimplementedError(
        f"rng_bit_generator: output element type {tu.fmt_elem(et)} "
        "(only 8/16/32/64-bit types)")
  new_state, raw = prng.generate(algo, state, shape, bits)
  return [new_state.astype(runtime.numpy_dtype(op.results[0].type)),
          raw.view(dt).reshape(shape)]
