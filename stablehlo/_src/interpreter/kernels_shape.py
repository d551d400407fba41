"""Interpreter kernels for the shape and data-movement ops: broadcast,
reshape, transpose, slicing, concatenation, padding, reversal, iota and the
dynamic-shape variants (spec sections of the same names).

These ops only move values, so they work on any storage dtype, quantized
storage included, without looking at what the values mean; only `iota` into
a quantized type computes values (spec "iota": `quantize(index)`); none of
them goes through dequantize -> op -> quantize.

Runtime shapes come from the operands (and, for the dynamic ops, from their
shape operands), never from a result type that may have dynamic dimensions.
Results may be numpy views of the operands (slices, transposes, read-only
broadcasts): kernels never write into their arguments.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import types as t
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support


def _ints(op, name, default=None) -> tuple:
  v = op.attr(name)
  if v is None:
    if default is None:
      raise support.InvalidArgumentError(f"missing attribute '{name}'")
    return default
  return tu.ints(v)


def _int(op, name) -> int:
  v = op.attr(name)
  if v is None:
    raise support.InvalidArgumentError(f"missing attribute '{name}'")
  return tu.int_value(v)


def _shape_operand(x) -> tuple:
  """A 1-D integer tensor operand (a runtime shape / index list) as ints."""
  return tuple(int(v) for v in np.asarray(x).reshape(-1))


def _result_dims(op, i: int = 0):
  ty = op.results[i].type
  return tuple(ty.shape) if isinstance(ty, t.RankedTensorType) else None


# --- broadcast ----------------------------------------------------------------


def _broadcast(operand: np.ndarray, dims, out_shape) -> np.ndarray:
  """spec: broadcast_in_dim - result[i] = operand[j] with
  j[d] = 0 if dim(operand, d) = 1 else i[dims[d]]."""
  out_shape = tuple(out_shape)
  if len(dims) != operand.ndim:
    raise support.InvalidArgumentError(
        f"broadcast_dimensions {list(dims)} do not match operand rank "
        f"{operand.ndim}")
  for d, size in enumerate(operand.shape):
    if not 0 <= dims[d] < len(out_shape):
      raise support.InvalidArgumentError(
          f"broadcast dimension {dims[d]} is out of range for a result of "
          f"rank {len(out_shape)}")
    if size != 1 and size != out_shape[dims[d]]:
      raise support.InvalidArgumentError(
          f"operand dimension {d} of size {size} cannot be broadcast to "
          f"result dimension {dims[d]} of size {out_shape[dims[d]]}")
  # Order the operand axes by their result axis, then insert size-1 axes.
  order = sorted(range(len(dims)), key=lambda d: dims[d])
  x = operand.transpose(order) if order != list(range(len(dims))) else operand
  shape = [1] * len(out_shape)
  for k, d in enumerate(order):
    shape[dims[d]] = x.shape[k]
  return np.broadcast_to(x.reshape(shape), out_shape)


def _out_shape_like(op, operand, dims):
  """The result shape of broadcast_in_dim: the result type's, with a
  dynamic dimension taken from the operand dimension mapped to it."""
  shape = list(_result_dims(op))
  for d, bd in enumerate(dims):
    if shape[bd] is None:
      shape[bd] = operand.shape[d]
  if any(s is None for s in shape):
    raise support.UnimplementedError(
        "broadcast_in_dim into an unmapped dynamic result dimension "
        f"({op.results[0].type}) has no runtime size")
  return shape


@registry.interpreter_kernel("stablehlo.broadcast_in_dim")
def _broadcast_in_dim(ctx, op, args):
  dims = _ints(op, "broadcast_dimensions")
  return _broadcast(args[0], dims, _out_shape_like(op, args[0], dims))


@registry.interpreter_kernel("stablehlo.dynamic_broadcast_in_dim")
def _dynamic_broadcast_in_dim(ctx, op, args):
  """spec: dynamic_broadcast_in_dim - broadcast_in_dim to the shape in
  `output_dimensions`."""
  dims = _ints(op, "broadcast_dimensions")
  shape = _shape_operand(args[1])
  if any(s < 0 for s in shape):
    raise support.InvalidArgumentError(
        f"output_dimensions {list(shape)} has a negative size")
  return _broadcast(args[0], dims, shape)


@registry.interpreter_kernel("stablehlo.broadcast")
def _broadcast_legacy(ctx, op, args):
  """Deprecated `broadcast`: result shape = broadcast_sizes ++ shape(operand),
  result[i, j] = operand[j]."""
  sizes = _ints(op, "broadcast_sizes", ())
  x = args[0]
  return np.broadcast_to(x, tuple(sizes) + x.shape)


# --- reshape / transpose / reverse --------------------------------------------


def _reshape_to(x: np.ndarray, shape) -> np.ndarray:
  """spec: reshape - row-major order of elements is kept."""
  shape = tuple(shape)
  n = 1
  for s in shape:
    n *= s
  if n != x.size or any(s < 0 for s in shape):
    raise support.InvalidArgumentError(
        f"cannot reshape {x.size} elements of shape {list(x.shape)} into "
        f"shape {list(shape)}")
  return x.reshape(shape)


@registry.interpreter_kernel("stablehlo.reshape")
def _reshape(ctx, op, args):
  shape = _result_dims(op)
  unknown = [i for i, s in enumerate(shape) if s is None]
  if len(unknown) > 1:
    raise support.UnimplementedError(
        f"reshape into {op.results[0].type}: more than one dynamic "
        "dimension has no runtime size")
  if unknown:
    known = 1
    for s in shape:
      if s is not None:
        known *= s
    shape = list(shape)
    shape[unknown[0]] = args[0].size // known if known else 0
  return _reshape_to(args[0], shape)


@registry.interpreter_kernel("stablehlo.dynamic_reshape")
def _dynamic_reshape(ctx, op, args):
  """spec: dynamic_reshape - reshape to the shape in `output_shape`."""
  return _reshape_to(args[0], _shape_operand(args[1]))


@registry.interpreter_kernel("stablehlo.transpose")
def _transpose(ctx, op, args):
  """spec: transpose - result[i] = operand[j], j[permutation[k]] = i[k]."""
  return np.transpose(args[0], _ints(op, "permutation"))


@registry.interpreter_kernel("stablehlo.reverse")
def _reverse(ctx, op, args):
  """spec: reverse - index d runs backwards for each d in `dimensions`."""
  dims = _ints(op, "dimensions", ())
  if not dims:
    return args[0]
  return np.flip(args[0], axis=dims)


# --- slices -------------------------------------------------------------------


def _slice_checked(x: np.ndarray, start, limit, strides) -> np.ndarray:
  if not len(start) == len(limit) == len(strides) == x.ndim:
    raise support.InvalidArgumentError(
        f"slice of a rank-{x.ndim} tensor needs {x.ndim} start, limit and "
        f"stride values, got {list(start)}, {list(limit)}, {list(strides)}")
  for d, (lo, hi, st) in enumerate(zip(start, limit, strides)):
    if not (0 <= lo <= hi <= x.shape[d] and st > 0):
      raise support.InvalidArgumentError(
          f"slice axis {d}: need 0 <= start ({lo}) <= limit ({hi}) <= dim "
          f"({x.shape[d]}) and stride ({st}) > 0")
  return x[tuple(slice(lo, hi, st) for lo, hi, st in
                 zip(start, limit, strides))]


@registry.interpreter_kernel("stablehlo.slice")
def _slice(ctx, op, args):
  """spec: slice - result[i] = operand[start_indices + i * strides]."""
  return _slice_checked(args[0], _ints(op, "start_indices"),
                        _ints(op, "limit_indices"), _ints(op, "strides"))


@registry.interpreter_kernel("stablehlo.real_dynamic_slice")
def _real_dynamic_slice(ctx, op, args):
  """`real_dynamic_slice`: slice with runtime start / limit / strides."""
  return _slice_checked(args[0], _shape_operand(args[1]),
                        _shape_operand(args[2]), _shape_operand(args[3]))


def _clamped_starts(shape, sizes, indices) -> list:
  """spec: dynamic_slice / dynamic_update_slice -
  adjusted_start_indices = clamp(0, start_indices, shape - sizes)."""
  if len(indices) != len(shape):
    raise support.InvalidArgumentError(
        f"got {len(indices)} start indices for a rank-{len(shape)} tensor")
  out = []
  for s, n, i in zip(shape, sizes, indices):
    if n > s:
      raise support.InvalidArgumentError(
          f"slice of size {n} does not fit a dimension of size {s}")
    out.append(min(max(int(i), 0), s - n))
  return out


@registry.interpreter_kernel("stablehlo.dynamic_slice")
def _dynamic_slice(ctx, op, args):
  """spec: dynamic_slice - result[i] = operand[adjusted_start + i]."""
  x = args[0]
  sizes = _ints(op, "slice_sizes")
  starts = _clamped_starts(x.shape, sizes, args[1:])
  return x[tuple(slice(b, b + n) for b, n in zip(starts, sizes))]


@registry.interpreter_kernel("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(ctx, op, args):
  """spec: dynamic_update_slice - the operand with `update` written at the
  adjusted start indices."""
  x, upd = args[0], args[1]
  if upd.ndim != x.ndim:
    raise support.InvalidArgumentError(
        f"update rank {upd.ndim} differs from operand rank {x.ndim}")
  starts = _clamped_starts(x.shape, upd.shape, args[2:])
  out = np.array(x, copy=True)
  out[tuple(slice(b, b + n) for b, n in zip(starts, upd.shape))] = upd
  return out


# --- concatenate / pad --------------------------------------------------------


@registry.interpreter_kernel("stablehlo.concatenate")
def _concatenate(ctx, op, args):
  """spec: concatenate - inputs joined along `dimension` in order."""
  dim = _int(op, "dimension")
  if len(args) == 1:
    return args[0]
  return np.concatenate(args, axis=dim)


def pad_array(x: np.ndarray, value: np.ndarray, lo, hi, interior):
  """spec: pad - edge padding (negative removes elements) and interior
  padding between elements, filled with `value`. Public: the pad kernels
  and the HLO evaluator (pad, reduce_window) share it."""
  if not len(lo) == len(hi) == len(interior) == x.ndim:
    raise support.InvalidArgumentError(
        f"padding sizes {list(lo)}, {list(hi)}, {list(interior)} do not "
        f"match the operand rank {x.ndim}")
  buf_shape, place, crop = [], [], []
  for d, n in enumerate(x.shape):
    l, h, i = int(lo[d]), int(hi[d]), int(interior[d])
    if i < 0:
      raise support.InvalidArgumentError(
          f"interior padding {i} of dimension {d} is negative")
    inner = n + max(n - 1, 0) * i
    size = l + inner + h
    if size < 0:
      raise support.InvalidArgumentError(
          f"padding dimension {d} of size {n} with low {l}, high {h}, "
          f"interior {i} gives a negative size {size}")
    # Pad with max(l, 0) / max(h, 0), then crop the negative edges.
    pl, ph = max(l, 0), max(h, 0)
    full = pl + inner + ph
    buf_shape.append(full)
    place.append(slice(pl, pl + inner, i + 1))
    crop.append(slice(pl - l, full - (ph - h)))
  value = np.asarray(value, dtype=x.dtype)
  buf = np.full(buf_shape, value, dtype=x.dtype)
  buf[tuple(place)] = x
  return buf[tuple(crop)]


@registry.interpreter_kernel("stablehlo.pad")
def _pad(ctx, op, args):
  return pad_array(args[0], args[1], _ints(op, "edge_padding_low"),
                    _ints(op, "edge_padding_high"),
                    _ints(op, "interior_padding"))


@registry.interpreter_kernel("stablehlo.dynamic_pad")
def _dynamic_pad(ctx, op, args):
  """spec: dynamic_pad - pad with the paddings given as operands."""
  return pad_array(args[0], args[1], _shape_operand(args[2]),
                    _shape_operand(args[3]), _shape_operand(args[4]))


# --- iota ---------------------------------------------------------------------


def _quantize_indices(idx: np.ndarray, qt: t.QuantizedType) -> np.ndarray:
  """spec: quantize - clamp(round_nearest_even(x / scale + zero_point)) in
  the expressed type, for the per-tensor quantized iota."""
  if qt.is_per_axis:
    raise support.UnimplementedError("iota into a per-axis quantized type")
  edt = runtime.numpy_dtype(qt.expressed_type)
  x = idx.astype(np.float64).astype(edt)
  scale = np.asarray(qt.scales[0], dtype=np.float64).astype(edt)
  zp = np.asarray(qt.zero_points[0], dtype=np.float64).astype(edt)
  lo, hi = tu.storage_range(qt)
  y = x / scale + zp
  y = np.clip(y, np.asarray(lo).astype(edt), np.asarray(hi).astype(edt))
  y = np.rint(y.astype(np.float64))
  return y.astype(np.int64).astype(runtime.numpy_dtype(qt))


def _iota_array(shape, dim: int, ty: t.Type) -> np.ndarray:
  """spec: iota - output[i] = i[iota_dimension] in the element type."""
  shape = tuple(shape)
  if not 0 <= dim < len(shape):
    raise support.InvalidArgumentError(
        f"iota_dimension {dim} is out of range for rank {len(shape)}")
  if any(s < 0 for s in shape):
    raise support.InvalidArgumentError(f"iota shape {list(shape)} is "
                                       "negative")
  et = t.element_type_of(ty)
  idx = np.arange(shape[dim], dtype=np.int64)
  if isinstance(et, t.QuantizedType):
    vals = _quantize_indices(idx, et)
  elif isinstance(et, (t.IntegerType, t.IndexType)):
    vals = runtime.wrap_to(idx, et)
  else:  # float / complex: exact in f64, then one rounding step
    vals = idx.astype(np.float64).astype(runtime.numpy_dtype(et))
  view = [1] * len(shape)
  view[dim] = shape[dim]
  return np.ascontiguousarray(np.broadcast_to(vals.reshape(view), shape))


@registry.interpreter_kernel("stablehlo.iota")
def _iota(ctx, op, args):
  ty = op.results[0].type
  return _iota_array(runtime.static_shape(ty), _int(op, "iota_dimension"), ty)


@registry.interpreter_kernel("stablehlo.dynamic_iota")
def _dynamic_iota(ctx, op, args):
  """spec: dynamic_iota - iota with the shape in `output_shape`."""
  return _iota_array(_shape_operand(args[0]), _int(op, "iota_dimension"),
                     op.results[0].type)


# --- dimension sizes ----------------------------------------------------------


def _axis(op, x: np.ndarray) -> int:
  dim = _int(op, "dimension")
  if not 0 <= dim < x.ndim:
    raise support.InvalidArgumentError(
        f"dimension {dim} is out of range for rank {x.ndim}")
  return dim


@registry.interpreter_kernel("stablehlo.get_dimension_size")
def _get_dimension_size(ctx, op, args):
  """spec: get_dimension_size - the size of `dimension` of the operand."""
  x = args[0]
  return runtime.wrap_to(np.int64(x.shape[_axis(op, x)]), op.results[0].type)


@registry.interpreter_kernel("stablehlo.set_dimension_size")
def _set_dimension_size(ctx, op, args):
  """XLA's SetDimensionSize: the runtime size of `dimension` becomes `size`
  (at most the operand's). With a dynamic result dimension the runtime value
  keeps the first `size` elements; a static result dimension keeps the
  operand's data as it is (the size only marks valid data there)."""
  x = args[0]
  dim = _axis(op, x)
  size = int(np.asarray(args[1]))
  if not 0 <= size <= x.shape[dim]:
    raise support.InvalidArgumentError(
        f"size {size} is not within [0, {x.shape[dim]}] for dimension {dim}")
  out = _result_dims(op)
  if out is not None and out[dim] is not None:
    return x
  idx = [slice(None)] * x.ndim
  idx[dim] = slice(0, size)
  return x[tuple(idx)]
