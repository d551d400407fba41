"""Ops outside StableHLO that StableHLO programs use: builtin, func,
ml_program (stateful globals), and the test dialects of the conformance
corpora (check.*, interpreter.probe / print). The interpreter runs them in
`program` and `checks`, not in a kernel family. The chlo ops (the ops JAX
emits) and interpreter.run_parallel are defined with the family whose
kernels run them."""

from __future__ import annotations

import functools
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import misc
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu


# This family's defaults for `registry.define_op`.
_define_op = functools.partial(r.define_op, results=None, spec=False)


# --- builtin ------------------------------------------------------------------------

_define_op("builtin.module", None, operands=(), results=(),
           attributes={"sym_name?": "str"}, regions=("body",),
           summary="top-level container of functions and globals")
_define_op("builtin.unrealized_conversion_cast", None, operands=("inputs*",),
           results=("outputs*",), summary="a cast left by partial conversions")

# --- func -----------------------------------------------------------------------------


def _verify_func(ctx):
  ft = ctx.attr("function_type")
  ctx.check(isinstance(ft, a.TypeAttr) and
            isinstance(ft.value, t.FunctionType), "func.func_schema",
            f"function_type must be a function type, got {ft!r}")
  ft = ft.value
  if not ctx.op.regions or not ctx.op.regions[0].blocks:
    return  # a declaration
  args = [v.type for v in ctx.op.regions[0].blocks[0].arguments]
  c.same_types(ctx, args, ft.inputs, "entry block arguments must match the "
              "function inputs")


_define_op("func.func", _verify_func, operands=(), results=(),
           attributes={"sym_name": "str", "function_type": "type",
                       "sym_visibility?": "str", "arg_attrs?": "array",
                       "res_attrs?": "array"}, regions=("body?",),
           summary="a function (spec 'Programs')")


def _verify_func_return(ctx):
  block = ctx.op.parent
  region = block.parent if block is not None else None
  fn = region.parent if region is not None else None
  if fn is None or fn.name != "func.func":
    return
  ft = fn.attr("function_type")
  if isinstance(ft, a.TypeAttr) and isinstance(ft.value, t.FunctionType):
    c.same_types(ctx, ctx.operand_types, ft.value.results,
                "returned types must match the function results")


_define_op("func.return", _verify_func_return, operands=("operands*",),
           results=(), traits=frozenset({r.TERMINATOR}))


def _verify_call(ctx):
  callee = misc.symbol_name(ctx.attr("callee"))
  if ctx.op.parent is None:
    return
  fn = misc.enclosing_symbol(ctx.op, callee)
  ctx.check(fn is not None, "func.call_schema", f"callee @{callee} is not "
            "defined")
  ft = misc.function_type(fn)
  if ft is not None and ft.results is not None:
    c.same_types(ctx, ctx.operand_types, ft.inputs, f"operands of @{callee}")
    if fn.attr("function_type") is not None:
      c.same_types(ctx, ctx.result_types, ft.results, f"results of @{callee}")


_define_op("func.call", _verify_call, operands=("operands*",),
           results=("results*",), attributes={"callee": "symbol"})

# --- ml_program -----------------------------------------------------------------------


def _global_type(ctx):
  name = misc.symbol_name(ctx.attr("global"))
  if ctx.op.parent is None:
    return None
  g = misc.enclosing_symbol(ctx.op, name)
  ctx.check(g is not None and g.name == "ml_program.global",
            ctx.short + "_schema", f"@{name} is not an ml_program.global")
  ty = g.attr("type")
  return ty.value if isinstance(ty, a.TypeAttr) else None


def _verify_global(ctx):
  ty = ctx.attr("type")
  ctx.check(isinstance(ty, a.TypeAttr), "ml_program.global_schema",
            "type must be a type attribute")
  v = ctx.attr("value")
  vt = getattr(v, "type", None)
  if vt is not None:
    ctx.check(tu.types_compatible(vt, ty.value), "ml_program.global_schema",
              lambda: f"initial value type {tu.fmt_type(vt)} differs from "
              f"{tu.fmt_type(ty.value)}")


def _verify_global_load(ctx):
  gt = _global_type(ctx)
  if gt is not None:
    c.same_types(ctx, ctx.result_types, [gt], "loaded type")


def _verify_global_store(ctx):
  gt = _global_type(ctx)
  if gt is not None:
    c.same_types(ctx, ctx.operand_types, [gt], "stored type")


_define_op("ml_program.global", _verify_global, operands=(), results=(),
           attributes={"sym_name": "str", "type": "type", "is_mutable?": "unit",
                       "value?": "elements", "sym_visibility?": "str"})
_define_op("ml_program.global_load", _verify_global_load, operands=(),
           results=("result",), attributes={"global": "symbol"},
           traits=frozenset({r.SIDE_EFFECT}))
_define_op("ml_program.global_load_const", _verify_global_load, operands=(),
           results=("result",), attributes={"global": "symbol"})
_define_op("ml_program.global_store", _verify_global_store, operands=("value",),
           results=(), attributes={"global": "symbol"},
           traits=frozenset({r.SIDE_EFFECT}))

# --- check.* / interpreter.* (conformance corpora) -----------------------------------


def _verify_expect_pair(ctx):
  lhs, rhs = ctx.operand_types
  ctx.check(tu.types_compatible(lhs, rhs, baseline=True),
            ctx.short + "_schema", lambda: f"compared values differ in type: "
            f"{tu.fmt_types([lhs, rhs])}")


def _verify_expect_const(ctx):
  x = ctx.operand_types[0]
  v = ctx.attr("value")
  vt = getattr(v, "type", None)
  if vt is not None and tu.is_tensor(x):
    ctx.check(tu.shapes_compatible(tu.shape_of(vt), tu.shape_of(x)),
              ctx.short + "_schema", lambda: f"expected value type "
              f"{tu.fmt_type(vt)} does not match {tu.fmt_type(x)}")


_SIDE = frozenset({r.SIDE_EFFECT})
for _n in ("expect_eq", "expect_almost_eq", "expect_close"):
  _define_op("check." + _n, _verify_expect_pair, operands=("lhs", "rhs"),
             results=(), attributes={"tolerance?": "f64",
                                     "max_ulp_difference?": "i64",
                                     "min_ulp_difference?": "i64"},
             traits=_SIDE)
for _n in ("expect_eq_const", "expect_almost_eq_const"):
  _define_op("check." + _n, _verify_expect_const, operands=("operand",),
             results=(), attributes={"value": "elements", "tolerance?": "f64"},
             traits=_SIDE)
_define_op("check.expect_serialized_eq", None, operands=("operand",),
           results=(), attributes={"probe_id": "str", "iteration?": "i32"},
           traits=_SIDE)
_define_op("interpreter.probe", None, operands=("operand",),
           results=("result",), attributes={"probe_id": "str"}, traits=_SIDE,
           infer=lambda ctx: [ctx.operand_types[0]])
_define_op("interpreter.print", None, operands=("operand",), results=(),
           traits=_SIDE)
