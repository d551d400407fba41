"""Lowerings of ATen view / layout ops: reshape, permute, expand, slicing,
concatenation, splitting, indexing.

Views need no aliasing here: a cluster is a pure function of its inputs
(AOTAutograd's graphs are functional), so a view is a value-producing op.
"""

from __future__ import annotations

import math

import torch

from torch_bridge._src import helpers as h
from torch_bridge._src import mlir
from torch_bridge._src.mlir import TensorType
from torch_bridge._src.registry import lowering


@lowering("aten.view.default", "aten._unsafe_view.default",
          "aten.reshape.default")
def view(ctx, x, *unused_shape):
  return h.reshape(ctx.b, x, ctx.out.shape)


def _as_strided_relative_offset(node) -> int | None:
  """Where as_strided's first element lies in its input's values: its
  storage offset (given, or the input's own) less the input's."""
  args = list(node.args) + [None] * 4
  offset = args[3] if args[3] is not None else node.kwargs.get(
      "storage_offset")
  source = h.arg_val(node)
  if source is None or not isinstance(source.storage_offset(), int):
    return None
  if offset is None:
    return 0
  return offset - source.storage_offset() if isinstance(offset, int) else None


def _as_strided_check(node):
  """A contiguous input: element (i0, .., ik) of the result is element
  offset + sum(ij * stride_j) of the input's values in row-major order,
  which must exist (torch's unfold and group-norm decompositions write
  this). A view of a non-contiguous input re-reads its storage in an
  order a dense array does not keep."""
  size, stride = list(node.args[1]), list(node.args[2])
  source = h.arg_val(node)
  if source is None or not source.is_contiguous():
    return "a non-contiguous input"
  offset = _as_strided_relative_offset(node)
  if len(size) != len(stride) or offset is None or any(
      not isinstance(v, int) for v in size + stride):
    return "symbolic sizes, strides or offset"
  if offset < 0 or any(st < 0 for st in stride):
    return "a negative stride, or an offset before its input"
  if any(d == 0 for d in size):
    return None
  last = offset + sum((d - 1) * st for d, st in zip(size, stride))
  if last >= source.numel():
    return "elements past the end of its input"
  return None


@lowering("aten.as_strided.default", check=_as_strided_check)
def as_strided(ctx, x, size, stride, storage_offset=None):
  """Elements of x in row-major order at offset + sum(i_j * stride_j):
  a slice and reshape where that is the row-major layout of `size` (a
  reshape), otherwise one gather of every position (overlapping windows:
  Tensor.unfold)."""
  b = ctx.b
  size, offset = list(size), _as_strided_relative_offset(ctx.node)
  count = math.prod(size)
  flat = h.reshape(b, x, [math.prod(x.shape)])
  if count == 0 or all(st == e for st, e, d in zip(
      stride, h.contiguous_strides(size), size) if d != 1):
    if count != math.prod(x.shape) or offset:
      flat = h.slice_(b, flat, [offset], [offset + count], [1])
    return h.reshape(b, flat, ctx.out.shape)
  ity = TensorType(tuple(size), "i64")
  index = b.constant(offset, ity)
  for j, (d, st) in enumerate(zip(size, stride)):
    if d == 1 or st == 0:
      continue
    position = b.op("stablehlo.iota", [], ity, f"iota_dimension = {j} : i64")
    if st != 1:
      position = b.op("stablehlo.multiply", [position, b.constant(st, ity)],
                      ity)
    index = b.op("stablehlo.add", [index, position], ity)
  index = h.reshape(b, index, size + [1])
  return b.op(
      "stablehlo.gather", [flat, index], ctx.out,
      "dimension_numbers = #stablehlo.gather<offset_dims = [], "
      "collapsed_slice_dims = [0], start_index_map = [0], "
      f"index_vector_dim = {len(size)}>, "
      f"slice_sizes = {mlir.i64_array([1])}, indices_are_sorted = false")


@lowering("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default",
          "aten.unsqueeze.default")
def squeeze(ctx, x, *unused_dims):
  return h.reshape(ctx.b, x, ctx.out.shape)


@lowering("aten.permute.default")
def permute(ctx, x, dims):
  return h.transpose(ctx.b, x, [h.normalize_dim(d, x.rank) for d in dims])


@lowering("aten.t.default")
def t(ctx, x):
  return h.transpose(ctx.b, x, list(reversed(range(x.rank))))


@lowering("aten.transpose.int")
def transpose(ctx, x, dim0, dim1):
  perm = list(range(x.rank))
  d0, d1 = h.normalize_dim(dim0, x.rank), h.normalize_dim(dim1, x.rank)
  perm[d0], perm[d1] = perm[d1], perm[d0]
  return h.transpose(ctx.b, x, perm)


@lowering("aten.expand.default")
def expand(ctx, x, *unused_size, **unused_kwargs):
  return h.broadcast(ctx.b, x, ctx.out.shape)


@lowering("aten.repeat.default")
def repeat(ctx, x, repeats):
  """Tiles x: broadcast to [r0, s0, r1, s1, ...], then merge the pairs."""
  n = len(repeats)
  shape = [1] * (n - x.rank) + list(x.shape)
  pairs = []
  for r, s in zip(repeats, shape):
    pairs += [r, s]
  x = h.reshape(ctx.b, x, shape)
  tiled = h.broadcast_in_dim(ctx.b, x, pairs, range(1, 2 * n, 2))
  return h.reshape(ctx.b, tiled, ctx.out.shape)


def _slice_check(node):
  step = node.args[4] if len(node.args) > 4 else node.kwargs.get("step", 1)
  if not isinstance(step, int) or step < 1:
    return f"step={step!r}"
  return None


@lowering("aten.slice.Tensor", check=_slice_check)
def slice_(ctx, x, dim=0, start=None, end=None, step=1):
  dim = h.normalize_dim(dim, x.rank)
  size = x.shape[dim]
  start, end = slice(start, end).indices(size)[:2]
  end = max(start, end)
  starts = [0] * x.rank
  limits = list(x.shape)
  strides = [1] * x.rank
  starts[dim], limits[dim], strides[dim] = start, end, step
  return h.slice_(ctx.b, x, starts, limits, strides)


def _slice_scatter_check(node):
  args = list(node.args) + [None] * 6
  step = args[5] if args[5] is not None else node.kwargs.get("step", 1)
  if not isinstance(step, int) or step < 1:
    return f"step={step!r}"
  return None


@lowering("aten.slice_scatter.default", check=_slice_scatter_check)
def slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
  """`x` with the slice [start:end:step] along `dim` replaced by `src`:
  src padded into x's shape (edge and interior padding place its
  elements) and a mask padded the same way pick it over x."""
  b = ctx.b
  dim = h.normalize_dim(dim, x.rank)
  start = slice(start, end).indices(x.shape[dim])[0]
  count = src.shape[dim]
  if not count:
    return x
  low, high, interior = [0] * x.rank, [0] * x.rank, [0] * x.rank
  low[dim] = start
  interior[dim] = step - 1
  high[dim] = x.shape[dim] - start - (count - 1) * step - 1
  attrs = (f"edge_padding_low = {mlir.i64_array(low)}, "
           f"edge_padding_high = {mlir.i64_array(high)}, "
           f"interior_padding = {mlir.i64_array(interior)}")
  src = h.convert(b, src, x.dtype)
  placed = b.op("stablehlo.pad", [src, b.constant(0, TensorType((), x.dtype))],
                x.type, attrs)
  ones = b.constant(True, src.type.with_dtype("i1"))
  mask = b.op("stablehlo.pad", [ones, b.constant(False, TensorType((), "i1"))],
              x.type.with_dtype("i1"), attrs)
  return b.op("stablehlo.select", [mask, placed, x], x.type)


@lowering("aten.select.int")
def select(ctx, x, dim, index):
  dim = h.normalize_dim(dim, x.rank)
  index = index % x.shape[dim]
  starts = [0] * x.rank
  limits = list(x.shape)
  starts[dim], limits[dim] = index, index + 1
  out = h.slice_(ctx.b, x, starts, limits, [1] * x.rank)
  return h.reshape(ctx.b, out, ctx.out.shape)


@lowering("aten.cat.default")
def cat(ctx, tensors, dim=0):
  ty = ctx.out
  dim = h.normalize_dim(dim, ty.rank)
  parts = [h.convert(ctx.b, t, ty.dtype) for t in tensors
           if t.rank == ty.rank and t.shape[dim] > 0]
  if len(parts) == 1:
    return parts[0]
  return ctx.b.op("stablehlo.concatenate", parts, ty,
                  f"dimension = {dim} : i64")


@lowering("aten.split_with_sizes.default", "aten.split.Tensor")
def split(ctx, x, sizes, dim=0):
  dim = h.normalize_dim(dim, x.rank)
  outs, offset = [], 0
  for ty in ctx.out:
    n = ty.shape[dim]
    starts = [0] * x.rank
    limits = list(x.shape)
    starts[dim], limits[dim] = offset, offset + n
    outs.append(h.slice_(ctx.b, x, starts, limits, [1] * x.rank))
    offset += n
  return outs


def _pad_check(node):
  pads = node.args[1]
  if len(pads) % 2:
    return "odd number of pad values"
  return None


@lowering("aten.constant_pad_nd.default", check=_pad_check)
def constant_pad_nd(ctx, x, pad, value=0):
  low, high = [0] * x.rank, [0] * x.rank
  for i in range(len(pad) // 2):  # pairs from the last dim backwards
    d = x.rank - 1 - i
    low[d], high[d] = pad[2 * i], pad[2 * i + 1]
  return ctx.b.op("stablehlo.pad", [x, ctx.b.constant(value,
                                                      TensorType((), x.dtype))],
                  ctx.out,
                  f"edge_padding_low = {mlir.i64_array(low)}, "
                  f"edge_padding_high = {mlir.i64_array(high)}, "
                  f"interior_padding = {mlir.i64_array([0] * x.rank)}")


# -- Indexing (gather / scatter). --------------------------------------------

def _gather_rows(b, table, indices, out):
  """out[i..., :] = table[indices[i...], :] along table's dim 0."""
  idx = h.convert(b, indices, "i64")
  rank = idx.rank
  slice_sizes = [1] + list(table.shape[1:])
  offset_dims = list(range(rank, rank + table.rank - 1))
  return b.op(
      "stablehlo.gather", [table, idx], out,
      "dimension_numbers = #stablehlo.gather<offset_dims = "
      f"[{', '.join(map(str, offset_dims))}], collapsed_slice_dims = [0], "
      f"start_index_map = [0], index_vector_dim = {rank}>, "
      f"slice_sizes = {mlir.i64_array(slice_sizes)}, "
      "indices_are_sorted = false")


def _embedding_check(node):
  # padding_idx only matters for the backward; scale_grad / sparse do not
  # change the forward either, but sparse gradients are not ours to make.
  if len(node.args) > 4 and node.args[4]:
    return "sparse=True"
  return None


@lowering("aten.embedding.default", check=_embedding_check)
def embedding(ctx, weight, indices, *unused):
  return _gather_rows(ctx.b, weight, indices, ctx.out)


@lowering("aten.index_select.default")
def index_select(ctx, x, dim, index):
  dim = h.normalize_dim(dim, x.rank)
  perm = [dim] + [d for d in range(x.rank) if d != dim]
  moved = h.transpose(ctx.b, x, perm)
  shape = [index.shape[0]] + [x.shape[d] for d in perm[1:]]
  rows = _gather_rows(ctx.b, moved, index, moved.type.with_shape(shape))
  inverse = [perm.index(d) for d in range(x.rank)]
  return h.transpose(ctx.b, rows, inverse)


def _index_check(node):
  indices = node.args[1]
  tensors = [i for i in indices if i is not None]
  if not tensors:
    return "no index tensor"
  for i in tensors:
    val = i.meta.get("val")
    if val is None or val.dtype == torch.bool:
      return "boolean-mask indexing has a data-dependent shape"
  return None


def _advanced_index(b, x, indices):
  """What torch's advanced indexing x[indices] reads: (index vectors
  [B..., k] as i64 with negative indices wrapped, the indexed dims, the
  positions of x's other dims in the result, the result's shape). B is
  the index tensors' broadcast shape; it takes the indexed dims' place in
  the result when they are adjacent, and comes first otherwise."""
  indexed = [d for d, i in enumerate(indices) if i is not None]
  k = len(indexed)
  batch = list(torch.broadcast_shapes(*[tuple(indices[d].shape)
                                        for d in indexed]))
  nb = len(batch)
  adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
  first = indexed[0] if adjacent else 0
  rest = [x.shape[d] for d in range(x.rank) if d not in indexed]
  shape = rest[:first] + batch + rest[first:]
  parts = []
  for d in indexed:
    iv = h.broadcast(b, h.convert(b, indices[d], "i64"), batch)
    size = b.constant(x.shape[d], iv.type)
    negative = h.compare(b, iv, b.constant(0, iv.type), "LT")
    iv = b.op("stablehlo.select",
              [negative, b.op("stablehlo.add", [iv, size], iv.type), iv],
              iv.type)
    parts.append(h.reshape(b, iv, batch + [1]))
  idx = parts[0] if k == 1 else b.op(
      "stablehlo.concatenate", parts, TensorType(tuple(batch) + (k,), "i64"),
      f"dimension = {nb} : i64")
  others = [d for d in range(len(shape)) if not first <= d < first + nb]
  return idx, indexed, others, shape


@lowering("aten.index.Tensor", check=_index_check)
def index(ctx, x, indices):
  """x[..., i0, ..., ik-1, ...] with index tensors broadcast together
  (shape B) on some dims and None (a whole dim) on others, as torch's
  advanced indexing (`_advanced_index`): e.g. x[:, :, ih, iw] of nearest /
  bilinear upsampling. Negative indices count from the end."""
  b = ctx.b
  idx, indexed, others, _ = _advanced_index(b, x, indices)
  dims = ", ".join(map(str, indexed))
  sizes = [1 if d in indexed else x.shape[d] for d in range(x.rank)]
  return b.op(
      "stablehlo.gather", [x, idx], ctx.out,
      "dimension_numbers = #stablehlo.gather<offset_dims = "
      f"[{', '.join(map(str, others))}], collapsed_slice_dims = "
      f"[{dims}], start_index_map = [{dims}], "
      f"index_vector_dim = {idx.rank - 1}>, "
      f"slice_sizes = {mlir.i64_array(sizes)}, "
      "indices_are_sorted = false")


def _index_put_check(node):
  reason = _index_check(node)  # The same indices as x[indices].
  if reason:
    return reason
  accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get(
      "accumulate", False)
  if not accumulate:
    return ("accumulate=False with repeated indices has no defined order; "
            "not lowered")
  return None


@lowering("aten.index_put.default", "aten._unsafe_index_put.default",
          check=_index_put_check)
def index_put(ctx, x, indices, values, accumulate=False):
  """x[indices] += values (the same advanced indexing as `index`), a
  scatter with an add combiner: the gradient of an embedding, of
  upsampling's x[:, :, ih, iw]."""
  b, ty = ctx.b, ctx.out
  idx, indexed, others, shape = _advanced_index(b, x, indices)
  upd = h.broadcast(b, h.convert(b, values, ty.dtype), shape)
  dims = ", ".join(map(str, indexed))
  return b.op(
      "stablehlo.scatter", [x, idx, upd], ty,
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = "
      f"[{', '.join(map(str, others))}], inserted_window_dims = [{dims}], "
      f"scatter_dims_to_operand_dims = [{dims}], "
      f"index_vector_dim = {idx.rank - 1}>, "
      "indices_are_sorted = false, unique_indices = false",
      region=b.scalar_region("stablehlo.add", ty.dtype))


def _gather_check(node):
  if len(node.args) > 3 and node.args[3]:
    return "sparse_grad=True"
  return None


@lowering("aten.flip.default")
def flip(ctx, x, dims):
  dims = sorted({h.normalize_dim(d, x.rank) for d in dims})
  if not dims:
    return x
  return ctx.b.op("stablehlo.reverse", [x], ctx.out,
                  "dimensions = " + mlir.i64_array(dims))


def _along_dim_indices(b, index, dim: int, rank: int):
  """[*index.shape, rank] full index vectors of torch.gather / scatter
  along `dim`: `index` itself at `dim`, each position's own coordinate in
  the other dims."""
  shape = list(index.shape)
  idx = h.convert(b, index, "i64")
  parts = []
  for d in range(rank):
    ity = TensorType(tuple(shape) + (1,), "i64")
    if d == dim:
      parts.append(h.reshape(b, idx, ity.shape))
    else:
      parts.append(b.op("stablehlo.iota", [], ity,
                        f"iota_dimension = {d} : i64"))
  return b.op("stablehlo.concatenate", parts,
              TensorType(tuple(shape) + (rank,), "i64"),
              f"dimension = {len(shape)} : i64")


@lowering("aten.gather.default", check=_gather_check)
def gather(ctx, x, dim, index, sparse_grad=False):
  """out[i0..in] = x[i0.., index[i0..in], ..in] (torch.gather), as a
  stablehlo.gather whose index vectors enumerate every output position."""
  b = ctx.b
  dim = h.normalize_dim(dim, x.rank)
  shape = list(index.shape)
  full_idx = _along_dim_indices(b, index, dim, x.rank)
  dims = ", ".join(map(str, range(x.rank)))
  return b.op(
      "stablehlo.gather", [x, full_idx], ctx.out,
      "dimension_numbers = #stablehlo.gather<offset_dims = [], "
      f"collapsed_slice_dims = [{dims}], start_index_map = [{dims}], "
      f"index_vector_dim = {len(shape)}>, "
      f"slice_sizes = {mlir.i64_array([1] * x.rank)}, "
      "indices_are_sorted = false")


def _scatter_add_check(node):
  x = node.args[0].meta.get("val")
  if x is None or x.dim() == 0:
    return "a 0-d operand"
  if x.dtype == torch.bool:
    return "a bool operand"
  return None


@lowering("aten.scatter_add.default", check=_scatter_add_check)
def scatter_add(ctx, x, dim, index, src):
  """x with src[p] added at x[.., index[p], ..] for every position p of
  `index` (torch.scatter_add; src is read where index has elements): a
  stablehlo.scatter of every such position with an add combiner, the
  inverse of `gather` (cummax's and gather's gradients, message passing
  in graph networks)."""
  b, ty = ctx.b, ctx.out
  dim = h.normalize_dim(dim, x.rank)
  shape = tuple(index.shape)
  full_idx = _along_dim_indices(b, index, dim, x.rank)
  upd = h.convert(b, src, ty.dtype)
  if tuple(upd.shape) != shape:
    upd = h.slice_(b, upd, [0] * len(shape), shape)
  dims = ", ".join(map(str, range(x.rank)))
  return b.op(
      "stablehlo.scatter", [h.convert(b, x, ty.dtype), full_idx, upd], ty,
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = "
      f"[], inserted_window_dims = [{dims}], "
      f"scatter_dims_to_operand_dims = [{dims}], "
      f"index_vector_dim = {len(shape)}>, "
      "indices_are_sorted = false, unique_indices = false",
      region=b.scalar_region("stablehlo.add", ty.dtype))
