"""Reductions and sort: reduce, reduce_window, select_and_scatter, sort and
chlo.top_k (a sort that keeps the first k)."""

from __future__ import annotations

import functools
from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu


# This family's defaults for `registry.define_op`.
_define_op = functools.partial(r.define_op, results=("results*",), regions=None)


# --- reduce ------------------------------------------------------------------------


def _verify_reduce(ctx):
  n = len(ctx.operand_types) // 2
  ins, inits = ctx.operand_types[:n], ctx.operand_types[n:]
  outs = ctx.result_types
  dims = ctx.ints("dimensions")
  ctx.check(len(ctx.operand_types) % 2 == 0 and n > 0 and
            len(outs) == n, "c3", lambda: "needs N > 0 inputs, N init values "
            f"and N results; got {len(ctx.operand_types)} operands and "
            f"{len(outs)} results")
  c.same_shape(ctx, "c1", ins, [f"input #{i}" for i in range(n)])
  for i, (x, iv) in enumerate(zip(ins, inits)):
    c.check_tensor(ctx, iv, f"init value #{i}", rank=0)
    ctx.check(tu.element_type(x) == tu.element_type(iv), "c2",
              lambda x=x, iv=iv, i=i: f"input #{i} element type "
              f"{tu.fmt_elem(tu.element_type(x))} differs from init value "
              f"type {tu.fmt_elem(tu.element_type(iv))}")
  rank = tu.rank_of(ins[0])
  c.check_axes(ctx, "c4", "dimensions", dims, rank)
  c.check_unique(ctx, "c5", "dimensions", dims)
  es = c.check_reducer(ctx, "c6", 0, "body",
                       [tu.element_type(x) for x in ins])
  s = tu.shape_of(ins[0])
  for i, y in enumerate(outs):
    if s is not None:
      want = tuple(d for k, d in enumerate(s) if k not in dims)
      ctx.check_result_shape(i, want, "c7", f"result #{i}")
    ctx.check(tu.element_type(y) == es[i], "c8", lambda y=y, i=i:
              f"result #{i} element type {tu.fmt_elem(tu.element_type(y))} "
              f"must be the body's {tu.fmt_elem(es[i])}")


def _infer_reduce(ctx):
  n = len(ctx.operand_types) // 2
  dims = ctx.ints("dimensions")
  _, rets = c.region_signature(ctx.op.regions[0])
  out = []
  for i in range(n):
    s = ctx.operand_types[i].shape
    out.append(t.RankedTensorType(
        tuple(d for k, d in enumerate(s) if k not in dims),
        tu.element_type(rets[i])))
  return out


_define_op("stablehlo.reduce", _verify_reduce,
           tuple(f"c{i}" for i in range(1, 9)), ("inputs*",),
           attributes={"dimensions": "i64[]"}, regions=("body",),
           infer=_infer_reduce)

# --- reduce_window -----------------------------------------------------------------------


def _window_attr(ctx, name, rank, size_cid, pos_cid, default=1):
  vals = ctx.ints(name, (default,) * (rank or 0))
  if rank is not None:
    ctx.check(len(vals) == rank, size_cid, lambda: f"{name} {list(vals)} "
              f"must have {rank} entries")
  if pos_cid is not None:
    ctx.check(all(v > 0 for v in vals), pos_cid,
              lambda: f"{name} {list(vals)} must be positive")
  return vals


def _padding(ctx, rank, cid):
  p = ctx.attr("padding")
  if p is None:
    return [(0, 0)] * (rank or 0)
  arr = tu.int_matrix(p)
  if rank is not None:
    ctx.check(arr.shape == (rank, 2) or (rank == 0 and arr.size == 0), cid,
              lambda: f"padding must have shape [{rank}, 2], got "
              f"{list(arr.shape)}")
  return [tuple(int(v) for v in row) for row in arr.reshape(-1, 2)]


def _verify_reduce_window(ctx):
  n = len(ctx.operand_types) // 2
  ins, inits = ctx.operand_types[:n], ctx.operand_types[n:]
  outs = ctx.result_types
  ctx.check(len(ctx.operand_types) % 2 == 0 and n > 0 and len(outs) == n,
            "c1", lambda: "needs N > 0 inputs, N init values and N results; "
            f"got {len(ctx.operand_types)} operands and {len(outs)} results")
  c.same_shape(ctx, "c2", ins, [f"input #{i}" for i in range(n)])
  for i, (x, iv) in enumerate(zip(ins, inits)):
    c.check_tensor(ctx, iv, f"init value #{i}", rank=0)
    ctx.check(tu.element_type(x) == tu.element_type(iv), "c3",
              lambda i=i: f"input #{i} and init value #{i} element types "
              "differ")
  rank = tu.rank_of(ins[0])
  wd = _window_attr(ctx, "window_dimensions", rank, "c4", "c5")
  ws = _window_attr(ctx, "window_strides", rank, "c6", "c7")
  bd = _window_attr(ctx, "base_dilations", rank, "c8", "c9")
  wdl = _window_attr(ctx, "window_dilations", rank, "c10", "c11")
  pad = _padding(ctx, rank, "c12")
  es = c.check_reducer(ctx, "c13", 0, "body",
                       [tu.element_type(x) for x in ins])
  c.same_shape(ctx, "c14", outs, [f"result #{i}" for i in range(n)])
  s = tu.shape_of(ins[0])
  if s is not None:
    want = tuple(c.num_windows(s[k], wd[k], ws[k], pad[k][0], pad[k][1],
                               bd[k], wdl[k]) for k in range(len(s)))
    ctx.check_result_shape(0, want, "c15", "result #0")
  for i, y in enumerate(outs):
    ctx.check(tu.element_type(y) == es[i], "c16", lambda y=y, i=i:
              f"result #{i} element type {tu.fmt_elem(tu.element_type(y))} "
              f"must be the body's {tu.fmt_elem(es[i])}")


_define_op("stablehlo.reduce_window", _verify_reduce_window,
           tuple(f"c{i}" for i in range(1, 17)), ("inputs*",),
           attributes={"window_dimensions": "i64[]", "window_strides?": "i64[]",
                       "base_dilations?": "i64[]", "window_dilations?": "i64[]",
                       "padding?": "dense<i64>"}, regions=("body",))

# --- select_and_scatter -------------------------------------------------------------


def _verify_select_and_scatter(ctx):
  x, src, init = ctx.operand_types
  y = ctx.result_types[0]
  ex = tu.element_type(x)
  ctx.check(tu.element_type(src) == ex, "c1", lambda: "operand element type "
            f"{tu.fmt_elem(ex)} and source element type "
            f"{tu.fmt_elem(tu.element_type(src))} differ")
  c.check_tensor(ctx, init, "init_value", rank=0)
  ctx.check(tu.element_type(init) == ex, "c3", lambda: "init_value element "
            f"type {tu.fmt_elem(tu.element_type(init))} must be "
            f"{tu.fmt_elem(ex)}")
  rank = tu.rank_of(x)
  wd = _window_attr(ctx, "window_dimensions", rank, "c4", "c5")
  ws = _window_attr(ctx, "window_strides", rank, "c6", "c7")
  pad = _padding(ctx, rank, "c8")
  s, ss = tu.shape_of(x), tu.shape_of(src)
  if s is not None and ss is not None:
    want = tuple(c.num_windows(s[k], wd[k], ws[k], pad[k][0], pad[k][1])
                 for k in range(len(s)))
    ctx.check(tu.shapes_compatible(ss, want), "c2", lambda: "source shape "
              f"{tu.fmt_shape(ss)} must be the window count "
              f"{tu.fmt_shape(want)}")
  scalar = tu.tensor((), ex)
  c.check_region(ctx, "c9", 0, "select", [scalar, scalar],
                 [tu.tensor((), t.i1)])
  es = c.check_reducer(ctx, "c10", 1, "scatter", [ex])
  c.same_shape(ctx, "c11", [x, y], ["operand", "result"])
  ctx.check(tu.element_type(y) == es[0], "c12", lambda: "result element type "
            f"{tu.fmt_elem(tu.element_type(y))} must be the scatter's "
            f"{tu.fmt_elem(es[0])}")


_define_op("stablehlo.select_and_scatter", _verify_select_and_scatter,
           tuple(f"c{i}" for i in range(1, 13)),
           ("operand", "source", "init_value"), results=("result",),
           attributes={"window_dimensions?": "i64[]",
                       "window_strides?": "i64[]", "padding?": "dense<i64>"},
           regions=("select", "scatter"))

# --- sort ------------------------------------------------------------------------------


def _verify_sort(ctx):
  ins, outs = ctx.operand_types, ctx.result_types
  ctx.check(len(ins) > 0, "c1", "needs at least one input")
  ctx.check(len(ins) == len(outs) and all(
      tu.types_compatible(a, b) for a, b in zip(ins, outs)), "c2",
            lambda: f"result types {tu.fmt_types(outs)} must equal input "
            f"types {tu.fmt_types(ins)}")
  allv = list(ins) + list(outs)
  c.same_shape(ctx, "c3", allv, [f"value #{i}" for i in range(len(allv))])
  rank = tu.rank_of(ins[0])
  dim = ctx.int("dimension", -1)
  if rank is not None:
    ctx.check(-rank <= dim < rank, "c4", f"dimension {dim} out of range "
              f"[{-rank}, {rank})")
  args = []
  for x in ins:
    args += [tu.tensor((), tu.element_type(x))] * 2
  c.check_region(ctx, "c5", 0, "comparator", args, [tu.tensor((), t.i1)])


_define_op("stablehlo.sort", _verify_sort, ("c1", "c2", "c3", "c4", "c5"),
           ("inputs*",), attributes={"dimension?": "i64", "is_stable?": "bool"},
           regions=("comparator",), infer=lambda ctx: list(ctx.operand_types))


# --- chlo.top_k --------------------------------------------------------------------------


def _verify_top_k(ctx):
  x = ctx.operand_types[0]
  vals, idx = ctx.result_types
  k = ctx.int("k")
  s = tu.shape_of(x)
  ctx.check(s is None or len(s) >= 1, "chlo.top_k_schema",
            "operand must have rank >= 1")
  ctx.check(k >= 0 and (s is None or s[-1] is None or k <= s[-1]),
            "chlo.top_k_schema", f"k = {k} exceeds the last dimension of "
            f"{tu.fmt_type(x)}")
  c.check_tensor(ctx, idx, "indices", "int")
  if s is not None:
    want = s[:-1] + (k,)
    ctx.check_result_shape(0, want, "chlo.top_k_schema", "values")
    ctx.check_result_shape(1, want, "chlo.top_k_schema", "indices")
  ctx.check(tu.element_type(vals) == tu.element_type(x), "chlo.top_k_schema",
            "values must have the operand's element type")


r.define_op("chlo.top_k", _verify_top_k, operands=("operand",),
            results=("values", "indices"), attributes={"k": "i64"},
            spec=False)
