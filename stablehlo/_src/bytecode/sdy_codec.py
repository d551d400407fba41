"""The Shardy (sdy) dialect's attribute encodings and op properties.

Kind codes and field orders follow openxla/shardy
`shardy/dialect/sdy/ir/bytecode.td` (the position in its `SdyDialectTypes`
list is the code). Shardy writes a tensor sharding with unreduced axes as
`TensorShardingAttrV2`, one without as V1 (likewise the per-value list).
Sdy ops keep their attributes as native properties, sorted by name as
ODS-generated `writeProperties` writes them (`OP_PROPERTIES`).
"""

from __future__ import annotations

from stablehlo._src.bytecode import codec

DIALECT = "sdy"

_AXES = ("axes", "attrs")
_ATTRS = {
    0: ("ManualAxesAttr", (("value", "attrs"),)),
    1: ("MeshAxisAttr", (("name", "string"), ("size", "svarint"))),
    2: ("MeshAttr", (_AXES, ("device_ids", "svarints"))),
    3: ("SubAxisInfoAttr", (("pre_size", "svarint"), ("size", "svarint"))),
    4: ("AxisRefAttr", (("name", "string"), ("sub_axis_info", "opt_attr"))),
    5: ("DimensionShardingAttr", (_AXES, ("is_closed", "byte"),
                                  ("priority", "opt_varint"))),
    6: ("TensorShardingAttr", (("mesh_or_ref", "attr"),
                               ("dim_shardings", "attrs"),
                               ("replicated_axes", "attrs"))),
    7: ("TensorShardingPerValueAttr", (("shardings", "attrs"),)),
    8: ("DimMappingAttr", (("factor_indices", "svarints"),)),
    9: ("TensorMappingAttr", (("dim_mappings", "attrs"),)),
    10: ("OpShardingRuleAttr", (("factor_sizes", "svarints"),
                                ("operand_mappings", "attrs"),
                                ("result_mappings", "attrs"),
                                ("reduction_factors", "svarints"),
                                ("need_replication_factors", "svarints"),
                                ("permutation_factors", "svarints"),
                                ("blocked_propagation_factors", "svarints"),
                                ("is_custom_rule", "byte"))),
    11: ("AxisRefListAttr", (("value", "attrs"),)),
    12: ("ListOfAxisRefListsAttr", (("value", "attrs"),)),
    13: ("AllToAllParamAttr", (_AXES, ("src_dim", "svarint"),
                               ("tgt_dim", "svarint"))),
    14: ("AllToAllParamListAttr", (("value", "attrs"),)),
    15: ("TensorShardingAttrV2", (("mesh_or_ref", "attr"),
                                  ("dim_shardings", "attrs"),
                                  ("replicated_axes", "attrs"),
                                  ("unreduced_axes", "attrs"))),
    16: ("TensorShardingPerValueAttrV2", (("shardings", "attrs"),)),
}

# op name -> ((property name, field kind), ...) in the order written.
OP_PROPERTIES = {
    "sdy.mesh": (("mesh", "attr"), ("sym_name", "attr")),
    "sdy.sharding_constraint": (("sharding", "attr"),),
    "sdy.reshard": (("sharding", "attr"),),
    "sdy.manual_computation": (("in_shardings", "attr"),
                               ("manual_axes", "attr"),
                               ("out_shardings", "attr")),
    "sdy.named_computation": (("in_shardings", "opt_attr"), ("name", "attr"),
                              ("out_shardings", "opt_attr")),
    "sdy.propagation_barrier": (("allowed_direction", "attr"),),
    "sdy.sharding_group": (("group_id", "attr"),),
    "sdy.constant": (("value", "attr"),),
    "sdy.data_flow_edge": (("sharding", "opt_attr"),),
    "sdy.all_gather": (("gathering_axes", "attr"), ("out_sharding", "attr")),
    "sdy.all_slice": (("out_sharding", "attr"), ("slicing_axes", "attr")),
    "sdy.all_to_all": (("out_sharding", "attr"), ("params", "attr")),
    "sdy.collective_permute": (("out_sharding", "attr"),),
    "sdy.all_reduce": (("out_sharding", "attr"), ("reduction_axes", "attr")),
    "sdy.reduce_scatter": (("out_sharding", "attr"),
                           ("reduce_scatter_axes", "attr")),
    "sdy.return": (),
    "sdy.func_data_flow_edge": (),
}

CODEC = codec.register(codec.DialectCodec(
    dialect=DIALECT,
    attrs=_ATTRS,
    types={},
    properties={name: tuple(kind for _, kind in props)
                for name, props in OP_PROPERTIES.items() if props},
))


def property_names(op_name: str):
  """The names of an sdy op's properties in the order written, or None for
  an op this codec does not know."""
  props = OP_PROPERTIES.get(op_name)
  return None if props is None else tuple(name for name, _ in props)
