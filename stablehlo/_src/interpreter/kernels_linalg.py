"""Interpreter kernels for contractions and numerics: dot_general (and the
deprecated dot / einsum / unary_einsum), convolution, dynamic_conv,
chlo.ragged_dot, fft, triangular_solve, cholesky and the batch_norm ops.

Contractions follow the spec's formulas ("dot_general", "convolution"):
each operand element is converted to the result element type, then products
are summed in that type. Both become one batched matrix product after
transposes (convolution gathers its windows with a strided view first).
Integer sums are taken in 64 bits and wrapped to the result width (two's
complement arithmetic makes that equal to wrapping after every step). Float
sums are accumulated one product at a time in contraction order, as the
formula reads, vectorized over the output (BLAS only for very large
contractions); narrow floats (f16, bf16, f8, ...) accumulate in f32 and are
rounded once at the end, as XLA does.

Quantized operands are handled by `kernels_quantization` (it wraps these
kernels); the functions `dot_general_array` and `convolution_array` are
shared with it.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import types as t
from stablehlo._src.ops import common
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support

# --- element conversions ------------------------------------------------------


def acc_dtype(et: t.Type) -> np.dtype:
  """The dtype in which a contraction with result element type `et` sums."""
  if isinstance(et, t.IntegerType):
    return np.dtype(np.uint64 if et.unsigned and et.width > 1 else np.int64)
  if isinstance(et, t.FloatType):
    return np.dtype(np.float64 if et.name == "f64" else np.float32)
  if isinstance(et, t.ComplexType):
    inner = et.element_type
    return np.dtype(np.complex128 if isinstance(inner, t.FloatType) and
                    inner.name == "f64" else np.complex64)
  raise support.UnimplementedError(
      f"no arithmetic for element type {tu.fmt_elem(et)}")


def convert(x: np.ndarray, et: t.Type) -> np.ndarray:
  """Converts values to element type `et` (spec "convert"): integers wrap,
  floats round to nearest even, float -> integer truncates toward zero and
  saturates (NaN -> 0), anything -> i1 is `!= 0`, complex -> real drops the
  imaginary part."""
  dt = runtime.numpy_dtype(et)
  x = np.asarray(x)
  if x.dtype == dt:
    return x
  src_int = is_int_like(x)
  if src_int and x.dtype.kind not in "iub":
    x = x.astype(np.int64)  # ml_dtypes int2 / int4 / uint2 / uint4
  if isinstance(et, t.IntegerType):
    if et.width == 1:
      return x != 0
    if src_int:
      return runtime.wrap_to(x, et)
    lo, hi = int_range(et)
    xf = np.trunc(np.real(x).astype(np.float64))
    xf = np.clip(np.nan_to_num(xf, nan=0.0, posinf=hi, neginf=lo), lo, hi)
    return runtime.wrap_to(xf.astype(np.uint64 if et.unsigned else np.int64),
                           et)
  if x.dtype.kind == "c" and dt.kind != "c":
    x = x.real
  return x.astype(dt)


def int_range(et: t.IntegerType) -> tuple[int, int]:
  """The (min, max) values of integer type `et`."""
  if et.unsigned:
    return 0, 2**et.width - 1
  return -(2**(et.width - 1)), 2**(et.width - 1) - 1


_NARROW_INT_NAMES = frozenset(("int2", "int4", "uint2", "uint4"))


def is_int_like(x: np.ndarray) -> bool:
  """Integer or boolean storage (ml_dtypes narrow ints included)."""
  return x.dtype.kind in "iub" or x.dtype.name in _NARROW_INT_NAMES


def to_acc(x: np.ndarray, src_ty: t.Type, res_et: t.Type) -> np.ndarray:
  """An operand converted to the result element type (per element, as the
  spec's contractions do) and then to the accumulation dtype."""
  src_et = runtime.storage_element_type(src_ty)
  if src_et != res_et:
    x = convert(x, res_et)
  if x.dtype.name in _NARROW_INT_NAMES:
    x = x.astype(np.int64)
  return x.astype(acc_dtype(res_et))


def finish(acc: np.ndarray, res_et: t.Type) -> np.ndarray:
  """Rounds / wraps an accumulated result to the result element type."""
  if isinstance(res_et, t.IntegerType):
    if res_et.width == 1:
      return np.asarray(acc != 0)
    return runtime.wrap_to(acc, res_et)
  return np.asarray(acc).astype(runtime.numpy_dtype(res_et))


# --- dot_general --------------------------------------------------------------


# Float products are summed one at a time in contraction order, exactly as
# the spec's formula (and the reference interpreter) reads, while the work
# stays under this many multiply-adds; bigger contractions use BLAS, which
# may differ in the last bits.
_SEQUENTIAL_WORK = 1 << 25
_CHUNK_ELEMENTS = 1 << 22


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Batched (B, M, K) @ (B, K, N) -> (B, M, N)."""
  bsz, m, k = a.shape
  n = b.shape[2]
  dtype = np.result_type(a, b)
  if k == 0 or bsz * m * n == 0:
    return np.zeros((bsz, m, n), dtype=dtype)
  if dtype.kind not in "fc" or bsz * m * n * k > _SEQUENTIAL_WORK:
    return np.matmul(a, b)
  at = a.transpose(2, 0, 1)[:, :, :, None]  # (K, B, M, 1)
  bt = b.transpose(1, 0, 2)[:, :, None, :]  # (K, B, 1, N)
  out = np.zeros((bsz, m, n), dtype=dtype)
  step = max(1, _CHUNK_ELEMENTS // (bsz * m * n))
  for s in range(0, k, step):
    e = min(k, s + step)
    buf = np.empty((e - s + 1, bsz, m, n), dtype=dtype)
    buf[0] = out
    np.multiply(at[s:e], bt[s:e], out=buf[1:])
    # add.accumulate is a left fold: ((out + p0) + p1) + ...
    out = np.add.accumulate(buf, axis=0, out=buf)[-1].copy()
  return out


def contract(lhs: np.ndarray, rhs: np.ndarray, lb: Sequence[int],
             rb: Sequence[int], lc: Sequence[int],
             rc: Sequence[int]) -> np.ndarray:
  """dot_general on two arrays of the same dtype: result dims are batch,
  lhs free, rhs free (spec "dot_general")."""
  lb, rb, lc, rc = list(lb), list(rb), list(lc), list(rc)
  lfree = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
  rfree = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
  bshape = [lhs.shape[d] for d in lb]
  mshape = [lhs.shape[d] for d in lfree]
  kshape = [lhs.shape[d] for d in lc]
  nshape = [rhs.shape[d] for d in rfree]
  b, m, k, n = (math.prod(s) for s in (bshape, mshape, kshape, nshape))
  l2 = lhs.transpose(lb + lfree + lc).reshape(b, m, k)
  r2 = rhs.transpose(rb + rc + rfree).reshape(b, k, n)
  out = matmul(l2, r2)
  return out.reshape(bshape + mshape + nshape)


def dot_dims(op) -> tuple:
  dn = tu.Params(op.attr("dot_dimension_numbers"))
  return (dn.ints("lhs_batching_dimensions"),
          dn.ints("rhs_batching_dimensions"),
          dn.ints("lhs_contracting_dimensions"),
          dn.ints("rhs_contracting_dimensions"))


def dot_general_array(lhs, rhs, lhs_ty, rhs_ty, res_et, dims) -> np.ndarray:
  """Spec "dot_general" on runtime arrays; `res_et` is the result element
  type. Precision config and the algorithm attribute do not change the
  reference result."""
  lb, rb, lc, rc = dims
  out = contract(to_acc(lhs, lhs_ty, res_et), to_acc(rhs, rhs_ty, res_et),
                 lb, rb, lc, rc)
  return finish(out, res_et)


@registry.interpreter_kernel("stablehlo.dot_general")
def _dot_general(ctx, op, args):
  lhs, rhs = args
  res_et = runtime.element_type(op.results[0].type)
  return dot_general_array(lhs, rhs, op.operands[0].type, op.operands[1].type,
                           res_et, dot_dims(op))


@registry.interpreter_kernel("stablehlo.dot")
def _dot(ctx, op, args):
  """The deprecated `stablehlo.dot`: contracts the last lhs dim with the
  first rhs dim (rank 1 or 2 operands)."""
  lhs, rhs = args
  res_et = runtime.element_type(op.results[0].type)
  dims = ((), (), (lhs.ndim - 1,), (0,))
  return dot_general_array(lhs, rhs, op.operands[0].type, op.operands[1].type,
                           res_et, dims)


def _einsum_config(op) -> str:
  cfg = op.attr("einsum_config")
  return cfg.value if hasattr(cfg, "value") else str(cfg)


@registry.interpreter_kernel("stablehlo.einsum", "stablehlo.unary_einsum")
def _einsum(ctx, op, args):
  """The deprecated `stablehlo.einsum` / `unary_einsum`: numpy's einsum on
  the operands converted to the result element type."""
  res_et = runtime.element_type(op.results[0].type)
  ops = [to_acc(x, v.type, res_et) for x, v in zip(args, op.operands)]
  cfg = _einsum_config(op).replace(" ", "")
  if "->" not in cfg:
    raise support.InvalidArgumentError(
        f"einsum_config '{cfg}' has no '->'")
  return finish(np.einsum(cfg, *ops), res_et)


# --- convolution --------------------------------------------------------------


class ConvDims:
  """A convolution's dimension numbers, read once from the op."""

  __slots__ = ("ib", "if_", "isp", "kif", "kof", "ksp", "ob", "of_", "osp")

  def __init__(self, attr):
    p = tu.Params(attr)
    self.ib = p.int("input_batch_dimension")
    self.if_ = p.int("input_feature_dimension")
    self.isp = p.ints("input_spatial_dimensions")
    self.kif = p.int("kernel_input_feature_dimension")
    self.kof = p.int("kernel_output_feature_dimension")
    self.ksp = p.ints("kernel_spatial_dimensions")
    self.ob = p.int("output_batch_dimension")
    self.of_ = p.int("output_feature_dimension")
    self.osp = p.ints("output_spatial_dimensions")


class ConvConfig:
  """The window attributes of convolution / dynamic_conv."""

  __slots__ = ("strides", "padding", "lhs_dil", "rhs_dil", "reversal",
               "dims", "fgc", "bgc")

  def __init__(self, op, padding: Optional[np.ndarray], rank: int):
    ns = rank - 2

    def ints(name, default):
      v = op.attr(name)
      vals = default if v is None else tu.ints(v)
      return tuple(int(x) for x in vals)[:ns]

    self.strides = ints("window_strides", (1,) * ns)
    if padding is None:
      padding = np.zeros((ns, 2), dtype=np.int64)
    self.padding = [tuple(int(v) for v in row)
                    for row in np.asarray(padding).reshape(-1, 2)][:ns]
    self.lhs_dil = ints("lhs_dilation", (1,) * ns)
    self.rhs_dil = ints("rhs_dilation", (1,) * ns)
    self.reversal = ints("window_reversal", (0,) * ns)
    self.dims = ConvDims(op.attr("dimension_numbers"))
    self.fgc = tu.int_value(op.attr("feature_group_count", 1))
    self.bgc = tu.int_value(op.attr("batch_group_count", 1))


def _dilate_and_pad(x: np.ndarray, lhs_dil, padding) -> np.ndarray:
  """x: (N, S..., C). Interior padding (lhs dilation) then edge padding,
  negative edge padding crops (spec "pad")."""
  if any(d > 1 for d in lhs_dil):
    shape = [x.shape[0]] + [
        0 if s == 0 else (s - 1) * d + 1
        for s, d in zip(x.shape[1:-1], lhs_dil)] + [x.shape[-1]]
    y = np.zeros(shape, dtype=x.dtype)
    y[(slice(None),) + tuple(slice(None, None, d) for d in lhs_dil)] = x
    x = y
  crops = []
  pads = [(0, 0)]
  for i, (lo, hi) in enumerate(padding):
    size = x.shape[1 + i]
    start = -lo if lo < 0 else 0
    stop = size + hi if hi < 0 else size
    crops.append(slice(start, max(start, stop)))
    pads.append((max(lo, 0), max(hi, 0)))
  pads.append((0, 0))
  if any(c.start or c.stop != x.shape[1 + i] for i, c in enumerate(crops)):
    x = x[(slice(None),) + tuple(crops) + (slice(None),)]
  if any(p != (0, 0) for p in pads):
    x = np.pad(x, pads)
  return x


def _windows(x: np.ndarray, kshape, strides, rhs_dil, out_sizes):
  """A read-only strided view (N, O..., K..., C) of the windows of x (N,
  P..., C)."""
  st = x.strides
  ns = len(kshape)
  shape = (x.shape[0],) + tuple(out_sizes) + tuple(kshape) + (x.shape[-1],)
  strides_ = ((st[0],) + tuple(st[1 + i] * strides[i] for i in range(ns)) +
              tuple(st[1 + i] * rhs_dil[i] for i in range(ns)) + (st[-1],))
  return np.lib.stride_tricks.as_strided(x, shape, strides_, writeable=False)


def conv_acc(lhs: np.ndarray, rhs: np.ndarray, cfg: ConvConfig) -> np.ndarray:
  """Spec "convolution" on operands already in the accumulation dtype;
  returns the result in the output layout (dimension numbers)."""
  d = cfg.dims
  ns = len(d.isp)
  x = lhs.transpose((d.ib,) + tuple(d.isp) + (d.if_,))
  k = rhs.transpose(tuple(d.ksp) + (d.kif, d.kof))
  if any(cfg.reversal):
    k = np.flip(k, axis=tuple(i for i in range(ns) if cfg.reversal[i]))
  kshape = k.shape[:ns]
  out_sizes = [common.num_windows(x.shape[1 + i], kshape[i], cfg.strides[i],
                                  cfg.padding[i][0], cfg.padding[i][1],
                                  cfg.lhs_dil[i], cfg.rhs_dil[i])
               for i in range(ns)]
  n, c = x.shape[0], x.shape[-1]
  co = k.shape[-1]
  fgc, bgc = cfg.fgc, cfg.bgc
  nb = n // bgc
  osz = math.prod(out_sizes)
  ksz = math.prod(kshape)
  cg = c // fgc
  dtype = np.result_type(x, k)
  if osz == 0 or nb == 0 or co == 0 or ksz == 0 or cg == 0:
    out = np.zeros((nb,) + tuple(out_sizes) + (co,), dtype=dtype)
  else:
    xp = np.ascontiguousarray(_dilate_and_pad(x, cfg.lhs_dil, cfg.padding))
    w = _windows(xp, kshape, cfg.strides, cfg.rhs_dil, out_sizes)
    if bgc > 1:
      # Batch group g pairs lhs batch slice g with output features of g.
      w2 = w.reshape(bgc, nb * osz, ksz * c)
      k2 = k.reshape(ksz * c, bgc, co // bgc).transpose(1, 0, 2)
      r = matmul(w2, k2)  # (bgc, nb*osz, co/bgc)
      out = r.transpose(1, 0, 2).reshape((nb,) + tuple(out_sizes) + (co,))
    else:
      w2 = w.reshape(n * osz, ksz, fgc, cg).transpose(2, 0, 1, 3).reshape(
          fgc, n * osz, ksz * cg)
      k2 = k.reshape(ksz, cg, fgc, co // fgc).transpose(2, 0, 1, 3).reshape(
          fgc, ksz * cg, co // fgc)
      r = matmul(w2, k2)  # (fgc, n*osz, co/fgc)
      out = r.transpose(1, 0, 2).reshape((n,) + tuple(out_sizes) + (co,))
  order = (d.ob,) + tuple(d.osp) + (d.of_,)
  return out.transpose(np.argsort(order))


def convolution_array(lhs, rhs, lhs_ty, rhs_ty, res_et,
                      cfg: ConvConfig) -> np.ndarray:
  return finish(conv_acc(to_acc(lhs, lhs_ty, res_et),
                         to_acc(rhs, rhs_ty, res_et), cfg), res_et)


@registry.interpreter_kernel("stablehlo.convolution")
def _convolution(ctx, op, args):
  lhs, rhs = args
  pad = op.attr("padding")
  cfg = ConvConfig(op, None if pad is None else tu.int_matrix(pad), lhs.ndim)
  return convolution_array(lhs, rhs, op.operands[0].type, op.operands[1].type,
                           runtime.element_type(op.results[0].type), cfg)


@registry.interpreter_kernel("stablehlo.dynamic_conv")
def _dynamic_conv(ctx, op, args):
  lhs, rhs, padding = args
  cfg = ConvConfig(op, np.asarray(padding).astype(np.int64), lhs.ndim)
  return convolution_array(lhs, rhs, op.operands[0].type, op.operands[1].type,
                           runtime.element_type(op.results[0].type), cfg)


# --- chlo.ragged_dot ----------------------------------------------------------


@registry.interpreter_kernel("chlo.ragged_dot")
def _ragged_dot(ctx, op, args):
  """`chlo.ragged_dot` (ChloOps.td): a dot_general whose lhs ragged
  dimension is split into groups of `group_sizes` rows.

  Mode 1 (ragged dim is lhs non-contracting): rows of group g use rhs group
  g. Mode 2 (ragged dim is contracting): one result per group, each
  contracting only over its rows, stacked in a new leading dim. Mode 3
  (ragged dim is a batch dim): a plain dot_general. `group_sizes` may carry
  leading batch dims ([b..., g]); positions past the last group are 0.
  """
  lhs, rhs, gs = args
  dn = tu.Params(op.attr("ragged_dot_dimension_numbers"))
  lb = dn.ints("lhs_batching_dimensions")
  rb = dn.ints("rhs_batching_dimensions")
  lc, rc = (dn.ints("lhs_contracting_dimensions"),
            dn.ints("rhs_contracting_dimensions"))
  ragged = dn.ints("lhs_ragged_dimensions")[0]
  res_et = runtime.element_type(op.results[0].type)
  l = to_acc(lhs, op.operands[0].type, res_et)
  r = to_acc(rhs, op.operands[1].type, res_et)
  if ragged in lb:
    return finish(contract(l, r, lb, rb, lc, rc), res_et)
  gs = np.asarray(gs).astype(np.int64)
  limits = np.cumsum(gs, axis=-1)
  starts = limits - gs
  g = gs.shape[-1]
  pos_shape = [1] * l.ndim
  pos_shape[ragged] = l.shape[ragged]
  pos = np.arange(l.shape[ragged]).reshape(pos_shape)

  def mask(i):
    # group_sizes batch dims map to the leading lhs dims.
    s = starts[..., i].reshape(starts.shape[:-1] +
                               (1,) * (l.ndim - gs.ndim + 1))
    e = limits[..., i].reshape(s.shape)
    return (pos >= s) & (pos < e)

  zero = np.zeros((), dtype=l.dtype)
  if ragged in lc:  # mode 2
    outs = [contract(np.where(mask(i), l, zero), r, lb, rb, lc, rc)
            for i in range(g)]
    out = np.stack(outs) if outs else np.zeros(
        (0,) + contract(l, r, lb, rb, lc, rc).shape, dtype=l.dtype)
    return finish(out, res_et)
  rg = dn.ints("rhs_group_dimensions")[0]
  adj = lambda ds: [x - 1 if x > rg else x for x in ds]
  out = None
  for i in range(g):
    part = contract(np.where(mask(i), l, zero), np.take(r, i, axis=rg),
                    lb, adj(rb), lc, adj(rc))
    out = part if out is None else out + part
  if out is None:
    shape = runtime.static_shape(op.results[0].type)
    out = np.zeros(shape, dtype=l.dtype)
  return finish(out, res_et)


# --- fft ----------------------------------------------------------------------


@registry.interpreter_kernel("stablehlo.fft")
def _fft(ctx, op, args):
  """Spec "fft" over the trailing len(fft_length) dims."""
  (x,) = args
  kind = tu.enum_value(op.attr("fft_type"))
  length = tuple(tu.ints(op.attr("fft_length")))
  axes = tuple(range(x.ndim - len(length), x.ndim))
  res_dt = runtime.numpy_dtype(op.results[0].type)
  if x.size == 0 or math.prod(length) == 0:
    return np.zeros(_fft_result_shape(x.shape, kind, length), dtype=res_dt)
  # Computed in double precision and rounded once (closest to XLA's f32
  # transforms on large inputs).
  x = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
  if kind == "FFT":
    y = np.fft.fftn(x, axes=axes)
  elif kind == "IFFT":
    y = np.fft.ifftn(x, axes=axes)
  elif kind == "RFFT":
    y = np.fft.rfftn(x, s=length, axes=axes)
  elif kind == "IRFFT":
    y = np.fft.irfftn(x, s=length, axes=axes)
  else:
    raise support.UnimplementedError(f"fft: unknown fft_type {kind}")
  return np.asarray(y).astype(res_dt)


def _fft_result_shape(shape, kind, length):
  shape = list(shape)
  if kind == "RFFT":
    shape[-1] = length[-1] // 2 + 1
  elif kind == "IRFFT":
    shape[-1] = length[-1]
  return tuple(shape)


# --- triangular_solve / cholesky ----------------------------------------------


def _float_compute_dtype(dt: np.dtype) -> np.dtype:
  if dt.kind == "c":
    return dt
  if dt == np.float64:
    return dt
  return np.dtype(np.float32)


@registry.interpreter_kernel("stablehlo.triangular_solve")
def triangular_solve(ctx, op, args):
  """Spec "triangular_solve": solves op(a) x = b (left_side) or
  x op(a) = b by substitution, reading only the `lower` / upper triangle of
  `a` (and assuming ones on its diagonal with unit_diagonal).

  A kernel entry point, also called by the HLO evaluator: `op` needs only
  `attr(name)` (left_side, lower, unit_diagonal, transpose_a) and
  `results[0].type`; `ctx` is unused."""
  a, b = args
  res_dt = runtime.numpy_dtype(op.results[0].type)
  cdt = _float_compute_dtype(np.dtype(res_dt))
  a = a.astype(cdt)
  b = b.astype(cdt)
  left = tu.bool_value(op.attr("left_side"))
  lower = tu.bool_value(op.attr("lower"))
  unit = tu.bool_value(op.attr("unit_diagonal"))
  trans = tu.enum_value(op.attr("transpose_a")) or "NO_TRANSPOSE"
  n = a.shape[-1]
  a = np.tril(a) if lower else np.triu(a)
  if trans in ("TRANSPOSE", "ADJOINT"):
    a = np.swapaxes(a, -1, -2)
    lower = not lower
    if trans == "ADJOINT":
      a = np.conj(a)
  if not left:
    # x A = b  <=>  A^T x^T = b^T.
    a = np.swapaxes(a, -1, -2)
    b = np.swapaxes(b, -1, -2)
    lower = not lower
  a = np.broadcast_to(a, b.shape[:-2] + a.shape[-2:])
  x = np.zeros(b.shape, dtype=cdt)
  rows = range(n) if lower else range(n - 1, -1, -1)
  for i in rows:
    if lower:
      acc = b[..., i, :] - np.einsum("...j,...jk->...k", a[..., i, :i],
                                     x[..., :i, :])
    else:
      acc = b[..., i, :] - np.einsum("...j,...jk->...k", a[..., i, i + 1:],
                                     x[..., i + 1:, :])
    if not unit:
      acc = acc / a[..., i, i][..., None]
    x[..., i, :] = acc
  if not left:
    x = np.swapaxes(x, -1, -2)
  return np.ascontiguousarray(x).astype(res_dt)


@registry.interpreter_kernel("stablehlo.cholesky")
def cholesky(ctx, op, args):
  """Spec "cholesky": L with a = L L^H (lower) or U with a = U^H U
  (upper), reading only that triangle of `a`; the other triangle of the
  result is zero. Like XLA, a matrix that is not positive definite (a NaN
  pivot) yields a result of NaNs for that batch element.

  A kernel entry point, also called by the HLO evaluator: `op` needs only
  `attr("lower")` and `results[0].type`; `ctx` is unused."""
  (a,) = args
  res_dt = runtime.numpy_dtype(op.results[0].type)
  cdt = _float_compute_dtype(np.dtype(res_dt))
  a = a.astype(cdt)
  lower = tu.bool_value(op.attr("lower"))
  if not lower:
    a = np.swapaxes(a, -1, -2)  # the upper triangle read as a lower one
  n = a.shape[-1]
  l = np.zeros(a.shape, dtype=cdt)
  bad = np.zeros(a.shape[:-2], dtype=bool)
  is_complex = np.dtype(cdt).kind == "c"
  for j in range(n):
    row = l[..., j, :j]
    d = a[..., j, j] - np.sum(row * np.conj(row), axis=-1)
    if is_complex:
      piv = np.sqrt(np.real(d)).astype(cdt)
      bad |= np.isnan(np.real(piv))
    else:
      piv = np.sqrt(d)
      bad |= np.isnan(piv)
    l[..., j, j] = piv
    if j + 1 < n:
      col = a[..., j + 1:, j] - np.einsum(
          "...ik,...k->...i", l[..., j + 1:, :j], np.conj(row))
      l[..., j + 1:, j] = col / piv[..., None]
  l = np.where(bad[..., None, None], np.array(np.nan, dtype=cdt), l)
  if not lower:
    l = np.swapaxes(l, -1, -2)
  return np.ascontiguousarray(l).astype(res_dt)


# --- batch norm ---------------------------------------------------------------


def _bn_setup(op, x):
  fi = tu.int_value(op.attr("feature_index"))
  eps = op.attr("epsilon")
  eps = float(eps.value if hasattr(eps, "value") else eps)
  axes = tuple(i for i in range(x.ndim) if i != fi)
  shape = [1] * x.ndim
  shape[fi] = x.shape[fi]
  return fi, eps, axes, tuple(shape)


def _bn_cast(arrays, res_dt):
  cdt = _float_compute_dtype(np.dtype(res_dt))
  return [np.asarray(v).astype(cdt) for v in arrays], cdt


@registry.interpreter_kernel("stablehlo.batch_norm_inference")
def _batch_norm_inference(ctx, op, args):
  """Spec "batch_norm_inference"."""
  res_dt = runtime.numpy_dtype(op.results[0].type)
  (x, scale, offset, mean, var), cdt = _bn_cast(args, res_dt)
  fi, eps, axes, bshape = _bn_setup(op, x)
  stddev = np.sqrt(var.reshape(bshape) + cdt.type(eps))
  y = scale.reshape(bshape) * ((x - mean.reshape(bshape)) / stddev) + \
      offset.reshape(bshape)
  return y.astype(res_dt)


@registry.interpreter_kernel("stablehlo.batch_norm_training")
def _batch_norm_training(ctx, op, args):
  """Spec "batch_norm_training": normalizes with the batch mean and
  (biased) variance over all dims but feature_index."""
  res_dt = runtime.numpy_dtype(op.results[0].type)
  (x, scale, offset), cdt = _bn_cast(args, res_dt)
  fi, eps, axes, bshape = _bn_setup(op, x)
  count = cdt.type(x.size // max(x.shape[fi], 1) if x.shape[fi] else 0)
  mean = np.sum(x, axis=axes) / count
  centered = x - mean.reshape(bshape)
  var = np.sum(centered * centered, axis=axes) / count
  stddev = np.sqrt(var.reshape(bshape) + cdt.type(eps))
  y = scale.reshape(bshape) * (centered / stddev) + offset.reshape(bshape)
  dts = [runtime.numpy_dtype(r.type) for r in op.results]
  return [y.astype(dts[0]), mean.astype(dts[1]), var.astype(dts[2])]


@registry.interpreter_kernel("stablehlo.batch_norm_grad")
def _batch_norm_grad(ctx, op, args):
  """Spec "batch_norm_grad" (XLA's batchnorm_expander formulas)."""
  res_dt = runtime.numpy_dtype(op.results[0].type)
  (x, scale, mean, var, gy), cdt = _bn_cast(args, res_dt)
  fi, eps, axes, bshape = _bn_setup(op, x)
  count = cdt.type(x.size // max(x.shape[fi], 1) if x.shape[fi] else 0)
  var_eps = var.reshape(bshape) + cdt.type(eps)
  centered = x - mean.reshape(bshape)
  stddev = np.sqrt(var_eps)
  normalized = centered / stddev
  i1 = gy * count
  i2 = np.sum(gy, axis=axes).reshape(bshape)
  i3 = np.sum(gy * centered, axis=axes).reshape(bshape)
  i5 = (i3 * centered) / var_eps
  i6 = (i1 - i2) - i5
  grad_x = ((scale.reshape(bshape) / stddev) / count) * i6
  grad_scale = np.sum(gy * normalized, axis=axes)
  grad_offset = np.sum(gy, axis=axes)
  dts = [runtime.numpy_dtype(r.type) for r in op.results]
  return [grad_x.astype(dts[0]), grad_scale.astype(dts[1]),
          grad_offset.astype(dts[2])]
