"""Control flow: case, if, while, optimization_barrier, return, and
chlo.scan. The reductions and sort are the `reduce` family, map is
`elementwise`."""

from __future__ import annotations

import functools
from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu


# This family's defaults for `registry.define_op`.
_define_op = functools.partial(r.define_op, results=("results*",), regions=None)


# --- case / if / while ----------------------------------------------------------------


def _check_branches(ctx, first_region, no_args_cid, same_cid, results_cid):
  sigs = [c.region_signature(rg) for rg in ctx.op.regions[first_region:]]
  for i, (args, _) in enumerate(sigs):
    ctx.check(not args, no_args_cid, lambda i=i, args=args:
              f"branch #{i} must take no arguments, takes "
              f"{tu.fmt_types(args)}")
  rets0 = sigs[0][1] if sigs else ()
  for i, (_, rets) in enumerate(sigs):
    ctx.check(rets is not None and len(rets) == len(rets0) and all(
        tu.types_compatible(a, b) for a, b in zip(rets, rets0)), same_cid,
              lambda i=i, rets=rets: f"branch #{i} returns "
              f"{tu.fmt_types(rets or ())}, branch #0 returns "
              f"{tu.fmt_types(rets0)}")
  outs = ctx.result_types
  ctx.check(rets0 is not None and len(outs) == len(rets0) and all(
      tu.types_compatible(a, b) for a, b in zip(outs, rets0)), results_cid,
            lambda: f"result types {tu.fmt_types(outs)} must be the branch "
            f"output types {tu.fmt_types(rets0 or ())}")


def _verify_case(ctx):
  c.check_tensor(ctx, ctx.operand_types[0], "index", "int", rank=0)
  ctx.check(len(ctx.op.regions) > 0, "c1", "needs at least one branch")
  _check_branches(ctx, 0, "c2", "c3", "c4")


_define_op("stablehlo.case", _verify_case, ("c1", "c2", "c3", "c4"), ("index",),
           regions=("branches*",))


def _verify_if(ctx):
  c.check_tensor(ctx, ctx.operand_types[0], "pred", "bool", rank=0)
  _check_branches(ctx, 0, "c1", "c2", "c3")


_define_op("stablehlo.if", _verify_if, ("c1", "c2", "c3"), ("pred",),
           regions=("true_branch", "false_branch"))


def _verify_while(ctx):
  ins, outs = ctx.operand_types, ctx.result_types
  c.check_region(ctx, "c1", 0, "cond", ins, [tu.tensor((), t.i1)])
  c.check_region(ctx, "c2", 1, "body", ins, ins)
  ctx.check(len(ins) == len(outs) and all(
      tu.types_compatible(a, b) for a, b in zip(ins, outs)), "c3",
            lambda: f"result types {tu.fmt_types(outs)} must equal operand "
            f"types {tu.fmt_types(ins)}")


_define_op("stablehlo.while", _verify_while, ("c1", "c2", "c3"), ("operand*",),
           regions=("cond", "body"), infer=lambda ctx: list(ctx.operand_types))


def _verify_optimization_barrier(ctx):
  ins, outs = ctx.operand_types, ctx.result_types
  ctx.check(len(ins) == len(outs) and all(
      tu.types_compatible(a, b) for a, b in zip(ins, outs)), "c1",
            lambda: f"result types {tu.fmt_types(outs)} must equal operand "
            f"types {tu.fmt_types(ins)}")


_define_op("stablehlo.optimization_barrier", _verify_optimization_barrier,
           ("c1",), ("operand*",), infer=lambda ctx: list(ctx.operand_types))


def _verify_return(ctx):
  parent = ctx.op.parent
  ctx.check(parent is None or parent.terminator is ctx.op, "return_schema",
            "must be the last op of its block")


_define_op("stablehlo.return", _verify_return, (), ("results*",), results=(),
           traits=frozenset({r.TERMINATOR}), spec=False)

# --- chlo.scan ----------------------------------------------------------------


def _verify_scan(ctx):
  dim = ctx.int("dimension")
  ins = ctx.operand_types
  if ins:
    rank = tu.rank_of(ins[0])
    c.check_axes(ctx, "chlo.scan_schema", "dimension", (dim,), rank)


r.define_op("chlo.scan", _verify_scan, operands=("inputs*",),
            results=("results*",), attributes={"dimension": "i64"},
            regions=("body",), spec=False)
