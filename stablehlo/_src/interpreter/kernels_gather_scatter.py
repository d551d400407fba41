"""Interpreter kernels for indexing: gather, dynamic_gather and scatter
(spec sections "gather", "dynamic_gather", "scatter"), plus the region
helpers the reduction kernels (`kernels_reduce`) share with scatter.

Everything is vectorized with numpy: gather computes the flat operand index
of every result element at once (clamped starts + batching iota + offsets)
and does a single `take`; scatter computes the flat result index of every
update element at once, drops the out-of-bounds elements (each one on its
own, as upstream does), and applies the update computation either as a
numpy `ufunc.at` (plain add / multiply / max / min / and / or / xor bodies,
in update order), as a last-write-wins assignment (a body returning the
update), or by evaluating the region on whole arrays in "rounds" where no
two updates of a round hit the same result element (any other body, still
in update order).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import ml_dtypes
import numpy as np

from stablehlo._src.interpreter import evaluator
from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import core
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support

# --- region helpers (shared with kernels_reduce) ------------------------------

_SCALAR_OK = frozenset(("stablehlo.constant", "chlo.constant"))


def region_is_batchable(region: core.Region) -> bool:
  """Whether `region` can run on whole arrays instead of scalars: a single
  block of elementwise ops and scalar constants (elementwise kernels are
  shape-agnostic, so the region then computes every element at once)."""
  if len(region.blocks) != 1:
    return False
  for op in region.blocks[0].operations:
    if op.name in ("stablehlo.return", "chlo.return", "func.return"):
      continue
    if op.name in _SCALAR_OK:
      continue
    d = registry.lookup(op.name)
    if d is None or registry.ELEMENTWISE not in d.traits or op.regions:
      return False
  return True


def region_result_dtypes(region: core.Region) -> list:
  """The storage dtypes of the values the region's terminator returns."""
  ret = region.blocks[0].operations[-1]
  return [runtime.numpy_dtype(v.type) for v in ret.operands]


def region_arg_dtypes(region: core.Region) -> list:
  return [runtime.numpy_dtype(v.type) for v in region.blocks[0].arguments]


def apply_region(ctx, region: core.Region, args: Sequence[np.ndarray],
                 shape: tuple, batchable: Optional[bool] = None) -> list:
  """Evaluates `region` elementwise over `args` (arrays broadcastable to
  `shape`) and returns its results as arrays of `shape` with the region's
  result dtypes. Batched on whole arrays where the region allows it, else
  one scalar evaluation per element."""
  if batchable is None:
    batchable = region_is_batchable(region)
  dts = region_result_dtypes(region)
  if batchable:
    outs = ctx.run_region(region, list(args))
    res = []
    for o, dt in zip(outs, dts):
      o = np.asarray(o)
      if o.dtype != dt:
        o = o.astype(dt)
      if o.shape != shape:
        o = filled(o, shape)
      res.append(o)
    return res
  n = math.prod(shape)
  flat = [filled(a, shape).reshape(-1) for a in args]
  res = [np.empty(n, dtype=dt) for dt in dts]
  for i in range(n):
    outs = ctx.run_region(region, [np.array(a[i]) for a in flat])
    for r, o in zip(res, outs):
      r[i] = np.asarray(o).reshape(())
  return [r.reshape(shape) for r in res]


_IS_FLOAT: dict = {}


def is_float_dtype(dt: np.dtype) -> bool:
  """numpy floats and the ml_dtypes float types (bf16, f8, f6, f4)."""
  dt = np.dtype(dt)
  hit = _IS_FLOAT.get(dt)
  if hit is None:
    hit = dt.kind == "f"
    if dt.kind == "V" and dt.itemsize <= 2:
      try:
        ml_dtypes.finfo(dt)
        hit = True
      except (TypeError, ValueError):
        hit = False
    _IS_FLOAT[dt] = hit
  return hit


def is_narrow_int_dtype(dt: np.dtype) -> bool:
  dt = np.dtype(dt)
  return dt.kind == "V" and not is_float_dtype(dt)


_BOOL_UFUNCS = {
    "stablehlo.add": np.logical_or,
    "stablehlo.multiply": np.logical_and,
    "stablehlo.maximum": np.logical_or,
    "stablehlo.minimum": np.logical_and,
    "stablehlo.and": np.logical_and,
    "stablehlo.or": np.logical_or,
    "stablehlo.xor": np.logical_xor,
}
_INT_UFUNCS = {
    "stablehlo.add": np.add,
    "stablehlo.multiply": np.multiply,
    "stablehlo.maximum": np.maximum,
    "stablehlo.minimum": np.minimum,
    "stablehlo.and": np.bitwise_and,
    "stablehlo.or": np.bitwise_or,
    "stablehlo.xor": np.bitwise_xor,
}
_FLOAT_UFUNCS = {
    "stablehlo.add": np.add,
    "stablehlo.multiply": np.multiply,
    "stablehlo.maximum": np.maximum,
    "stablehlo.minimum": np.minimum,
}


def binary_ufunc(name: Optional[str], dt: np.dtype):
  """The numpy ufunc that computes the binary op `name` exactly like the
  spec on arrays of dtype `dt` (integers wrap, booleans use logical ops), or
  None. Narrow integers (i2/i4/u2/u4) are None: callers compute them in a
  wide type. Float maximum / minimum leave the sign of a zero result to
  numpy; callers fix it to IEEE's maximum(-0, +0) = +0 (see `_minmax_at`)."""
  if name is None:
    return None
  dt = np.dtype(dt)
  if dt == np.bool_:
    return _BOOL_UFUNCS.get(name)
  if dt.kind in "iu":
    return _INT_UFUNCS.get(name)
  if dt.kind == "c":
    return _FLOAT_UFUNCS.get(name) if name in (
        "stablehlo.add", "stablehlo.multiply") else None
  if is_float_dtype(dt):
    return _FLOAT_UFUNCS.get(name)
  return None


def signbit(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x)
  if x.dtype.kind != "f":
    x = x.astype(np.float32)
  return np.signbit(x)


def is_replace_body(region: core.Region, n: int) -> Optional[str]:
  """'update' if the region returns its update arguments unchanged
  (`^bb(%old, %new): return %new`), 'keep' if it returns the old values,
  else None."""
  if len(region.blocks) != 1:
    return None
  b = region.blocks[0]
  if len(b.operations) != 1 or len(b.arguments) != 2 * n:
    return None
  ret = b.operations[0].operands
  if len(ret) != n:
    return None
  if all(r is a for r, a in zip(ret, b.arguments[n:])):
    return "update"
  if all(r is a for r, a in zip(ret, b.arguments[:n])):
    return "keep"
  return None


# --- array helpers ------------------------------------------------------------


def filled(x, shape: tuple, dtype=None) -> np.ndarray:
  """A new array of `shape` holding `x` broadcast (np.broadcast_to plus a
  copy, without its per-call overhead, which dominates on small arrays)."""
  x = np.asarray(x)
  out = np.empty(shape, dtype=x.dtype if dtype is None else dtype)
  out[...] = x
  return out


def move_to_end(x: np.ndarray, axis: int) -> np.ndarray:
  """`np.moveaxis(x, axis, -1)` as a plain transpose view."""
  if axis == x.ndim - 1:
    return x
  perm = [d for d in range(x.ndim) if d != axis] + [axis]
  return x.transpose(perm)


def move_from_end(x: np.ndarray, axis: int) -> np.ndarray:
  """The inverse of `move_to_end`."""
  if axis == x.ndim - 1:
    return x
  perm = list(range(x.ndim - 1))
  perm.insert(axis, x.ndim - 1)
  return x.transpose(perm)


# --- index helpers ------------------------------------------------------------


def as_index(a: np.ndarray) -> np.ndarray:
  """Integer indices as int64 (huge unsigned values saturate, so they stay
  out of bounds / clamp to the top instead of wrapping negative)."""
  a = np.asarray(a)
  if a.dtype == np.uint64:
    return np.minimum(a, np.uint64(2**62)).astype(np.int64)
  return a.astype(np.int64)


def _index_vectors(idx: np.ndarray, ivd: int) -> np.ndarray:
  """`idx` with its index vector dimension last (a size-1 one appended when
  `index_vector_dim == rank`), as int64."""
  idx = as_index(idx)
  if ivd >= idx.ndim:
    return idx[..., None]
  return move_to_end(idx, ivd)


def _placed(v: np.ndarray, ndim: int, axes: Sequence[int]) -> np.ndarray:
  """Reshapes `v` so its dims land on `axes` of an `ndim`-rank array (size
  1 elsewhere), for broadcasting."""
  shape = [1] * ndim
  for ax, s in zip(axes, v.shape):
    shape[ax] = s
  return v.reshape(shape)


_DN_CACHE: dict = {}


def dim_numbers(attr, keys: tuple) -> tuple:
  """The integer fields `keys` of a dimension-numbers attribute (lists as
  tuples, `index_vector_dim` as an int), memoized per attribute object."""
  hit = _DN_CACHE.get(id(attr))
  if hit is not None and hit[0] is attr and hit[1] == keys:
    return hit[2]
  p = tu.Params(attr)
  vals = tuple(p.int(k) if k == "index_vector_dim" else p.ints(k)
               for k in keys)
  if len(_DN_CACHE) > 4096:
    _DN_CACHE.clear()
  _DN_CACHE[id(attr)] = (attr, keys, vals)  # holds `attr`: ids stay unique
  return vals


# --- gather -------------------------------------------------------------------


# The fields of `#stablehlo.gather<...>` in the order `dim_numbers` returns
# them; public for callers that build the attribute from other IRs (the HLO
# evaluator passes a dict with these keys).
GATHER_KEYS = ("offset_dims", "collapsed_slice_dims",
                "operand_batching_dims", "start_indices_batching_dims",
                "start_index_map", "index_vector_dim")


def gather(operand: np.ndarray, start_indices: np.ndarray, dn_attr,
           slice_sizes: Sequence[int]) -> np.ndarray:
  """spec: gather. Start indices are clamped so that every slice lies in
  the operand (`clamp(start, 0, dim - slice_size)`)."""
  offset_dims, collapsed, obatch, ibatch, sim, ivd = dim_numbers(
      dn_attr, GATHER_KEYS)
  rank = operand.ndim
  oshape = operand.shape
  if len(slice_sizes) != rank or any(
      not 0 <= s <= n for s, n in zip(slice_sizes, oshape)):
    raise support.InvalidArgumentError(
        f"slice_sizes {list(slice_sizes)} do not fit the operand shape "
        f"{list(oshape)}")
  vecs = _index_vectors(start_indices, ivd)
  batch_shape = vecs.shape[:-1]
  if vecs.shape[-1] != len(sim):
    raise support.InvalidArgumentError(
        f"index vectors have {vecs.shape[-1]} entries, start_index_map "
        f"{list(sim)} has {len(sim)}")
  nb = len(batch_shape)
  off_operand = [d for d in range(rank)
                 if d not in collapsed and d not in obatch]
  full = batch_shape + tuple(slice_sizes[d] for d in off_operand)
  ndim = len(full)
  batch_axes = range(nb)
  lin = None
  stride = 1
  for d in reversed(range(rank)):
    comp = None
    if d in sim:
      top = oshape[d] - slice_sizes[d]
      comp = _placed(np.minimum(np.maximum(vecs[..., sim.index(d)], 0), top),
                     ndim, batch_axes)
    if d in obatch:
      b = ibatch[obatch.index(d)]
      pos = b - (1 if b > ivd else 0)
      v = _placed(np.arange(batch_shape[pos]), ndim, (pos,))
      comp = v if comp is None else comp + v
    if d in off_operand:
      k = off_operand.index(d)
      v = _placed(np.arange(slice_sizes[d]), ndim, (nb + k,))
      comp = v if comp is None else comp + v
    if comp is not None:
      if stride != 1:
        comp = comp * stride
      lin = comp if lin is None else lin + comp
    stride *= oshape[d]
  if lin is None:
    lin = np.zeros((), dtype=np.int64)
  if lin.shape != full:
    lin = filled(lin, full)
  out = operand.reshape(-1)[lin] if operand.size else np.zeros(
      full, operand.dtype)
  # Result dims: offset dims at `offset_dims`, batch dims elsewhere, in order.
  perm, bi = [], 0
  for r in range(ndim):
    if r in offset_dims:
      perm.append(nb + offset_dims.index(r))
    else:
      perm.append(bi)
      bi += 1
  if perm != list(range(ndim)):
    out = np.ascontiguousarray(out.transpose(perm))
  return out


@registry.interpreter_kernel("stablehlo.gather")
def _gather_kernel(ctx, op, args):
  return gather(args[0], args[1], op.attr("dimension_numbers"),
                _slice_sizes(op.attr("slice_sizes")))


def _slice_sizes(attr) -> tuple:
  hit = _DN_CACHE.get(id(attr))
  if hit is None or hit[0] is not attr:
    hit = (attr, None, tu.ints(attr))
    _DN_CACHE[id(attr)] = hit
  return hit[2]


@registry.interpreter_kernel("stablehlo.dynamic_gather")
def _dynamic_gather_kernel(ctx, op, args):
  """spec: dynamic_gather - gather with `slice_sizes` as an operand."""
  sizes = [int(s) for s in as_index(args[2]).reshape(-1)]
  return gather(args[0], args[1], op.attr("dimension_numbers"), sizes)


# --- scatter ------------------------------------------------------------------


# The fields of `#stablehlo.scatter<...>` in the order `dim_numbers` returns
# them (public, like GATHER_KEYS).
SCATTER_KEYS = ("update_window_dims", "inserted_window_dims",
                 "input_batching_dims", "scatter_indices_batching_dims",
                 "scatter_dims_to_operand_dims", "index_vector_dim")


def scatter_targets(input_shape: tuple, indices: np.ndarray,
                    update_shape: tuple, dn_attr):
  """The flat result index of every in-bounds update element (in row-major
  update order) and the mask of in-bounds update elements, or None when
  all are in bounds (spec: scatter, `result_index`)."""
  uwd, iwd, ibd, sibd, sdod, ivd = dim_numbers(dn_attr, SCATTER_KEYS)
  rank = len(input_shape)
  ndim = len(update_shape)
  vecs = _index_vectors(indices, ivd)
  if vecs.shape[-1] != len(sdod):
    raise support.InvalidArgumentError(
        f"index vectors have {vecs.shape[-1]} entries, "
        f"scatter_dims_to_operand_dims {list(sdod)} has {len(sdod)}")
  scatter_axes = [d for d in range(ndim) if d not in uwd]
  if tuple(update_shape[d] for d in scatter_axes) != vecs.shape[:-1]:
    raise support.InvalidArgumentError(
        f"updates shape {list(update_shape)} does not match the scatter "
        f"indices batch shape {list(vecs.shape[:-1])}")
  win_input = [d for d in range(rank) if d not in iwd and d not in ibd]
  valid = None
  lin = None
  stride = 1
  for d in reversed(range(rank)):
    comp = None
    bounded = True  # the component is known to lie in [0, size)
    if d in sdod:
      comp = _placed(vecs[..., sdod.index(d)], ndim, scatter_axes)
      bounded = False
    if d in ibd:
      b = sibd[ibd.index(d)]
      pos = b - (1 if b > ivd else 0)
      size = vecs.shape[pos]
      v = _placed(np.arange(size), ndim, (scatter_axes[pos],))
      comp = v if comp is None else comp + v
      bounded = bounded and size <= input_shape[d]
    if d in win_input:
      u = uwd[win_input.index(d)]
      v = _placed(np.arange(update_shape[u]), ndim, (u,))
      comp = v if comp is None else comp + v
      bounded = bounded and update_shape[u] <= input_shape[d]
    if comp is None:
      stride *= input_shape[d]
      continue
    if not bounded:
      ok = (comp >= 0) & (comp < input_shape[d])
      valid = ok if valid is None else valid & ok
    if stride != 1:
      comp = comp * stride
    lin = comp if lin is None else lin + comp
    stride *= input_shape[d]
  if lin is None:
    lin = np.zeros((), dtype=np.int64)
  if lin.shape != update_shape:
    lin = filled(lin, update_shape)
  if valid is None or valid.all():
    return lin.reshape(-1), None
  if valid.shape != update_shape:
    valid = filled(valid, update_shape)
  return lin[valid], valid


def apply_updates(ctx, region: core.Region, results: list, lin: np.ndarray,
                  updates: list) -> None:
  """Applies `results[lin[i]] = region(results[lin[i]], updates[i])` for
  every i in order, in place on the flat `results` arrays."""
  n = len(results)
  if lin.size == 0:
    return
  kind = is_replace_body(region, n)
  if kind == "keep":
    return
  if kind == "update":
    # Last write wins: keep each target's last update.
    rev = lin[::-1]
    _, first = np.unique(rev, return_index=True)
    pick = lin.size - 1 - first
    for r, u in zip(results, updates):
      r[lin[pick]] = u[pick]
    return
  name = evaluator.region_binary_op(region) if n == 1 else None
  if name is not None:
    r, u = results[0], updates[0]
    dt = r.dtype
    if u.dtype == dt and region_result_dtypes(region)[0] == dt:
      uf = binary_ufunc(name, dt)
      if uf is not None:
        if (is_float_dtype(dt) and name in ("stablehlo.maximum",
                                            "stablehlo.minimum")):
          _minmax_at(uf, name, r, lin, u)
        else:
          uf.at(r, lin, u)
        return
      if is_narrow_int_dtype(dt):
        uf = binary_ufunc(name, np.int64)
        if uf is not None:
          wide = r.astype(np.int64)
          uf.at(wide, lin, u.astype(np.int64))
          r[...] = wrap_int(wide, dt)
          return
  _apply_in_rounds(ctx, region, results, lin, updates)


def wrap_int(wide: np.ndarray, dt: np.dtype) -> np.ndarray:
  """Wraps int64 values into a narrow ml_dtypes integer dtype (i2 / i4 /
  u2 / u4) modulo 2^bits, two's complement for the signed ones."""
  info = ml_dtypes.iinfo(dt)
  bits = info.bits
  v = np.asarray(wide) & ((1 << bits) - 1)
  if info.min < 0:
    v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
  return v.astype(dt)


def _minmax_at(uf, name, r, lin, u) -> None:
  """`uf.at` for float maximum / minimum with the spec's IEEE semantics for
  signed zeros: maximum(-0, +0) = +0 and minimum(-0, +0) = -0."""
  want_pos = name == "stablehlo.maximum"

  def wins(x):  # a zero whose sign wins a tie between zeros
    return (x == 0) & (signbit(x) != want_pos)

  base_win = wins(r)
  upd_win = wins(u)
  uf.at(r, lin, u)
  if not (base_win.any() or upd_win.any()):
    return
  flag = base_win
  flag[lin[upd_win]] = True
  fix = flag & (r == 0)
  if fix.any():
    zero = np.zeros((), dtype=r.dtype)
    r[fix] = zero if want_pos else -zero


def _apply_in_rounds(ctx, region, results, lin, updates) -> None:
  """Generic update computation: round k applies the k-th update of every
  target at once (targets within a round are distinct), so the region runs
  batched while each target still sees its updates in update order."""
  order = np.argsort(lin, kind="stable")
  sl = lin[order]
  starts = np.ones(sl.size, dtype=bool)
  starts[1:] = sl[1:] != sl[:-1]
  seg_start = np.maximum.accumulate(np.where(starts, np.arange(sl.size), 0))
  rank_sorted = np.arange(sl.size) - seg_start
  occ = np.empty_like(rank_sorted)
  occ[order] = rank_sorted
  by_round = np.argsort(occ, kind="stable")
  counts = np.bincount(occ)
  batchable = region_is_batchable(region)
  pos = 0
  for c in counts:
    sel = by_round[pos:pos + c]
    pos += c
    tgt = lin[sel]
    args = [r[tgt] for r in results] + [u[sel] for u in updates]
    outs = apply_region(ctx, region, args, (int(c),), batchable)
    for r, o in zip(results, outs):
      r[tgt] = o.astype(r.dtype, copy=False)


@registry.interpreter_kernel("stablehlo.scatter")
def _scatter_kernel(ctx, op, args):
  """spec: scatter. Out-of-bounds update elements are skipped; updates apply
  in row-major update order; the inputs are never modified (copied)."""
  n = (len(args) - 1) // 2
  inputs, indices, updates = args[:n], args[n], args[n + 1:]
  region = op.regions[0]
  dn = op.attr("scatter_dimension_numbers")
  res_dts = [runtime.numpy_dtype(r.type) for r in op.results]
  arg_dts = region_arg_dtypes(region)
  upd_dts = arg_dts[n:] if len(arg_dts) == 2 * n else res_dts
  results = [np.array(x, dtype=dt, copy=True) for x, dt in zip(inputs,
                                                                res_dts)]
  shape = results[0].shape
  ushape = np.shape(updates[0])
  lin, valid = scatter_targets(shape, indices, ushape, dn)
  flat_upd = []
  for u, dt in zip(updates, upd_dts):
    u = np.asarray(u)
    if u.dtype != dt:
      u = u.astype(dt)
    flat_upd.append(u.reshape(-1) if valid is None else u[valid])
  flat_res = [r.reshape(-1) for r in results]
  apply_updates(ctx, region, flat_res, lin, flat_upd)
  return [r.reshape(shape) for r in flat_res]
