"""Gather and scatter ops (gather, dynamic_gather, scatter), plus the
deprecated torch_index_select."""

from __future__ import annotations

from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu


def _batch_sizes(indices_shape, ivd):
  return tuple(d for k, d in enumerate(indices_shape) if k != ivd)


def _combine(rank, offset_dims, offset_sizes, batch_sizes):
  out, oi, bi = [], iter(offset_sizes), iter(batch_sizes)
  for k in range(rank):
    out.append(next(oi, None) if k in offset_dims else next(bi, None))
  return tuple(out)


def _gather_result_shape(operand_shape, idx_shape, slice_sizes, offset_dims,
                         collapsed, batching, ivd):
  del operand_shape
  batch = _batch_sizes(idx_shape, ivd)
  offs = tuple(s for k, s in enumerate(slice_sizes)
               if k not in collapsed and k not in batching)
  return _combine(len(batch) + len(offset_dims), offset_dims, offs, batch)


def _check_gather(ctx, ids, slice_sizes, batching_supported=True):
  """Shared by gather and dynamic_gather; `ids` maps a constraint name to
  that op's id (gather and dynamic_gather number them differently)."""
  x, idx = ctx.operand_types[:2]
  y = ctx.result_types[0]
  dn = ctx.dim_numbers("dimension_numbers")
  offset_dims = dn.ints("offset_dims")
  collapsed = dn.ints("collapsed_slice_dims")
  obatch = dn.ints("operand_batching_dims")
  ibatch = dn.ints("start_indices_batching_dims")
  sim = dn.ints("start_index_map")
  ivd = dn.int("index_vector_dim")
  c.check_tensor(ctx, idx, "start_indices", "int|index")
  rx, ri, ry = tu.rank_of(x), tu.rank_of(idx), tu.rank_of(y)
  sx, si = tu.shape_of(x), tu.shape_of(idx)
  if rx is not None:
    ctx.check(rx == len(offset_dims) + len(collapsed) + len(obatch),
              ids["rank"], lambda: f"operand rank {rx} must equal "
              f"size(offset_dims) {len(offset_dims)} + "
              f"size(collapsed_slice_dims) {len(collapsed)}" +
              (f" + size(operand_batching_dims) {len(obatch)}"
               if batching_supported else ""))
  if ri is not None:
    ctx.check(0 <= ivd <= ri, ids["ivd"], f"index_vector_dim {ivd} out of "
              f"range [0, {ri}]")
    n = si[ivd] if ivd < ri else 1
    if n is not None:
      ctx.check(len(sim) == n, ids["sim_size"], lambda: f"start_index_map "
                f"{list(sim)} must have {n} entries")
  ctx.check(tu.is_unique(offset_dims) and tu.is_sorted(offset_dims),
            ids["offset_sorted"], lambda: f"offset_dims {list(offset_dims)} "
            "must be unique and sorted")
  c.check_axes(ctx, ids["offset_range"], "offset_dims", offset_dims, ry)
  if batching_supported:
    c.check_unique(ctx, ids["collapsed_unique"],
                   "collapsed_slice_dims + operand_batching_dims",
                   collapsed + obatch)
    c.check_sorted(ctx, ids["collapsed_sorted"], "collapsed_slice_dims",
                   collapsed)
  else:
    ctx.check(tu.is_unique(collapsed) and tu.is_sorted(collapsed),
              ids["collapsed_sorted"], lambda: f"collapsed_slice_dims "
              f"{list(collapsed)} must be unique and sorted")
  c.check_axes(ctx, ids["collapsed_range"], "collapsed_slice_dims",
               collapsed, rx)
  if slice_sizes is not None:
    bad = [d for d in collapsed if d < len(slice_sizes) and
           slice_sizes[d] > 1]
    ctx.check(not bad, ids["collapsed_size"], lambda: f"slice_sizes "
              f"{list(slice_sizes)} exceed 1 at collapsed dims {bad}")
  if batching_supported:
    c.check_sorted(ctx, "c10", "operand_batching_dims", obatch)
    c.check_axes(ctx, "c11", "operand_batching_dims", obatch, rx)
    if slice_sizes is not None:
      bad = [d for d in obatch if d < len(slice_sizes) and slice_sizes[d] > 1]
      ctx.check(not bad, "c12", lambda: f"slice_sizes {list(slice_sizes)} "
                f"exceed 1 at operand batching dims {bad}")
    c.check_unique(ctx, "c13", "start_indices_batching_dims", ibatch)
    c.check_axes(ctx, "c14", "start_indices_batching_dims", ibatch, ri)
    ctx.check(ivd not in ibatch, "c15", lambda: f"index_vector_dim {ivd} is "
              f"in start_indices_batching_dims {list(ibatch)}")
    ctx.check(len(obatch) == len(ibatch), "c16", lambda: "operand_batching_"
              f"dims {list(obatch)} and start_indices_batching_dims "
              f"{list(ibatch)} differ in size")
    if sx is not None and si is not None:
      for a, b in zip(obatch, ibatch):
        ctx.check(tu.dims_compatible(sx[a], si[b]), "c17",
                  lambda a=a, b=b: f"operand dim {a} ({sx[a]}) and "
                  f"start_indices dim {b} ({si[b]}) differ")
    c.check_unique(ctx, "c18", "start_index_map + operand_batching_dims",
                   sim + obatch)
  else:
    c.check_unique(ctx, ids["sim_unique"], "start_index_map", sim)
  c.check_axes(ctx, ids["sim_range"], "start_index_map", sim, rx)
  if slice_sizes is not None:
    if rx is not None:
      ctx.check(len(slice_sizes) == rx, ids["ss_size"], lambda: f"slice_sizes "
                f"{list(slice_sizes)} must have {rx} entries")
    if sx is not None:
      ctx.check(all(0 <= s and (d is None or s <= d)
                    for s, d in zip(slice_sizes, sx)), ids["ss_range"],
                lambda: f"slice_sizes {list(slice_sizes)} must lie within "
                f"the operand shape {tu.fmt_shape(sx)}")
    if si is not None and ivd <= len(si):
      want = _gather_result_shape(sx, si, slice_sizes, offset_dims,
                                  collapsed, obatch, ivd)
      ctx.check_result_shape(0, want, ids["result"])
  c.same_element_type(ctx, ids["elem"], [x, y], ["operand", "result"])


_GATHER_IDS = dict(rank="c1", ivd="c2", sim_size="c3", offset_sorted="c4",
                   offset_range="c5", collapsed_unique="c6",
                   collapsed_sorted="c7", collapsed_range="c8",
                   collapsed_size="c9", sim_range="c19", ss_size="c20",
                   ss_range="c21", result="c22", elem="c23")


def _verify_gather(ctx):
  _check_gather(ctx, _GATHER_IDS, ctx.ints("slice_sizes"))


def _infer_gather(ctx):
  x, idx = ctx.operand_types[:2]
  dn = ctx.dim_numbers("dimension_numbers")
  return [t.RankedTensorType(_gather_result_shape(
      x.shape, idx.shape, ctx.ints("slice_sizes"), dn.ints("offset_dims"),
      dn.ints("collapsed_slice_dims"), dn.ints("operand_batching_dims"),
      dn.int("index_vector_dim")), x.element_type)]


r.define_op("stablehlo.gather", _verify_gather,
            tuple(f"c{i}" for i in range(1, 24)),
            ("operand", "start_indices"),
            attributes={"dimension_numbers": "#stablehlo.gather",
                        "slice_sizes": "i64[]", "indices_are_sorted?": "bool"},
            infer=_infer_gather)

_DYN_GATHER_IDS = dict(rank="c1", ivd="c2", sim_size="c3", offset_sorted="c4",
                       offset_range="c5", collapsed_sorted="c6",
                       collapsed_range="c7", collapsed_size="c8",
                       sim_unique="c9", sim_range="c10", ss_size="c11",
                       ss_range="c12", result="c13", elem="c14")


def _verify_dynamic_gather(ctx):
  ss = ctx.operand_types[2]
  c.check_tensor(ctx, ss, "slice_sizes", "int|index", rank=1)
  rx = tu.rank_of(ctx.operand_types[0])
  sss = tu.shape_of(ss)
  if rx is not None and sss is not None:
    ctx.check(tu.dims_compatible(sss[0], rx), "c11", lambda: "slice_sizes "
              f"has {sss[0]} entries, operand rank is {rx}")
  _check_gather(ctx, _DYN_GATHER_IDS, c.const_ints(ctx.op.operands[2]),
                batching_supported=False)


r.define_op("stablehlo.dynamic_gather", _verify_dynamic_gather,
            tuple(f"c{i}" for i in range(1, 15)),
            ("operand", "start_indices", "slice_sizes"),
            attributes={"dimension_numbers": "#stablehlo.gather",
                        "indices_are_sorted?": "bool"})

# --- scatter ------------------------------------------------------------------------


def _verify_scatter(ctx):
  ops = ctx.operand_types
  n = (len(ops) - 1) // 2
  ctx.check(len(ops) % 2 == 1 and n > 0, "c5", lambda: "needs N > 0 inputs "
            f"and N updates around scatter_indices; got {len(ops)} operands")
  ins, idx, upds = ops[:n], ops[n], ops[n + 1:]
  outs = ctx.result_types
  dn = ctx.dim_numbers("scatter_dimension_numbers")
  uwd = dn.ints("update_window_dims")
  iwd = dn.ints("inserted_window_dims")
  ibd = dn.ints("input_batching_dims")
  sibd = dn.ints("scatter_indices_batching_dims")
  sdod = dn.ints("scatter_dims_to_operand_dims")
  ivd = dn.int("index_vector_dim")
  c.check_tensor(ctx, idx, "scatter_indices", "int|index")
  c.same_shape(ctx, "c1", ins, [f"input #{i}" for i in range(n)])
  rx, ri, ru = tu.rank_of(ins[0]), tu.rank_of(idx), tu.rank_of(upds[0])
  sx, si, su = tu.shape_of(ins[0]), tu.shape_of(idx), tu.shape_of(upds[0])
  if rx is not None:
    ctx.check(rx == len(uwd) + len(iwd) + len(ibd), "c2", lambda: f"input "
              f"rank {rx} must equal size(update_window_dims) {len(uwd)} + "
              f"size(inserted_window_dims) {len(iwd)} + "
              f"size(input_batching_dims) {len(ibd)}")
  c.same_shape(ctx, "c3", upds, [f"update #{i}" for i in range(n)])
  ctx.check(len(upds) == n, "c5", "inputs and updates differ in number")
  for i, (x, u) in enumerate(zip(ins, upds)):
    ctx.check(tu.element_type(x) == tu.element_type(u), "c6",
              lambda i=i: f"update #{i} and input #{i} element types differ")
  ctx.check(tu.is_unique(uwd) and tu.is_sorted(uwd), "c7", lambda:
            f"update_window_dims {list(uwd)} must be unique and sorted")
  c.check_axes(ctx, "c8", "update_window_dims", uwd, ru)
  c.check_unique(ctx, "c9", "inserted_window_dims + input_batching_dims",
                 iwd + ibd)
  c.check_sorted(ctx, "c10", "inserted_window_dims", iwd)
  c.check_axes(ctx, "c11", "inserted_window_dims", iwd, rx)
  c.check_sorted(ctx, "c12", "input_batching_dims", ibd)
  c.check_axes(ctx, "c13", "input_batching_dims", ibd, rx)
  c.check_unique(ctx, "c14", "scatter_indices_batching_dims", sibd)
  c.check_axes(ctx, "c15", "scatter_indices_batching_dims", sibd, ri)
  ctx.check(ivd not in sibd, "c16", lambda: f"index_vector_dim {ivd} is in "
            f"scatter_indices_batching_dims {list(sibd)}")
  ctx.check(len(ibd) == len(sibd), "c17", lambda: f"input_batching_dims "
            f"{list(ibd)} and scatter_indices_batching_dims {list(sibd)} "
            "differ in size")
  if sx is not None and si is not None:
    for a, b in zip(ibd, sibd):
      if a < len(sx) and b < len(si):
        ctx.check(tu.dims_compatible(sx[a], si[b]), "c18",
                  lambda a=a, b=b: f"input dim {a} ({sx[a]}) and "
                  f"scatter_indices dim {b} ({si[b]}) differ")
  if si is not None and 0 <= ivd <= len(si):
    want = si[ivd] if ivd < len(si) else 1
    if want is not None:
      ctx.check(len(sdod) == want, "c19", lambda: "scatter_dims_to_operand_"
                f"dims {list(sdod)} must have {want} entries")
  c.check_unique(ctx, "c20", "scatter_dims_to_operand_dims + "
                 "input_batching_dims", sdod + ibd)
  c.check_axes(ctx, "c21", "scatter_dims_to_operand_dims", sdod, rx)
  if ri is not None:
    ctx.check(0 <= ivd <= ri, "c22", f"index_vector_dim {ivd} out of range "
              f"[0, {ri}]")
  if sx is not None and si is not None and su is not None and ivd <= len(si):
    scatter_sizes = _batch_sizes(si, ivd)
    window_limits = tuple(d for k, d in enumerate(sx)
                          if k not in iwd and k not in ibd)
    ok = len(su) == len(scatter_sizes) + len(uwd)
    if ok:
      sc = [d for k, d in enumerate(su) if k not in uwd]
      win = [su[k] for k in uwd if k < len(su)]
      ok = (len(sc) == len(scatter_sizes) and all(
          tu.dims_compatible(a, b) for a, b in zip(sc, scatter_sizes)) and
            all(a is None or b is None or a <= b
                for a, b in zip(win, window_limits)))
    ctx.check(ok, "c4", lambda: f"updates shape {tu.fmt_shape(su)} does not "
              f"combine the scatter dims {tu.fmt_shape(scatter_sizes)} with "
              f"window dims at {list(uwd)} bounded by "
              f"{tu.fmt_shape(window_limits)}")
  es = c.check_reducer(ctx, "c23", 0, "update_computation",
                       [tu.element_type(x) for x in ins])
  ctx.check(len(outs) == n, "c24", f"expects {n} results, got {len(outs)}")
  c.same_shape(ctx, "c24", list(ins) + list(outs),
               [f"input #{i}" for i in range(n)] +
               [f"result #{i}" for i in range(n)])
  for i, y in enumerate(outs):
    ctx.check(tu.element_type(y) == es[i], "c25", lambda y=y, i=i:
              f"result #{i} element type {tu.fmt_elem(tu.element_type(y))} "
              f"must be the computation's {tu.fmt_elem(es[i])}")


r.define_op("stablehlo.scatter", _verify_scatter,
            tuple(f"c{i}" for i in range(1, 26)),
            ("inputs*",), results=("results*",),
            attributes={"scatter_dimension_numbers": "#stablehlo.scatter",
                        "indices_are_sorted?": "bool",
                        "unique_indices?": "bool"},
            regions=("update_computation",))


def _verify_torch_index_select(ctx):
  x, idx = ctx.operand_types
  c.check_tensor(ctx, idx, "index", "int|index")
  dim, bd = ctx.int("dim"), ctx.int("batch_dims")
  c.check_axes(ctx, "torch_index_select_schema", "dim", (dim,),
               tu.rank_of(x))
  ctx.check(0 <= bd <= dim if tu.rank_of(x) is not None else True,
            "torch_index_select_schema", f"batch_dims {bd} must be in "
            f"[0, dim {dim}]")


r.define_op("stablehlo.torch_index_select", _verify_torch_index_select, (),
            ("operand", "index"),
            attributes={"dim": "i64", "batch_dims": "i64"},
            traits=frozenset({r.DEPRECATED}), spec=False)
