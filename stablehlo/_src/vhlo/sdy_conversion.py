"""Shardy attributes and ops in portable artifacts.

JAX serializes sharded programs "mixed": StableHLO ops as VHLO, Shardy ops
(`sdy.mesh`, `sdy.sharding_constraint`, `sdy.manual_computation`, ...) as
they are, with builtin types, and `builtin.unrealized_conversion_cast` ops
between the two where a value crosses (a VHLO tensor into an sdy op, an sdy
result into a VHLO op). Shardy attributes keep their own bytecode encoding
(`bytecode/sdy_codec.py`) wherever they appear: as sdy op properties and
inside VHLO dictionaries (`sdy.sharding` argument attributes,
`sdy.sharding_rule` on custom calls).

This module converts those attributes between the bytecode tree and our IR
values (`ir/sdy.py`), and the other attributes of sdy ops (names, ids,
discardable dictionaries) through their builtin encodings.
"""

from __future__ import annotations

from stablehlo._src.bytecode import tree
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import sdy
from stablehlo._src.vhlo import type_conversion as tc

DIALECT = sdy.DIALECT
CAST = "builtin.unrealized_conversion_cast"
ConversionError = tc.ConversionError


def _sa(kind: str, *fields) -> tree.Attr:
  return tree.Attr(DIALECT, kind, fields)


def _string(value: str) -> tree.Attr:
  return tree.Attr("builtin", "StringAttr", (value,))


def _string_value(attr) -> str:
  if isinstance(attr, tree.Attr) and attr.dialect == "builtin" and \
      attr.kind == "StringAttr":
    return attr.fields[0]
  raise ConversionError(f"expected a builtin string, got {attr!r}")


def is_sdy(attr) -> bool:
  return isinstance(attr, (tree.Attr, tree.OpaqueAttr, tree.AsmAttr)) and \
      attr.dialect == DIALECT


# --- tree -> IR ----------------------------------------------------------------------


def _axis_refs(attrs) -> tuple:
  return tuple(from_tree(x) for x in attrs)


def _from_text(attr: tree.AsmAttr):
  """An sdy attribute Shardy wrote as text (those without a bytecode
  encoding, e.g. propagation debugging attributes): parsed as our text
  parser reads it (an `OpaqueAttr` when it is not modelled)."""
  from stablehlo._src.text import attr_parser  # pylint: disable=g-import-not-at-top
  return attr_parser.AttrParser(attr.text.decode("utf-8")).parse_attribute()


def from_tree(attr):
  """Our sdy attribute for an sdy bytecode attribute."""
  if isinstance(attr, tree.AsmAttr) and attr.dialect == DIALECT:
    return _from_text(attr)
  if not isinstance(attr, tree.Attr) or attr.dialect != DIALECT:
    raise ConversionError(f"expected a decoded sdy attribute, got {attr!r}")
  kind, f = attr.kind, attr.fields
  if kind == "ManualAxesAttr":
    return sdy.ManualAxes(tuple(_string_value(x) for x in f[0]))
  if kind == "MeshAxisAttr":
    return sdy.MeshAxis(f[0], f[1])
  if kind == "MeshAttr":
    return sdy.Mesh(_axis_refs(f[0]), tuple(f[1]))
  if kind == "SubAxisInfoAttr":
    return sdy.SubAxisInfo(f[0], f[1])
  if kind == "AxisRefAttr":
    return sdy.AxisRef(f[0], None if f[1] is None else from_tree(f[1]))
  if kind == "DimensionShardingAttr":
    return sdy.DimensionSharding(_axis_refs(f[0]), bool(f[1]), f[2])
  if kind in ("TensorShardingAttr", "TensorShardingAttrV2"):
    mesh = f[0]
    if isinstance(mesh, tree.Attr) and mesh.dialect == "builtin" and \
        mesh.kind == "FlatSymbolRefAttr":
      mesh_or_ref = _string_value(mesh.fields[0])
    else:
      mesh_or_ref = from_tree(mesh)
    unreduced = _axis_refs(f[3]) if kind == "TensorShardingAttrV2" else ()
    return sdy.TensorSharding(mesh_or_ref, _axis_refs(f[1]), _axis_refs(f[2]),
                              unreduced)
  if kind in ("TensorShardingPerValueAttr", "TensorShardingPerValueAttrV2"):
    return sdy.TensorShardingPerValue(_axis_refs(f[0]))
  if kind == "DimMappingAttr":
    return sdy.DimMapping(tuple(f[0]))
  if kind == "TensorMappingAttr":
    return sdy.TensorMapping(_axis_refs(f[0]))
  if kind == "OpShardingRuleAttr":
    return sdy.OpShardingRule(tuple(f[0]), _axis_refs(f[1]), _axis_refs(f[2]),
                              tuple(f[3]), tuple(f[4]), tuple(f[5]),
                              tuple(f[6]), bool(f[7]))
  if kind == "AxisRefListAttr":
    return sdy.AxisRefList(_axis_refs(f[0]))
  if kind == "ListOfAxisRefListsAttr":
    return sdy.ListOfAxisRefLists(_axis_refs(f[0]))
  if kind == "AllToAllParamAttr":
    return sdy.AllToAllParam(_axis_refs(f[0]), f[1], f[2])
  if kind == "AllToAllParamListAttr":
    return sdy.AllToAllParamList(_axis_refs(f[0]))
  raise ConversionError(f"sdy attribute {kind} is not supported")


# --- IR -> tree ----------------------------------------------------------------------


def _trees(values) -> tuple:
  return tuple(to_tree(x) for x in values)


def is_sdy_text(attr) -> bool:
  """An sdy attribute our IR keeps as text (`#sdy.propagation_edges...`)."""
  return isinstance(attr, a.OpaqueAttr) and attr.text.startswith("#sdy")


def to_tree(attr):
  """The sdy bytecode attribute for one of our sdy attributes, in the
  encoding Shardy writes (V2 shardings only where unreduced axes are);
  sdy attributes kept as text are written as text."""
  if is_sdy_text(attr):
    return tree.AsmAttr(DIALECT, attr.text.encode("utf-8"))
  if isinstance(attr, sdy.ManualAxes):
    return _sa("ManualAxesAttr", tuple(_string(x) for x in attr.axes))
  if isinstance(attr, sdy.MeshAxis):
    return _sa("MeshAxisAttr", attr.name, attr.size)
  if isinstance(attr, sdy.Mesh):
    return _sa("MeshAttr", _trees(attr.axes), attr.device_ids)
  if isinstance(attr, sdy.SubAxisInfo):
    return _sa("SubAxisInfoAttr", attr.pre_size, attr.size)
  if isinstance(attr, sdy.AxisRef):
    sub = attr.sub_axis_info
    return _sa("AxisRefAttr", attr.name, None if sub is None else to_tree(sub))
  if isinstance(attr, sdy.DimensionSharding):
    return _sa("DimensionShardingAttr", _trees(attr.axes),
               1 if attr.is_closed else 0, attr.priority)
  if isinstance(attr, sdy.TensorSharding):
    if isinstance(attr.mesh_or_ref, sdy.Mesh):
      mesh = to_tree(attr.mesh_or_ref)
    else:
      mesh = tree.Attr("builtin", "FlatSymbolRefAttr",
                       (_string(attr.mesh_or_ref),))
    fields = (mesh, _trees(attr.dim_shardings), _trees(attr.replicated_axes))
    if attr.unreduced_axes:
      return _sa("TensorShardingAttrV2", *fields,
                 _trees(attr.unreduced_axes))
    return _sa("TensorShardingAttr", *fields)
  if isinstance(attr, sdy.TensorShardingPerValue):
    v2 = any(s.unreduced_axes for s in attr.shardings)
    return _sa("TensorShardingPerValueAttrV2" if v2 else
               "TensorShardingPerValueAttr", _trees(attr.shardings))
  if isinstance(attr, sdy.DimMapping):
    return _sa("DimMappingAttr", attr.factor_indices)
  if isinstance(attr, sdy.TensorMapping):
    return _sa("TensorMappingAttr", _trees(attr.dim_mappings))
  if isinstance(attr, sdy.OpShardingRule):
    return _sa("OpShardingRuleAttr", attr.factor_sizes,
               _trees(attr.operand_mappings), _trees(attr.result_mappings),
               attr.reduction_factors, attr.need_replication_factors,
               attr.permutation_factors, attr.blocked_propagation_factors,
               1 if attr.is_custom_rule else 0)
  if isinstance(attr, sdy.AxisRefList):
    return _sa("AxisRefListAttr", _trees(attr.axes))
  if isinstance(attr, sdy.ListOfAxisRefLists):
    return _sa("ListOfAxisRefListsAttr", _trees(attr.lists))
  if isinstance(attr, sdy.AllToAllParam):
    return _sa("AllToAllParamAttr", _trees(attr.axes), attr.src_dim,
               attr.tgt_dim)
  if isinstance(attr, sdy.AllToAllParamList):
    return _sa("AllToAllParamListAttr", _trees(attr.params))
  raise ConversionError(f"attribute {attr} has no sdy bytecode encoding")
