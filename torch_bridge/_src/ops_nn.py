"""Lowerings of ATen neural-network ops: convolution (and its backward),
batch / layer normalization, dropout (only where it is the identity),
average and max pooling."""

from __future__ import annotations

import math

import torch

from torch_bridge._src import helpers as h
from torch_bridge._src import mlir
from torch_bridge._src.mlir import TensorType
from torch_bridge._src.registry import lowering


def _float_check(node):
  val = node.meta.get("val")
  val = val[0] if isinstance(val, (tuple, list)) else val
  if val is None or not val.dtype.is_floating_point:
    return "needs a floating-point result"
  return None


def _expand(values, n):
  values = list(values)
  return values * n if len(values) == 1 else values


def _conv_dims(n: int) -> str:
  spatial = ", ".join(str(i) for i in range(n))
  return f"[b, f, {spatial}]x[o, i, {spatial}]->[b, f, {spatial}]"


def _conv(b, lhs, rhs, out, *, strides, padding, lhs_dilation, rhs_dilation,
          dims, groups=1, batch_groups=1):
  n = len(strides)
  pads = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
  return b.op(
      "stablehlo.convolution", [lhs, rhs], out,
      f"window_strides = {mlir.i64_array(strides)}, "
      f"padding = dense<[{pads}]> : tensor<{n}x2xi64>, "
      f"lhs_dilation = {mlir.i64_array(lhs_dilation)}, "
      f"rhs_dilation = {mlir.i64_array(rhs_dilation)}, "
      f"dimension_numbers = #stablehlo.conv<{dims}>, "
      f"feature_group_count = {groups} : i64, "
      f"batch_group_count = {batch_groups} : i64")


def _conv_check(node):
  return _float_check(node)


def _regroup(b, weight, groups, kernel):
  """A weight [A, C, ...] whose dim 0 holds G groups of A / G features, as
  the kernel [A / G, G * C, ...] of a G-group convolution that swaps the
  two feature roles (group g's C new output features follow its A / G new
  input features): a grouped convolution's input gradient, a grouped
  transposed convolution."""
  a, c = weight.shape[0], weight.shape[1]
  n = len(kernel)
  split = h.reshape(b, weight, [groups, a // groups, c] + list(kernel))
  perm = [1, 0, 2] + [3 + i for i in range(n)]
  swapped = b.op("stablehlo.transpose", [split], split.type.with_shape(
      [split.shape[q] for q in perm]), "permutation = " + mlir.i64_array(perm))
  return h.reshape(b, swapped, [a // groups, groups * c] + list(kernel))


@lowering("aten.convolution.default", check=_conv_check)
def convolution(ctx, x, weight, bias, stride, padding, dilation, transposed,
                output_padding, groups):
  b, ty = ctx.b, ctx.out
  n = x.rank - 2
  stride, padding, dilation = (_expand(stride, n), _expand(padding, n),
                               _expand(dilation, n))
  if transposed:
    # The gradient of a convolution: x dilated by the stride, the kernel
    # [Cin, Cout / G, ...] spatially reversed with its feature roles
    # swapped, padded by d (k - 1) - p (plus output_padding at the end).
    kernel = weight.shape[2:]
    spatial = list(range(2, 2 + n))
    flipped = b.op("stablehlo.reverse", [weight], weight.type,
                   "dimensions = " + mlir.i64_array(spatial))
    if groups > 1:
      flipped = _regroup(b, flipped, groups, kernel)
    extra = _expand(output_padding, n)
    pads = [(d * (k - 1) - p, d * (k - 1) - p + e)
            for k, p, d, e in zip(kernel, padding, dilation, extra)]
    sp = ", ".join(str(i) for i in range(n))
    out = _conv(b, x, flipped, ty, strides=[1] * n, padding=pads,
                lhs_dilation=stride, rhs_dilation=dilation,
                dims=f"[b, f, {sp}]x[i, o, {sp}]->[b, f, {sp}]",
                groups=groups)
  else:
    out = _conv(b, x, weight, ty, strides=stride,
                padding=[(p, p) for p in padding], lhs_dilation=[1] * n,
                rhs_dilation=dilation, dims=_conv_dims(n), groups=groups)
  if bias is not None:
    out = b.op("stablehlo.add",
               [out, h.broadcast_in_dim(b, bias, ty.shape, [1])], ty)
  return out


def _conv_backward_check(node):
  return _float_check(node.args[1])


@lowering("aten.convolution_backward.default", check=_conv_backward_check)
def convolution_backward(ctx, grad, x, weight, bias_sizes, stride, padding,
                         dilation, transposed, output_padding, groups,
                         output_mask):
  """Input grad: the transposed convolution of `grad` with the spatially
  reversed kernel (lhs_dilation = stride). Weight grad: a convolution of
  `x` (batch and feature swapped) with `grad` as the kernel (rhs_dilation =
  stride, window strides = dilation). Bias grad: a sum.

  With G groups (depthwise: G = input channels) the input grad is a
  G-group convolution whose kernel regroups the weight
  [Cout, Cin / G, ...] so each group's output features follow its input
  features, and the weight grad splits x's features (its batch here) into
  G batch groups.

  Padding wider than the dilated kernel (a 1x1 convolution with padding
  1) makes the input grad's padding negative: the convolution crops those
  rows, which only ever read the forward's zero padding.

  A transposed convolution's gradients swap the two roles: its input
  grad is the plain (G-group) convolution of `grad` with the weight, and
  its weight grad [Cin, Cout / G, ...] is a plain convolution's weight
  grad with `grad` as the input and `x` as the output grad."""
  b = ctx.b
  n = x.rank - 2
  stride, padding, dilation = (_expand(stride, n), _expand(padding, n),
                               _expand(dilation, n))
  kernel = weight.shape[2:]
  spatial = list(range(2, 2 + n))
  sp = ", ".join(str(i) for i in range(n))
  results = [None, None, None]
  if output_mask[0]:
    if transposed:
      results[0] = _conv(
          b, grad, weight, ctx.out[0], strides=stride,
          padding=[(p, p) for p in padding], lhs_dilation=[1] * n,
          rhs_dilation=dilation,
          dims=f"[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]", groups=groups)
    else:
      results[0] = _input_grad(b, grad, weight, ctx.out[0], x.shape[2:],
                               kernel, stride, padding, dilation, groups)
  if output_mask[1]:
    if transposed:
      results[1] = _weight_grad(b, grad, x, ctx.out[1], kernel, stride,
                                padding, dilation, groups)
    else:
      results[1] = _weight_grad(b, x, grad, ctx.out[1], kernel, stride,
                                padding, dilation, groups)
  if output_mask[2]:
    results[2] = h.reduce(b, grad, [0] + spatial, "stablehlo.add", 0)
  return results


def _input_grad(b, grad, weight, out, in_size, kernel, stride, padding,
                dilation, groups):
  n = len(kernel)
  spatial = list(range(2, 2 + n))
  flipped = b.op("stablehlo.reverse", [weight], weight.type,
                 "dimensions = " + mlir.i64_array(spatial))
  if groups > 1:
    flipped = _regroup(b, flipped, groups, kernel)
  pads = []
  for i, k, s, p, d in zip(in_size, kernel, stride, padding, dilation):
    r = (i + 2 * p - d * (k - 1) - 1) % s
    pads.append((d * (k - 1) - p, d * (k - 1) - p + r))
  sp = ", ".join(str(i) for i in range(n))
  return _conv(b, grad, flipped, out, strides=[1] * n, padding=pads,
               lhs_dilation=stride, rhs_dilation=dilation,
               dims=f"[b, f, {sp}]x[i, o, {sp}]->[b, f, {sp}]", groups=groups)


def _weight_grad(b, inp, grad, out, kernel, stride, padding, dilation,
                 groups):
  """The weight grad [Cout, Cin / G, ...] of the convolution of `inp`
  (Cin features) whose output grad is `grad` (Cout features)."""
  n = len(kernel)
  lhs = inp
  pads = []
  for axis, (i, o, k, s, p, d) in enumerate(zip(
      inp.shape[2:], grad.shape[2:], kernel, stride, padding, dilation)):
    hi = (k - 1) * d + (o - 1) * s + 1 - i - p
    if hi < 0:  # Rows the forward never read: crop them.
      limits = list(lhs.shape)
      limits[2 + axis] += hi
      lhs = h.slice_(b, lhs, [0] * lhs.rank, limits)
      hi = 0
    pads.append((p, hi))
  sp = ", ".join(str(i) for i in range(n))
  return _conv(b, lhs, grad, out, strides=dilation, padding=pads,
               lhs_dilation=[1] * n, rhs_dilation=stride,
               dims=f"[f, b, {sp}]x[i, o, {sp}]->[f, b, {sp}]",
               batch_groups=groups)


# -- Normalization. -----------------------------------------------------------

def _normalize(b, x, mean, rstd, weight, bias, channel_dims):
  """(x - mean) * rstd * weight + bias; mean/rstd/weight/bias broadcast
  along `channel_dims` of x."""
  ty = x.type

  def bc(v, dims):
    return h.broadcast_in_dim(b, v, ty.shape, dims)

  out = b.op("stablehlo.multiply", [
      b.op("stablehlo.subtract", [x, mean], ty), rstd], ty)
  if weight is not None:
    out = b.op("stablehlo.multiply", [out, bc(weight, channel_dims)], ty)
  if bias is not None:
    out = b.op("stablehlo.add", [out, bc(bias, channel_dims)], ty)
  return out


def _batch_stats(ctx, x, eps):
  """Per-channel (dim 1) mean, biased variance and 1/sqrt(var + eps)."""
  b = ctx.b
  dims = [d for d in range(x.rank) if d != 1]
  count = 1
  for d in dims:
    count *= x.shape[d]
  cty = TensorType((x.shape[1],), x.dtype)
  mean = b.op("stablehlo.divide", [
      h.reduce(b, x, dims, "stablehlo.add", 0), b.constant(count, cty)], cty)
  centered = b.op("stablehlo.subtract",
                  [x, h.broadcast_in_dim(b, mean, x.shape, [1])], x.type)
  sq = b.op("stablehlo.multiply", [centered, centered], x.type)
  var = b.op("stablehlo.divide", [
      h.reduce(b, sq, dims, "stablehlo.add", 0), b.constant(count, cty)], cty)
  rstd = b.op("stablehlo.rsqrt",
              [b.op("stablehlo.add", [var, b.constant(eps, cty)], cty)], cty)
  return mean, var, rstd, count


def _bn_check(node):
  val = node.meta.get("val")
  if val is None or not val[0].dtype.is_floating_point:
    return "needs a floating-point input"
  x = node.args[0].meta.get("val")
  for a in node.args[1:5]:
    if isinstance(a, torch.fx.Node) and a.meta["val"].dtype != x.dtype:
      return "mixed-precision batch norm"
  return None


def _empty(ctx, ty):
  return None if ty is None else ctx.b.constant(0, ty)


def _batch_norm(ctx, x, weight, bias, running_mean, running_var, training,
                momentum, eps, *, functional: bool):
  b = ctx.b
  if training:
    mean, var, rstd, count = _batch_stats(ctx, x, eps)
    out = _normalize(b, x, h.broadcast_in_dim(b, mean, x.shape, [1]),
                     h.broadcast_in_dim(b, rstd, x.shape, [1]), weight, bias,
                     [1])
    results = [out, mean, rstd]
    if functional:
      cty = mean.type
      keep = b.constant(1 - momentum, cty)
      m = b.constant(momentum, cty)
      unbiased = b.op("stablehlo.multiply", [
          var, b.constant(count / max(count - 1, 1), cty)], cty)
      for running, stat in ((running_mean, mean), (running_var, unbiased)):
        results.append(b.op("stablehlo.add", [
            b.op("stablehlo.multiply", [running, keep], cty),
            b.op("stablehlo.multiply", [stat, m], cty)], cty))
    return results
  cty = running_mean.type
  rstd = b.op("stablehlo.rsqrt", [
      b.op("stablehlo.add", [running_var, b.constant(eps, cty)], cty)], cty)
  out = _normalize(b, x, h.broadcast_in_dim(b, running_mean, x.shape, [1]),
                   h.broadcast_in_dim(b, rstd, x.shape, [1]), weight, bias,
                   [1])
  results = [out] + [_empty(ctx, ty) for ty in ctx.out[1:3]]
  if functional:
    results += [running_mean, running_var]
  return results


def _bn_functional_check(node):
  reason = _bn_check(node)
  if reason:
    return reason
  training = node.args[5]
  if not training and (node.args[3] is None or node.args[4] is None):
    return "eval mode without running statistics"
  return None


@lowering("aten._native_batch_norm_legit_functional.default",
          check=_bn_functional_check)
def batch_norm_functional(ctx, x, weight, bias, running_mean, running_var,
                          training, momentum, eps):
  return _batch_norm(ctx, x, weight, bias, running_mean, running_var,
                     training, momentum, eps, functional=True)


@lowering("aten._native_batch_norm_legit_no_training.default", check=_bn_check)
def batch_norm_no_training(ctx, x, weight, bias, running_mean, running_var,
                           momentum, eps):
  return _batch_norm(ctx, x, weight, bias, running_mean, running_var, False,
                     momentum, eps, functional=False)


def _native_bn_check(node):
  reason = _bn_check(node)
  if reason:
    return reason
  if node.args[5]:
    return ("training-mode native_batch_norm updates running statistics in "
            "place; only its functional form is lowered")
  return None


@lowering("aten.native_batch_norm.default", check=_native_bn_check)
def native_batch_norm(ctx, x, weight, bias, running_mean, running_var,
                      training, momentum, eps):
  return _batch_norm(ctx, x, weight, bias, running_mean, running_var, False,
                     momentum, eps, functional=False)


@lowering("aten.native_layer_norm.default", check=_float_check)
def native_layer_norm(ctx, x, normalized_shape, weight, bias, eps):
  """Over the last len(normalized_shape) dims: out, mean, rstd (the last
  two with those dims kept as size 1)."""
  b = ctx.b
  k = len(normalized_shape)
  axis = x.rank - k
  dims = list(range(axis, x.rank))
  count = 1
  for d in dims:
    count *= x.shape[d]
  sty = TensorType(tuple(x.shape[:axis]), x.dtype)
  keep = list(range(axis))
  mean = b.op("stablehlo.divide", [
      h.reduce(b, x, dims, "stablehlo.add", 0), b.constant(count, sty)], sty)
  centered = b.op("stablehlo.subtract",
                  [x, h.broadcast_in_dim(b, mean, x.shape, keep)], x.type)
  sq = b.op("stablehlo.multiply", [centered, centered], x.type)
  var = b.op("stablehlo.divide", [
      h.reduce(b, sq, dims, "stablehlo.add", 0), b.constant(count, sty)], sty)
  rstd = b.op("stablehlo.rsqrt",
              [b.op("stablehlo.add", [var, b.constant(eps, sty)], sty)], sty)
  out = b.op("stablehlo.multiply",
             [centered, h.broadcast_in_dim(b, rstd, x.shape, keep)], x.type)
  affine = list(range(axis, x.rank))
  if weight is not None:
    out = b.op("stablehlo.multiply",
               [out, h.broadcast_in_dim(b, weight, x.shape, affine)], x.type)
  if bias is not None:
    out = b.op("stablehlo.add",
               [out, h.broadcast_in_dim(b, bias, x.shape, affine)], x.type)
  return [out, h.reshape(b, mean, ctx.out[1].shape),
          h.reshape(b, rstd, ctx.out[2].shape)]


def _dropout_check(node):
  p, train = node.args[1], node.args[2]
  if train and p != 0:
    return (f"dropout with p={p} in training draws random numbers; it runs "
            "eagerly (torch's RNG stream is not reproduced)")
  return None


@lowering("aten.native_dropout.default", check=_dropout_check)
def native_dropout(ctx, x, p, train):
  return [x, ctx.b.constant(True, ctx.out[1])]


def dropout_decomposition(x, p, train):
  """`native_dropout` in training as a uniform draw and elementwise ops,
  for AOTAutograd's decomposition table. The draw, `torch.rand` of the
  input's shape, has no tensor inputs: it runs eagerly (torch's generator,
  so torch.manual_seed makes runs repeatable, though the masks differ from
  eager dropout's, as inductor's do) before the cluster that reads it, and
  the mask, scaling and the ops around them stay one compiled cluster
  instead of being cut at every dropout. Keeps each element with
  probability 1 - p and scales kept ones by 1 / (1 - p), as eager does."""
  if not train or p == 0 or p >= 1 or not x.is_floating_point():
    return NotImplemented
  draw = torch.rand(x.shape, dtype=torch.float32, device=x.device)
  keep = draw >= p
  return x * keep * (1.0 / (1.0 - p)), keep


# -- Pooling. -----------------------------------------------------------------

def _pool_args(node):
  args = list(node.args) + [None] * 8
  offset = 1 if "backward" in str(node.target) else 0
  kernel, stride, padding, ceil_mode, count_include_pad, divisor = args[
      1 + offset:7 + offset]
  return kernel, stride or kernel, padding or [0], ceil_mode, divisor


def _avg_pool_check(node):
  kernel, stride, padding, ceil_mode, divisor = _pool_args(node)
  if any(p != 0 for p in padding):
    return "padding is not lowered"
  if ceil_mode:
    return "ceil_mode=True is not lowered"
  if divisor is not None:
    return "divisor_override is not lowered"
  if "backward" in str(node.target) and list(_expand(stride, 2)) != list(
      _expand(kernel, 2)):
    return "the backward is lowered only for stride == kernel_size"
  return _float_check(node)


@lowering("aten.avg_pool2d.default", check=_avg_pool_check)
def avg_pool2d(ctx, x, kernel_size, stride=(), *unused):
  b, ty = ctx.b, ctx.out
  kernel = _expand(kernel_size, 2)
  stride = _expand(stride or kernel_size, 2)
  lead = [1] * (x.rank - 2)
  total = b.op(
      "stablehlo.reduce_window", [x, b.constant(0, TensorType((), x.dtype))],
      ty,
      f"window_dimensions = {mlir.i64_array(lead + kernel)}, "
      f"window_strides = {mlir.i64_array(lead + stride)}",
      region=b.scalar_region("stablehlo.add", x.dtype))
  return b.op("stablehlo.divide",
              [total, b.constant(kernel[0] * kernel[1], ty)], ty)


@lowering("aten.avg_pool2d_backward.default", check=_avg_pool_check)
def avg_pool2d_backward(ctx, grad, x, kernel_size, *unused):
  """With stride == kernel the windows tile the input: each input element
  gets grad / (kh * kw) of its window; rows and columns past the last
  window get 0."""
  b, ty = ctx.b, ctx.out
  kh, kw = _expand(kernel_size, 2)
  lead = list(grad.shape[:-2])
  ho, wo = grad.shape[-2:]
  r = len(lead)
  g = h.reshape(b, grad, lead + [ho, 1, wo, 1])
  g = h.broadcast_in_dim(b, g, lead + [ho, kh, wo, kw], range(r + 4))
  g = h.reshape(b, g, lead + [ho * kh, wo * kw])
  g = b.op("stablehlo.divide", [g, b.constant(kh * kw, g.type)], g.type)
  if g.shape != ty.shape:
    high = [0] * r + [ty.shape[-2] - ho * kh, ty.shape[-1] - wo * kw]
    g = b.op("stablehlo.pad", [g, b.constant(0, TensorType((), g.dtype))], ty,
             f"edge_padding_low = {mlir.i64_array([0] * (r + 2))}, "
             f"edge_padding_high = {mlir.i64_array(high)}, "
             f"interior_padding = {mlir.i64_array([0] * (r + 2))}")
  return g


# -- Max pooling. -------------------------------------------------------------

def _max_pool_args(node):
  """(kernel, stride, padding, dilation, ceil_mode), each pair expanded,
  of max_pool2d_with_indices or its backward."""
  args = list(node.args) + [None] * 8
  offset = 1 if "backward" in str(node.target) else 0
  kernel, stride, padding, dilation, ceil_mode = args[1 + offset:6 + offset]
  kernel = _expand(kernel, 2)
  stride = _expand(stride or kernel, 2)
  padding = _expand(padding if padding is not None else [0], 2)
  dilation = _expand(dilation if dilation is not None else [1], 2)
  return kernel, stride, padding, dilation, bool(ceil_mode)


def _max_pool_check(node):
  val = h.arg_val(node, 1 if "backward" in str(node.target) else 0)
  if val is None or not val.dtype.is_floating_point:
    return "needs a floating-point input"
  if val.dim() not in (3, 4):
    return f"a rank-{val.dim()} input (3 or 4 expected)"
  return None


def _pool_positions(b, in_hw, out_hw, kernel, stride, padding, dilation,
                    lead):
  """For each kernel offset (row-major, as torch scans a window): the
  strided slice bounds into the input padded by `padding` (low) and enough
  -inf (high) for every window, and the flat index (row * W + col) in the
  unpadded input of each output position's element at that offset."""
  (hgt, wid), (oh, ow) = in_hw, out_hw
  i64 = "i64"
  shape = tuple(lead) + (oh, ow)
  rows = b.op("stablehlo.iota", [], TensorType(shape, i64),
              f"iota_dimension = {len(lead)} : i64")
  cols = b.op("stablehlo.iota", [], TensorType(shape, i64),
              f"iota_dimension = {len(lead) + 1} : i64")
  base = b.op("stablehlo.add", [
      b.op("stablehlo.multiply",
           [rows, b.constant(stride[0] * wid, TensorType(shape, i64))],
           rows.type),
      b.op("stablehlo.multiply",
           [cols, b.constant(stride[1], TensorType(shape, i64))],
           cols.type)], rows.type)
  positions = []
  for i in range(kernel[0]):
    for j in range(kernel[1]):
      start = [i * dilation[0], j * dilation[1]]
      limit = [start[0] + (oh - 1) * stride[0] + 1,
               start[1] + (ow - 1) * stride[1] + 1]
      flat = (start[0] - padding[0]) * wid + (start[1] - padding[1])
      index = (base if flat == 0 else b.op(
          "stablehlo.add", [base, b.constant(flat, base.type)], base.type))
      positions.append((start, limit, index))
  high = [max(0, (oh - 1) * stride[k] + (kernel[k] - 1) * dilation[k] + 1 -
              (in_hw[k] + padding[k])) for k in range(2)]
  return positions, high


def _first_valid_index(b, in_hw, out_hw, stride, padding, dilation, lead):
  """Per output position, the flat index of its window's first element
  inside the input (torch's index while no element beat -inf)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  firsts = []
  for k in range(2):
    starts = np.arange(out_hw[k]) * stride[k] - padding[k]
    steps = np.where(starts < 0, -(starts // dilation[k]), 0)
    firsts.append(starts + steps * dilation[k])
  flat = firsts[0][:, None] * in_hw[1] + firsts[1][None, :]
  table = b.dense_constant(flat.astype(np.int64),
                           TensorType(tuple(out_hw), "i64"))
  return h.broadcast(b, table, tuple(lead) + tuple(out_hw))


@lowering("aten.max_pool2d_with_indices.default", check=_max_pool_check)
def max_pool2d_with_indices(ctx, x, *unused):
  """Values and flat indices (row * W + col per plane), as torch's CPU
  kernel computes them: scanning each window row by row, an element
  replaces the maximum if it is greater or NaN (so the first of equal
  maxima wins); padding never does."""
  b = ctx.b
  vty, ity = ctx.out
  kernel, stride, padding, dilation, _ = _max_pool_args(ctx.node)
  lead = list(x.shape[:-2])
  in_hw, out_hw = tuple(x.shape[-2:]), tuple(vty.shape[-2:])
  positions, high = _pool_positions(b, in_hw, out_hw, kernel, stride,
                                    padding, dilation, lead)
  scalar = TensorType((), x.dtype)
  r = len(lead)
  padded = b.op(
      "stablehlo.pad", [x, b.constant(float("-inf"), scalar)],
      x.type.with_shape(lead + [in_hw[0] + padding[0] + high[0],
                                in_hw[1] + padding[1] + high[1]]),
      f"edge_padding_low = {mlir.i64_array([0] * r + padding)}, "
      f"edge_padding_high = {mlir.i64_array([0] * r + high)}, "
      f"interior_padding = {mlir.i64_array([0] * (r + 2))}")
  best = b.constant(float("-inf"), vty)
  best_index = (_first_valid_index(b, in_hw, out_hw, stride, padding,
                                   dilation, lead)
                if any(padding) else positions[0][2])
  for start, limit, index in positions:
    value = b.op("stablehlo.slice", [padded], vty,
                 f"start_indices = {mlir.i64_array([0] * r + start)}, "
                 f"limit_indices = {mlir.i64_array(lead + limit)}, "
                 f"strides = {mlir.i64_array([1] * r + stride)}")
    better = b.op("stablehlo.or", [
        h.compare(b, value, best, "GT"),
        h.compare(b, value, value, "NE")], vty.with_dtype("i1"))
    best = b.op("stablehlo.select", [better, value, best], vty)
    best_index = b.op("stablehlo.select", [better, index, best_index], ity)
  return [best, best_index]


@lowering("aten.max_pool2d_with_indices_backward.default",
          check=_max_pool_check)
def max_pool2d_with_indices_backward(ctx, grad, x, *args):
  """Each output gradient added at its element's index (a scatter-add over
  each plane flattened)."""
  b, ty = ctx.b, ctx.out
  indices = args[-1]
  lead = list(x.shape[:-2])
  planes = 1
  for d in lead:
    planes *= d
  hw = x.shape[-2] * x.shape[-1]
  count = grad.shape[-2] * grad.shape[-1]
  idx = h.reshape(b, h.convert(b, indices, "i64"), [planes, count, 1])
  plane = b.op("stablehlo.iota", [], TensorType((planes, count, 1), "i64"),
               "iota_dimension = 0 : i64")
  full = b.op("stablehlo.concatenate", [plane, idx],
              TensorType((planes, count, 2), "i64"), "dimension = 2 : i64")
  updates = h.reshape(b, grad, [planes, count])
  zeros = b.constant(0, TensorType((planes, hw), ty.dtype))
  out = b.op(
      "stablehlo.scatter", [zeros, full, updates], zeros.type,
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = "
      "[], inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = "
      "[0, 1], index_vector_dim = 2>, indices_are_sorted = false, "
      "unique_indices = false",
      region=b.scalar_region("stablehlo.add", ty.dtype))
  return h.reshape(b, out, ty.shape)


def flash_attention_backward_decomposition(grad_out, query, key, value, out,
                                           logsumexp, dropout_p, is_causal,
                                           attn_mask=None, scale=None):
  """The gradient of `_scaled_dot_product_flash_attention_for_cpu` (the
  attention torch picks on CPU, e.g. for transformers' "sdpa" attention
  with is_causal), for AOTAutograd's decomposition table: the forward is
  decomposed by torch into the math attention, but autograd still emits
  this op for its gradient. With P the attention probabilities,
  dV = P^T dO, dS = P * (dO V^T - rowsum(dO V^T * P)), dQ = scale dS K and
  dK = scale dS^T Q. P is the forward's second output when torch's
  decomposition made it (its "logsumexp" is then the probabilities,
  [B, H, L, S]); from a real log-sum-exp [B, H, L] it is recomputed.
  Grouped-query attention (fewer key / value heads) sums the gradients of
  each group's shared head."""
  if dropout_p != 0:
    return NotImplemented
  heads, kv_heads = query.shape[1], key.shape[1]
  groups = heads // kv_heads
  if groups * kv_heads != heads:
    return NotImplemented
  if scale is None:
    scale = 1.0 / math.sqrt(query.shape[-1])
  k = key.repeat_interleave(groups, dim=1) if groups > 1 else key
  v = value.repeat_interleave(groups, dim=1) if groups > 1 else value
  length, source = query.shape[-2], key.shape[-2]
  if tuple(logsumexp.shape) == tuple(query.shape[:-1]) + (source,):
    probs = logsumexp.to(query.dtype)
  else:
    scores = (query @ k.transpose(-2, -1)) * scale
    if is_causal:
      allowed = torch.ones(length, source, dtype=torch.bool,
                           device=query.device).tril()
      scores = scores.masked_fill(~allowed, float("-inf"))
    if attn_mask is not None:
      if attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
      else:
        scores = scores + attn_mask
    probs = torch.exp(scores - logsumexp.unsqueeze(-1)).to(query.dtype)
  grad_v = probs.transpose(-2, -1) @ grad_out
  grad_p = grad_out @ v.transpose(-2, -1)
  grad_s = probs * (grad_p - (grad_p * probs).sum(-1, keepdim=True))
  grad_q = (grad_s @ k) * scale
  grad_k = (grad_s.transpose(-2, -1) @ query) * scale
  if groups > 1:
    shape = (key.shape[0], kv_heads, groups) + tuple(key.shape[2:])
    grad_k = grad_k.reshape(shape).sum(2)
    grad_v = grad_v.reshape(shape[:-1] + (value.shape[-1],)).sum(2)
  return grad_q, grad_k, grad_v


def _adaptive_window(x, output_size):
  """(kernel = stride) of an adaptive max pool whose output divides its
  input exactly, or None."""
  window = []
  for size, out in zip(x.shape[-2:], output_size):
    out = size if out is None else out
    if out <= 0 or size % out:
      return None
    window.append(size // out)
  return window


def _adaptive_bounds(size: int, out: int, device):
  """(starts, ends) [out] of torch's adaptive windows along one dim:
  floor(i * size / out) to ceil((i + 1) * size / out), end excluded. Made
  of torch ops (a decomposition may not make constant tensors)."""
  i = torch.arange(out, dtype=torch.int64, device=device)
  return (i * size) // out, ((i + 1) * size + out - 1) // out


def _adaptive_rows(size: int, out: int, device) -> torch.Tensor:
  """[out, k] input positions of each adaptive window along one dim, k the
  widest window's length; a narrower window repeats its last position,
  which changes neither its maximum nor where that is first found in
  row-major order."""
  k = max(-((-(i + 1) * size) // out) - (i * size) // out
          for i in range(out))
  starts, ends = _adaptive_bounds(size, out, device)
  offsets = torch.arange(k, dtype=torch.int64, device=device)
  return torch.minimum(starts.unsqueeze(1) + offsets.unsqueeze(0),
                       (ends - 1).unsqueeze(1))


def _adaptive_average_matrix(size: int, out: int, like) -> torch.Tensor:
  """[size, out]: column i is 1 / (window length) on adaptive window i's
  positions and 0 elsewhere."""
  starts, ends = _adaptive_bounds(size, out, like.device)
  pos = torch.arange(size, dtype=torch.int64,
                     device=like.device).unsqueeze(1)
  inside = (pos >= starts.unsqueeze(0)) & (pos < ends.unsqueeze(0))
  return inside.to(like.dtype) / (ends - starts).to(like.dtype).unsqueeze(0)


def adaptive_avg_pool2d_backward_decomposition(grad, x):
  """The gradient of adaptive average pooling (torch has no decomposition
  of it): the pooling is separable, out = Ah^T x Aw with `Ah`, `Aw` the
  per-dim averaging matrices, so the input gradient is Ah grad Aw^T."""
  height, width = x.shape[-2:]
  out_h, out_w = grad.shape[-2:]
  rows = _adaptive_average_matrix(height, out_h, grad)  # [H, oh]
  cols = _adaptive_average_matrix(width, out_w, grad)   # [W, ow]
  return torch.matmul(torch.matmul(rows, grad), cols.transpose(0, 1))


def _adaptive_max_gather(x, output_size):
  """`adaptive_max_pool2d` with any windows: every window gathered (padded
  to the widest as `_adaptive_rows` says), then one max with the first
  index of it, mapped back to the flat input index."""
  height, width = x.shape[-2:]
  out_h = height if output_size[0] is None else output_size[0]
  out_w = width if output_size[1] is None else output_size[1]
  if out_h <= 0 or out_w <= 0:
    return NotImplemented
  rows = _adaptive_rows(height, out_h, x.device)  # [oh, kh]
  cols = _adaptive_rows(width, out_w, x.device)   # [ow, kw]
  kh, kw = rows.shape[1], cols.shape[1]
  ih = rows.reshape(out_h, 1, kh, 1)
  iw = cols.reshape(1, out_w, 1, kw)
  windows = x[..., ih, iw]  # [..., oh, ow, kh, kw]
  lead = tuple(x.shape[:-2])
  values, first = windows.reshape(lead + (out_h, out_w, kh * kw)).max(-1)
  flat = (ih * width + iw).reshape(out_h, out_w, kh * kw)
  indices = flat.expand(lead + (out_h, out_w, kh * kw)).gather(
      -1, first.unsqueeze(-1)).squeeze(-1)
  return values, indices


def adaptive_max_pool2d_decomposition(x, output_size):
  """`adaptive_max_pool2d`, for AOTAutograd's decomposition table: where
  the output divides the input a max pool with kernel = stride = input /
  output (the same windows, and the same flat input indices), else the
  windows gathered (`_adaptive_max_gather`)."""
  window = _adaptive_window(x, output_size)
  if window is None:
    return _adaptive_max_gather(x, output_size)
  return torch.ops.aten.max_pool2d_with_indices.default(x, window, window)


def adaptive_max_pool2d_backward_decomposition(grad, x, indices):
  """Its gradient, which autograd emits even when the forward was
  decomposed: the max pool's gradient over the same windows where they
  divide the input, else each output's gradient added at its flat input
  index (an accumulating index_put: windows overlap)."""
  window = _adaptive_window(x, grad.shape[-2:])
  if window is None:
    height, width = x.shape[-2:]
    planes = math.prod(x.shape[:-2])
    per = height * width
    base = torch.arange(planes, device=x.device, dtype=torch.int64) * per
    where = (indices.reshape(planes, -1) + base.unsqueeze(-1)).reshape(-1)
    total = torch.zeros(planes * per, dtype=grad.dtype, device=grad.device)
    total = torch.ops.aten.index_put.default(
        total, [where], grad.reshape(-1), True)
    return total.reshape(x.shape)
  return torch.ops.aten.max_pool2d_with_indices_backward.default(
      grad, x, window, window, [0, 0], [1, 1], False, indices)


# -- median, kthvalue (decompositions over the sort lowering). ---------------


def _order_statistic(x, dim, position, keepdim):
  """(values, indices) at `position` ([..., 1, ...] along `dim`) of a
  stable ascending sort along `dim`."""
  values, indices = torch.sort(x, dim)
  v = values.gather(dim, position)
  i = indices.gather(dim, position)
  if not keepdim:
    v, i = v.squeeze(dim), i.squeeze(dim)
  return v, i


def median_dim_decomposition(x, dim=-1, keepdim=False):
  """torch.median along a dim: the lower median of the sorted values, or
  NaN (at the first NaN's index) where the slice holds one, as torch does.
  Which of several equal values' index comes back torch leaves open; this
  one takes the stable sort's."""
  if x.dim() == 0:
    return NotImplemented
  dim = dim % x.dim()
  n = x.shape[dim]
  shape = list(x.shape)
  shape[dim] = 1
  middle = torch.full(shape, (n - 1) // 2, dtype=torch.int64,
                      device=x.device)
  if x.is_floating_point():
    nans = torch.isnan(x).sum(dim, keepdim=True)
    middle = torch.where(nans > 0, n - nans, middle)
  return _order_statistic(x, dim, middle, keepdim)


def kthvalue_decomposition(x, k, dim=-1, keepdim=False):
  """torch.kthvalue: the k-th smallest value (NaN sorts last); the index
  of equal values is the stable sort's (torch leaves it open)."""
  if x.dim() == 0:
    return NotImplemented
  dim = dim % x.dim()
  shape = list(x.shape)
  shape[dim] = 1
  position = torch.full(shape, k - 1, dtype=torch.int64, device=x.device)
  return _order_statistic(x, dim, position, keepdim)


# -- embedding_bag (decompositions into gather and index_add). --------------


def _bags_of(indices, offsets, include_last_offset):
  """(bag of each index position, number of bags) from the bags' start
  offsets: a running count of the starts at or before each position
  (empty bags share a start and are skipped by the count)."""
  n = indices.shape[0]
  bags = offsets.shape[0] - (1 if include_last_offset else 0)
  starts = offsets[:bags].clamp(0, n)
  marks = torch.zeros(n + 1, dtype=torch.int64, device=indices.device)
  marks = marks.index_add(0, starts, torch.ones_like(starts))
  return torch.cumsum(marks, 0)[:n] - 1, bags


def _counted(indices, padding_idx):
  """Mask of the index positions a bag counts (all but padding_idx's), or
  None when it counts every one."""
  if padding_idx is None or padding_idx < 0:
    return None
  return indices != padding_idx


def _bag_sizes(bag_of, counted, num_bags):
  """How many counted index positions each bag holds."""
  ones = (torch.ones_like(bag_of) if counted is None
          else counted.to(torch.int64))
  return torch.zeros(num_bags, dtype=torch.int64,
                     device=bag_of.device).index_add(0, bag_of, ones)


def _embedding_bag_supported(indices, offsets, mode, per_sample_weights):
  return (mode in (0, 1) and indices.dim() == 1 and offsets is not None and
          offsets.dim() == 1 and
          (per_sample_weights is None or mode == 0))


def embedding_bag_decomposition(weight, indices, offsets,
                                scale_grad_by_freq=False, mode=0,
                                sparse=False, per_sample_weights=None,
                                include_last_offset=False, padding_idx=-1):
  """torch's _embedding_bag for sum (optionally weighted) and mean bags:
  the rows of every index gathered, padding rows zeroed, added into their
  bag; a mean divides by the bag's count (an empty bag is 0). Returns
  (output, offset2bag, bag_size, max_indices) as autograd's formula takes
  them; the last three are the bag of every index and the bags' sizes
  (torch's CPU kernel leaves them empty or zero in sum mode; the backward
  below recomputes what it needs from the offsets). Max bags and sparse
  gradients stay with torch."""
  if sparse or not _embedding_bag_supported(indices, offsets, mode,
                                            per_sample_weights):
    return NotImplemented
  offset2bag, bags = _bags_of(indices, offsets, include_last_offset)
  rows = weight[indices]
  counted = _counted(indices, padding_idx)
  if counted is not None:
    rows = rows * counted[:, None].to(rows.dtype)
  if per_sample_weights is not None:
    rows = rows * per_sample_weights[:, None].to(rows.dtype)
  output = torch.zeros((bags, weight.shape[1]), dtype=weight.dtype,
                       device=weight.device).index_add(0, offset2bag, rows)
  bag_size = _bag_sizes(offset2bag, counted, bags)
  if mode == 1:
    output = output / bag_size.clamp(min=1)[:, None].to(output.dtype)
  return output, offset2bag, bag_size, bag_size.clone()


def embedding_bag_backward_decomposition(grad, indices, offsets, offset2bag,
                                         bag_size, maximum_indices,
                                         num_weights, scale_grad_by_freq,
                                         mode, sparse, per_sample_weights,
                                         padding_idx=-1):
  """The dense weight gradient of sum / mean bags: each index position's
  bag gradient (divided by its bag's count for a mean, times its weight
  when weighted, zero at padding) added into its row. Bags and counts come
  from the offsets (whatever the forward returned beside its output)."""
  if (sparse or scale_grad_by_freq or
      not _embedding_bag_supported(indices, offsets, mode,
                                   per_sample_weights)):
    return NotImplemented
  include_last = offsets.shape[0] == grad.shape[0] + 1
  bags, num_bags = _bags_of(indices, offsets, include_last)
  g = grad[bags]
  counted = _counted(indices, padding_idx)
  if mode == 1:
    counts = _bag_sizes(bags, counted, num_bags)
    g = g / counts.clamp(min=1)[bags][:, None].to(g.dtype)
  if per_sample_weights is not None:
    g = g * per_sample_weights[:, None].to(g.dtype)
  if counted is not None:
    g = g * counted[:, None].to(g.dtype)
  return torch.zeros((num_weights, grad.shape[1]), dtype=grad.dtype,
                     device=grad.device).index_add(0, indices, g)
