"""Lowerings of ATen reductions and of the softmax family
(`stablehlo.reduce` with an add / max combiner; cumsum through
`stablehlo.reduce_window`)."""

from __future__ import annotations

import torch

from torch_bridge._src import helpers as h
from torch_bridge._src import mlir
from torch_bridge._src.mlir import TensorType
from torch_bridge._src.registry import lowering


def _dims(x, dim):
  if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
    return list(range(x.rank))
  if isinstance(dim, int):
    dim = [dim]
  return [h.normalize_dim(d, x.rank) for d in dim]


def _finish(ctx, out, rank, dims, keepdim):
  if keepdim:
    out = h.keep_dims(ctx.b, out, rank, dims)
  return h.reshape(ctx.b, out, ctx.out.shape)


def _sum_check(node):
  val = node.meta.get("val")
  if val is not None and val.dtype == torch.bool:
    return "a bool result"
  return None


@lowering("aten.sum.dim_IntList", "aten.sum.default", check=_sum_check)
def sum_(ctx, x, dim=None, keepdim=False, dtype=None):
  dims = _dims(x, dim)
  xv = h.convert(ctx.b, x, ctx.out.dtype)
  out = h.reduce(ctx.b, xv, dims, "stablehlo.add", 0)
  return _finish(ctx, out, x.rank, dims, keepdim)


def _float_check(node):
  val = node.meta.get("val")
  if val is None or not val.dtype.is_floating_point:
    return "needs a floating-point result"
  return None


def _mean(ctx, x, dims, dtype: str):
  xv = h.convert(ctx.b, x, dtype)
  total = h.reduce(ctx.b, xv, dims, "stablehlo.add", 0)
  count = 1
  for d in dims:
    count *= x.shape[d]
  return ctx.b.op("stablehlo.divide",
                  [total, ctx.b.constant(count, total.type)], total.type)


@lowering("aten.mean.dim", "aten.mean.default", check=_float_check)
def mean(ctx, x, dim=None, keepdim=False, dtype=None):
  dims = _dims(x, dim)
  return _finish(ctx, _mean(ctx, x, dims, ctx.out.dtype), x.rank, dims,
                 keepdim)


def _init_min(dtype):
  return float("-inf") if dtype in mlir.FLOAT_TYPES else (
      0 if dtype in ("ui8", "i1") else -(2 ** (int(dtype[1:]) - 1)))


def _init_max(dtype):
  return float("inf") if dtype in mlir.FLOAT_TYPES else (
      1 if dtype == "i1" else (255 if dtype == "ui8" else
                               2 ** (int(dtype[1:]) - 1) - 1))


@lowering("aten.amax.default")
def amax(ctx, x, dim=(), keepdim=False):
  dims = _dims(x, dim)
  out = h.reduce(ctx.b, x, dims, "stablehlo.maximum", _init_min(x.dtype))
  return _finish(ctx, out, x.rank, dims, keepdim)


def _logical(op_name: str, init: bool):
  def lower(ctx, x, dim=None, keepdim=False):
    dims = _dims(x, dim)
    out = h.reduce(ctx.b, h.convert(ctx.b, x, "i1"), dims, op_name, init)
    return _finish(ctx, out, x.rank, dims, keepdim)
  return lower


# any / all: nonzero elements (NaN counts) reduced with or / and.
lowering("aten.any.dim", "aten.any.dims", "aten.any.default")(
    _logical("stablehlo.or", False))
lowering("aten.all.dim", "aten.all.dims", "aten.all.default")(
    _logical("stablehlo.and", True))


@lowering("aten.amin.default")
def amin(ctx, x, dim=(), keepdim=False):
  dims = _dims(x, dim)
  out = h.reduce(ctx.b, x, dims, "stablehlo.minimum", _init_max(x.dtype))
  return _finish(ctx, out, x.rank, dims, keepdim)


def _variance(ctx, x, dims, correction, dtype):
  """sum((x - mean)^2) / (N - correction), and the mean (kept dims)."""
  b = ctx.b
  xv = h.convert(b, x, dtype)
  m = h.keep_dims(b, _mean(ctx, x, dims, dtype), x.rank, dims)
  centered = b.op("stablehlo.subtract", [xv, h.broadcast_in_dim(
      b, m, x.shape, range(x.rank))], xv.type)
  sq = b.op("stablehlo.multiply", [centered, centered], xv.type)
  total = h.reduce(b, sq, dims, "stablehlo.add", 0)
  count = 1
  for d in dims:
    count *= x.shape[d]
  var = b.op("stablehlo.divide",
             [total, b.constant(max(count - correction, 0), total.type)],
             total.type)
  return var, m


def _correction(node):
  correction = node.kwargs.get("correction")
  if correction is None:
    return 1
  return correction


def _var_check(node):
  reason = _float_check(node)
  if reason:
    return reason
  if not isinstance(_correction(node), (int, float)):
    return "correction is not a number"
  return None


@lowering("aten.var.correction", check=_var_check)
def var(ctx, x, dim=None, *, correction=None, keepdim=False):
  dims = _dims(x, dim)
  v, _ = _variance(ctx, x, dims, 1 if correction is None else correction,
                   ctx.out.dtype)
  return _finish(ctx, v, x.rank, dims, keepdim)


def _var_mean_check(node):
  val = node.meta.get("val")
  if not val or not val[0].dtype.is_floating_point:
    return "needs a floating-point result"
  return None


@lowering("aten.var_mean.correction", check=_var_mean_check)
def var_mean(ctx, x, dim=None, *, correction=None, keepdim=False):
  dims = _dims(x, dim)
  v, m = _variance(ctx, x, dims, 1 if correction is None else correction,
                   ctx.out[0].dtype)
  if keepdim:
    v = h.keep_dims(ctx.b, v, x.rank, dims)
  return [h.reshape(ctx.b, v, ctx.out[0].shape),
          h.reshape(ctx.b, m, ctx.out[1].shape)]


# -- Softmax. -----------------------------------------------------------------

def _softmax_check(node):
  if len(node.args) > 2 and node.args[2]:
    return "half_to_float=True"
  return _float_check(node)


def _softmax_parts(ctx, x, dim):
  """(x - max, sum(exp(x - max))) along `dim`, both of x's shape."""
  b = ctx.b
  dim = h.normalize_dim(dim, x.rank)
  keep = [d for d in range(x.rank) if d != dim]
  mx = h.reduce(b, x, [dim], "stablehlo.maximum", float("-inf"))
  shifted = b.op("stablehlo.subtract",
                 [x, h.broadcast_in_dim(b, mx, x.shape, keep)], x.type)
  e = b.op("stablehlo.exponential", [shifted], x.type)
  total = h.reduce(b, e, [dim], "stablehlo.add", 0)
  return shifted, e, h.broadcast_in_dim(b, total, x.shape, keep)


@lowering("aten._softmax.default", check=_softmax_check)
def softmax(ctx, x, dim, half_to_float=False):
  _, e, total = _softmax_parts(ctx, x, dim)
  return ctx.b.op("stablehlo.divide", [e, total], x.type)


@lowering("aten._log_softmax.default", check=_softmax_check)
def log_softmax(ctx, x, dim, half_to_float=False):
  shifted, _, total = _softmax_parts(ctx, x, dim)
  return ctx.b.op("stablehlo.subtract",
                  [shifted, ctx.b.op("stablehlo.log", [total], x.type)],
                  x.type)


def _sum_keep(ctx, v, dim):
  b = ctx.b
  keep = [d for d in range(v.rank) if d != dim]
  return h.broadcast_in_dim(b, h.reduce(b, v, [dim], "stablehlo.add", 0),
                            v.shape, keep)


@lowering("aten._softmax_backward_data.default", check=_float_check)
def softmax_backward(ctx, grad, out, dim, input_dtype):
  """dx = y * (g - sum(g * y))."""
  b = ctx.b
  dim = h.normalize_dim(dim, grad.rank)
  gy = b.op("stablehlo.multiply", [grad, out], grad.type)
  inner = b.op("stablehlo.subtract", [grad, _sum_keep(ctx, gy, dim)],
               grad.type)
  return h.convert(b, b.op("stablehlo.multiply", [out, inner], grad.type),
                   ctx.out.dtype)


@lowering("aten._log_softmax_backward_data.default", check=_float_check)
def log_softmax_backward(ctx, grad, out, dim, input_dtype):
  """dx = g - exp(y) * sum(g)."""
  b = ctx.b
  dim = h.normalize_dim(dim, grad.rank)
  e = b.op("stablehlo.exponential", [out], out.type)
  return h.convert(b, b.op("stablehlo.subtract", [
      grad, b.op("stablehlo.multiply", [e, _sum_keep(ctx, grad, dim)],
                 grad.type)], grad.type), ctx.out.dtype)


def _cumsum_check(node):
  val = node.meta.get("val")
  if val is None or val.dtype == torch.bool:
    return "a bool result"
  return None


@lowering("aten.cumsum.default", check=_cumsum_check)
def cumsum(ctx, x, dim, dtype=None):
  """A running sum: a reduce_window over the whole dim, padded below."""
  b, ty = ctx.b, ctx.out
  xv = h.convert(b, x, ty.dtype)
  dim = h.normalize_dim(dim, x.rank)
  n = x.shape[dim]
  window = [1] * x.rank
  window[dim] = n
  pad = ", ".join(f"[{n - 1 if d == dim else 0}, 0]" for d in range(x.rank))
  return b.op(
      "stablehlo.reduce_window", [xv, b.constant(0, TensorType((), ty.dtype))],
      ty,
      f"window_dimensions = {mlir.i64_array(window)}, "
      f"window_strides = {mlir.i64_array([1] * x.rank)}, "
      f"padding = dense<[{pad}]> : tensor<{x.rank}x2xi64>",
      region=b.scalar_region("stablehlo.add", ty.dtype))
