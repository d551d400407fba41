"""Interpreter kernels for control flow: `stablehlo.while`, `stablehlo.if`,
`stablehlo.case`, `stablehlo.optimization_barrier` (spec sections of the
same names) and `chlo.scan`.

Regions run through `ctx.run_region` in the caller's scope. Loops call
`ctx.tick` once per iteration, so `Options.max_while_iterations` and
`Options.timeout_s` stop a runaway program with `ResourceExhausted`.
These kernels pass values through untouched, quantized ones included.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support


def _scalar_bool(x) -> bool:
  arr = np.asarray(x)
  if arr.size != 1:
    raise support.InvalidArgumentError(
        f"expected a 0-dimensional predicate, got shape {list(arr.shape)}")
  return bool(arr.reshape(()))


@registry.interpreter_kernel("stablehlo.while")
def _while(ctx, op, args):
  """spec: while -
      state = operand
      while cond(*state): state = body(*state)
  """
  cond, body = op.regions[0], op.regions[1]
  state = list(args)
  iterations = 0
  while _scalar_bool(ctx.run_region(cond, state)[0]):
    iterations += 1
    ctx.tick(iterations, op)
    state = ctx.run_region(body, state)
  return state


@registry.interpreter_kernel("stablehlo.if")
def _if(ctx, op, args):
  """spec: if - runs `true_branch` if `pred`, else `false_branch`."""
  branch = op.regions[0] if _scalar_bool(args[0]) else op.regions[1]
  return list(ctx.run_region(branch, []))


@registry.interpreter_kernel("stablehlo.case")
def _case(ctx, op, args):
  """spec: case - runs branches[index], or the last branch when `index` is
  out of range."""
  n = len(op.regions)
  if n == 0:
    raise support.InvalidArgumentError("case has no branches")
  arr = np.asarray(args[0])
  if arr.size != 1:
    raise support.InvalidArgumentError(
        f"expected a 0-dimensional index, got shape {list(arr.shape)}")
  index = int(arr.reshape(()))
  if not 0 <= index < n:
    index = n - 1
  return list(ctx.run_region(op.regions[index], []))


def _scan_counts(op) -> tuple[int, int]:
  """(number of inputs, number of inits) from `operandSegmentSizes`."""
  seg = op.attr("operandSegmentSizes")
  if isinstance(seg, a.DenseArrayAttr) and len(seg.values) == 2:
    return int(seg.values[0]), int(seg.values[1])
  raise support.InvalidArgumentError(
      "chlo.scan needs operandSegmentSizes to tell inputs from inits")


@registry.interpreter_kernel("stablehlo.optimization_barrier")
def _optimization_barrier(ctx, op, args):
  """spec: optimization_barrier - the operands, unchanged."""
  return list(args)


@registry.interpreter_kernel("chlo.scan")
def _scan(ctx, op, args):
  """chlo.scan (XLA operation semantics "Scan"): for each position k along
  `dimension` (from the end if `is_reverse`),

      outs_k..., carries = body(inputs[..., k, ...]..., carries...)

  and the results are the per-position outputs stacked along `dimension`,
  then the final carries. The body returns the outputs before the carries.
  """
  n_in, n_init = _scan_counts(op)
  inputs, carries = list(args[:n_in]), list(args[n_in:n_in + n_init])
  dim = tu.int_value(op.attr("dimension"))
  reverse = tu.bool_value(op.attr("is_reverse"), False)
  n_out = len(op.results) - n_init
  if n_out < 0:
    raise support.InvalidArgumentError(
        f"chlo.scan has {len(op.results)} results for {n_init} carries")
  for i, x in enumerate(inputs):
    if not 0 <= dim < x.ndim:
      raise support.InvalidArgumentError(
          f"scan dimension {dim} is out of range for input #{i} of rank "
          f"{x.ndim}")
  if inputs:
    length = inputs[0].shape[dim]
    for i, x in enumerate(inputs):
      if x.shape[dim] != length:
        raise support.InvalidArgumentError(
            f"input #{i} has {x.shape[dim]} elements along the scan "
            f"dimension, input #0 has {length}")
  elif op.attr("scan_dim_size") is not None:
    length = tu.int_value(op.attr("scan_dim_size"))
  else:
    length = _static_dim(op.results[0].type, dim) if n_out else 0
  out_types = [op.results[k].type for k in range(n_out)]
  outs: list = [None] * n_out
  body = op.regions[0]
  order = range(length - 1, -1, -1) if reverse else range(length)
  for step, k in enumerate(order):
    ctx.tick(step + 1, op)
    sliced = [np.take(x, k, axis=dim) for x in inputs]
    res = ctx.run_region(body, sliced + carries)
    if len(res) != n_out + n_init:
      raise support.InvalidArgumentError(
          f"scan body returned {len(res)} values, expected "
          f"{n_out + n_init}")
    for j in range(n_out):
      elem = np.asarray(res[j])
      if outs[j] is None:
        shape = list(elem.shape)
        shape.insert(dim, length)
        outs[j] = np.empty(shape, dtype=runtime.numpy_dtype(out_types[j]))
      idx = [slice(None)] * outs[j].ndim
      idx[dim] = k
      outs[j][tuple(idx)] = elem
    carries = list(res[n_out:])
  for j in range(n_out):
    if outs[j] is None:  # an empty scan: shape from the result type
      outs[j] = runtime.zeros(out_types[j])
  return outs + carries


def _static_dim(ty, dim):
  if isinstance(ty, t.RankedTensorType) and ty.shape[dim] is not None:
    return ty.shape[dim]
  raise support.UnimplementedError(
      "chlo.scan without inputs needs a static scan dimension in its result "
      "type or scan_dim_size")
