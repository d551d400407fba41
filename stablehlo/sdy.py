"""Shardy (`sdy`): the sharding dialect JAX emits for sharded jit and
shard_map.

    import stablehlo.sdy as sdy
    s = sdy.TensorSharding.of("mesh", [["x"], []])
    str(s)                       # '#sdy.sharding<@mesh, [{"x"}, {}]>'
    mesh = sdy.lookup_mesh(module, s.mesh_or_ref)
    sdy.local_type(global_type, s, ["x"], mesh)

The attributes are immutable values whose `str` is their MLIR spelling;
`stablehlo.text` parses and prints the sdy ops (`sdy.mesh`,
`sdy.sharding_constraint`, `sdy.manual_computation`, ...) and
`stablehlo.verify` checks them. `sharding_problem` / `mesh_problem` /
`rule_problem` are the verifier's checks of one attribute.
"""

# pylint: disable=g-multiple-import,g-importing-member
from stablehlo._src.ir.sdy import (
    DIALECT as DIALECT,
    PROPAGATION_DIRECTIONS as PROPAGATION_DIRECTIONS,
    SHARDING as SHARDING,
    SHARDING_RULE as SHARDING_RULE,
    AllToAllParam as AllToAllParam,
    AllToAllParamList as AllToAllParamList,
    AxisRef as AxisRef,
    AxisRefList as AxisRefList,
    DimMapping as DimMapping,
    DimensionSharding as DimensionSharding,
    ListOfAxisRefLists as ListOfAxisRefLists,
    ManualAxes as ManualAxes,
    Mesh as Mesh,
    MeshAxis as MeshAxis,
    OpShardingRule as OpShardingRule,
    SdyAttr as SdyAttr,
    SubAxisInfo as SubAxisInfo,
    TensorMapping as TensorMapping,
    TensorSharding as TensorSharding,
    TensorShardingPerValue as TensorShardingPerValue,
    local_type as local_type,
    lookup_mesh as lookup_mesh,
    manual_axes_size as manual_axes_size,
)
from stablehlo._src.ops.sdy import (
    mesh_problem as mesh_problem,
    rule_problem as rule_problem,
    sharding_problem as sharding_problem,
)
