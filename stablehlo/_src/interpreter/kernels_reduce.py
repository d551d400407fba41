"""Interpreter kernels for reductions: reduce, reduce_window,
select_and_scatter, sort and chlo.top_k (spec sections "reduce",
"reduce_window", "select_and_scatter", "sort"; top_k as its CHLO lowering:
a stable descending sort with TOTALORDER on floats, ties by lower index).

Regions are never called per element where that can be avoided:

- a body that is one plain binary op (add, multiply, maximum, minimum, and,
  or, xor; see `evaluator.region_binary_op`) becomes the numpy ufunc; float
  add / multiply keep upstream's left-to-right order (`ufunc.accumulate`),
  order-free ops use `ufunc.reduce`;
- any other elementwise body runs batched on whole arrays
  (`kernels_gather_scatter.apply_region`): `reduce` folds a long axis as a
  balanced binary tree of adjacent pairs (a schedule the spec allows), short
  axes and windows left to right as upstream does;
- sort detects a comparator that is one LT / GT compare of one operand pair
  and uses a stable `np.argsort` on an order key (TOTALORDER: IEEE totalOrder
  with -0 < +0 and NaNs outermost by sign); any other comparator is evaluated
  batched on all pairs of a slice (or, for long slices, in a vectorized
  bottom-up merge sort), giving the stable order.

The gather / scatter family lives in `kernels_gather_scatter`; importing
this module imports (and so registers) it too.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Optional, Sequence

import numpy as np

from stablehlo._src.interpreter import evaluator
from stablehlo._src.interpreter import kernels_gather_scatter as gs
from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import core
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support

# Longest axis `reduce` folds strictly left to right with a generic body;
# longer ones use a pairwise tree (far fewer region evaluations).
_SEQUENTIAL_FOLD_MAX = 32
# The generic sort evaluates the comparator on all n * n pairs of a slice
# when that is cheap (short slices, or few pairs in all), else it runs the
# merge sort (about n log(n)^2 / 2 comparisons, in log(n)^2 / 2 batches).
_PAIRS_MAX_ELEMENTS = 1 << 20
_PAIRS_MAX_N = 128

_ADD = "stablehlo.add"
_MUL = "stablehlo.multiply"
_MAX = "stablehlo.maximum"
_MIN = "stablehlo.minimum"

# --- shared fold machinery ----------------------------------------------------


def _simple_ufunc(region: core.Region, n: int, dts: Sequence[np.dtype]):
  """(name, ufunc, wide) for a one-op binary body over one operand (`n`
  == 1) where all of `dts` and the body's types agree; `wide` means: compute
  in int64 and wrap (narrow ints). None where the body needs the generic
  path."""
  if n != 1:
    return None
  name = evaluator.region_binary_op(region)
  if name is None:
    return None
  dt = np.dtype(dts[0])
  body = (list(dts) + gs.region_arg_dtypes(region) +
          gs.region_result_dtypes(region))
  if any(np.dtype(d) != dt for d in body):
    return None
  uf = gs.binary_ufunc(name, dt)
  if uf is not None:
    return name, uf, False
  if gs.is_narrow_int_dtype(dt):
    uf = gs.binary_ufunc(name, np.int64)
    if uf is not None:
      return name, uf, True
  return None


def _order_matters(name: str, dt: np.dtype) -> bool:
  """Float / complex add and multiply round: keep the sequential order."""
  return name in (_ADD, _MUL) and (gs.is_float_dtype(dt) or
                                   np.dtype(dt).kind == "c")


def _zero_sign_fix(name: str, dt: np.dtype) -> bool:
  return name in (_MAX, _MIN) and gs.is_float_dtype(dt)


def _wins_tie(name: str, x: np.ndarray) -> np.ndarray:
  """Zeros that win a maximum (+0) / minimum (-0) tie between zeros."""
  return (x == 0) & (gs.signbit(x) != (name == _MAX))


def fold_last_axis(ctx, region: core.Region, xs: list, inits: list) -> list:
  """Reduces arrays `xs` (all of shape S + (K,)) over their last axis with
  the body `region` and the 0-d `inits`; returns arrays of shape S. The
  fold starts from the init values (`body(init, ...)`)."""
  out_shape = xs[0].shape[:-1]
  k = xs[0].shape[-1]
  n = len(xs)
  if k == 0:
    return [gs.filled(v, out_shape) for v in inits]
  simple = _simple_ufunc(region, n, [x.dtype for x in xs] +
                         [v.dtype for v in inits])
  if simple is not None:
    name, uf, wide = simple
    x, init = xs[0], inits[0]
    dt = x.dtype
    if wide:
      x, init = x.astype(np.int64), init.astype(np.int64)
    if _order_matters(name, dt):
      seq = np.concatenate(
          [gs.filled(init, out_shape + (1,)), x], axis=-1)
      return [uf.accumulate(seq, axis=-1)[..., -1].astype(dt, copy=False)]
    red = uf(init, uf.reduce(x, axis=-1, dtype=x.dtype))
    red = np.asarray(red)
    if wide:
      red = gs.wrap_int(red, dt)
    elif _zero_sign_fix(name, dt) and (red == 0).any():
      win = _wins_tie(name, x).any(axis=-1) | _wins_tie(name, init)
      fix = win & (red == 0)
      zero = np.zeros((), dtype=dt)
      red = np.where(fix, zero if name == _MAX else -zero, red)
    return [np.asarray(red, dtype=dt).reshape(out_shape)]
  batchable = gs.region_is_batchable(region)
  if k <= _SEQUENTIAL_FOLD_MAX and not (k > 2 and _selects_only(region)):
    acc = list(inits)  # 0-d: broadcast by the first body evaluation
    for j in range(k):
      acc = gs.apply_region(ctx, region, acc + [x[..., j] for x in xs],
                            out_shape, batchable)
    return acc
  # Balanced tree of adjacent pairs: in-order it is still x0, x1, ..., so
  # it is one of the schedules the spec allows.
  cur = list(xs)
  while k > 1:
    half = k // 2
    left = [c[..., 0:2 * half:2] for c in cur]
    right = [c[..., 1:2 * half:2] for c in cur]
    nxt = gs.apply_region(ctx, region, left + right, out_shape + (half,),
                          batchable)
    if k % 2:
      nxt = [np.concatenate([a, c[..., -1:].astype(a.dtype, copy=False)],
                            axis=-1) for a, c in zip(nxt, cur)]
    cur = nxt
    k = half + k % 2
  return gs.apply_region(ctx, region, list(inits) + [c[..., 0] for c in cur],
                         out_shape, batchable)


_SELECTING_OPS = frozenset((
    "stablehlo.compare", "stablehlo.select", "stablehlo.and", "stablehlo.or",
    "stablehlo.xor", "stablehlo.not", "stablehlo.constant",
    "stablehlo.maximum", "stablehlo.minimum", "stablehlo.return"))


def _selects_only(region: core.Region) -> bool:
  """A body that only compares and selects (argmax-style) rounds nothing,
  so a tree fold gives exactly what the left-to-right fold gives."""
  return len(region.blocks) == 1 and all(
      op.name in _SELECTING_OPS for op in region.blocks[0].operations)


def _converted(args, dts) -> list:
  out = []
  for x, dt in zip(args, dts):
    x = np.asarray(x)
    out.append(x if x.dtype == dt else x.astype(dt))
  return out


def _body_types(op, region, n: int):
  """(accumulator dtypes, input dtypes) of a reduction body; inputs and
  init values are converted to them (spec: `to_destination_type`)."""
  dts = gs.region_arg_dtypes(region)
  if len(dts) != 2 * n:
    raise support.InvalidArgumentError(
        f"the body takes {len(dts)} arguments, expected {2 * n}")
  return dts[:n], dts[n:]


# --- reduce -------------------------------------------------------------------


@registry.interpreter_kernel("stablehlo.reduce")
def _reduce(ctx, op, args):
  """spec: reduce."""
  n = len(args) // 2
  region = op.regions[0]
  acc_dts, in_dts = _body_types(op, region, n)
  xs = _converted(args[:n], in_dts)
  inits = _converted(args[n:], acc_dts)
  dims = sorted(tu.ints(op.attr("dimensions")))
  shape = xs[0].shape
  keep = [d for d in range(len(shape)) if d not in dims]
  out_shape = tuple(shape[d] for d in keep)
  k = math.prod(shape[d] for d in dims)
  perm = keep + dims
  xs = [np.transpose(x, perm).reshape(out_shape + (k,)) for x in xs]
  return fold_last_axis(ctx, region, xs, inits)


# --- reduce_window ------------------------------------------------------------


def pad(x: np.ndarray, value, low: Sequence[int], high: Sequence[int],
        interior: Sequence[int]) -> np.ndarray:
  """spec: pad (negative low / high padding removes elements)."""
  shape, src, dst = [], [], []
  for d, n in enumerate(x.shape):
    lo, hi, step = int(low[d]), int(high[d]), int(interior[d]) + 1
    dil = (n - 1) * step + 1 if n > 0 else 0
    size = max(lo + dil + hi, 0)
    shape.append(size)
    i_min = 0 if lo >= 0 else (-lo + step - 1) // step
    i_max = min(n - 1, (size - 1 - lo) // step) if size > 0 else -1
    src.append(slice(i_min, max(i_max + 1, i_min)))
    dst.append(slice(lo + i_min * step, lo + i_max * step + 1, step)
               if i_max >= i_min else slice(0, 0))
  out = np.full(shape, value, dtype=x.dtype)
  if all(s.stop > s.start for s in src):
    out[tuple(dst)] = x[tuple(src)]
  return out


def _window_attr(op, name: str, rank: int, default: int) -> list:
  v = op.attr(name)
  if v is None:
    return [default] * rank
  return list(tu.ints(v))


def _padding(op, rank: int) -> list:
  p = op.attr("padding")
  if p is None:
    return [(0, 0)] * rank
  arr = tu.int_matrix(p).reshape(-1, 2)
  return [(int(a), int(b)) for a, b in arr]


def _num_windows(size, window, stride, dilation) -> int:
  dw = (window - 1) * dilation + 1
  if size == 0 or dw > size:
    return 0
  return (size - dw) // stride + 1


@registry.interpreter_kernel("stablehlo.reduce_window")
def _reduce_window(ctx, op, args):
  """spec: reduce_window. Windows are read as strided slices of the padded
  inputs (one slice per window position), folded left to right from the
  init values."""
  n = len(args) // 2
  region = op.regions[0]
  acc_dts, in_dts = _body_types(op, region, n)
  xs = _converted(args[:n], in_dts)
  inits = _converted(args[n:], acc_dts)
  rank = xs[0].ndim
  wd = _window_attr(op, "window_dimensions", rank, 1)
  ws = _window_attr(op, "window_strides", rank, 1)
  bd = _window_attr(op, "base_dilations", rank, 1)
  wdl = _window_attr(op, "window_dilations", rank, 1)
  padding = _padding(op, rank)
  lo = [p[0] for p in padding]
  hi = [p[1] for p in padding]
  padded = [pad(x, v.astype(x.dtype), lo, hi, [b - 1 for b in bd])
            for x, v in zip(xs, inits)]
  pshape = padded[0].shape
  out_shape = tuple(_num_windows(pshape[d], wd[d], ws[d], wdl[d])
                    for d in range(rank))
  if 0 in out_shape or 0 in wd:
    return [gs.filled(v, out_shape) for v in inits]

  def window_slices(pos):
    return tuple(slice(w * dl, w * dl + (r - 1) * s + 1, s)
                 for w, dl, r, s in zip(pos, wdl, out_shape, ws))

  positions = itertools.product(*[range(w) for w in wd])
  simple = _simple_ufunc(region, n, [x.dtype for x in xs] +
                         [v.dtype for v in inits])
  if simple is not None:
    name, uf, wide = simple
    dt = xs[0].dtype
    src = padded[0].astype(np.int64) if wide else padded[0]
    init = inits[0].astype(np.int64) if wide else inits[0]
    acc = init  # 0-d: broadcast by the first window
    fix = _zero_sign_fix(name, dt)
    win = _wins_tie(name, init) if fix else None
    for pos in positions:
      sl = src[window_slices(pos)]
      acc = uf(acc, sl)
      if fix:
        win = win | _wins_tie(name, sl)
    if wide:
      return [gs.wrap_int(acc, dt)]
    acc = np.array(acc, dtype=dt)
    if fix:
      m = win & (acc == 0)
      zero = np.zeros((), dtype=dt)
      acc[m] = zero if name == _MAX else -zero
    return [acc]
  batchable = gs.region_is_batchable(region)
  acc = list(inits)  # 0-d: broadcast by the first window
  for pos in positions:
    sl = window_slices(pos)
    acc = gs.apply_region(ctx, region, acc + [p[sl] for p in padded],
                          out_shape, batchable)
  return acc


# --- select_and_scatter -------------------------------------------------------


def _windows(operand: np.ndarray, sshape: tuple, wd, ws, lo):
  """The window elements of every source position: (flat operand index,
  in-bounds mask), both of shape `sshape + (prod(wd),)`, window positions
  in row-major order. Built as a strided view of the operand's flat
  indices padded with -1."""
  rank = operand.ndim
  span = [(s - 1) * st + w if s else 0 for s, st, w in zip(sshape, ws, wd)]
  ids = np.full(span, -1, dtype=np.int64)
  src, dst = [], []
  for d in range(rank):
    a = max(0, -lo[d])  # first operand index that lands in the span
    b = min(operand.shape[d], span[d] - lo[d])
    if b <= a:
      a = b = 0
    src.append(slice(a, b))
    dst.append(slice(a + lo[d], b + lo[d]) if b > a else slice(0, 0))
  ids[tuple(dst)] = np.arange(operand.size, dtype=np.int64).reshape(
      operand.shape)[tuple(src)]
  st = ids.strides
  view = np.lib.stride_tricks.as_strided(
      ids, shape=tuple(sshape) + tuple(wd),
      strides=tuple(x * k for x, k in zip(st, ws)) + st, writeable=False)
  flat = view.reshape(tuple(sshape) + (math.prod(wd),))
  valid = flat >= 0
  return flat, valid


def _simple_select(region: core.Region) -> Optional[tuple]:
  """(max?, first?) if `select` is one GE / GT / LE / LT compare of its two
  arguments: GE keeps the first maximum of a window, GT the last one, LE /
  LT the first / last minimum."""
  b = region.blocks[0] if len(region.blocks) == 1 else None
  if b is None or len(b.operations) != 2 or len(b.arguments) != 2:
    return None
  cmp, ret = b.operations
  if cmp.name != "stablehlo.compare" or ret.operands[0] is not cmp.results[0]:
    return None
  direction = tu.enum_value(cmp.attr("comparison_direction"))
  if tuple(cmp.operands) == tuple(b.arguments):
    pass
  elif tuple(cmp.operands) == tuple(reversed(b.arguments)):
    direction = {"GE": "LE", "GT": "LT", "LE": "GE", "LT": "GT"}.get(
        direction)
  else:
    return None
  return {"GE": (True, True), "GT": (True, False), "LE": (False, True),
          "LT": (False, False)}.get(direction)


def _lowest(dt: np.dtype, want_max: bool):
  if dt == np.bool_:
    return not want_max
  if dt.kind in "iu":
    info = np.iinfo(dt)
    return info.min if want_max else info.max
  return -np.inf if want_max else np.inf


@registry.interpreter_kernel("stablehlo.select_and_scatter")
def _select_and_scatter(ctx, op, args):
  """spec: select_and_scatter. Each window's selected element is found by
  folding `select` over the window positions in order (on all windows at
  once; a plain GE / GT / LE / LT select becomes a first / last arg-max /
  arg-min); the source values are then scattered into a result filled with
  `init_value` using `scatter`, in source order. A window lying entirely in
  the padding selects nothing."""
  operand, source, init = (np.asarray(a) for a in args)
  select, scatter = op.regions
  rank = operand.ndim
  wd = _window_attr(op, "window_dimensions", rank, 1)
  ws = _window_attr(op, "window_strides", rank, 1)
  lo = [p[0] for p in _padding(op, rank)]
  res_dt = runtime.numpy_dtype(op.results[0].type)
  sshape = source.shape
  result = np.full(operand.shape, init, dtype=res_dt).reshape(-1)
  if operand.size == 0 or source.size == 0:
    return result.reshape(operand.shape)
  flat, valid = _windows(operand, sshape, wd, ws, lo)
  vals = operand.reshape(-1)[np.maximum(flat, 0)]
  has = valid.any(axis=-1)
  simple = _simple_select(select)
  dt = operand.dtype
  cmp_vals = vals
  if simple is not None and dt.kind not in "biuf" and gs.is_float_dtype(dt):
    cmp_vals = vals.astype(np.float32)
  if (simple is not None and cmp_vals.dtype.kind in "biuf" and
      not (cmp_vals.dtype.kind == "f" and np.isnan(cmp_vals).any())):
    want_max, first = simple
    masked = np.where(valid, cmp_vals, _lowest(cmp_vals.dtype, want_max))
    best = masked.max(axis=-1) if want_max else masked.min(axis=-1)
    hit = valid & (cmp_vals == best[..., None])
    if first:
      pick = np.argmax(hit, axis=-1)
    else:
      pick = hit.shape[-1] - 1 - np.argmax(hit[..., ::-1], axis=-1)
    sel_pos = np.take_along_axis(flat, pick[..., None], axis=-1)[..., 0]
  else:
    batchable = gs.region_is_batchable(select)
    sel_val = vals[..., 0]
    sel_pos = flat[..., 0]
    seen = valid[..., 0]
    for w in range(1, vals.shape[-1]):
      cur, ok = vals[..., w], valid[..., w]
      first = ok & ~seen
      sel_val = np.where(first, cur, sel_val)
      sel_pos = np.where(first, flat[..., w], sel_pos)
      seen = seen | ok
      keep = gs.apply_region(ctx, select, [sel_val, cur], sshape,
                             batchable)[0].astype(bool)
      take = ok & ~keep
      sel_val = np.where(take, cur, sel_val)
      sel_pos = np.where(take, flat[..., w], sel_pos)
  upd = source[has].astype(gs.region_arg_dtypes(scatter)[1], copy=False)
  gs.apply_updates(ctx, scatter, [result], sel_pos[has], [upd])
  return result.reshape(operand.shape)


# --- sort ---------------------------------------------------------------------


def order_key(x: np.ndarray, total_order: bool) -> Optional[np.ndarray]:
  """An array whose natural order is the element order of `x` (floats:
  IEEE totalOrder when `total_order`, else numeric order with -0 == +0;
  None for float data with NaNs, which has no numeric order). Keys are
  int64 / uint64 / float64, so `~key` / `-key` reverses them exactly."""
  dt = x.dtype
  if dt == np.bool_:
    return x.astype(np.int64)
  if dt.kind in "iu":
    return x if dt in (np.int64, np.uint64) else x.astype(np.int64)
  if gs.is_narrow_int_dtype(dt):
    return x.astype(np.int64)
  if gs.is_float_dtype(dt):
    f = x.astype(np.float64)
    if total_order:
      b = f.view(np.int64)
      return np.where(b < 0, b ^ np.int64(0x7FFFFFFFFFFFFFFF), b)
    if np.isnan(f).any():
      return None
    return f
  return None


def _descending(key: np.ndarray) -> np.ndarray:
  if key.dtype.kind == "f":
    return -key
  return ~key


def _simple_comparator(region: core.Region, n: int):
  """(operand, descending, total_order) if the comparator is a single
  `compare LT|GT` of one operand's pair, else None."""
  if len(region.blocks) != 1:
    return None
  b = region.blocks[0]
  if len(b.operations) != 2 or len(b.arguments) != 2 * n:
    return None
  cmp, ret = b.operations
  if cmp.name != "stablehlo.compare" or len(ret.operands) != 1 or (
      ret.operands[0] is not cmp.results[0]):
    return None
  direction = tu.enum_value(cmp.attr("comparison_direction"))
  if direction not in ("LT", "GT"):
    return None
  lhs, rhs = cmp.operands
  args = list(b.arguments)
  if lhs not in args or rhs not in args:
    return None
  i, j = args.index(lhs), args.index(rhs)
  if i // 2 != j // 2 or i == j:
    return None
  desc = direction == "GT"
  if i % 2 == 1:  # compare(rhs, lhs): the reversed order
    desc = not desc
  total = tu.enum_value(cmp.attr("compare_type")) == "TOTALORDER"
  return i // 2, desc, total


def sort_permutation(ctx, comparator: core.Region, xs: list) -> np.ndarray:
  """The stable sort permutation of the last axis of `xs` (arrays of one
  shape) under `comparator`: `perm[..., k]` is the index of the element
  that goes to position k."""
  n_in = len(xs)
  simple = _simple_comparator(comparator, n_in)
  if simple is not None:
    which, desc, total = simple
    key = order_key(xs[which], total)
    if key is not None:
      if desc:
        key = _descending(key)
      return np.argsort(key, axis=-1, kind="stable")
  shape = xs[0].shape
  n = shape[-1]
  batch = shape[:-1]
  nb = math.prod(batch)
  flat = [x.reshape(nb, n) for x in xs]
  if n <= 1 or nb == 0:
    return gs.filled(np.arange(n), shape)
  batchable = gs.region_is_batchable(comparator)
  if n <= _PAIRS_MAX_N or nb * n * n <= _PAIRS_MAX_ELEMENTS:
    perm = _sort_by_pairs(ctx, comparator, flat, batchable)
  else:
    perm = _merge_sort(ctx, comparator, flat, batchable)
  return perm.reshape(shape)


def _comparator_args(xs_lhs, xs_rhs) -> list:
  args = []
  for a, b in zip(xs_lhs, xs_rhs):
    args += [a, b]
  return args


def _sort_by_pairs(ctx, comparator, flat, batchable) -> np.ndarray:
  """Evaluates the comparator on every pair of a slice at once; element i
  goes to #{j: j before i} + #{j < i: j equivalent to i}."""
  nb, n = flat[0].shape
  perm = np.empty((nb, n), dtype=np.int64)
  rows = max(1, _PAIRS_MAX_ELEMENTS // (n * n))
  lower = np.tri(n, n, -1, dtype=bool)  # [i, j]: j < i
  for r0 in range(0, nb, rows):
    part = [x[r0:r0 + rows] for x in flat]
    m = part[0].shape[0]
    lhs = [x[:, :, None] for x in part]
    rhs = [x[:, None, :] for x in part]
    less = gs.apply_region(ctx, comparator, _comparator_args(lhs, rhs),
                           (m, n, n), batchable)[0].astype(bool)
    less_t = less.transpose(0, 2, 1)
    pos = less_t.sum(axis=2) + ((~less & ~less_t) & lower).sum(axis=2)
    for i in range(m):
      p = pos[i]
      if np.array_equal(np.sort(p), np.arange(n)):
        perm[r0 + i, p] = np.arange(n)
      else:  # not a strict weak order: a plain stable sort on the matrix
        li = less[i]
        key = functools.cmp_to_key(
            lambda a, b, li=li: -1 if li[a, b] else (1 if li[b, a] else 0))
        perm[r0 + i] = sorted(range(n), key=key)
  return perm


def _merge_sort(ctx, comparator, flat, batchable) -> np.ndarray:
  """A vectorized bottom-up stable merge sort: at each level every element
  finds its place in the partner run by a binary search whose probes are
  comparator calls on all elements at once."""
  nb, n = flat[0].shape
  rows = np.arange(nb)[:, None]
  perm = gs.filled(np.arange(n), (nb, n))
  k = np.arange(n)
  width = 1
  while width < n:
    run = k // width
    is_left = run % 2 == 0
    run_start = run * width
    partner = np.where(is_left, run_start + width, run_start - width)
    plen = np.clip(n - partner, 0, width)
    own = k - run_start
    lo = np.zeros((nb, n), dtype=np.int64)
    hi = gs.filled(plen, (nb, n))
    cur = [x[rows, perm] for x in flat]
    while (lo < hi).any():
      mid = (lo + hi) // 2
      probe_pos = np.clip(partner + mid, 0, n - 1)
      probe = [x[rows, perm[rows, probe_pos]] for x in flat]
      lhs = [np.where(is_left, p, c) for p, c in zip(probe, cur)]
      rhs = [np.where(is_left, c, p) for p, c in zip(probe, cur)]
      c = gs.apply_region(ctx, comparator, _comparator_args(lhs, rhs),
                          (nb, n), batchable)[0].astype(bool)
      go_right = np.where(is_left, c, ~c)
      active = lo < hi
      lo = np.where(active & go_right, mid + 1, lo)
      hi = np.where(active & ~go_right, mid, hi)
    pair_start = np.minimum(run_start, partner)
    newpos = pair_start + own + lo
    nxt = np.empty_like(perm)
    nxt[rows, newpos] = perm
    ok = (np.sort(newpos, axis=1) == k).all(axis=1)
    if not ok.all():
      # Not a strict weak order: these rows get a plain stable sort.
      for r in np.nonzero(~ok)[0]:
        nxt[r] = _sort_row(ctx, comparator, [x[r] for x in flat], batchable)
    perm = nxt
    width *= 2
  return perm


def _sort_row(ctx, comparator, row: list, batchable: bool) -> np.ndarray:
  """A stable sort of one slice with one comparator call per comparison
  (the last resort for comparators that are no strict weak order)."""

  def less(i, j):
    args = _comparator_args([np.array(x[i]) for x in row],
                            [np.array(x[j]) for x in row])
    return bool(gs.apply_region(ctx, comparator, args, (), batchable)[0])

  key = functools.cmp_to_key(
      lambda i, j: -1 if less(i, j) else (1 if less(j, i) else 0))
  return np.array(sorted(range(row[0].shape[0]), key=key), dtype=np.int64)


@registry.interpreter_kernel("stablehlo.sort")
def _sort(ctx, op, args):
  """spec: sort. Every sort is stable here (a valid order for
  `is_stable = false` as well)."""
  xs = [np.asarray(a) for a in args]
  rank = xs[0].ndim
  dim = tu.int_value(op.attr("dimension")) if op.attr(
      "dimension") is not None else -1
  if dim < 0:
    dim += rank
  if not 0 <= dim < max(rank, 1):
    raise support.InvalidArgumentError(f"sort dimension {dim} out of range")
  if rank == 0:
    return [x.copy() for x in xs]
  moved = [gs.move_to_end(x, dim) for x in xs]
  perm = sort_permutation(ctx, op.regions[0], moved)
  return [np.ascontiguousarray(gs.move_from_end(
      np.take_along_axis(m, perm, axis=-1), dim)) for m in moved]


# --- chlo.top_k ---------------------------------------------------------------


@registry.interpreter_kernel("chlo.top_k")
def _top_k(ctx, op, args):
  """chlo.top_k: the k largest entries of the last dimension, in
  descending order, ties by lower index; floats compare by IEEE totalOrder
  (as the CHLO lowering's TOTALORDER sort does: +NaN first, -NaN last,
  +0 before -0)."""
  x = np.asarray(args[0])
  k = tu.int_value(op.attr("k"))
  if x.ndim == 0:
    raise support.InvalidArgumentError("top_k needs an operand of rank >= 1")
  if x.dtype.kind == "c":
    re = order_key(x.real.copy(), True)
    im = order_key(x.imag.copy(), True)
    idx = np.lexsort((_descending(im), _descending(re)), axis=-1)
  else:
    key = order_key(x, True)
    if key is None:
      raise support.UnimplementedError(
          f"chlo.top_k: element type {x.dtype} is not supported")
    idx = np.argsort(_descending(key), axis=-1, kind="stable")
  idx = idx[..., :k]
  values = np.take_along_axis(x, idx, axis=-1)
  idt = runtime.numpy_dtype(op.results[1].type)
  return [np.ascontiguousarray(values), idx.astype(idt)]
