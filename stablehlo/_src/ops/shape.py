"""Shape-manipulating ops: broadcast, reshape, transpose, slice, pad,
concatenate, reverse, iota and their dynamic variants."""

from __future__ import annotations

import dataclasses

from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu


def _same_elem_modulo_axis(e1, e2, *, scales_may_differ: bool) -> bool:
  """Element types equal, except per-axis quantization parameters
  (quantization dimension; also scales / zero points if allowed)."""
  if not (tu.is_per_axis(e1) and tu.is_quantized(e2)):
    return e1 == e2
  changes = {"quantized_dimension": None}
  if scales_may_differ:
    changes.update(scales=(), zero_points=())
  return (dataclasses.replace(e1, **changes) ==
          dataclasses.replace(e2, **changes))


def _check_elem_c1(ctx, x, y, *, scales_may_differ):
  ex, ey = tu.element_type(x), tu.element_type(y)
  ctx.check(_same_elem_modulo_axis(ex, ey, scales_may_differ=scales_may_differ),
            "c1", lambda: f"operand element type {tu.fmt_elem(ex)} and result "
            f"element type {tu.fmt_elem(ey)} must match")


# --- broadcast_in_dim / dynamic_broadcast_in_dim ------------------------------------


def _check_broadcast(ctx, bd):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  _check_elem_c1(ctx, x, y, scales_may_differ=True)
  sx, sy = tu.shape_of(x), tu.shape_of(y)
  if sx is not None:
    ctx.check(len(bd) == len(sx), "c2", lambda: f"broadcast_dimensions "
              f"{list(bd)} must have one entry per operand axis ({len(sx)})")
  c.check_axes(ctx, "c3", "broadcast_dimensions", bd, tu.rank_of(y))
  c.check_unique(ctx, "c4", "broadcast_dimensions", bd)
  if sx is not None and sy is not None:
    for d, size in enumerate(sx):
      out = sy[bd[d]]
      ctx.check(size in (1, None) or tu.dims_compatible(size, out), "c5",
                lambda d=d, size=size, out=out: f"operand dim {d} of size "
                f"{size} cannot broadcast to result dim {bd[d]} of size {out}")
  ex, ey = tu.element_type(x), tu.element_type(y)
  if tu.is_per_axis(ey) and tu.is_per_axis(ex):
    qd = ey.quantized_dimension
    ctx.check(qd == bd[ex.quantized_dimension], "c6", lambda: "result "
              f"quantization dimension {qd} must be broadcast_dimensions"
              f"[{ex.quantized_dimension}] = {bd[ex.quantized_dimension]}")
    if sx is not None and sx[ex.quantized_dimension] == 1:
      ctx.check(all(s == ex.scales[0] for s in ey.scales) and
                all(z == ex.zero_points[0] for z in ey.zero_points), "c6",
                "broadcasting a size-1 quantized dimension must repeat its "
                "scale and zero point")


def _verify_broadcast_in_dim(ctx):
  _check_broadcast(ctx, ctx.ints("broadcast_dimensions"))


r.define_op("stablehlo.broadcast_in_dim", _verify_broadcast_in_dim,
            ("c1", "c2", "c3", "c4", "c5", "c6"), ("operand",),
            attributes={"broadcast_dimensions": "i64[]"})


def _verify_dynamic_broadcast_in_dim(ctx):
  bd = ctx.ints("broadcast_dimensions")
  _check_broadcast(ctx, bd)
  out_dims = ctx.operand_types[1]
  c.check_tensor(ctx, out_dims, "output_dimensions", "int|index", rank=1)
  so = tu.shape_of(out_dims)
  ry = tu.rank_of(ctx.result_types[0])
  if so is not None and ry is not None:
    ctx.check(tu.dims_compatible(so[0], ry), "c7", lambda: "output_dimensions"
              f" has {so[0]} entries, result rank is {ry}")
  exp = ctx.ints("known_expanding_dimensions", ())
  nonexp = ctx.ints("known_nonexpanding_dimensions", ())
  c.check_unique(ctx, "c8", "known expanding + non-expanding dimensions",
                 exp + nonexp)
  rx = tu.rank_of(ctx.operand_types[0])
  c.check_axes(ctx, "c9", "known_expanding_dimensions", exp, rx)
  c.check_axes(ctx, "c10", "known_nonexpanding_dimensions", nonexp, rx)


r.define_op("stablehlo.dynamic_broadcast_in_dim",
            _verify_dynamic_broadcast_in_dim,
            tuple(f"c{i}" for i in range(1, 11)),
            ("operand", "output_dimensions"),
            attributes={"broadcast_dimensions": "i64[]",
                        "known_expanding_dimensions?": "i64[]",
                        "known_nonexpanding_dimensions?": "i64[]"})


def _verify_broadcast(ctx):
  # Deprecated `broadcast`: result shape = broadcast_sizes + operand shape.
  x, y = ctx.operand_types[0], ctx.result_types[0]
  sizes = ctx.ints("broadcast_sizes")
  sx = tu.shape_of(x)
  if sx is not None:
    ctx.check_result_shape(0, sizes + sx, "broadcast_schema")
  ctx.check(tu.element_type(x) == tu.element_type(y), "broadcast_schema",
            "operand and result element types differ")


r.define_op("stablehlo.broadcast", _verify_broadcast, (), ("operand",),
            attributes={"broadcast_sizes": "i64[]"},
            traits=frozenset({r.DEPRECATED}), spec=False)

# --- reshape / dynamic_reshape ---------------------------------------------------------


def _check_reshape(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  _check_elem_c1(ctx, x, y, scales_may_differ=False)
  sx, sy = tu.shape_of(x), tu.shape_of(y)
  nx, ny = tu.num_elements(sx), tu.num_elements(sy)
  if nx is not None and ny is not None:
    ctx.check(nx == ny, "c2", lambda: f"operand {tu.fmt_type(x)} has {nx} "
              f"elements, result {tu.fmt_type(y)} has {ny}")
  ex, ey = tu.element_type(x), tu.element_type(y)
  if tu.is_per_axis(ex) and tu.is_per_axis(ey) and sx is not None and \
      sy is not None:
    qx, qy = ex.quantized_dimension, ey.quantized_dimension
    before = (tu.num_elements(sx[:qx]), tu.num_elements(sy[:qy]))
    after = (tu.num_elements(sx[qx + 1:]), tu.num_elements(sy[qy + 1:]))
    ok = tu.dims_compatible(sx[qx], sy[qy])
    ok = ok and (None in before or before[0] == before[1])
    ok = ok and (None in after or after[0] == after[1])
    ctx.check(ok, "c3", lambda: "reshape must keep the quantized dimension "
              f"and the element counts around it: {tu.fmt_type(x)} -> "
              f"{tu.fmt_type(y)}")


def _verify_reshape(ctx):
  _check_reshape(ctx)
  ctx.check(tu.shape_of(ctx.result_types[0]) is None or
            all(d is not None for d in ctx.result_types[0].shape),
            "reshape_schema", "result of reshape must have a static shape")


r.define_op("stablehlo.reshape", _verify_reshape, ("c1", "c2", "c3"),
            ("operand",))


def _verify_dynamic_reshape(ctx):
  _check_reshape(ctx)
  shp = ctx.operand_types[1]
  c.check_tensor(ctx, shp, "output_shape", "int|index", rank=1)
  so, ry = tu.shape_of(shp), tu.rank_of(ctx.result_types[0])
  if so is not None and ry is not None:
    ctx.check(tu.dims_compatible(so[0], ry), "c4", lambda: "output_shape has "
              f"{so[0]} entries, result rank is {ry}")


r.define_op("stablehlo.dynamic_reshape", _verify_dynamic_reshape,
            ("c1", "c2", "c3", "c4"), ("operand", "output_shape"))

# --- transpose / reverse -------------------------------------------------------------


def _verify_transpose(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  perm = ctx.ints("permutation")
  _check_elem_c1(ctx, x, y, scales_may_differ=False)
  rx = tu.rank_of(x)
  if rx is not None:
    ctx.check(sorted(perm) == list(range(rx)), "c2", lambda: f"permutation "
              f"{list(perm)} is not a permutation of 0..{rx - 1}")
    ctx.check_result_shape(0, tuple(x.shape[p] for p in perm), "c3")
  ex, ey = tu.element_type(x), tu.element_type(y)
  if tu.is_per_axis(ey) and tu.is_per_axis(ex):
    ctx.check(ex.quantized_dimension == perm[ey.quantized_dimension], "c4",
              lambda: f"operand quantization dimension "
              f"{ex.quantized_dimension} must be permutation"
              f"[{ey.quantized_dimension}]")


def _infer_transpose(ctx):
  x = ctx.operand_types[0]
  perm = ctx.ints("permutation")
  return [t.RankedTensorType(tuple(x.shape[p] for p in perm), x.element_type)]


r.define_op("stablehlo.transpose", _verify_transpose, ("c1", "c2", "c3", "c4"),
            ("operand",), attributes={"permutation": "i64[]"},
            infer=_infer_transpose)


def _verify_reverse(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  dims = ctx.ints("dimensions")
  c.same_type(ctx, "c1", [x, y], ["operand", "result"])
  c.check_unique(ctx, "c2", "dimensions", dims)
  c.check_axes(ctx, "c3", "dimensions", dims, tu.rank_of(y))


r.define_op("stablehlo.reverse", _verify_reverse, ("c1", "c2", "c3"),
            ("operand",), attributes={"dimensions": "i64[]"},
            infer=lambda ctx: [ctx.operand_types[0]])

# --- slice / dynamic_slice / dynamic_update_slice -------------------------------------


def _infer_slice(ctx):
  x = ctx.operand_types[0]
  start, limit, strides = (ctx.ints(n) for n in
                           ("start_indices", "limit_indices", "strides"))
  shape = tuple(-(-(hi - lo) // s) if s > 0 else None
                for lo, hi, s in zip(start, limit, strides))
  return [t.RankedTensorType(shape, x.element_type)]


def _verify_slice(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  start, limit, strides = (ctx.ints(n) for n in
                           ("start_indices", "limit_indices", "strides"))
  c.same_element_type(ctx, "c1", [x, y], ["operand", "result"])
  rx = tu.rank_of(x)
  if rx is not None:
    ctx.check(len(start) == len(limit) == len(strides) == rx, "c2",
              lambda: f"start_indices {list(start)}, limit_indices "
              f"{list(limit)} and strides {list(strides)} must each have "
              f"{rx} entries (the operand rank)")
  ctx.check(len(start) == len(limit) == len(strides), "c2", lambda:
            "start_indices, limit_indices and strides differ in size")
  sx = tu.shape_of(x) or (None,) * len(start)
  for d, (lo, hi, size) in enumerate(zip(start, limit, sx)):
    ctx.check(0 <= lo <= hi and (size is None or hi <= size), "c3",
              lambda d=d, lo=lo, hi=hi, size=size: f"axis {d}: need 0 <= "
              f"start ({lo}) <= limit ({hi}) <= dim ({size})")
  ctx.check(all(s > 0 for s in strides), "c4",
            lambda: f"strides {list(strides)} must be positive")
  ctx.check_result_shape(0, _infer_slice(ctx)[0].shape, "c5")


r.define_op("stablehlo.slice", _verify_slice, ("c1", "c2", "c3", "c4", "c5"),
            ("operand",),
            attributes={"start_indices": "i64[]", "limit_indices": "i64[]",
                        "strides": "i64[]"}, infer=_infer_slice)


def _check_start_indices(ctx, indices, rank, size_cid, same_cid, extra=None):
  for i, ty in enumerate(indices):
    c.check_tensor(ctx, ty, f"start index #{i}", "int|index", rank=0)
  if rank is not None:
    ctx.check(len(indices) == rank and (extra is None or extra == rank),
              size_cid, lambda: f"got {len(indices)} start indices"
              + ("" if extra is None else f" and {extra} slice sizes")
              + f" for an operand of rank {rank}")
  ctx.check(all(x == indices[0] for x in indices), same_cid,
            lambda: f"start indices have different types "
            f"{tu.fmt_types(indices)}")


def _verify_dynamic_slice(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  sizes = ctx.ints("slice_sizes")
  c.same_element_type(ctx, "c1", [x, y], ["operand", "result"])
  _check_start_indices(ctx, ctx.operand_types[1:], tu.rank_of(x), "c2", "c3",
                       len(sizes))
  sx = tu.shape_of(x)
  if sx is not None:
    ctx.check(all(0 <= s and (d is None or s <= d) for s, d in
                  zip(sizes, sx)), "c4", lambda: f"slice_sizes {list(sizes)} "
              f"must lie within the operand shape {tu.fmt_shape(sx)}")
  ctx.check_result_shape(0, sizes, "c5")


r.define_op("stablehlo.dynamic_slice", _verify_dynamic_slice,
            ("c1", "c2", "c3", "c4", "c5"), ("operand", "start_indices*"),
            attributes={"slice_sizes": "i64[]"},
            infer=lambda ctx: [t.RankedTensorType(
                ctx.ints("slice_sizes"), ctx.operand_types[0].element_type)])


def _verify_dynamic_update_slice(ctx):
  x, upd = ctx.operand_types[:2]
  y = ctx.result_types[0]
  c.same_type(ctx, "c1", [x, y], ["operand", "result"])
  c.same_element_type(ctx, "c2", [upd, x], ["update", "operand"])
  rx, ru = tu.rank_of(x), tu.rank_of(upd)
  if rx is not None and ru is not None:
    ctx.check(rx == ru, "c3", f"update rank {ru} differs from operand rank "
              f"{rx}")
  _check_start_indices(ctx, ctx.operand_types[2:], rx, "c4", "c5")
  su, sx = tu.shape_of(upd), tu.shape_of(x)
  if su is not None and sx is not None:
    ctx.check(all(a is None or b is None or 0 <= a <= b
                  for a, b in zip(su, sx)), "c6", lambda: "update shape "
              f"{tu.fmt_shape(su)} does not fit operand shape "
              f"{tu.fmt_shape(sx)}")


r.define_op("stablehlo.dynamic_update_slice", _verify_dynamic_update_slice,
            ("c1", "c2", "c3", "c4", "c5", "c6"),
            ("operand", "update", "start_indices*"),
            infer=lambda ctx: [ctx.operand_types[0]])


def _verify_real_dynamic_slice(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  ctx.check(tu.element_type(x) == tu.element_type(y), "real_dynamic_slice_"
            "schema", "operand and result element types differ")
  for i, ty in enumerate(ctx.operand_types[1:]):
    c.check_tensor(ctx, ty, f"index operand #{i + 1}", "int|index", rank=1)


r.define_op("stablehlo.real_dynamic_slice", _verify_real_dynamic_slice, (),
            ("operand", "start_indices", "limit_indices", "strides"),
            traits=frozenset({r.DEPRECATED}), spec=False)

# --- pad / dynamic_pad ---------------------------------------------------------------


def _padded_shape(shape, lo, hi, interior):
  return tuple(None if d is None else
               d + l + max(d - 1, 0) * i + h
               for d, l, h, i in zip(shape, lo, hi, interior))


def _check_pad(ctx, lo, hi, interior, sizes_known=True):
  x, pv = ctx.operand_types[:2]
  y = ctx.result_types[0]
  c.check_tensor(ctx, pv, "padding_value", rank=0)
  c.same_element_type(ctx, "c1", [x, pv, y],
                      ["operand", "padding_value", "result"])
  rx = tu.rank_of(x)
  if rx is not None and sizes_known:
    ctx.check(len(lo) == len(hi) == len(interior) == rx, "c2",
              lambda: f"edge_padding_low {list(lo)}, edge_padding_high "
              f"{list(hi)} and interior_padding {list(interior)} must each "
              f"have {rx} entries")
  ctx.check(all(i >= 0 for i in interior), "c3",
            lambda: f"interior_padding {list(interior)} must be non-negative")
  if rx is not None and sizes_known:
    ctx.check_result_shape(0, _padded_shape(x.shape, lo, hi, interior), "c4")


def _verify_pad(ctx):
  _check_pad(ctx, ctx.ints("edge_padding_low"), ctx.ints("edge_padding_high"),
             ctx.ints("interior_padding"))


def _infer_pad(ctx):
  x = ctx.operand_types[0]
  return [t.RankedTensorType(_padded_shape(
      x.shape, ctx.ints("edge_padding_low"), ctx.ints("edge_padding_high"),
      ctx.ints("interior_padding")), x.element_type)]


r.define_op("stablehlo.pad", _verify_pad, ("c1", "c2", "c3", "c4"),
            ("operand", "padding_value"),
            attributes={"edge_padding_low": "i64[]",
                        "edge_padding_high": "i64[]",
                        "interior_padding": "i64[]"}, infer=_infer_pad)


def _verify_dynamic_pad(ctx):
  x, pv, lo, hi, interior = ctx.operand_types
  y = ctx.result_types[0]
  c.check_tensor(ctx, pv, "padding_value", rank=0)
  c.same_element_type(ctx, "c1", [x, pv, y],
                      ["operand", "padding_value", "result"])
  rx = tu.rank_of(x)
  for ty, nm in ((lo, "edge_padding_low"), (hi, "edge_padding_high"),
                 (interior, "interior_padding")):
    c.check_tensor(ctx, ty, nm, "int|index", rank=1)
    s = tu.shape_of(ty)
    if s is not None and rx is not None:
      ctx.check(tu.dims_compatible(s[0], rx), "c2", lambda nm=nm, s=s:
                f"{nm} has {s[0]} entries, operand rank is {rx}")
  ry = tu.rank_of(y)
  if rx is not None and ry is not None:
    ctx.check(rx == ry, "c4", f"result rank {ry} differs from operand rank "
              f"{rx}")


r.define_op("stablehlo.dynamic_pad", _verify_dynamic_pad, ("c1", "c2", "c4"),
            ("operand", "padding_value", "edge_padding_low",
             "edge_padding_high", "interior_padding"))

# --- concatenate --------------------------------------------------------------------


def _verify_concatenate(ctx):
  ins = ctx.operand_types
  y = ctx.result_types[0]
  dim = ctx.int("dimension")
  ctx.check(len(ins) > 0, "c3", "needs at least one input")
  c.same_element_type(ctx, "c1", ins, [f"input #{i}" for i in
                                        range(len(ins))])
  ranked = [tu.shape_of(x) for x in ins if tu.shape_of(x) is not None]
  if not ranked:
    return
  r0 = len(ranked[0])
  c.check_axes(ctx, "c4", "dimension", (dim,), r0)
  for i, s in enumerate(ranked):
    ok = len(s) == r0 and all(tu.dims_compatible(a, b) for k, (a, b) in
                              enumerate(zip(s, ranked[0])) if k != dim)
    ctx.check(ok, "c2", lambda i=i, s=s: f"input shapes {tu.fmt_shape(s)} and "
              f"{tu.fmt_shape(ranked[0])} differ outside dimension {dim}")
  c.same_element_type(ctx, "c5", [y, ins[0]], ["result", "input #0"])
  if len(ranked) == len(ins):
    total = 0
    for s in ranked:
      total = None if total is None or s[dim] is None else total + s[dim]
    want = list(ranked[0])
    want[dim] = total
    ctx.check_result_shape(0, want, "c6")


def _infer_concatenate(ctx):
  ins = ctx.operand_types
  dim = ctx.int("dimension")
  shape = list(ins[0].shape)
  total = 0
  for x in ins:
    total = None if total is None or x.shape[dim] is None else \
        total + x.shape[dim]
  shape[dim] = total
  return [t.RankedTensorType(tuple(shape), ins[0].element_type)]


r.define_op("stablehlo.concatenate", _verify_concatenate,
            ("c1", "c2", "c3", "c4", "c5", "c6"), ("inputs*",),
            attributes={"dimension": "i64"}, infer=_infer_concatenate)

# --- iota / dynamic_iota / get_dimension_size --------------------------------------


def _verify_iota(ctx):
  y = ctx.result_types[0]
  c.check_kinds(ctx, "int|float|complex|quant", "results")
  dim = ctx.int("iota_dimension")
  c.check_axes(ctx, "c1", "iota_dimension", (dim,), tu.rank_of(y))


r.define_op("stablehlo.iota", _verify_iota, ("c1",), (), results=("output",),
            attributes={"iota_dimension": "i64"})


def _verify_dynamic_iota(ctx):
  shp = ctx.operand_types[0]
  y = ctx.result_types[0]
  c.check_tensor(ctx, shp, "output_shape", "int|index", rank=1)
  dim = ctx.int("iota_dimension")
  n = (tu.shape_of(shp) or (None,))[0]
  c.check_axes(ctx, "c1", "iota_dimension", (dim,), n)
  ry = tu.rank_of(y)
  if ry is not None and n is not None:
    ctx.check(ry == n, "c2", f"result rank {ry} must be the size of "
              f"output_shape ({n})")


r.define_op("stablehlo.dynamic_iota", _verify_dynamic_iota, ("c1", "c2"),
            ("output_shape",), attributes={"iota_dimension": "i64"})


def _verify_get_dimension_size(ctx):
  dim = ctx.int("dimension")
  c.check_axes(ctx, "c1", "dimension", (dim,),
               tu.rank_of(ctx.operand_types[0]))
  c.check_tensor(ctx, ctx.result_types[0], "result", "int", rank=0)


r.define_op("stablehlo.get_dimension_size", _verify_get_dimension_size, ("c1",),
            ("operand",), attributes={"dimension": "i64"},
            infer=lambda ctx: [t.RankedTensorType((), t.i32)])


def _verify_set_dimension_size(ctx):
  dim = ctx.int("dimension")
  c.check_axes(ctx, "set_dimension_size_schema", "dimension", (dim,),
               tu.rank_of(ctx.operand_types[0]))


r.define_op("stablehlo.set_dimension_size", _verify_set_dimension_size, (),
            ("operand", "size"), attributes={"dimension": "i64"},
            traits=frozenset({r.DEPRECATED}), spec=False)
