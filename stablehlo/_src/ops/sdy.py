"""The Shardy (`sdy`) ops and the `sdy.sharding` / `sdy.sharding_rule`
attributes: definitions and verifiers (openxla/shardy `docs/sdy_dialect.md`).

Errors name the violated constraint after the op name, e.g.
`'sdy.manual_computation' op sdy.manual_computation_local_shape: ...`; the
constraint ids and what they require are listed in `CHECKS`. Sharded
dimensions need not be divisible by their shard count (uneven shards are
padded), except where a manual computation splits them: its body sees the
global shape divided by the manual axes' sizes.

Shardings of collectives (`sdy.all_gather`, ...) are checked for their own
validity only; how the operand's sharding must relate to `out_sharding` is
not checked.
"""

from __future__ import annotations

import functools
from typing import Optional

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.ops import registry as r
from stablehlo._src.ops import typeutil as tu

# Constraint id -> what it requires. Errors name the id after the op (or
# attribute) name: `sdy.manual_computation_local_shape`. (The registry's
# `checks` hold StableHLO spec ids only, so these are listed here.)
CHECKS = {
    "mesh": "a mesh has unique axis names, axis sizes >= 1, and device ids "
            "that are a non-iota permutation of iota(product of axis sizes) "
            "(or one id and no axes: a maximal mesh)",
    "mesh_parent": "sdy.mesh is a direct child of the module, its name "
                   "unique",
    "mesh_exists": "a sharding's mesh name refers to an sdy.mesh",
    "axis_known": "every axis a sharding names exists in its mesh",
    "axis_unique": "an axis (or overlapping sub-axes) is used at most once "
                   "per sharding",
    "sub_axis": "a sub-axis (m)k has m >= 1, k > 1, m*k dividing the axis "
                "size, k != axis size; consecutive sub-axes are merged",
    "axis_order": "replicated and unreduced axes are ordered as the mesh",
    "rank": "a sharding has one dimension sharding per tensor dimension",
    "priority": "priorities are >= 0; an empty closed dimension has none",
    "maximal": "a sharding on a maximal mesh (or on a non-tensor) has no "
               "dimensions and no replicated / unreduced axes",
    "manual_bound": "an axis already manual in an enclosing "
                    "sdy.manual_computation is not used again",
    "count": "one sharding per value",
    "same_type": "operand and result types are equal",
    "direction": "a propagation barrier blocks at least one direction",
    "manual_axes": "manual axes exist in the common mesh of all in / out "
                   "shardings and come before free axes in each dimension",
    "divisible": "a dimension split by manual axes is divisible by their "
                 "size",
    "local_shape": "region arguments / returned values have the global "
                   "shape divided by the manual axes' sizes",
    "region_types": "region argument and returned types match the op's "
                    "operands and results",
    "parent": "sdy.return terminates an sdy region op",
    "rule": "a sharding rule has one mapping per operand and result, of "
            "its rank, with factor indices in range and used once per "
            "tensor and group",
    "attr_type": "the attribute has the expected sdy attribute kind",
    "schema": "operands are ranked tensors; a region op has one block "
              "ending in sdy.return",
}

_define_op = functools.partial(r.define_op, spec=False)


def _fail(ctx, check: str, message: str):
  ctx.fail(f"{ctx.short}_{check}", message)


# --- meshes --------------------------------------------------------------------------


def mesh_problem(mesh: sdy.Mesh) -> Optional[str]:
  """Why `mesh` is invalid, or None."""
  for axis in mesh.axes:
    if axis.size <= 0:
      return f"axis size must be at least 1, got: {axis.size}"
  for device in mesh.device_ids:
    if device < 0:
      return f"device id must be non-negative, got: {device}"
  if not mesh.axes:
    if len(mesh.device_ids) > 1:
      return "axes is empty and device_ids has more than one element"
    return None
  names = mesh.axis_names
  for i, name in enumerate(names):
    if name in names[:i]:
      return f"duplicate axis name: {sdy.quote(name)}"
  if not mesh.device_ids:
    return None
  if mesh.num_devices != len(mesh.device_ids):
    return ("total product of axis sizes must match total number of device "
            f"ids, got: {mesh.num_devices} != {len(mesh.device_ids)}")
  if sorted(mesh.device_ids) != list(range(len(mesh.device_ids))):
    return ("sorted device ids must be iota(product(axes)), got: "
            f"{', '.join(map(str, sorted(mesh.device_ids)))}")
  return None


# --- shardings ------------------------------------------------------------------------


def _manual_parents(op: core.Operation) -> dict:
  """Axis name -> the enclosing sdy.manual_computation manual on it."""
  out = {}
  block = op.parent
  while block is not None and block.parent is not None:
    parent = block.parent.parent
    if parent is None:
      break
    if parent.name == "sdy.manual_computation":
      axes = parent.attr("manual_axes")
      for name in getattr(axes, "axes", ()):
        out.setdefault(name, parent)
    block = parent.parent
  return out


def _axis_list_problem(refs, mesh, seen, sub_axes) -> Optional[tuple]:
  prev = None
  for ref in refs:
    if not mesh.has_axis(ref.name):
      return "axis_known", f"unknown axis name: {sdy.quote(ref.name)}"
    if ref in seen:
      return "axis_unique", f"duplicate axis ref: {ref.body()}"
    seen.add(ref)
    if ref.sub_axis_info is not None:
      sub_axes.setdefault(ref.name, []).append(ref)
      if prev is not None and prev.can_merge(ref):
        return ("sub_axis", "two consecutive sub-axes can be merged: "
                f"{prev.body()}, {ref.body()}")
    prev = ref
  return None


def _sub_axes_problem(name, subs, mesh, seen) -> Optional[tuple]:
  size = mesh.axis_size(name)
  if sdy.AxisRef(name) in seen:
    return ("axis_unique", "both sub-axis and full-axis are used for axis "
            f"name: {sdy.quote(name)}")
  prev = None
  for ref in sorted(subs, key=sdy.mesh_axis_key(mesh)):
    info = ref.sub_axis_info
    if info.pre_size < 1:
      return "sub_axis", f"sub-axis pre-size must be at least 1: {ref.body()}"
    if info.size <= 1:
      return "sub_axis", f"sub-axis sizes must be greater than 1: {ref.body()}"
    if size % info.next_pre_size:
      return ("sub_axis", f"sub-axis next pre-size {info.next_pre_size} "
              f"doesn't divide the size of the full axis {size}: "
              f"{ref.body()}")
    if info.size == size:
      return ("sub_axis", "sub-axis size is equal to the full axis size: "
              f"{ref.body()}")
    if prev is not None and prev.sub_axis_info.next_pre_size > info.pre_size:
      return ("axis_unique", f"overlapping sub-axes: {prev.body()}, "
              f"{ref.body()}")
    prev = ref
  return None


def sharding_problem(sharding: sdy.TensorSharding, ty: Optional[t.Type],
                     anchor: core.Operation,
                     manual_parents: Optional[dict] = None
                     ) -> Optional[tuple]:
  """(constraint id, message) when `sharding` is invalid for a value of type
  `ty` used at op `anchor` (which locates the mesh symbol), else None.
  `ty` None means a sharding not tied to a value."""
  mesh = sdy.lookup_mesh(anchor, sharding.mesh_or_ref)
  if mesh is None:
    return "mesh_exists", f"unknown mesh: {sdy.symbol(sharding.mesh_name)}"
  if mesh.is_maximal or (ty is None and sharding.is_fully_replicated()):
    if sharding.rank or sharding.replicated_axes or sharding.unreduced_axes:
      return ("maximal", "a maximal sharding can only have a sharding with "
              "rank 0 and no replicated or unreduced axes.")
    return None
  if isinstance(ty, t.TupleType):
    if len(ty.types) != 1:
      return ("rank", "ops can only have a sharding for a tuple of size 1: "
              f"{tu.fmt_type(ty)}")
    ty = ty.types[0]
  if isinstance(ty, t.UnrankedTensorType):
    return ("rank", "only ranked tensors can have a sharding. type: "
            f"{tu.fmt_type(ty)}")
  if not isinstance(ty, t.RankedTensorType):
    if sharding.rank or sharding.replicated_axes or sharding.unreduced_axes:
      return ("maximal", "non-shaped tensors can only have a sharding with "
              "rank 0 and no replicated or unreduced axes. type: "
              f"{tu.fmt_type(ty)}, sharding: {sharding}")
    return None
  if sharding.rank != ty.rank:
    return ("rank", "sharding doesn't match tensor rank: "
            f"{sharding.rank} != {ty.rank}")
  seen, sub_axes = set(), {}
  for dim, d in enumerate(sharding.dim_shardings):
    if d.priority is not None:
      if d.priority < 0:
        return "priority", f"dim {dim} has a negative priority"
      if d.is_closed and not d.axes:
        return ("priority", f"dim {dim} is empty and closed but has a "
                "priority")
    problem = _axis_list_problem(d.axes, mesh, seen, sub_axes)
    if problem:
      return problem
  key = sdy.mesh_axis_key(mesh)
  for what, refs in (("replicated", sharding.replicated_axes),
                     ("unreduced", sharding.unreduced_axes)):
    if list(refs) != sorted(refs, key=key):
      return "axis_order", f"{what} axes are not ordered w.r.t. mesh"
    problem = _axis_list_problem(refs, mesh, seen, sub_axes)
    if problem:
      return problem
  for name, subs in sub_axes.items():
    problem = _sub_axes_problem(name, subs, mesh, seen)
    if problem:
      return problem
  if manual_parents is None:
    manual_parents = _manual_parents(anchor)
  for ref in sharding.all_axis_refs():
    if ref.name in manual_parents:
      return ("manual_bound", f"operates on axis {sdy.quote(ref.name)} which "
              "is already bound by a parent sdy.manual_computation op")
  return None


def _check_sharding(ctx, sharding, ty, what=""):
  if not isinstance(sharding, sdy.TensorSharding):
    _fail(ctx, "attr_type", f"{what}expected a #sdy.sharding, got "
          f"{sharding!r}")
  problem = sharding_problem(sharding, ty, ctx.op)
  if problem:
    _fail(ctx, problem[0], what + problem[1])


def _check_per_value(ctx, per_value, types, what):
  """`what` prefixes messages ("in_shardings ", "result ")."""
  if not isinstance(per_value, sdy.TensorShardingPerValue):
    _fail(ctx, "attr_type", f"{what}expected a #sdy.sharding_per_value, got "
          f"{per_value!r}")
  shardings = per_value.shardings
  if not types and len(shardings) == 1:
    mesh = sdy.lookup_mesh(ctx.op, shardings[0].mesh_or_ref)
    if (mesh is not None and mesh.is_maximal) or (
        shardings[0].is_fully_replicated()):
      _check_sharding(ctx, shardings[0], None, what + "- ")
      return
  if len(shardings) != len(types):
    _fail(ctx, "count", f"{what}shardings don't match number of values: "
          f"{len(shardings)} shardings vs {len(types)} values")
  for i, (sharding, ty) in enumerate(zip(shardings, types)):
    prefix = f"{what}- " if len(types) == 1 else f"{what}{i} - "
    _check_sharding(ctx, sharding, ty, prefix)


def _check_same_type(ctx):
  x, y = ctx.operand_types[0], ctx.result_types[0]
  if x != y:
    _fail(ctx, "same_type", f"operand type {tu.fmt_type(x)} and result type "
          f"{tu.fmt_type(y)} must be equal")


# --- sdy.mesh --------------------------------------------------------------------------


def _verify_mesh(ctx):
  mesh, sym = ctx.attr("mesh"), ctx.attr("sym_name")
  if not isinstance(mesh, sdy.Mesh):
    _fail(ctx, "attr_type", f"'mesh' must be a #sdy.mesh, got {mesh!r}")
  problem = mesh_problem(mesh)
  if problem:
    _fail(ctx, "mesh", problem)
  block = ctx.op.parent
  parent = block.parent.parent if block and block.parent else None
  if parent is None:
    return
  if parent.name != "builtin.module":
    _fail(ctx, "mesh_parent", f"expects parent op 'builtin.module', got "
          f"'{parent.name}'")
  for other in block.operations:
    if other is ctx.op:
      break
    if other.attr("sym_name") == sym:
      _fail(ctx, "mesh_parent", f"redefinition of symbol "
            f"{sdy.symbol(sym.value)}")


_define_op("sdy.mesh", _verify_mesh, operands=(), results=(),
           attributes={"sym_name": "str", "mesh": "#sdy.mesh"},
           summary="a named mesh of devices")

# --- single-operand ops ------------------------------------------------------------------


def _verify_constraint(ctx):
  _check_same_type(ctx)
  _check_sharding(ctx, ctx.attr("sharding"), ctx.result_types[0])


for _name, _summary in (
    ("sdy.sharding_constraint", "constrains a value to a sharding"),
    ("sdy.reshard", "reshards a value to a sharding")):
  _define_op(_name, _verify_constraint, operands=("input",),
             results=("result",),
             attributes={"sharding": "#sdy.sharding"}, summary=_summary,
             infer=lambda ctx: [ctx.operand_types[0]])


def _check_ranked(ctx, ty, what):
  if not isinstance(ty, t.RankedTensorType):
    _fail(ctx, "schema", f"{what} must be a ranked tensor, got "
          f"{tu.fmt_type(ty)}")


def _verify_barrier(ctx):
  _check_same_type(ctx)
  _check_ranked(ctx, ctx.operand_types[0], "input")
  d = ctx.attr("allowed_direction")
  names = sdy.PROPAGATION_DIRECTIONS
  if not (isinstance(d, a.IntegerAttr) and 0 <= d.value < len(names)):
    _fail(ctx, "attr_type", f"allowed_direction must be one of "
          f"{', '.join(names)}, got {d!r}")
  if names[d.value] == "BOTH":
    _fail(ctx, "direction", "cannot specify `BOTH` as the direction. Not "
          "blocking propagation direction makes the op redundant.")


_define_op("sdy.propagation_barrier", _verify_barrier, operands=("input",),
           results=("result",),
           attributes={"allowed_direction": "enum"},
           summary="an identity that blocks sharding propagation",
           infer=lambda ctx: [ctx.operand_types[0]])


def _verify_sharding_group(ctx):
  _check_ranked(ctx, ctx.operand_types[0], "input")
  gid = ctx.attr("group_id")
  if not (isinstance(gid, a.IntegerAttr) and gid.type == t.i64):
    _fail(ctx, "attr_type", f"group_id must be an i64 integer, got {gid!r}")


_define_op("sdy.sharding_group", _verify_sharding_group, operands=("input",),
           results=(),
           attributes={"group_id": "i64"},
           summary="puts a value in a group whose members share a sharding")


def _verify_collective(ctx):
  _check_same_type(ctx)
  _check_sharding(ctx, ctx.attr("out_sharding"), ctx.result_types[0],
                  "out_sharding ")


for _name, _axes in (("sdy.all_gather", "gathering_axes"),
                     ("sdy.all_slice", "slicing_axes"),
                     ("sdy.all_to_all", "params"),
                     ("sdy.all_reduce", "reduction_axes"),
                     ("sdy.reduce_scatter", "reduce_scatter_axes"),
                     ("sdy.collective_permute", None)):
  _define_op(_name, _verify_collective, operands=("tensor",),
             results=("result",),
             attributes=dict({"out_sharding": "#sdy.sharding"},
                             **({_axes: "#sdy"} if _axes else {})),
             summary="a collective on mesh axes (syntax and shardings "
             "checked)", infer=lambda ctx: [ctx.operand_types[0]])


def _verify_data_flow_edge(ctx):
  _check_same_type(ctx)
  sharding = ctx.attr("sharding")
  if sharding is not None:
    _check_sharding(ctx, sharding, ctx.result_types[0])


_define_op("sdy.data_flow_edge", _verify_data_flow_edge, operands=("input",),
           results=("result",), attributes={"sharding?": "#sdy.sharding"},
           summary="a propagation edge of a data-flow op")
_define_op("sdy.func_data_flow_edge", _check_same_type,
           operands=("operand",), results=("result",),
           summary="a propagation edge of a function value")


def _verify_constant(ctx):
  value = ctx.attr("value")
  if getattr(value, "type", None) != ctx.result_types[0]:
    _fail(ctx, "same_type", "value type must equal the result type "
          f"{tu.fmt_type(ctx.result_types[0])}")


_define_op("sdy.constant", _verify_constant, operands=(),
           results=("output",), attributes={"value": "elements"},
           summary="a constant that propagation does not merge")

# --- region ops ---------------------------------------------------------------------------


def _body(ctx):
  region = ctx.op.regions[0]
  if len(region.blocks) != 1:
    _fail(ctx, "schema", f"expects a single-block region, got "
          f"{len(region.blocks)} blocks")
  block = region.blocks[0]
  ret = block.terminator
  if ret is None or ret.name != "sdy.return":
    _fail(ctx, "parent", "expects its region to end with 'sdy.return'")
  return block, ret


def _common_mesh(ctx, shardings) -> Optional[sdy.Mesh]:
  mesh = None
  for s in shardings:
    m = sdy.lookup_mesh(ctx.op, s.mesh_or_ref)
    if m is None or (not m.axes and not m.device_ids):
      continue  # an empty mesh binds nothing
    if mesh is not None and m != mesh:
      return None
    mesh = m
  return mesh if mesh is not None else sdy.Mesh()


def _verify_manual_values(ctx, what, global_types, local_types, per_value,
                          manual):
  shardings = getattr(per_value, "shardings", None)
  if not global_types and not local_types and shardings == ():
    return
  _check_per_value(ctx, per_value, global_types, f"{what} ")
  if len(global_types) != len(local_types):
    _fail(ctx, "region_types", f"number of op {what}s and region {what}s "
          f"must match. Op has {len(global_types)} op {what}s and "
          f"{len(local_types)} region {what}s")
  for i, (gty, lty, sharding) in enumerate(zip(global_types, local_types,
                                               shardings)):
    for dim, d in enumerate(sharding.dim_shardings):
      free = None
      for ref in d.axes:
        if ref.name not in manual:
          free = free or ref
        elif free is not None:
          _fail(ctx, "manual_axes", f"{what} sharding at index {i} must have "
                "all manual axes come before free axes in its dimension "
                f"sharding at index {dim}. Saw manual axis {ref.body()} after "
                f"free axis {free.body()}")
    if not isinstance(gty, t.RankedTensorType):
      continue
    mesh = sdy.lookup_mesh(ctx.op, sharding.mesh_or_ref)
    for size, d in zip(gty.shape, sharding.dim_shardings):
      split = sdy.manual_axes_size(d, manual, mesh)
      if size is not None and size % split:
        _fail(ctx, "divisible", f"{what} dimension size {size} is not "
              f"divisible by the manual axes size {split}")
    want = sdy.local_type(gty, sharding, manual, mesh)
    if want != lty:
      _fail(ctx, "local_shape", f"{what} shape, corresponding sharding, and "
            f"region {what} shape at index {i} must match. Expected local "
            f"shape {tu.fmt_type(want)}, actual local shape "
            f"{tu.fmt_type(lty)}")


def _verify_manual_computation(ctx):
  ins, outs = ctx.attr("in_shardings"), ctx.attr("out_shardings")
  axes = ctx.attr("manual_axes")
  if not isinstance(axes, sdy.ManualAxes):
    _fail(ctx, "attr_type", f"manual_axes must be a #sdy<manual_axes>, got "
          f"{axes!r}")
  bound = _manual_parents(ctx.op)
  for name in axes.axes:
    if name in bound:
      _fail(ctx, "manual_bound", f"operates on axis {sdy.quote(name)} which "
            "is already bound by a parent sdy.manual_computation op")
  block, ret = _body(ctx)
  manual = frozenset(axes.axes)
  _verify_manual_values(ctx, "operand", ctx.operand_types,
                        [x.type for x in block.arguments], ins, manual)
  _verify_manual_values(ctx, "result", ctx.result_types, ret.operand_types,
                        outs, manual)
  if not ins.shardings and not outs.shardings:
    return
  mesh = _common_mesh(ctx, ins.shardings + outs.shardings)
  if mesh is None and axes.axes:
    _fail(ctx, "manual_axes", "all in and out shardings must be bound to the "
          "same mesh or an empty mesh.")
  for name in axes.axes:
    if mesh is not None and not mesh.has_axis(name):
      _fail(ctx, "manual_axes", f"unknown manual axis: {sdy.quote(name)}")


_define_op("sdy.manual_computation", _verify_manual_computation,
           operands=("tensors*",), results=("results*",),
           attributes={"in_shardings": "#sdy.sharding_per_value",
                       "out_shardings": "#sdy.sharding_per_value",
                       "manual_axes": "#sdy.manual_axes"},
           regions=("body",),
           summary="a region of per-device code, manual on some mesh axes")


def _verify_named_computation(ctx):
  name = ctx.attr("name")
  if not isinstance(name, a.StringAttr):
    _fail(ctx, "attr_type", f"name must be a string, got {name!r}")
  block, ret = _body(ctx)
  args = [x.type for x in block.arguments]
  for what, inner, outer in (("block argument", args, ctx.operand_types),
                             ("returned value", ret.operand_types,
                              ctx.result_types)):
    if list(inner) != list(outer):
      _fail(ctx, "region_types", f"{what} types {tu.fmt_types(inner)} must "
            f"match the op's {tu.fmt_types(outer)}")
  for key, types in (("in_shardings", ctx.operand_types),
                     ("out_shardings", ctx.result_types)):
    value = ctx.attr(key)
    if value is not None:
      _check_per_value(ctx, value, types, f"{key} ")


_define_op("sdy.named_computation", _verify_named_computation,
           operands=("operands*",), results=("results*",),
           attributes={"name": "str",
                       "in_shardings?": "#sdy.sharding_per_value",
                       "out_shardings?": "#sdy.sharding_per_value"},
           regions=("body",), summary="a named group of ops (a call site)")


def _verify_return(ctx):
  block = ctx.op.parent
  parent = block.parent.parent if block and block.parent else None
  if parent is not None and parent.dialect != "sdy":
    _fail(ctx, "parent", f"must terminate an sdy region op, not "
          f"'{parent.name}'")


_define_op("sdy.return", _verify_return, operands=("results*",),
           results=(), traits=frozenset({r.TERMINATOR}),
           summary="terminates the region of an sdy op")

# --- discardable attributes ------------------------------------------------------------------


def _verify_sharding_attr(ctx, value, owner):
  """`sdy.sharding` on an op (one sharding per result) or on a function
  argument / result (`owner` = ("arg", i, type) / ("result", i, type))."""
  if owner is None:
    _check_per_value(ctx, value, ctx.result_types, "")
    return
  kind, index, ty = owner
  what = f"{kind} {index} - "
  if not isinstance(value, sdy.TensorSharding):
    _fail(ctx, "attr_type", f"{what}should have a sharding attribute of type "
          "TensorShardingAttr")
  _check_sharding(ctx, value, ty, what)


def rule_problem(rule: sdy.OpShardingRule, operand_types,
                 result_types) -> Optional[str]:
  """Why `rule` does not describe an op with these operand / result types
  (None if it does)."""
  n = len(rule.factor_sizes)
  for what, mappings, types in (("operand", rule.operand_mappings,
                                 operand_types),
                                ("result", rule.result_mappings,
                                 result_types)):
    if len(mappings) != len(types):
      return (f"number of {what}s and mappings must match: {len(types)} != "
              f"{len(mappings)}")
    for i, (mapping, ty) in enumerate(zip(mappings, types)):
      rank = ty.rank if isinstance(ty, t.RankedTensorType) else 0
      if len(mapping.dim_mappings) != rank:
        return (f"{what} {i} - mapping rank must match: "
                f"{len(mapping.dim_mappings)} != {rank}")
      used = [f for d in mapping.dim_mappings for f in d.factor_indices]
      for f in used:
        if not 0 <= f < n:
          return (f"{what} {i} - expecting factor indices to be within "
                  f"0<=index<num_factors; received: {f}, num_factors: {n}")
      if len(set(used)) != len(used):
        return f"{what} {i} - cannot reuse factors for the same tensor value"
  grouped = []
  for kind in sdy.OpShardingRule.FACTOR_KINDS[:3]:
    grouped += rule.factors_of_kind(kind)
  for f in grouped + list(rule.blocked_propagation_factors):
    if not 0 <= f < n:
      return f"factor index {f} out of range [0, {n})"
  if len(set(grouped)) != len(grouped):
    return "a factor appears in more than one factor group"
  return None


def _verify_sharding_rule_attr(ctx, value, owner):
  if not isinstance(value, sdy.OpShardingRule):
    _fail(ctx, "attr_type", "should have a sharding rule attribute of type "
          f"OpShardingRuleAttr, got {value!r}")
  problem = rule_problem(value, ctx.operand_types, ctx.result_types)
  if problem:
    _fail(ctx, "rule", problem)


r.define_attr_verifier(sdy.SHARDING, _verify_sharding_attr)
r.define_attr_verifier(sdy.SHARDING_RULE, _verify_sharding_rule_attr)
