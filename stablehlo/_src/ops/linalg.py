"""Contractions and numerics: dot_general, convolution, dynamic_conv, the
deprecated dot / einsum / unary_einsum, chlo.ragged_dot, fft, cholesky,
triangular_solve and the batch_norm ops.

Dimension numbers are `DialectAttr`s whose params use the field names of
the MLIR attributes: `#stablehlo.dot<lhs_batching_dimensions = ...>` and, for
`#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`, the expanded
fields input_batch_dimension, input_feature_dimension,
input_spatial_dimensions, kernel_input_feature_dimension,
kernel_output_feature_dimension, kernel_spatial_dimensions,
output_batch_dimension, output_feature_dimension, output_spatial_dimensions.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu

_PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST")


def _check_precision(ctx, cid):
  pc = tu.enum_list(ctx.attr("precision_config"))
  ctx.check(len(pc) in (0, 2), cid, lambda: f"precision_config {list(pc)} "
            "must have 2 entries (or none)")
  for p in pc:
    ctx.check(p in _PRECISIONS, ctx.short + "_schema", f"precision {p!r} is "
              f"not one of {', '.join(_PRECISIONS)}")
  return pc


def _check_quantized_contraction(ctx, lhs, rhs, res, ids, rhs_qdim_check):
  """The quantization constraints dot_general and convolution share."""
  el, er, eo = (tu.element_type(x) for x in (lhs, rhs, res))
  if not any(tu.is_quantized(e) for e in (el, er, eo)):
    if ids.get("plain") is None:
      return
    ctx.check(el == er and (ids.get("plain_result") is None or er == eo),
              ids["plain"], lambda: f"lhs element type {tu.fmt_elem(el)}, "
              f"rhs element type {tu.fmt_elem(er)}" +
              ("" if ids.get("plain_result") is None else
               f" and result element type {tu.fmt_elem(eo)}") +
              " must be equal")
    return
  ctx.check(tu.is_quantized(el) == (tu.is_quantized(eo) and
                                    tu.is_quantized(er)), ids["q"],
            lambda: "lhs must be quantized exactly when rhs and result are: "
            f"{tu.fmt_types([lhs, rhs, res])}")
  if "zp" in ids and tu.is_quantized(er):
    ctx.check(all(z == 0 for z in er.zero_points), ids["zp"],
              lambda: f"rhs zero points {list(er.zero_points)} must be 0")
  if tu.is_per_axis(er):
    rhs_qdim_check(er.quantized_dimension)
  if "res_axis" in ids and tu.is_per_axis(eo):
    ids["res_axis"](eo.quantized_dimension)
  if tu.is_quantized(el):
    ctx.check(tu.is_quantized(er) and el.storage_type == er.storage_type,
              ids["storage"], lambda: f"lhs and rhs storage types differ: "
              f"{tu.fmt_types([lhs, rhs])}")
    ctx.check(tu.is_quantized(eo) and tu.is_quantized(er) and
              el.expressed_type == er.expressed_type == eo.expressed_type,
              ids["expressed"], lambda: "lhs, rhs and result expressed "
              f"types differ: {tu.fmt_types([lhs, rhs, res])}")
    if tu.is_per_tensor(er):
      ctx.check(tu.is_per_tensor(eo), ids["per_tensor"], "a per-tensor "
                "quantized rhs needs a per-tensor quantized result")
  else:
    ok = tu.is_quantized(er) and el == er.expressed_type == eo
    ctx.check(ok, ids["hybrid"], lambda: f"lhs element type "
              f"{tu.fmt_elem(el)} must equal the rhs expressed type and the "
              f"result element type: {tu.fmt_types([lhs, rhs, res])}")


# --- dot_general -------------------------------------------------------------------


def _dot_result_shape(sl, sr, lb, rb, lc, rc):
  batch = tuple(sl[d] for d in lb)
  lfree = tuple(d for k, d in enumerate(sl) if k not in lb and k not in lc)
  rfree = tuple(d for k, d in enumerate(sr) if k not in rb and k not in rc)
  return batch + lfree + rfree


def _verify_dot_general(ctx):
  lhs, rhs = ctx.operand_types
  res = ctx.result_types[0]
  dn = ctx.dim_numbers("dot_dimension_numbers")
  lb, rb = dn.ints("lhs_batching_dimensions"), dn.ints("rhs_batching_dimensions")
  lc = dn.ints("lhs_contracting_dimensions")
  rc = dn.ints("rhs_contracting_dimensions")
  ctx.check(len(lb) == len(rb), "c1", lambda: f"lhs_batching_dimensions "
            f"{list(lb)} and rhs_batching_dimensions {list(rb)} differ in "
            "size")
  ctx.check(len(lc) == len(rc), "c2", lambda: f"lhs_contracting_dimensions "
            f"{list(lc)} and rhs_contracting_dimensions {list(rc)} differ "
            "in size")
  c.check_unique(ctx, "c3", "lhs batching + contracting dimensions", lb + lc)
  c.check_unique(ctx, "c4", "rhs batching + contracting dimensions", rb + rc)
  rl, rr = tu.rank_of(lhs), tu.rank_of(rhs)
  c.check_axes(ctx, "c5", "lhs_batching_dimensions", lb, rl)
  c.check_axes(ctx, "c6", "lhs_contracting_dimensions", lc, rl)
  c.check_axes(ctx, "c7", "rhs_batching_dimensions", rb, rr)
  c.check_axes(ctx, "c8", "rhs_contracting_dimensions", rc, rr)
  sl, sr = tu.shape_of(lhs), tu.shape_of(rhs)
  if sl is not None and sr is not None:
    for cid, ls, rs, what in (("c9", lb, rb, "batching"),
                              ("c10", lc, rc, "contracting")):
      for a, b in zip(ls, rs):
        ctx.check(tu.dims_compatible(sl[a], sr[b]), cid,
                  lambda a=a, b=b, what=what: f"{what} dims differ: lhs dim "
                  f"{a} is {sl[a]}, rhs dim {b} is {sr[b]}")
  pc = _check_precision(ctx, "c11")
  if sl is not None and sr is not None:
    ctx.check_result_shape(0, _dot_result_shape(sl, sr, lb, rb, lc, rc),
                           "c12")

  def rhs_qdim(qd):
    ctx.check(qd not in rc, "c16", f"rhs quantization dimension {qd} must "
              f"not be a contracting dimension {list(rc)}")

  # dot_general_c13 (element_type(lhs) = element_type(rhs) when nothing is
  # quantized) is in the spec, but upstream's verifier (TypeInference.cpp,
  # verifyDotGeneralOp) does not enforce it, and JAX emits mixed operands
  # (e.g. f8E4M3FN x f8E5M2 -> f32, bf16 x f32); like upstream, we accept
  # them. Kernels compute in the result type (see the interpreter's
  # dot_general).
  _check_quantized_contraction(
      ctx, lhs, rhs, res, dict(plain=None, q="c14", zp="c15", storage="c17",
                               expressed="c18", per_tensor="c19",
                               hybrid="c20"), rhs_qdim)
  algo = ctx.attr("algorithm")
  if algo is not None:
    p = tu.Params(algo)
    ctx.check(all(x == "DEFAULT" for x in pc), "c21", lambda: "with an "
              f"algorithm, precision_config {list(pc)} must be DEFAULT")
    for cid, key in (("c22", "lhs_component_count"),
                     ("c23", "rhs_component_count"),
                     ("c24", "num_primitive_operations")):
      v = p.int(key, 1)
      ctx.check(v > 0, cid, f"{key} must be positive, got {v}")


def _infer_dot_general(ctx):
  lhs, rhs = ctx.operand_types
  dn = ctx.dim_numbers("dot_dimension_numbers")
  shape = _dot_result_shape(
      lhs.shape, rhs.shape, dn.ints("lhs_batching_dimensions"),
      dn.ints("rhs_batching_dimensions"), dn.ints("lhs_contracting_dimensions"),
      dn.ints("rhs_contracting_dimensions"))
  return [t.RankedTensorType(shape, lhs.element_type)]


r.define_op("stablehlo.dot_general", _verify_dot_general,
            tuple(f"c{i}" for i in range(1, 25)),
            ("lhs", "rhs"),
            attributes={"dot_dimension_numbers": "#stablehlo.dot",
                        "precision_config?": "enum[]",
                        "algorithm?": "#stablehlo.dot_algorithm"},
            infer=_infer_dot_general)


def _verify_dot(ctx):
  lhs, rhs = ctx.operand_types
  rl, rr = tu.rank_of(lhs), tu.rank_of(rhs)
  sl, sr = tu.shape_of(lhs), tu.shape_of(rhs)
  _check_precision(ctx, "dot_schema")
  if sl is None or sr is None:
    return
  ctx.check(rl in (1, 2) and rr in (1, 2), "dot_schema",
            f"operands must have rank 1 or 2, got {rl} and {rr}")
  ctx.check(tu.dims_compatible(sl[-1], sr[0]), "dot_schema",
            f"contracting dims differ: {sl[-1]} vs {sr[0]}")
  ctx.check_result_shape(0, sl[:-1] + sr[1:], "dot_schema")


r.define_op("stablehlo.dot", _verify_dot, (), ("lhs", "rhs"),
            attributes={"precision_config?": "enum[]"},
            traits=frozenset({r.DEPRECATED}), spec=False)
r.define_op("stablehlo.einsum", None, (), ("lhs", "rhs"),
            attributes={"einsum_config": "str"},
            traits=frozenset({r.DEPRECATED}), spec=False)
r.define_op("stablehlo.unary_einsum", None, (), ("operand",),
            attributes={"einsum_config": "str"},
            traits=frozenset({r.DEPRECATED}), spec=False)

# --- convolution / dynamic_conv ------------------------------------------------------


def _conv_result_shape(sl, sr, strides, pad, lhs_dil, rhs_dil, dn, bgc):
  ob, of_ = dn.int("output_batch_dimension"), dn.int("output_feature_dimension")
  os_ = dn.ints("output_spatial_dimensions")
  out = [None] * len(sl)
  b = sl[dn.int("input_batch_dimension")]
  out[ob] = None if b is None else b // bgc
  out[of_] = sr[dn.int("kernel_output_feature_dimension")]
  for k, (ld, kd) in enumerate(zip(dn.ints("input_spatial_dimensions"),
                                   dn.ints("kernel_spatial_dimensions"))):
    lo, hi = pad[k] if pad is not None else (None, None)
    if lo is None:
      out[os_[k]] = None
      continue
    out[os_[k]] = c.num_windows(sl[ld], sr[kd], strides[k], lo, hi,
                                lhs_dil[k], rhs_dil[k])
  return tuple(out)


def _verify_conv(ctx, padding, check_stride_count=True):
  """Shared by convolution (`padding` from the attribute) and dynamic_conv
  (`padding` from a constant operand, or None when unknown)."""
  lhs, rhs = ctx.operand_types[:2]
  res = ctx.result_types[0]
  rl, rr, ro = tu.rank_of(lhs), tu.rank_of(rhs), tu.rank_of(res)
  if rl is not None and rr is not None:
    ctx.check(rl == rr, "c1", f"lhs rank {rl} and rhs rank {rr} differ")
  n = rl if rl is not None else rr
  ns = None if n is None else n - 2
  ns_or0 = ns if ns is not None else 0

  def sized(name, cid, default):
    vals = ctx.ints(name, (default,) * ns_or0)
    if ns is not None:
      ctx.check(len(vals) == ns, cid, lambda: f"{name} {list(vals)} must "
                f"have {ns} entries")
    return vals

  if check_stride_count:
    strides = sized("window_strides", "c2", 1)
  else:
    strides = ctx.ints("window_strides", (1,) * ns_or0)[:ns_or0]
  ctx.check(all(s > 0 for s in strides), "c3", lambda: f"window_strides "
            f"{list(strides)} must be positive")
  if padding is not None and ns is not None:
    ctx.check(padding.shape == (ns, 2) or (ns == 0 and padding.size == 0),
              "c4", lambda: f"padding must have shape [{ns}, 2], got "
              f"{list(padding.shape)}")
  lhs_dil = sized("lhs_dilation", "c5", 1)
  ctx.check(all(s > 0 for s in lhs_dil), "c6", lambda: f"lhs_dilation "
            f"{list(lhs_dil)} must be positive")
  rhs_dil = sized("rhs_dilation", "c7", 1)
  ctx.check(all(s > 0 for s in rhs_dil), "c8", lambda: f"rhs_dilation "
            f"{list(rhs_dil)} must be positive")
  if ctx.has("window_reversal"):
    sized("window_reversal", "c9", 0)
  dn = ctx.dim_numbers("dimension_numbers")
  fgc = ctx.int("feature_group_count", 1)
  bgc = ctx.int("batch_group_count", 1)
  ctx.check(fgc > 0, "c21", f"feature_group_count must be positive, got "
            f"{fgc}")
  ctx.check(bgc > 0, "c22", f"batch_group_count must be positive, got {bgc}")
  ctx.check(fgc == 1 or bgc == 1, "c23", "feature_group_count "
            f"({fgc}) or batch_group_count ({bgc}) must be 1")
  ib, if_ = dn.int("input_batch_dimension"), dn.int("input_feature_dimension")
  isp = dn.ints("input_spatial_dimensions")
  kif = dn.int("kernel_input_feature_dimension")
  kof = dn.int("kernel_output_feature_dimension")
  ksp = dn.ints("kernel_spatial_dimensions")
  ob, of_ = dn.int("output_batch_dimension"), dn.int("output_feature_dimension")
  osp = dn.ints("output_spatial_dimensions")
  if ns is not None:
    for cid, what, dims in (("c12", "input_spatial_dimensions", isp),
                            ("c17", "kernel_spatial_dimensions", ksp),
                            ("c19", "output_spatial_dimensions", osp)):
      ctx.check(len(dims) == ns, cid, lambda what=what, dims=dims: f"{what} "
                f"{list(dims)} must have {ns} entries")
  for cid, what, dims in (("c13", "input dimensions", (ib,) + isp + (if_,)),
                          ("c18", "kernel dimensions", ksp + (kif, kof)),
                          ("c20", "output dimensions", (ob,) + osp + (of_,))):
    c.check_unique(ctx, cid, what, dims)
    c.check_axes(ctx, cid, what, dims, n)
  sl, sr = tu.shape_of(lhs), tu.shape_of(rhs)
  if sl is not None and fgc > 0 and bgc > 0:
    b, f = sl[ib], sl[if_]
    ctx.check(b is None or b % bgc == 0, "c10", f"input batch dim {b} is not "
              f"divisible by batch_group_count {bgc}")
    ctx.check(f is None or f % fgc == 0, "c11", f"input feature dim {f} is "
              f"not divisible by feature_group_count {fgc}")
  if sl is not None and sr is not None and fgc > 0 and bgc > 0:
    f, ki, ko = sl[if_], sr[kif], sr[kof]
    ctx.check(f is None or ki is None or ki == f // fgc, "c14",
              f"kernel input feature dim {ki} must be input features {f} / "
              f"feature_group_count {fgc}")
    ctx.check(ko is None or ko % bgc == 0, "c15", f"kernel output feature "
              f"dim {ko} is not divisible by batch_group_count {bgc}")
    ctx.check(ko is None or ko % fgc == 0, "c16", f"kernel output feature "
              f"dim {ko} is not divisible by feature_group_count {fgc}")
  _check_precision(ctx, "c24")
  if ro is not None and n is not None:
    ctx.check(ro == n, "c26", f"result rank {ro} must be {n}")
  if sl is not None and sr is not None and ro == n:
    pad = None if padding is None else [tuple(int(v) for v in row)
                                        for row in padding.reshape(-1, 2)]
    want = _conv_result_shape(sl, sr, strides, pad, lhs_dil, rhs_dil, dn, bgc)
    ctx.check_result_shape(0, want, "c25")

  def rhs_qdim(qd):
    ctx.check(qd == kof, "c29", f"rhs quantization dimension {qd} must be "
              f"the kernel output feature dimension {kof}")

  def res_qdim(qd):
    ctx.check(qd == of_, "c30", f"result quantization dimension {qd} must "
              f"be the output feature dimension {of_}")

  # C27 is checked for lhs and rhs only: like upstream, a wider result
  # element type (i8 x i8 -> i32, as JAX emits) is accepted.
  _check_quantized_contraction(
      ctx, lhs, rhs, res, dict(plain="c27", q="c28",
                               res_axis=res_qdim, storage="c31",
                               expressed="c32", per_tensor="c33",
                               hybrid="c34"), rhs_qdim)


def _conv_padding_attr(ctx):
  p = ctx.attr("padding")
  if p is None:
    n = tu.rank_of(ctx.operand_types[0])
    return np.zeros((max((n or 2) - 2, 0), 2), dtype=np.int64)
  return tu.int_matrix(p)


_CONV_ATTRS = {"window_strides?": "i64[]", "padding?": "dense<i64>",
               "lhs_dilation?": "i64[]", "rhs_dilation?": "i64[]",
               "window_reversal?": "bool[]",
               "dimension_numbers": "#stablehlo.conv",
               "feature_group_count": "i64", "batch_group_count": "i64",
               "precision_config?": "enum[]"}

r.define_op("stablehlo.convolution",
            lambda ctx: _verify_conv(ctx, _conv_padding_attr(ctx)),
            tuple(f"c{i}" for i in range(1, 35)), ("lhs", "rhs"),
            attributes=_CONV_ATTRS)


def _verify_dynamic_conv(ctx):
  pad_t = ctx.operand_types[2]
  c.check_tensor(ctx, pad_t, "padding", "int|index", rank=2)
  rl = tu.rank_of(ctx.operand_types[0])
  sp = tu.shape_of(pad_t)
  if sp is not None and rl is not None:
    ctx.check(tu.shapes_compatible(sp, (rl - 2, 2)), "c4", lambda: "padding "
              f"must have shape [{rl - 2}, 2], got {tu.fmt_shape(sp)}")
  vals = c.const_ints(ctx.op.operands[2])
  padding = None
  if vals is not None and sp is not None and None not in sp:
    padding = np.array(vals, dtype=np.int64).reshape(sp)
  # Upstream accepts dynamic_conv programs (in its own JAX-generated
  # testdata) whose window_strides outnumber the spatial dims, so the count
  # (C2) is not enforced here; the extra entries are ignored.
  _verify_conv(ctx, padding, check_stride_count=False)


r.define_op("stablehlo.dynamic_conv", _verify_dynamic_conv,
            tuple(f"c{i}" for i in range(1, 35) if i != 2),
            ("lhs", "rhs", "padding"),
            attributes={k: v for k, v in _CONV_ATTRS.items()
                        if k != "padding?"})

# --- fft -------------------------------------------------------------------------------


def _verify_fft(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  c.check_kinds(ctx, "float|complex")
  kind = ctx.enum("fft_type")
  length = ctx.ints("fft_length")
  rx = tu.rank_of(x)
  if rx is not None:
    ctx.check(len(length) <= rx, "c1", lambda: f"fft_length {list(length)} "
              f"is longer than the operand rank {rx}")
  ex, ey = tu.element_type(x), tu.element_type(y)
  if kind in ("FFT", "IFFT"):
    ok = tu.is_complex(ex) and ex == ey
  elif kind == "RFFT":
    ok = tu.is_float(ex) and ey == t.ComplexType(ex)
  elif kind == "IRFFT":
    ok = tu.is_complex(ex) and ex == t.ComplexType(ey)
  else:
    ctx.fail("fft_schema", f"unknown fft_type {kind!r}")
  ctx.check(ok, "c2", lambda: f"{kind} cannot map {tu.fmt_elem(ex)} to "
            f"{tu.fmt_elem(ey)}")
  ctx.check(1 <= len(length) <= 3, "c3", lambda: f"fft_length "
            f"{list(length)} must have 1 to 3 entries")
  real = x if kind == "RFFT" else (y if kind == "IRFFT" else None)
  sr = tu.shape_of(real) if real is not None else None
  if sr is not None and len(sr) >= len(length):
    tail = sr[len(sr) - len(length):]
    ctx.check(tu.shapes_compatible(tail, length), "c4", lambda: "the real "
              f"side's minor dims {tu.fmt_shape(tail)} must equal fft_length "
              f"{list(length)}")
  sx, sy = tu.shape_of(x), tu.shape_of(y)
  if sx is not None and sy is not None and sx:
    want = list(sx)
    if kind == "RFFT":
      want[-1] = None if sx[-1] is None else (0 if sx[-1] == 0 else
                                              sx[-1] // 2 + 1)
      ctx.check_result_shape(0, want, "c5")
    elif kind == "IRFFT":
      ok = len(sy) == len(sx) and tu.shapes_compatible(sx[:-1], sy[:-1]) and (
          sy[-1] is None or sx[-1] is None or
          sx[-1] == (0 if sy[-1] == 0 else sy[-1] // 2 + 1))
      ctx.check(ok, "c5", lambda: f"IRFFT operand shape {tu.fmt_shape(sx)} "
                f"does not match result shape {tu.fmt_shape(sy)}")
    else:
      ctx.check_result_shape(0, want, "c5")


r.define_op("stablehlo.fft", _verify_fft, ("c1", "c2", "c3", "c4", "c5"),
            ("operand",),
            attributes={"fft_type": "enum", "fft_length": "i64[]"})

# --- linear algebra --------------------------------------------------------------------


def _verify_cholesky(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  c.check_kinds(ctx, "float|complex|quant")
  c.same_baseline(ctx, "c1", [x, y], ["a", "result"])
  s = tu.shape_of(x)
  if s is not None:
    ctx.check(len(s) >= 2, "c2", f"a must have rank >= 2, got {len(s)}")
    ctx.check(tu.dims_compatible(s[-2], s[-1]), "c3", lambda: "the minor "
              f"dims of a must be equal, got {tu.fmt_shape(s)}")


r.define_op("stablehlo.cholesky", _verify_cholesky, ("c1", "c2", "c3"), ("a",),
            attributes={"lower?": "bool"},
            infer=lambda ctx: [ctx.operand_types[0]])


def _verify_triangular_solve(ctx):
  a_, b_ = ctx.operand_types
  y = ctx.result_types[0]
  c.check_kinds(ctx, "float|complex|quant")
  c.same_baseline(ctx, "c1", [tu.tensor((), tu.element_type(a_)),
                              tu.tensor((), tu.element_type(b_))], ["a", "b"])
  sa, sb = tu.shape_of(a_), tu.shape_of(b_)
  if sa is not None and sb is not None:
    ctx.check(len(sa) == len(sb) and len(sa) >= 2, "c2", lambda: "a and b "
              f"must have the same rank >= 2: {tu.fmt_shape(sa)}, "
              f"{tu.fmt_shape(sb)}")
    left = ctx.bool("left_side")
    ok = (tu.shapes_compatible(sa[:-2], sb[:-2]) and
          tu.dims_compatible(sa[-2], sa[-1]) and
          tu.dims_compatible(sa[-1], sb[-2] if left else sb[-1]))
    ctx.check(ok, "c3", lambda: f"a {tu.fmt_shape(sa)} must be square and "
              f"match b {tu.fmt_shape(sb)} on its "
              f"{'left' if left else 'right'} side")
  c.same_baseline(ctx, "c4", [b_, y], ["b", "result"])


r.define_op("stablehlo.triangular_solve", _verify_triangular_solve,
            ("c1", "c2", "c3", "c4"), ("a", "b"),
            attributes={"left_side": "bool", "lower": "bool",
                        "unit_diagonal": "bool", "transpose_a": "enum"},
            infer=lambda ctx: [ctx.operand_types[1]])

# --- batch norm -------------------------------------------------------------------------


def _check_feature_sizes(ctx, x, fi, pairs):
  s = tu.shape_of(x)
  size = s[fi] if s is not None and 0 <= fi < len(s) else None
  for ty, nm, cid in pairs:
    st = tu.shape_of(ty)
    if st is None:
      continue
    ctx.check(len(st) == 1, ctx.short + "_schema",
              f"{nm} must be 1-dimensional, got {tu.fmt_type(ty)}")
    ctx.check(tu.dims_compatible(st[0], size), cid, lambda nm=nm, st=st:
              f"{nm} has {st[0]} elements, feature dim {fi} has {size}")


def _same_baseline_elems(ctx, cid, types, names):
  c.same_baseline(ctx, cid, [tu.tensor((), tu.element_type(x)) for x in types],
                  names)


def _verify_bn_inference(ctx):
  x, scale, offset, mean, var = ctx.operand_types
  y = ctx.result_types[0]
  c.check_kinds(ctx, "float|quant")
  fi = ctx.int("feature_index")
  c.check_axes(ctx, "c1", "feature_index", (fi,), tu.rank_of(x))
  _same_baseline_elems(ctx, "c2", [x, scale, offset, mean, var, y],
                       ["operand", "scale", "offset", "mean", "variance",
                        "result"])
  _check_feature_sizes(ctx, x, fi, [(scale, "scale", "c3"),
                                    (offset, "offset", "c4"),
                                    (mean, "mean", "c5"),
                                    (var, "variance", "c6")])
  c.same_baseline(ctx, "c7", [x, y], ["operand", "result"])


r.define_op("stablehlo.batch_norm_inference", _verify_bn_inference,
            tuple(f"c{i}" for i in range(1, 8)),
            ("operand", "scale", "offset", "mean", "variance"),
            attributes={"epsilon": "f32", "feature_index": "i64"},
            infer=lambda ctx: [ctx.operand_types[0]])


def _verify_bn_training(ctx):
  x, scale, offset = ctx.operand_types
  out, bmean, bvar = ctx.result_types
  c.check_kinds(ctx, "float|quant")
  fi = ctx.int("feature_index")
  c.check_axes(ctx, "c1", "feature_index", (fi,), tu.rank_of(x))
  _same_baseline_elems(ctx, "c2", [x, scale, offset, bmean, bvar, out],
                       ["operand", "scale", "offset", "batch_mean",
                        "batch_var", "output"])
  _check_feature_sizes(ctx, x, fi, [(scale, "scale", "c3"),
                                    (offset, "offset", "c4"),
                                    (bmean, "batch_mean", "c5"),
                                    (bvar, "batch_var", "c6")])
  c.same_baseline(ctx, "c7", [out, x], ["output", "operand"])


r.define_op("stablehlo.batch_norm_training", _verify_bn_training,
            tuple(f"c{i}" for i in range(1, 8)), ("operand", "scale", "offset"),
            results=("output", "batch_mean", "batch_var"),
            attributes={"epsilon": "f32", "feature_index": "i64"})


def _verify_bn_grad(ctx):
  x, scale, mean, var, gout = ctx.operand_types
  gx, gscale, goffset = ctx.result_types
  c.check_kinds(ctx, "float|quant")
  fi = ctx.int("feature_index")
  c.check_axes(ctx, "c1", "feature_index", (fi,), tu.rank_of(x))
  _same_baseline_elems(
      ctx, "c2", [x, scale, mean, var, gout, gx, gscale, goffset],
      ["operand", "scale", "mean", "variance", "grad_output", "grad_operand",
       "grad_scale", "grad_offset"])
  c.same_shape(ctx, "c3", [x, gout, gx],
               ["operand", "grad_output", "grad_operand"])
  c.same_shape(ctx, "c4", [scale, mean, var, gscale, goffset],
               ["scale", "mean", "variance", "grad_scale", "grad_offset"])
  _check_feature_sizes(ctx, x, fi, [(scale, "scale", "c5")])


r.define_op("stablehlo.batch_norm_grad", _verify_bn_grad,
            tuple(f"c{i}" for i in range(1, 6)),
            ("operand", "scale", "mean", "variance", "grad_output"),
            results=("grad_operand", "grad_scale", "grad_offset"),
            attributes={"epsilon": "f32", "feature_index": "i64"})

# --- chlo.ragged_dot -------------------------------------------------------------------


def _verify_ragged_dot(ctx):
  lhs, rhs, gs = ctx.operand_types
  c.check_tensor(ctx, gs, "group_sizes", "int")
  dn = ctx.dim_numbers("ragged_dot_dimension_numbers")
  for side, ty in (("lhs", lhs), ("rhs", rhs)):
    rank = tu.rank_of(ty)
    dims = (dn.ints(f"{side}_batching_dimensions") +
            dn.ints(f"{side}_contracting_dimensions"))
    c.check_axes(ctx, "chlo.ragged_dot_schema", f"{side} dimensions", dims,
                 rank)
  c.check_axes(ctx, "chlo.ragged_dot_schema", "lhs_ragged_dimensions",
               dn.ints("lhs_ragged_dimensions"), tu.rank_of(lhs))
  c.check_axes(ctx, "chlo.ragged_dot_schema", "rhs_group_dimensions",
               dn.ints("rhs_group_dimensions"), tu.rank_of(rhs))


r.define_op("chlo.ragged_dot", _verify_ragged_dot,
            operands=("lhs", "rhs", "group_sizes"), results=("result",),
            attributes={"ragged_dot_dimension_numbers": "#chlo.ragged_dot",
                        "precision_config?": "enum[]"}, spec=False)
