"""The remaining spec ops: constant (and chlo.constant), rng, tuples,
custom_call and composite."""

from __future__ import annotations

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.ops import common as c
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu


# --- constant ----------------------------------------------------------------------


def _verify_constant(ctx):
  v = ctx.attr("value")
  y = ctx.result_types[0]
  vt = getattr(v, "type", None)
  if vt is None:
    ctx.fail("constant_schema", f"value must be a typed elements attribute, "
             f"got {v!r}")
  ok = tu.types_compatible(vt, y)
  ey = tu.element_type(y)
  if not ok and tu.is_quantized(ey):
    # A quantized constant may spell its value with the storage type.
    ok = (tu.element_type(vt) == ey.storage_type and
          tu.shapes_compatible(tu.shape_of(vt), tu.shape_of(y)))
  ctx.check(ok, "c1", lambda: f"value type {tu.fmt_type(vt)} differs from "
            f"output type {tu.fmt_type(y)}")


r.define_op("stablehlo.constant", _verify_constant, ("c1",), (),
            results=("output",), attributes={"value": "elements"},
            infer=lambda ctx: [ctx.attr("value").type])

r.define_op("chlo.constant", None, operands=(), results=("output",),
            attributes={"value": "elements"}, spec=False)

# --- rng ---------------------------------------------------------------------------------


def _verify_rng(ctx):
  a_, b_, shp = ctx.operand_types
  y = ctx.result_types[0]
  for ty, nm in ((a_, "a"), (b_, "b")):
    c.check_tensor(ctx, ty, nm, "int|bool|float", rank=0)
  c.check_tensor(ctx, shp, "shape", "int|index", rank=1)
  c.same_element_type(ctx, "c1", [a_, b_, y], ["a", "b", "result"])
  dist = ctx.enum("rng_distribution")
  if dist == "NORMAL":
    ctx.check(tu.is_float(tu.element_type(a_)), "c2", lambda: "NORMAL needs "
              f"float operands, got {tu.fmt_type(a_)}")
  vals = c.const_ints(ctx.op.operands[2])
  if vals is not None:
    ctx.check_result_shape(0, vals, "c3")
  else:
    n = (tu.shape_of(shp) or (None,))[0]
    ry = tu.rank_of(y)
    ctx.check(n is None or ry is None or n == ry, "c3",
              f"result rank {ry} must be the size of shape ({n})")


r.define_op("stablehlo.rng", _verify_rng, ("c1", "c2", "c3"),
            ("a", "b", "shape"), attributes={"rng_distribution": "enum"},
            traits=frozenset({r.DEPRECATED}))


def _verify_rng_bit_generator(ctx):
  st = ctx.operand_types[0]
  ost, out = ctx.result_types
  c.check_tensor(ctx, st, "initial_state", "uint", rank=1)
  c.check_tensor(ctx, out, "output", "int|float")
  c.same_type(ctx, "c1", [st, ost], ["initial_state", "output_state"])
  algo = ctx.enum("rng_algorithm", "DEFAULT")
  n = (tu.shape_of(st) or (None,))[0]
  allowed = {"THREE_FRY": (2,), "PHILOX": (2, 3)}.get(algo)
  if allowed is not None and n is not None:
    ctx.check(n in allowed, "c2", f"{algo} needs a state of "
              f"{' or '.join(map(str, allowed))} elements, got {n}")


r.define_op("stablehlo.rng_bit_generator", _verify_rng_bit_generator,
            ("c1", "c2"), ("initial_state",),
            results=("output_state", "output"),
            attributes={"rng_algorithm": "enum"})

# --- tuples ----------------------------------------------------------------------------


def _verify_tuple(ctx):
  y = ctx.result_types[0]
  want = t.TupleType(tuple(ctx.operand_types))
  ctx.check(tu.types_compatible(y, want), "c1", lambda: "result "
            f"{tu.fmt_type(y)} must be {tu.fmt_type(want)}")


r.define_op("stablehlo.tuple", _verify_tuple, ("c1",), ("val*",),
            infer=lambda ctx: [t.TupleType(tuple(ctx.operand_types))],
            traits=frozenset({r.DEPRECATED}))


def _verify_get_tuple_element(ctx):
  x = ctx.operand_types[0]
  if not isinstance(x, t.TupleType):
    ctx.fail("get_tuple_element_schema", f"operand must be a tuple, got "
             f"{tu.fmt_type(x)}")
  i = ctx.int("index")
  ctx.check(0 <= i < len(x.types), "c1", f"index {i} out of range for "
            f"{tu.fmt_type(x)}")
  y = ctx.result_types[0]
  ctx.check(tu.types_compatible(y, x.types[i]), "c2", lambda: f"result "
            f"{tu.fmt_type(y)} must be {tu.fmt_type(x.types[i])}")


r.define_op("stablehlo.get_tuple_element", _verify_get_tuple_element,
            ("c1", "c2"), ("operand",), attributes={"index": "i32"},
            infer=lambda ctx: [ctx.operand_types[0].types[ctx.int("index")]],
            traits=frozenset({r.DEPRECATED}))

# --- custom_call / composite --------------------------------------------------------------


def _verify_custom_call(ctx):
  name = ctx.attr("call_target_name")
  ctx.check(isinstance(name, a.StringAttr), "custom_call_schema",
            f"call_target_name must be a string, got {name!r}")
  api = ctx.attr("api_version")
  if api is not None:
    v = tu.enum_value(api)
    ctx.check(v is not None, "custom_call_schema", "bad api_version")


r.define_op("stablehlo.custom_call", _verify_custom_call, (), ("inputs*",),
            results=("results*",),
            attributes={"call_target_name": "str", "has_side_effect?": "bool",
                        "backend_config?": "str|dict", "api_version?": "i32",
                        "called_computations?": "symbol[]",
                        "output_operand_aliases?": "array",
                        "operand_layouts?": "array",
                        "result_layouts?": "array"},
            traits=frozenset({r.SIDE_EFFECT}))


def enclosing_symbol(op: core.Operation, name: str):
  """The op named `name` (by sym_name) in the nearest enclosing symbol
  table (module) of `op`, or None."""
  block = op.parent
  while block is not None:
    region = block.parent
    parent = region.parent if region is not None else None
    if parent is None:
      return None
    if parent.name == "builtin.module":
      for o in parent.regions[0].blocks[0].operations:
        sym = o.attr("sym_name")
        if isinstance(sym, a.StringAttr) and sym.value == name:
          return o
      return None
    block = parent.parent
  return None


def function_type(fn: core.Operation):
  ft = fn.attr("function_type")
  if isinstance(ft, a.TypeAttr) and isinstance(ft.value, t.FunctionType):
    return ft.value
  if fn.regions and fn.regions[0].blocks:
    return t.FunctionType(tuple(v.type for v in
                                fn.regions[0].blocks[0].arguments), ())
  return None


def symbol_name(v) -> str:
  if isinstance(v, a.SymbolRefAttr):
    return v.root
  if isinstance(v, a.StringAttr):
    return v.value
  return str(v)


def _verify_composite(ctx):
  name = ctx.attr("name")
  nm = name.value if isinstance(name, a.StringAttr) else str(name)
  ctx.check("." in nm and not nm.startswith(".") and not nm.endswith("."),
            "c1", f"name {nm!r} must be namespaced (dialect.op)")
  dec = symbol_name(ctx.attr("decomposition"))
  fn = enclosing_symbol(ctx.op, dec)
  if ctx.op.parent is None:
    return  # a detached op has no scope to look in
  ctx.check(fn is not None, "c2", f"decomposition @{dec} is not defined in "
            "the enclosing module")
  ft = function_type(fn)
  if ft is None:
    return
  ins, outs = ctx.operand_types, ctx.result_types
  ctx.check(len(ins) == len(ft.inputs) and all(
      tu.types_compatible(p, q) for p, q in zip(ins, ft.inputs)), "c3",
            lambda: f"input types {tu.fmt_types(ins)} differ from @{dec}'s "
            f"{tu.fmt_types(ft.inputs)}")
  ctx.check(len(outs) == len(ft.results) and all(
      tu.types_compatible(p, q) for p, q in zip(outs, ft.results)), "c4",
            lambda: f"result types {tu.fmt_types(outs)} differ from @{dec}'s "
            f"{tu.fmt_types(ft.results)}")


r.define_op("stablehlo.composite", _verify_composite, ("c1", "c2", "c3", "c4"),
            ("inputs*",), results=("results*",),
            attributes={"name": "str", "composite_attributes?": "dict",
                        "decomposition": "symbol", "version?": "i32"})
