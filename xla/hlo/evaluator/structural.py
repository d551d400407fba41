"""Non-elementwise HLO opcodes for the HLO evaluator: data movement,
reductions, sort, gather / scatter, dot / convolution, fft, linear algebra
and random bits.

Kernels are fn(evaluator, instruction, operand values), each registered
for its opcodes in `evaluator_registry` with `@evaluator_kernel(...)` where
it is defined. Where the StableHLO reference interpreter already has the
math as a helper over plain arrays (gather, scatter index computation,
convolution, dot contraction, padding, random bit generation, triangular
solve, cholesky) it is called directly; its op-reading entry points get a
small adapter (`_OpView`) that answers `attr()` with plain Python values.
"""

from __future__ import annotations

import math

import numpy as np

from stablehlo import types as t
from stablehlo.interpreter import kernels_elementwise as ke
from stablehlo.interpreter import kernels_gather_scatter as kgs
from stablehlo.interpreter import kernels_linalg as kl
from stablehlo.interpreter import kernels_shape as kshape
from stablehlo.interpreter import prng
import support
from xla import primitive_util
from xla.hlo.evaluator import elementwise as ew
from xla.hlo.evaluator import evaluator_registry
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.xla_data import FftType

O = HloOpcode


def _dt(shape) -> np.dtype:
  return primitive_util.numpy_dtype(shape.element_type)


class _OpView:
  """Answers the interpreter helpers' `op.attr(name)` / `op.results`."""

  def __init__(self, attrs: dict, result_et=None):
    self._attrs = attrs
    self.results = [_Result(result_et)]

  def attr(self, name, default=None):
    return self._attrs.get(name, default)


class _Result:

  def __init__(self, ty):
    self.type = ty


# --- shapes -------------------------------------------------------------------


@evaluator_registry.evaluator_kernel(O.kBroadcast)
def _broadcast(ev, instr, ops):
  x = ops[0]
  dims = instr.dimensions
  out = tuple(instr.shape.dimensions)
  shape = [1] * len(out)
  for i, d in enumerate(dims):
    shape[d] = x.shape[i]
  return np.broadcast_to(x.reshape(shape), out).copy()


@evaluator_registry.evaluator_kernel(O.kReshape)
def _reshape(ev, instr, ops):
  return ops[0].reshape(tuple(instr.shape.dimensions))


def _major_to_minor(shape):
  if shape.layout is not None and shape.layout.minor_to_major:
    return tuple(reversed(shape.layout.minor_to_major))
  return tuple(range(len(shape.dimensions)))


@evaluator_registry.evaluator_kernel(O.kBitcast)
def _bitcast(ev, instr, ops):
  """A bitcast reinterprets the physical (layout-ordered) buffer."""
  x = ops[0]
  src, dst = instr.operand(0).shape, instr.shape
  if _dt(src) != _dt(dst):
    if _dt(src).itemsize != _dt(dst).itemsize:
      raise support.UnimplementedError(
          f"bitcast changing the element width ({instr.name})")
    x = x.view(_dt(dst))
  phys = x.transpose(_major_to_minor(src))
  dorder = _major_to_minor(dst)
  pdims = tuple(dst.dimensions[d] for d in dorder)
  y = phys.reshape(pdims)
  return np.ascontiguousarray(y.transpose(np.argsort(dorder)))


@evaluator_registry.evaluator_kernel(O.kTranspose)
def _transpose(ev, instr, ops):
  return np.ascontiguousarray(ops[0].transpose(instr.dimensions))


@evaluator_registry.evaluator_kernel(O.kSlice)
def _slice(ev, instr, ops):
  return ops[0][tuple(slice(b, e, s) for b, e, s in zip(
      instr.slice_starts, instr.slice_limits, instr.slice_strides))].copy()


def _starts(shape, sizes, idx):
  return [min(max(int(i), 0), s - n) for s, n, i in zip(shape, sizes, idx)]


@evaluator_registry.evaluator_kernel(O.kDynamicSlice)
def _dynamic_slice(ev, instr, ops):
  x = ops[0]
  sizes = instr.dynamic_slice_sizes
  st = _starts(x.shape, sizes, ops[1:])
  return x[tuple(slice(b, b + n) for b, n in zip(st, sizes))].copy()


@evaluator_registry.evaluator_kernel(O.kDynamicUpdateSlice)
def _dynamic_update_slice(ev, instr, ops):
  x, upd = ops[0], ops[1]
  st = _starts(x.shape, upd.shape, ops[2:])
  out = x.copy()
  out[tuple(slice(b, b + n) for b, n in zip(st, upd.shape))] = upd
  return out


@evaluator_registry.evaluator_kernel(O.kConcatenate)
def _concatenate(ev, instr, ops):
  return np.concatenate(ops, axis=instr.dimensions[0])


@evaluator_registry.evaluator_kernel(O.kPad)
def _pad(ev, instr, ops):
  cfg = instr.padding_config.dimensions
  # The interpreter's pad (edge + interior padding).
  return kshape.pad_array(ops[0], ops[1],
                           [d.edge_padding_low for d in cfg],
                           [d.edge_padding_high for d in cfg],
                           [d.interior_padding for d in cfg])


@evaluator_registry.evaluator_kernel(O.kReverse)
def _reverse(ev, instr, ops):
  return np.flip(ops[0], axis=instr.dimensions).copy()


@evaluator_registry.evaluator_kernel(O.kIota)
def _iota(ev, instr, ops):
  dims = tuple(instr.shape.dimensions)
  d = instr.iota_dimension
  shape = [1] * len(dims)
  shape[d] = dims[d]
  v = np.arange(dims[d], dtype=np.int64).reshape(shape)
  et = ew.sh_type(instr.shape.element_type)
  v = ew.C.convert_array(v, t.i64, et)
  return np.broadcast_to(v, dims).copy()


@evaluator_registry.evaluator_kernel(
    O.kAddDependency, O.kDomain, O.kOptimizationBarrier)
def _passthrough(ev, instr, ops):
  return ops[0]


@evaluator_registry.evaluator_kernel(O.kAfterAll)
def _token(ev, instr, ops):
  return None


@evaluator_registry.evaluator_kernel(O.kPartitionId, O.kReplicaId)
def _zero_id(ev, instr, ops):
  return np.zeros((), _dt(instr.shape))


@evaluator_registry.evaluator_kernel(O.kGetDimensionSize)
def _get_dimension_size(ev, instr, ops):
  return np.asarray(ops[0].shape[instr.dimensions[0]], _dt(instr.shape))


# --- reductions ---------------------------------------------------------------

_UFUNCS = {
    O.kAdd: np.add, O.kMultiply: np.multiply, O.kMaximum: np.maximum,
    O.kMinimum: np.minimum, O.kAnd: np.bitwise_and, O.kOr: np.bitwise_or,
    O.kXor: np.bitwise_xor,
}


def simple_binop(comp):
  """The opcode if `comp` is `op(p0, p1)` on scalars, else None."""
  root = comp.root_instruction
  if (comp.instruction_count != 3 or root.opcode not in _UFUNCS or
      root.shape.dimensions):
    return None
  if {o.opcode for o in root.operands} != {O.kParameter} or len(
      {o.parameter_number for o in root.operands}) != 2:
    return None
  return root.opcode


_NARROW_INTS = {"int2": 2, "int4": 4, "uint2": 2, "uint4": 4}


def _ufunc_reduce(opc, x, axes, init):
  """op(init, fold of x over axes) with numpy's ufunc reduce.

  Float / complex add and multiply round at every step, so their order is
  kept: a left fold from init over the reduced elements in row-major order,
  in the element type (as XLA's evaluator and the StableHLO interpreter
  do)."""
  dt = x.dtype
  if (opc in (O.kAdd, O.kMultiply) and dt.kind in "fcV" and
      str(dt) not in _NARROW_INTS):
    axes = tuple(axes)
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(x.shape[d] for d in kept)
    k = math.prod(x.shape[d] for d in axes)
    moved = np.transpose(x, kept + list(axes)).reshape(out_shape + (k,))
    seq = np.concatenate([np.broadcast_to(np.asarray(init, dt),
                                          out_shape + (1,)), moved], axis=-1)
    return np.asarray(_UFUNCS[opc].accumulate(seq, axis=-1)[..., -1],
                      dtype=dt)
  narrow = _NARROW_INTS.get(str(dt))
  acc = x
  if narrow:
    acc = x.astype(np.int64)
  elif dt.kind == "b":
    opc = {O.kAdd: O.kOr, O.kMultiply: O.kAnd, O.kMaximum: O.kOr,
           O.kMinimum: O.kAnd}.get(opc, opc)
  elif dt.kind == "V" or dt.kind == "f" and dt.itemsize < 4:
    acc = x.astype(np.float32)  # bf16 / f16 / f8 accumulate in f32
  uf = _UFUNCS[opc]
  r = uf.reduce(acc, axis=tuple(axes))
  r = uf(np.asarray(init).astype(r.dtype), r)
  if narrow:
    r = r & ((1 << narrow) - 1)
    if not str(dt).startswith("u"):
      r = np.where(r >= (1 << (narrow - 1)), r - (1 << narrow), r)
  return np.asarray(r).astype(dt)


def _fold(ev, comp, xs, inits):
  """Folds the last axis of each array in `xs` with `comp`, vectorized
  over the leading axes; returns the accumulators."""
  lead = xs[0].shape[:-1]
  accs = [np.broadcast_to(i, lead).copy() for i in inits]
  for k in range(xs[0].shape[-1]):
    accs = ev.apply(comp, accs + [x[..., k] for x in xs])
  return accs


@evaluator_registry.evaluator_kernel(O.kReduce)
def _reduce(ev, instr, ops):
  n = len(ops) // 2
  xs, inits = ops[:n], ops[n:]
  axes = instr.dimensions
  comp = instr.to_apply
  opc = simple_binop(comp)
  if n == 1 and opc is not None:
    return _ufunc_reduce(opc, xs[0], axes, inits[0])
  kept = [d for d in range(xs[0].ndim) if d not in axes]
  k = math.prod(xs[0].shape[d] for d in axes)
  moved = [x.transpose(kept + list(axes)).reshape(
      tuple(x.shape[d] for d in kept) + (k,)) for x in xs]
  outs = _fold(ev, comp, moved, inits)
  outs = [o.astype(i.dtype, copy=False) for o, i in zip(outs, inits)]
  return outs[0] if n == 1 else tuple(outs)


def _window_params(instr, rank):
  dims = instr.window.dimensions
  if not dims:
    dims = None
  get = lambda f, dflt: [getattr(d, f) for d in dims] if dims else [dflt] * rank
  return (get("size", 1), get("stride", 1), get("padding_low", 0),
          get("padding_high", 0), get("base_dilation", 1),
          get("window_dilation", 1))


def _windows(x, fill, size, stride, lo, hi, bdil, wdil):
  """A view (out..., win...) of the windows of x after dilation + padding
  with `fill`."""
  padded = kshape.pad_array(
      x, np.asarray(fill, x.dtype), lo, hi, [b - 1 for b in bdil])
  padded = np.ascontiguousarray(padded)
  out = [max(0, (p - ((s - 1) * wd + 1)) // st + 1) if p >= (
      (s - 1) * wd + 1) else 0
         for p, s, st, wd in zip(padded.shape, size, stride, wdil)]
  strides = padded.strides
  view = np.lib.stride_tricks.as_strided(
      padded, tuple(out) + tuple(size),
      tuple(s * st for s, st in zip(strides, stride)) + tuple(
          s * wd for s, wd in zip(strides, wdil)), writeable=False)
  return view, out


@evaluator_registry.evaluator_kernel(O.kReduceWindow)
def _reduce_window(ev, instr, ops):
  n = len(ops) // 2
  xs, inits = ops[:n], ops[n:]
  rank = xs[0].ndim
  size, stride, lo, hi, bdil, wdil = _window_params(instr, rank)
  views = []
  for x, i in zip(xs, inits):
    v, out = _windows(x, i, size, stride, lo, hi, bdil, wdil)
    views.append(v)
  win_axes = tuple(range(rank, 2 * rank))
  opc = simple_binop(instr.to_apply)
  if n == 1 and opc is not None:
    return _ufunc_reduce(opc, views[0], win_axes, inits[0])
  k = math.prod(size)
  flat = [v.reshape(tuple(out) + (k,)) for v in views]
  outs = _fold(ev, instr.to_apply, flat, inits)
  outs = [o.astype(i.dtype, copy=False) for o, i in zip(outs, inits)]
  return outs[0] if n == 1 else tuple(outs)


def combine_at(ev, comp, results, lin, updates):
  """results[k].flat[lin] = comp(results[k].flat[lin], updates[k]) applied
  in order, duplicates one after another (in rounds)."""
  opc = simple_binop(comp)
  if len(results) == 1 and opc is not None and results[0].dtype.kind in "iuf":
    r = results[0]
    if r.dtype.itemsize >= 4 and r.dtype.kind == "f" or r.dtype.kind in "iu":
      flat = r.reshape(-1)
      _UFUNCS[opc].at(flat, lin, updates[0].astype(r.dtype))
      return
  root = comp.root_instruction
  n = len(results)
  order = np.arange(lin.size)
  while order.size:
    uniq, first = np.unique(lin[order], return_index=True)
    pick = order[first]
    cur = [r.reshape(-1)[uniq] for r in results]
    new = ev.apply(comp, cur + [u[pick] for u in updates])
    for r, v in zip(results, new):
      r.reshape(-1)[uniq] = v
    keep = np.ones(order.size, bool)
    keep[first] = False
    order = order[keep]
  del root, n


@evaluator_registry.evaluator_kernel(O.kSelectAndScatter)
def _select_and_scatter(ev, instr, ops):
  operand, source, init = ops
  rank = operand.ndim
  size, stride, lo, hi, bdil, wdil = _window_params(instr, rank)
  pos = np.arange(operand.size, dtype=np.int64).reshape(operand.shape)
  vals, out = _windows(operand, 0, size, stride, lo, hi, bdil, wdil)
  idx, _ = _windows(pos, -1, size, stride, lo, hi, bdil, wdil)
  k = math.prod(size)
  vals = vals.reshape(tuple(out) + (k,))
  idx = idx.reshape(tuple(out) + (k,))
  cur_v = vals[..., 0].copy()
  cur_i = idx[..., 0].copy()
  for j in range(1, k):
    v, i = vals[..., j], idx[..., j]
    valid = i >= 0
    has = cur_i >= 0
    keep = ev.apply(instr.attr("select"), [cur_v, v])[0].astype(bool)
    take = valid & (~has | ~keep)
    cur_v = np.where(take, v, cur_v)
    cur_i = np.where(take, i, cur_i)
  result = np.broadcast_to(init, operand.shape).copy()
  ok = cur_i >= 0
  combine_at(ev, instr.attr("scatter"), [result], cur_i[ok],
             [source.reshape(cur_i.shape)[ok]])
  return result


# --- sort ---------------------------------------------------------------------


def _sort_keys_fast(comp, x):
  """Stable sort keys when the comparator is `compare(p0, p1)`; else None."""
  root = comp.root_instruction
  if root.opcode != O.kCompare:
    return None
  a, b = root.operands
  if a.opcode != O.kParameter or b.opcode != O.kParameter:
    return None
  pa, pb = a.parameter_number, b.parameter_number
  if {pa, pb} != {0, 1}:
    return None
  direction = root.comparison_direction.name
  if direction not in ("LT", "GT"):
    return None
  descending = (direction == "GT") == (pa == 0)
  et = ew.sh_type(a.shape.element_type)
  k = ew.C.kind(et)
  ctype = getattr(root.comparison_type, "value", root.comparison_type)
  if k == ew.C.FLOAT:
    if ctype == "TOTALORDER":
      key = ke.total_order_key(x, et)
    else:
      return None
  elif k in (ew.C.SINT, ew.C.UINT, ew.C.BOOL):
    key = x
  else:
    return None
  if descending:
    _, inv = np.unique(key, return_inverse=True)
    key = -inv.reshape(key.shape).astype(np.int64)
  return key


@evaluator_registry.evaluator_kernel(O.kSort)
def _sort(ev, instr, ops):
  dim = instr.dimensions[0]
  comp = instr.to_apply
  moved = [np.moveaxis(x, dim, -1) for x in ops]
  shape = moved[0].shape
  n = shape[-1] if shape else 1
  rows = [m.reshape(-1, n) for m in moved]
  nrows = rows[0].shape[0]
  key = _sort_keys_fast(comp, rows[0]) if len(ops) == 1 else None
  if key is None and len(ops) > 1:
    key = _sort_keys_fast(comp, rows[0]) if _only_uses_first(comp) else None
  if key is not None:
    perm = np.argsort(key, axis=-1, kind="stable")
  else:
    perm = np.empty((nrows, n), np.int64)
    chunk = max(1, 4_000_000 // max(1, n * n))
    ii = np.arange(n)
    for s in range(0, nrows, chunk):
      args = []
      for r in rows:
        blk = r[s:s + chunk]
        args += [blk[:, :, None], blk[:, None, :]]
      less = ev.apply(comp, args)[0].astype(bool)  # less[r, i, j]: i < j
      lt = less.transpose(0, 2, 1)  # lt[r, i, j] = less(j, i)
      equiv = ~less & ~lt
      rank = lt.sum(axis=2) + (equiv & (ii[None, :] < ii[:, None])[None]
                               ).sum(axis=2)
      blk_perm = np.empty_like(rank)
      np.put_along_axis(blk_perm, rank, np.broadcast_to(ii, rank.shape),
                        axis=1)
      perm[s:s + chunk] = blk_perm
  outs = []
  for r in rows:
    o = np.take_along_axis(r, perm, axis=1).reshape(shape)
    outs.append(np.ascontiguousarray(np.moveaxis(o, -1, dim)))
  return outs[0] if len(outs) == 1 else tuple(outs)


def _only_uses_first(comp) -> bool:
  root = comp.root_instruction
  return root.opcode == O.kCompare and all(
      o.opcode == O.kParameter and o.parameter_number in (0, 1)
      for o in root.operands)


@evaluator_registry.evaluator_kernel(O.kTopK)
def _topk(ev, instr, ops):
  return top_k(instr, ops[0], instr.k, instr.largest)


def top_k_custom_call(instr, ops):
  """XLA CPU's "TopK" custom call: the largest k along the last axis."""
  k = instr.shape.tuple_shapes[0].dimensions[-1]
  return top_k(instr, ops[0], k, True)


def top_k(instr, x, k, largest):
  """(values, indices) of the k largest (or smallest) along the last axis,
  ties by lower index; floats in total order."""
  et = ew.sh_type(instr.operand(0).shape.element_type)
  key = ke.total_order_key(x, et) if ew.C.kind(et) == ew.C.FLOAT else x
  if largest:
    _, inv = np.unique(key, return_inverse=True)
    key = -inv.reshape(key.shape).astype(np.int64)
  perm = np.argsort(key, axis=-1, kind="stable")[..., :k]
  return (np.take_along_axis(x, perm, axis=-1),
          perm.astype(_dt(instr.shape.tuple_shapes[1])))


# --- gather / scatter ---------------------------------------------------------


@evaluator_registry.evaluator_kernel(O.kGather)
def _gather(ev, instr, ops):
  dn = instr.gather_dimension_numbers
  attr = {f: getattr(dn, f) for f in kgs.GATHER_KEYS}
  return kgs.gather(ops[0], ops[1].astype(np.int64), attr,
                    instr.gather_slice_sizes)


@evaluator_registry.evaluator_kernel(O.kScatter)
def _scatter(ev, instr, ops):
  n = (len(ops) - 1) // 2
  inputs, indices, updates = ops[:n], ops[n], ops[n + 1:]
  dn = instr.scatter_dimension_numbers
  attr = {f: getattr(dn, f) for f in kgs.SCATTER_KEYS}
  lin, valid = kgs.scatter_targets(inputs[0].shape, indices.astype(np.int64),
                                   updates[0].shape, attr)
  ups = [u.reshape(-1) if valid is None else u[valid] for u in updates]
  results = [x.copy() for x in inputs]
  combine_at(ev, instr.to_apply, results, lin, ups)
  return results[0] if n == 1 else tuple(results)


# --- dot / convolution --------------------------------------------------------


def _compute_dtype(res_dt: np.dtype, *xs):
  if res_dt.kind == "c":
    return np.dtype(np.complex128) if res_dt.itemsize > 8 else np.dtype(
        np.complex64)
  if res_dt.kind in "iub" or str(res_dt) in ("int4", "int2", "uint4",
                                              "uint2"):
    return np.dtype(np.int64)
  return np.dtype(np.float64) if res_dt == np.float64 else np.dtype(
      np.float32)


def _finish(acc, instr):
  et = ew.sh_type(instr.shape.element_type)
  if ew.C.kind(et) in (ew.C.SINT, ew.C.UINT):
    return ew.C.finish_int(acc.astype(np.int64), et)
  if ew.C.kind(et) == ew.C.BOOL:
    return acc != 0
  return acc.astype(_dt(instr.shape))


@evaluator_registry.evaluator_kernel(O.kDot)
def _dot(ev, instr, ops):
  lhs, rhs = ops
  cdt = _compute_dtype(_dt(instr.shape))
  dn = instr.dot_dimension_numbers
  out = kl.contract(lhs.astype(cdt), rhs.astype(cdt), dn.lhs_batch_dimensions,
                    dn.rhs_batch_dimensions, dn.lhs_contracting_dimensions,
                    dn.rhs_contracting_dimensions)
  return _finish(out, instr)


@evaluator_registry.evaluator_kernel(O.kConvolution)
def _convolution(ev, instr, ops):
  lhs, rhs = ops
  cdt = _compute_dtype(_dt(instr.shape))
  dn = instr.convolution_dimension_numbers
  ns = len(dn.input_spatial_dimensions)
  wd = instr.window.dimensions or ()
  get = lambda f, dflt: tuple(getattr(d, f) for d in wd) if wd else (
      dflt,) * ns
  attrs = {
      "window_strides": get("stride", 1),
      "lhs_dilation": get("base_dilation", 1),
      "rhs_dilation": get("window_dilation", 1),
      "window_reversal": tuple(int(b) for b in get("window_reversal", 0)),
      "dimension_numbers": {
          "input_batch_dimension": dn.input_batch_dimension,
          "input_feature_dimension": dn.input_feature_dimension,
          "input_spatial_dimensions": dn.input_spatial_dimensions,
          "kernel_input_feature_dimension": dn.kernel_input_feature_dimension,
          "kernel_output_feature_dimension":
              dn.kernel_output_feature_dimension,
          "kernel_spatial_dimensions": dn.kernel_spatial_dimensions,
          "output_batch_dimension": dn.output_batch_dimension,
          "output_feature_dimension": dn.output_feature_dimension,
          "output_spatial_dimensions": dn.output_spatial_dimensions,
      },
      "feature_group_count": instr.feature_group_count,
      "batch_group_count": instr.batch_group_count,
  }
  padding = np.array([[d.padding_low, d.padding_high] for d in wd],
                     np.int64).reshape(-1, 2) if wd else None
  cfg = kl.ConvConfig(_OpView(attrs), padding, lhs.ndim)
  out = kl.conv_acc(lhs.astype(cdt), rhs.astype(cdt), cfg)
  return _finish(out, instr)


@evaluator_registry.evaluator_kernel(O.kFft)
def _fft(ev, instr, ops):
  x = ops[0]
  kind = instr.attr("fft_type")
  length = tuple(instr.attr("fft_length"))
  axes = tuple(range(x.ndim - len(length), x.ndim))
  res_dt = _dt(instr.shape)
  if x.size == 0 or math.prod(length) == 0:
    return np.zeros(tuple(instr.shape.dimensions), res_dt)
  x = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
  if kind == FftType.FFT:
    y = np.fft.fftn(x, axes=axes)
  elif kind == FftType.IFFT:
    y = np.fft.ifftn(x, axes=axes)
  elif kind == FftType.RFFT:
    y = np.fft.rfftn(x, s=length, axes=axes)
  else:
    y = np.fft.irfftn(x, s=length, axes=axes)
  return np.asarray(y).astype(res_dt)


def _linalg_view(instr, attrs):
  return _OpView(attrs, ew.sh_type(instr.shape.element_type))


@evaluator_registry.evaluator_kernel(O.kTriangularSolve)
def _triangular_solve(ev, instr, ops):
  trans = instr.attr("transpose_a")
  attrs = {"left_side": instr.attr("left_side"), "lower": instr.attr("lower"),
           "unit_diagonal": instr.attr("unit_diagonal"),
           "transpose_a": ("NO_TRANSPOSE" if trans.name == "TRANSPOSE_INVALID"
                           else trans.name)}
  return kl.triangular_solve(None, _linalg_view(instr, attrs), ops)


@evaluator_registry.evaluator_kernel(O.kCholesky)
def _cholesky(ev, instr, ops):
  return kl.cholesky(None, _linalg_view(
      instr, {"lower": instr.attr("lower")}), ops)


@evaluator_registry.evaluator_kernel(O.kRngBitGenerator)
def _rng_bit_generator(ev, instr, ops):
  alg = instr.attr("algorithm").name[len("RNG_"):]
  out_shape = instr.shape.tuple_shapes[1]
  bits = primitive_util.bit_width(out_shape.element_type)
  state, raw = prng.generate(alg, ops[0], tuple(out_shape.dimensions), bits)
  return (state.astype(_dt(instr.shape.tuple_shapes[0])),
          raw.view(_dt(out_shape)) if raw.dtype.itemsize == _dt(
              out_shape).itemsize else raw.astype(_dt(out_shape)))
