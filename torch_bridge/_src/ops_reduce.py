"""Lowerings of ATen reductions and of the softmax family
(`stablehlo.reduce` with an add / max combiner; cumsum through
`stablehlo.reduce_window`)."""

from __future__ import annotations

import math

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
  return _running(ctx, x, dim, "stablehlo.add", 0)


@lowering("aten.cumprod.default", check=_cumsum_check)
def cumprod(ctx, x, dim, dtype=None):
  """A running product, as `cumsum` (padded with ones)."""
  return _running(ctx, x, dim, "stablehlo.multiply", 1)


def _running(ctx, x, dim, op_name, init):
  b, ty = ctx.b, ctx.out
  xv = h.convert(b, x, ty.dtype)
  dim = h.normalize_dim(dim, x.rank)
  n = x.shape[dim]
  window = [1] * x.rank
  window[dim] = n
  pad = ", ".join(f"[{n - 1 if d == dim else 0}, 0]" for d in range(x.rank))
  return b.op(
      "stablehlo.reduce_window", [xv, b.constant(init,
                                                 TensorType((), ty.dtype))],
      ty,
      f"window_dimensions = {mlir.i64_array(window)}, "
      f"window_strides = {mlir.i64_array([1] * x.rank)}, "
      f"padding = dense<[{pad}]> : tensor<{x.rank}x2xi64>",
      region=b.scalar_region(op_name, ty.dtype))


def _prod_check(node):
  val = node.meta.get("val")
  if val is None or val.dtype == torch.bool or val.is_complex():
    return "needs a real, non-bool result"
  return None


@lowering("aten.prod.dim_int", "aten.prod.default", check=_prod_check)
def prod(ctx, x, dim=None, keepdim=False, dtype=None):
  dims = _dims(x, dim)
  out = h.reduce(ctx.b, h.convert(ctx.b, x, ctx.out.dtype), dims,
                 "stablehlo.multiply", 1)
  return _finish(ctx, out, x.rank, dims, keepdim)


@lowering("aten.max.default", check=_prod_check)
def max_all(ctx, x):
  return h.reduce(ctx.b, x, list(range(x.rank)), "stablehlo.maximum",
                  _init_min(x.dtype))


@lowering("aten.min.default", check=_prod_check)
def min_all(ctx, x):
  return h.reduce(ctx.b, x, list(range(x.rank)), "stablehlo.minimum",
                  _init_max(x.dtype))


def _norm_check(node):
  reason = _float_check(node)
  if reason:
    return reason
  ord_ = node.args[1] if len(node.args) > 1 else node.kwargs.get("ord", 2)
  if ord_ not in (1, 2, float("inf"), float("-inf")):
    return f"ord={ord_!r}"
  return None


@lowering("aten.linalg_vector_norm.default", check=_norm_check)
def vector_norm(ctx, x, ord=2, dim=None, keepdim=False, dtype=None):  # pylint: disable=redefined-builtin
  """The 1-, 2- and inf-norms: sum |x|, sqrt(sum x^2), max / min |x|."""
  b, ty = ctx.b, ctx.out
  dims = _dims(x, dim)
  xv = h.convert(b, x, ty.dtype)
  if ord == 2:
    squares = h.reduce(b, b.op("stablehlo.multiply", [xv, xv], xv.type),
                       dims, "stablehlo.add", 0)
    return _finish(ctx, b.op("stablehlo.sqrt", [squares], squares.type),
                   x.rank, dims, keepdim)
  mag = b.op("stablehlo.abs", [xv], xv.type)
  if ord == 1:
    out = h.reduce(b, mag, dims, "stablehlo.add", 0)
  elif ord > 0:
    out = h.reduce(b, mag, dims, "stablehlo.maximum", 0)
  else:
    out = h.reduce(b, mag, dims, "stablehlo.minimum", float("inf"))
  return _finish(ctx, out, x.rank, dims, keepdim)


# -- max / min along a dim with their index, argmax / argmin. --------------


class _Region:
  """The text of a comparator / combiner region over scalars: `emit`
  appends one op (operands as (name, type) pairs) and returns its name;
  `compare` emits a stablehlo.compare; `text(args, results)` is the
  region with block arguments `args` returning `results`."""

  BOOL = "tensor<i1>"

  def __init__(self, b):
    self.b = b
    self.lines: list[str] = []

  def fresh(self, prefix: str) -> str:
    return self.b._fresh(prefix)  # pylint: disable=protected-access

  def emit(self, name, operands, ty, attrs=""):
    r = self.fresh("rr")
    types = ", ".join(t for _, t in operands)
    text = f'{r} = "{name}"({", ".join(v for v, _ in operands)})'
    if attrs:
      text += f" {{{attrs}}}"
    self.lines.append(f"      {text} : ({types}) -> {ty}")
    return r

  def compare(self, x, y, ty, direction, kind):
    return self.emit("stablehlo.compare", [(x, ty), (y, ty)], self.BOOL,
                     f"comparison_direction = #stablehlo<comparison_direction "
                     f"{direction}>, compare_type = "
                     f"#stablehlo<comparison_type {kind}>")

  def logic(self, name, x, y=None):
    operands = [(x, self.BOOL)] + ([(y, self.BOOL)] if y is not None else [])
    return self.emit(name, operands, self.BOOL)

  def text(self, args, results) -> str:
    block = ", ".join(f"{n}: {t}" for n, t in args)
    names = ", ".join(n for n, _ in results)
    types = ", ".join(t for _, t in results)
    return (f"    ^bb0({block}):\n" + "\n".join(self.lines) +
            f'\n      "stablehlo.return"({names}) : ({types}) -> ()')


def _arg_region(b, dtype: str, direction: str) -> str:
  """The combiner of a (value, index) reduction: the greater (GT) or
  smaller (LT) value wins, NaN beats every number, and of equal values
  (two NaNs included) the lower index wins: torch's first extremum."""
  t, it = f"tensor<{dtype}>", "tensor<i64>"
  r = _Region(b)
  a, ai, c, ci = r.fresh("ra"), r.fresh("ri"), r.fresh("rb"), r.fresh("rj")
  kind = h.compare_type(dtype)
  better = r.compare(a, c, t, direction, kind)
  equal = r.compare(a, c, t, "EQ", kind)
  if dtype in mlir.FLOAT_TYPES:
    a_nan = r.compare(a, a, t, "NE", kind)
    c_nan = r.compare(c, c, t, "NE", kind)
    c_num = r.logic("stablehlo.not", c_nan)
    better = r.logic("stablehlo.or", better,
                     r.logic("stablehlo.and", a_nan, c_num))
    equal = r.logic("stablehlo.or", equal,
                    r.logic("stablehlo.and", a_nan, c_nan))
  first = r.compare(ai, ci, it, "LT", "SIGNED")
  pick = r.logic("stablehlo.or", better,
                 r.logic("stablehlo.and", equal, first))
  value = r.emit("stablehlo.select", [(pick, r.BOOL), (a, t), (c, t)], t)
  index = r.emit("stablehlo.select", [(pick, r.BOOL), (ai, it), (ci, it)], it)
  return r.text([(a, t), (ai, it), (c, t), (ci, it)], [(value, t), (index, it)])


def _arg_reduce(ctx, x, dim, keepdim, direction):
  """(values, indices) of the extremum of `x` along `dim` (None: over all
  elements, flattened)."""
  b = ctx.b
  rank = x.rank
  if dim is None:
    x = h.reshape(b, x, (math.prod(x.shape),))
    d = 0
  else:
    d = h.normalize_dim(dim, max(rank, 1))
    if x.rank == 0:
      x = h.reshape(b, x, (1,))
  index_type = x.type.with_dtype("i64")
  iota = b.op("stablehlo.iota", [], index_type, f"iota_dimension = {d}")
  extreme = (_init_min if direction == "GT" else _init_max)(x.dtype)
  shape = [n for i, n in enumerate(x.shape) if i != d]
  values, indices = b.op_multi(
      "stablehlo.reduce",
      [x, iota, b.constant(extreme, TensorType((), x.dtype)),
       b.constant(2 ** 63 - 1, TensorType((), "i64"))],
      [x.type.with_shape(shape), index_type.with_shape(shape)],
      "dimensions = " + mlir.i64_array([d]),
      region=_arg_region(b, x.dtype, direction))
  # The result type torch inferred has the kept dims (keepdim) or not.
  del keepdim
  outs = ctx.out if isinstance(ctx.out, (list, tuple)) else [ctx.out]
  return [h.reshape(b, v, outs[-1].shape) for v in (values, indices)]


def _real_operand(node):
  x = h.arg_val(node)
  if x is None or x.dtype == torch.bool or x.is_complex():
    return "needs a real, non-bool operand"
  return None


def _arg_check(node):
  reason = _real_operand(node)
  if reason is None and node.args[0].meta["val"].numel() == 0:
    return "an empty operand"
  return reason


@lowering("aten.max.dim", check=_arg_check)
def max_dim(ctx, x, dim, keepdim=False):
  return _arg_reduce(ctx, x, dim, keepdim, "GT")


@lowering("aten.min.dim", check=_arg_check)
def min_dim(ctx, x, dim, keepdim=False):
  return _arg_reduce(ctx, x, dim, keepdim, "LT")


@lowering("aten.argmax.default", check=_arg_check)
def argmax(ctx, x, dim=None, keepdim=False):
  return _arg_reduce(ctx, x, dim, keepdim, "GT")[1]


@lowering("aten.argmin.default", check=_arg_check)
def argmin(ctx, x, dim=None, keepdim=False):
  return _arg_reduce(ctx, x, dim, keepdim, "LT")[1]


# -- sort, topk. ----------------------------------------------------------------


def _sort_region(b, dtype: str, descending: bool) -> str:
  """The comparator of a stable (value, index) sort in torch's order: NaN
  above every number (last ascending, first descending)."""
  t, it = f"tensor<{dtype}>", "tensor<i64>"
  r = _Region(b)
  a, c, ai, ci = r.fresh("ra"), r.fresh("rb"), r.fresh("ri"), r.fresh("rj")
  kind = h.compare_type(dtype)
  first, second = (c, a) if descending else (a, c)
  before = r.compare(first, second, t, "LT", kind)
  if dtype in mlir.FLOAT_TYPES:
    # NaN counts as the greatest value.
    nan_second = r.compare(second, second, t, "NE", kind)
    num_first = r.logic("stablehlo.not",
                        r.compare(first, first, t, "NE", kind))
    before = r.logic("stablehlo.or", before,
                     r.logic("stablehlo.and", num_first, nan_second))
  return r.text([(a, t), (c, t), (ai, it), (ci, it)], [(before, r.BOOL)])


def _sorted(ctx, x, dim, descending):
  """(values, indices) of a stable sort of `x` along `dim`."""
  b = ctx.b
  if x.rank == 0:
    return x, b.constant(0, TensorType((), "i64"))
  d = h.normalize_dim(dim, x.rank)
  index_type = x.type.with_dtype("i64")
  iota = b.op("stablehlo.iota", [], index_type, f"iota_dimension = {d}")
  values, indices = b.op_multi(
      "stablehlo.sort", [x, iota], [x.type, index_type],
      f"dimension = {d} : i64, is_stable = true",
      region=_sort_region(b, x.dtype, bool(descending)))
  return values, indices


@lowering("aten.sort.default", check=_real_operand)
def sort(ctx, x, dim=-1, descending=False):
  """torch.sort (stable on the CPU, as torch's CPU kernel is)."""
  return list(_sorted(ctx, x, dim, descending))


@lowering("aten.sort.stable", check=_real_operand)
def sort_stable(ctx, x, stable=None, dim=-1, descending=False):
  return list(_sorted(ctx, x, dim, descending))


@lowering("aten.topk.default", check=_real_operand)
def topk(ctx, x, k, dim=-1, largest=True, sorted=True):  # pylint: disable=redefined-builtin
  """The first k of a stable sort (descending for the largest): the same
  values as torch; of equal values the lower index first (torch leaves
  the order of ties unspecified)."""
  b = ctx.b
  values, indices = _sorted(ctx, x, dim, largest)
  if x.rank == 0:
    return [values, indices]
  d = h.normalize_dim(dim, x.rank)
  limits = list(x.shape)
  limits[d] = k
  return [h.slice_(b, v, [0] * x.rank, limits) for v in (values, indices)]
