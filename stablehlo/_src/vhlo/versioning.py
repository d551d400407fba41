"""Moving VHLO ops between versions (StableHLO's `VhloToVersion`).

Upgrading (`vN` -> `vN+1`) always works: the new attributes get the value
that means "as before". Downgrading works only when the newer features are
unused (the new attributes hold those values, variadic operands are single,
...); otherwise the program cannot be expressed at the target and
`UnsupportedAtTargetError` names the op, the attribute and the version
needed. After conversion every op, attribute and type must exist at the
target (`check_legal`), including the versioned constraints some ops carry.
"""

from __future__ import annotations

import functools

import numpy as np

import support
from stablehlo._src.bytecode import tree
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import ops
from stablehlo._src.vhlo import version as v
from stablehlo._src.vhlo import vhlo_ir


class UnsupportedAtTargetError(support.InvalidArgumentError):
  """The program uses a feature newer than the serialization target."""


_V = v.Version.parse

# --- which attributes / types exist since when ----------------------------------

_TYPE_MIN = {
    "FloatF4E2M1FNV1Type": "1.8.0", "FloatF6E2M3FNV1Type": "1.8.0",
    "FloatF6E3M2FNV1Type": "1.8.0", "FloatF8E8M0FNUV1Type": "1.8.0",
    "FloatF8E3M4V1Type": "1.7.0", "FloatF8E4M3V1Type": "1.7.0",
    "FloatF8E4M3FNUZV1Type": "0.10.0", "FloatF8E5M2FNUZV1Type": "0.10.0",
    "FloatF8E4M3B11FNUZV1Type": "0.11.0", "FloatTF32V1Type": "1.6.0",
    "IntegerSI2V1Type": "1.2.0", "IntegerUI2V1Type": "1.2.0",
    "NoneV1Type": "1.6.0", "UniformQuantizedPerAxisV1Type": "0.18.0",
    "FutureV1Type": "1.15.0", "RankedBufferV1Type": "1.13.0",
}
_ATTR_MIN = {
    "ResultAccuracyV1Attr": "1.9.0", "ResultAccuracyModeV1Attr": "1.9.0",
    "SubAxisInfoV1Attr": "1.16.0", "AxisRefV1Attr": "1.16.0",
    "ReplicaGroupMeshAxesV1Attr": "1.16.0", "MeshAxisV1Attr": "1.16.0",
    "MeshV1Attr": "1.16.0",
}
# Spellings for error messages.
_TYPE_NAMES = {
    "FloatF4E2M1FNV1Type": "f4E2M1FN", "FloatF6E2M3FNV1Type": "f6E2M3FN",
    "FloatF6E3M2FNV1Type": "f6E3M2FN", "FloatF8E8M0FNUV1Type": "f8E8M0FNU",
    "FloatF8E3M4V1Type": "f8E3M4", "FloatF8E4M3V1Type": "f8E4M3",
    "FloatF8E4M3FNUZV1Type": "f8E4M3FNUZ", "FloatF8E5M2FNUZV1Type":
    "f8E5M2FNUZ", "FloatF8E4M3B11FNUZV1Type": "f8E4M3B11FNUZ",
    "FloatTF32V1Type": "tf32", "IntegerSI2V1Type": "i2",
    "IntegerUI2V1Type": "ui2", "NoneV1Type": "none",
    "UniformQuantizedPerAxisV1Type": "per-axis !quant.uniform",
    "FutureV1Type": "!stablehlo.future", "RankedBufferV1Type": "memref",
}
_ATTR_NAMES = {
    "ResultAccuracyV1Attr": "#stablehlo.result_accuracy",
    "ResultAccuracyModeV1Attr": "#stablehlo.result_accuracy_mode",
    "SubAxisInfoV1Attr": "#stablehlo.sub_axis_info",
    "AxisRefV1Attr": "#stablehlo.axis_ref",
    "ReplicaGroupMeshAxesV1Attr": "#stablehlo.replica_group_mesh_axes",
    "MeshAxisV1Attr": "#stablehlo.mesh_axis", "MeshV1Attr": "#stablehlo.mesh",
}


def _children(fields):
  """The attributes and types nested (at any tuple depth) in `fields`."""
  for field in fields:
    if isinstance(field, (tree.Attr, tree.Type)):
      yield field
    elif isinstance(field, tuple):
      yield from _children(field)


def _type_issue(ty, target: v.Version):
  """(description, min version) of the first part of `ty` too new, or None."""
  return _issue(ty, target)


def _attr_issue(attr, target: v.Version):
  return _issue(attr, target)


def _issue(entry, target: v.Version):
  if not isinstance(entry, (tree.Attr, tree.Type)) or entry.dialect != "vhlo":
    return None
  if isinstance(entry, tree.Type):
    need = _TYPE_MIN.get(entry.kind)
    what = f"type {_TYPE_NAMES.get(entry.kind, entry.kind)}"
  else:
    need = _ATTR_MIN.get(entry.kind)
    what = f"attribute {_ATTR_NAMES.get(entry.kind, entry.kind)}"
  if need is not None and target < _V(need):
    return what, need
  for child in _children(entry.fields):
    issue = _issue(child, target)
    if issue:
      return issue
  return None


# --- helpers ------------------------------------------------------------------------


def _is_empty_tensor(attr) -> bool:
  return (isinstance(attr, tree.Attr) and attr.kind == "TensorV1Attr" and
          not attr.fields[1])


def _is_empty_array(attr) -> bool:
  return (isinstance(attr, tree.Attr) and attr.kind == "ArrayV1Attr" and
          not attr.fields[0])


def is_none_type(attr) -> bool:
  return (isinstance(attr, tree.Attr) and attr.kind == "TypeV1Attr" and
          isinstance(attr.fields[0], tree.Type) and
          attr.fields[0].kind == "NoneV1Type")


def _is_false(attr) -> bool:
  return (isinstance(attr, tree.Attr) and attr.kind == "BooleanV1Attr" and
          not attr.fields[0])


def is_default_result_accuracy(attr) -> bool:
  """Zero tolerances (either sign), no ulps, mode DEFAULT."""
  if not (isinstance(attr, tree.Attr) and attr.kind == "ResultAccuracyV1Attr"):
    return False
  atol, rtol, ulps, mode = attr.fields
  zero_bits = (0, 1 << 63)
  return (atol in zero_bits and rtol in zero_bits and ulps == 0 and
          mode == ac.enum("ResultAccuracyModeV1Attr", "DEFAULT"))


def _stablehlo_name(op: vhlo_ir.VhloOp) -> str:
  definition = op.definition
  if definition is None:
    return op.name
  if definition.base == "return":
    return "return"
  return ops.stablehlo_name(definition.base)


def _conv_padding(op) -> tree.Attr | None:
  lhs = op.operands[0].type if op.operands else None
  if not (isinstance(lhs, tree.Type) and lhs.kind.startswith(
      "RankedTensorV1Type")):
    return None
  shape = lhs.fields[0] if lhs.kind == "RankedTensorV1Type" else lhs.fields[1]
  n = len(shape) - 2
  return ac.i64_tensor(np.zeros((n, 2), np.int64), shape=(n, 2))


# --- upgrade / downgrade rules ------------------------------------------------------
#
# UPGRADES[name_vN](op) rewrites op.named in place for vN+1.
# DOWNGRADES[name_vN+1](op) returns None after rewriting op.named for vN, or
# (attribute or feature, explanation) when vN cannot express the op.


def _add(**defaults):
  def rule(op):
    for name, make in defaults.items():
      op.named[name] = make()
  return rule


def _drop_if(checks: dict, extra=None):
  """Downgrade: each named attribute must satisfy its check, then goes."""
  def rule(op):
    for name, (check, why) in checks.items():
      if not check(op.named.get(name)):
        return name, why
    if extra is not None:
      issue = extra(op)
      if issue:
        return issue
    for name in checks:
      op.named.pop(name, None)
    return None
  return rule


def _single_operand(op):
  if len(op.operands) != 1:
    return "operands", f"{len(op.operands)} operands (only one allowed)"
  return None


def _no_regions(op):
  if any(r.blocks for r in op.regions):
    return "composite_regions", "non-empty composite regions"
  op.regions = []
  return None


_EMPTY = (_is_empty_tensor, "non-empty value")
_NONE = (is_none_type, "a dot algorithm is set")
_FALSE = (_is_false, "value true")

UPGRADES = {
    "dynamic_conv_v1": lambda op: op.named.pop("padding", None) and None,
    "gather_v1": _add(operand_batching_dims=lambda: ac.i64_tensor(()),
                      start_indices_batching_dims=lambda: ac.i64_tensor(())),
    "dynamic_gather_v1": _add(
        operand_batching_dims=lambda: ac.i64_tensor(()),
        start_indices_batching_dims=lambda: ac.i64_tensor(())),
    "scatter_v1": _add(input_batching_dims=lambda: ac.i64_tensor(()),
                       scatter_indices_batching_dims=lambda: ac.i64_tensor(())),
    "all_gather_v1": _add(),
    "all_to_all_v1": _add(),
    "all_reduce_v1": _add(),
    "dot_general_v1": _add(**{n: ac.none_type_attr for n in (
        "lhs_precision_type", "rhs_precision_type", "accumulation_type",
        "lhs_component_count", "rhs_component_count",
        "num_primitive_operations", "allow_imprecise_accumulation")}),
    "send_v1": _add(source_target_pairs=lambda: ac.i64_tensor(())),
    "recv_v1": _add(source_target_pairs=lambda: ac.i64_tensor(())),
    "collective_broadcast_v1": _add(has_dynamic_root=lambda: ac.boolean(False)),
    "composite_v1": _add(),
    "custom_call_v1": _add(result_tilings=lambda: ac.array(())),
}

DOWNGRADES = {
    "dynamic_conv_v2": None,  # Filled below (needs the operand type).
    "gather_v2": _drop_if({"operand_batching_dims": _EMPTY,
                           "start_indices_batching_dims": _EMPTY}),
    "dynamic_gather_v2": _drop_if({"operand_batching_dims": _EMPTY,
                                   "start_indices_batching_dims": _EMPTY}),
    "scatter_v2": _drop_if({"input_batching_dims": _EMPTY,
                            "scatter_indices_batching_dims": _EMPTY}),
    "all_gather_v2": _drop_if({}, _single_operand),
    "all_to_all_v2": _drop_if({}, _single_operand),
    "all_reduce_v2": _drop_if({}, _single_operand),
    "dot_general_v2": _drop_if({n: _NONE for n in (
        "lhs_precision_type", "rhs_precision_type", "accumulation_type",
        "lhs_component_count", "rhs_component_count",
        "num_primitive_operations", "allow_imprecise_accumulation")}),
    "send_v2": _drop_if({"source_target_pairs": _EMPTY}),
    "recv_v2": _drop_if({"source_target_pairs": _EMPTY}),
    "collective_broadcast_v2": _drop_if({"has_dynamic_root": _FALSE},
                                        _single_operand),
    "composite_v2": _drop_if({}, _no_regions),
    "custom_call_v2": _drop_if({"result_tilings": (_is_empty_array,
                                                   "non-empty value")}),
}


def _downgrade_dynamic_conv(op):
  padding = _conv_padding(op)
  if padding is None:
    return "lhs", "an unranked lhs (the padding attribute needs its rank)"
  op.named["padding"] = padding
  return None


DOWNGRADES["dynamic_conv_v2"] = _downgrade_dynamic_conv

for _base in ("cbrt", "cosine", "exponential", "exponential_minus_one", "log",
              "log_plus_one", "logistic", "rsqrt", "sine", "sqrt", "tan",
              "tanh"):
  _v1 = ops.VERSIONS[_base][0].name
  UPGRADES[_v1] = _add(result_accuracy=ac.default_result_accuracy)
  DOWNGRADES[ops.VERSIONS[_base][1].name] = _drop_if(
      {"result_accuracy": (is_default_result_accuracy, "a non-default value")})


def _rename(op: vhlo_ir.VhloOp, definition: ops.OpDef) -> None:
  op.name = definition.full_name


# The full names of the current op definitions: ops already there.
_CURRENT_NAMES = frozenset("vhlo." + defs[-1].name
                           for defs in ops.VERSIONS.values())


def upgrade(root: vhlo_ir.VhloOp) -> None:
  """Brings every VHLO op to its current version (in place)."""
  for op in root.walk():
    if op.name in _CURRENT_NAMES:
      continue
    if op.dialect != "vhlo":  # the module; sdy ops and casts (mixed)
      continue
    definition = ops.lookup(op.name)
    if definition is None:
      raise support.InvalidArgumentError(
          f"unregistered operation '{op.name}' found in dialect "
          f"('{op.dialect}') that does not allow unknown operations")
    versions = ops.VERSIONS[definition.base]
    while definition is not versions[-1]:
      rule = UPGRADES.get(definition.name)
      if rule is None:
        raise support.InternalError(f"no upgrade from {definition.name}")
      rule(op)
      definition = versions[versions.index(definition) + 1]
      _rename(op, definition)


@functools.lru_cache(maxsize=64)
def _supported_at(parts: tuple) -> frozenset:
  """The names of the op definitions a target (without patch) supports."""
  target = v.Version(*parts)
  return frozenset(name for name, d in ops.OPS.items() if d.supports(target))


@functools.lru_cache(maxsize=64)
def _supported_full_names(parts: tuple) -> frozenset:
  """`_supported_at(parts)` as `vhlo.`-prefixed op names."""
  return frozenset("vhlo." + name for name in _supported_at(parts))


def downgrade(root: vhlo_ir.VhloOp, target: v.Version) -> list:
  """Brings every VHLO op to the version `target` supports (in place).

  Returns the ops it rewrote, in order. Raises UnsupportedAtTargetError when
  an op cannot be expressed there.
  """
  rewritten = []
  supported = _supported_at(target.without_patch().parts)
  supported_full = _supported_full_names(target.without_patch().parts)
  for op in root.walk():
    name = op.name
    if name in supported_full:
      continue  # nothing to do: most ops at most targets
    if op.dialect != "vhlo":  # the module; sdy ops and casts (mixed)
      continue
    definition = ops.lookup(name)
    if definition is not None and definition.name in supported:
      continue
    versions = ops.VERSIONS[definition.base]
    if not any(d.supports(target) for d in versions):
      raise UnsupportedAtTargetError(
          f"{_stablehlo_name(op)} (vhlo.{definition.name}) needs StableHLO "
          f">= {versions[0].min_version}; it cannot be serialized for "
          f"target {target}")
    while not definition.supports(target):
      older = versions[versions.index(definition) - 1]
      rule = DOWNGRADES.get(definition.name)
      issue = rule(op) if rule is not None else None
      if issue:
        what, why = issue
        raise UnsupportedAtTargetError(
            f"{_stablehlo_name(op)}: {what} has {why}, which needs StableHLO "
            f">= {definition.min_version} (vhlo.{definition.name}); it cannot "
            f"be serialized for target {target}")
      definition = older
      _rename(op, definition)
      if not rewritten or rewritten[-1] is not op:
        rewritten.append(op)
  return rewritten


# --- legality at a target ------------------------------------------------------------

_MIXED_TYPES_OPS = ("all_reduce_v1", "reduce_v1", "reduce_scatter_v1",
                    "reduce_window_v1", "scatter_v1", "select_and_scatter_v1")


def _element(ty):
  if isinstance(ty, tree.Type) and ty.kind == "RankedTensorV1Type":
    return ty.fields[1]
  if isinstance(ty, tree.Type) and ty.kind == "RankedTensorV1TypeWithEncoding":
    return ty.fields[2]
  if isinstance(ty, tree.Type) and ty.kind == "UnrankedTensorV1Type":
    return ty.fields[0]
  return ty


def _constraint_issue(op: vhlo_ir.VhloOp, target: v.Version):
  name = op.definition.name
  if name in _MIXED_TYPES_OPS and target < _V("0.17.0"):
    pairs = zip([_element(x.type) for x in op.operands],
                [_element(x.type) for x in op.results])
    if any(x != y for x, y in pairs):
      return ("operand and result element types",
              "different element types", "0.17.0")
  if name == "custom_call_v1" and target < _V("1.17.0") and any(
      isinstance(x.type, tree.Type) and x.type.kind == "FutureV1Type"
      for x in op.operands):
    return "operands", "!stablehlo.future operands", "1.17.0"
  if name == "custom_call_v1" and target < _V("1.3.0"):
    config = op.named.get("backend_config")
    if isinstance(config, tree.Attr) and config.kind == "DictionaryV1Attr":
      return "backend_config", "a dictionary value", "1.3.0"
    api = op.named.get("api_version")
    if api == ac.enum("CustomCallApiVersionV1Attr", "API_VERSION_TYPED_FFI"):
      return "api_version", "value API_VERSION_TYPED_FFI", "1.3.0"
  return None


# Targets at or above these have every attribute / type kind and meet every
# versioned op constraint, so check_legal skips those walks for them.
_NEWEST_ENTRY = max(_V(x) for x in list(_TYPE_MIN.values()) +
                    list(_ATTR_MIN.values()))
_NEWEST_CONSTRAINT = _V("1.17.0")  # the newest version _constraint_issue tests


def check_legal(root: vhlo_ir.VhloOp, target: v.Version) -> None:
  """Raises UnsupportedAtTargetError unless all of `root` exists at target."""
  target = target.without_patch()
  supported = _supported_at(target.parts)
  check_constraints = target < _NEWEST_CONSTRAINT
  check_entries = target < _NEWEST_ENTRY
  for op in root.walk():
    if op.dialect != "vhlo":  # the module; sdy ops and casts (mixed)
      continue
    definition = op.definition
    if definition.name not in supported:
      raise UnsupportedAtTargetError(
          f"{_stablehlo_name(op)} (vhlo.{definition.name}) is not available "
          f"in StableHLO {target}")
    if check_constraints:
      issue = _constraint_issue(op, target)
      if issue:
        what, why, need = issue
        raise UnsupportedAtTargetError(
            f"{_stablehlo_name(op)}: {what} with {why} needs StableHLO >= "
            f"{need}; it cannot be serialized for target {target}")
    if check_entries:
      _check_entries(op, target)


def _check_entries(op: vhlo_ir.VhloOp, target: v.Version) -> None:
  """Raises unless every attribute and type `op` uses exists at target."""
  where = _stablehlo_name(op)
  for name, attr in op.named.items():
    issue = _attr_issue(attr, target)
    if issue:
      raise UnsupportedAtTargetError(
          f"{where}: attribute '{name}' uses {issue[0]}, which needs "
          f"StableHLO >= {issue[1]}; it cannot be serialized for target "
          f"{target}")
  values = list(op.operands) + list(op.results) + [
      arg for r in op.regions for b in r.blocks for arg in b.args]
  for value in values:
    issue = _type_issue(value.type, target)
    if issue:
      raise UnsupportedAtTargetError(
          f"{where}: {issue[0]} needs StableHLO >= {issue[1]}; it cannot "
          f"be serialized for target {target}")


def to_version(root: vhlo_ir.VhloOp, target) -> list:
  """Converts `root` (current ops) to the ops of `target`, checking it.

  Returns the ops that were rewritten (see `downgrade`).
  """
  target = v.Version.parse(target).without_patch()
  rewritten = downgrade(root, target)
  # Every VHLO op downgrade leaves exists at target; what remains to check
  # are the constraints and attribute / type kinds, which targets at or
  # above these versions all meet.
  if target < _NEWEST_CONSTRAINT or target < _NEWEST_ENTRY:
    check_legal(root, target)
  return rewritten

