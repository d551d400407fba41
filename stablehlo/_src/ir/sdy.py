"""Shardy (`sdy`) attributes: meshes, axis references and tensor shardings.

These are the values JAX attaches to programs it lowers for several devices
(openxla/shardy `docs/sharding_representation.md`, `docs/sdy_dialect.md`):

    sdy.mesh @mesh = <["x"=2, "y"=2]>
    func.func @main(%arg0: tensor<4x4xf32>
        {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y", ?}p1]>}) ...

Every attribute is an immutable value; `str(attr)` is the attribute exactly
as MLIR prints it on its own (`#sdy.sharding<@mesh, [{"x"}, {}]>`,
`#sdy<manual_axes{"x", "y"}>`), `attr.body()` the part after the mnemonic
that sdy ops print inline (`<@mesh, [{"x"}, {}]>`, `{"x", "y"}`).

Op attributes that are plain integers upstream stay builtin attributes here:
`sdy.propagation_barrier`'s direction is an `i32` (`PROPAGATION_DIRECTIONS`
names the values), `sdy.sharding_group`'s id an `i64`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Optional, Sequence, Union

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t

DIALECT = "sdy"
# Discardable attribute names.
SHARDING = "sdy.sharding"  # TensorSharding (func args / results) or
#                            TensorShardingPerValue (op results).
SHARDING_RULE = "sdy.sharding_rule"  # OpShardingRule

# `sdy.propagation_barrier` allowed_direction values (an i32 attribute).
PROPAGATION_DIRECTIONS = ("NONE", "FORWARD", "BACKWARD", "BOTH")

# Factor 17 prints as `z`, factor 18 as `z_1` (shardy's factorSymbolString).
_START_AT_Z = ord("z") - ord("i")
_BARE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def quote(value: str) -> str:
  """A string literal as MLIR prints it (llvm::printEscapedString): `\\`
  doubled, `"` and every non-printable byte as `\\XX`."""
  out = ['"']
  for byte in value.encode("utf-8", "surrogateescape"):
    if byte == 0x5C:
      out.append("\\\\")
    elif 0x20 <= byte < 0x7F and byte != 0x22:
      out.append(chr(byte))
    else:
      out.append("\\%02X" % byte)
  out.append('"')
  return "".join(out)


def symbol(name: str) -> str:
  """`@name`, quoted when it is not a bare identifier."""
  return "@" + (name if _BARE_SYMBOL.fullmatch(name) else quote(name))


def factor_symbol(index: int) -> str:
  """`i`, `j`, ..., `z`, `z_1`, `z_2`, ... (the factor names of a rule)."""
  if index <= _START_AT_Z:
    return chr(ord("i") + index)
  return f"z_{index - _START_AT_Z}"


def _tuple(values) -> tuple:
  return tuple(values) if not isinstance(values, tuple) else values


def _freeze(obj, *names) -> None:
  """Turns list fields into tuples (dataclasses are frozen and hashed)."""
  for name in names:
    object.__setattr__(obj, name, _tuple(getattr(obj, name)))


class SdyAttr(a.Attribute):
  """Base of the Shardy attributes. Subclasses define `MNEMONIC` and
  `body()`."""

  __slots__ = ()
  MNEMONIC = ""

  def body(self) -> str:
    raise NotImplementedError

  def __str__(self) -> str:
    body = self.body()
    # MLIR's pretty dialect-attribute form `#sdy.mnemonic<...>` applies when
    # the printed body is one `<...>` group; otherwise `#sdy<mnemonic...>`.
    if body.startswith("<") and body.endswith(">"):
      return f"#{DIALECT}.{self.MNEMONIC}{body}"
    return f"#{DIALECT}<{self.MNEMONIC}{body}>"


# --- meshes ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MeshAxis(SdyAttr):
  """`"x"=4`: a named mesh axis and its size."""

  name: str
  size: int
  MNEMONIC = "mesh_axis"

  def body(self) -> str:
    return f"{quote(self.name)}={self.size}"


@dataclasses.dataclass(frozen=True)
class Mesh(SdyAttr):
  """`<["x"=2, "y"=2]>`, `<["a"=2, "b"=2], device_ids=[0, 2, 1, 3]>`, the
  empty mesh `<[]>` or a maximal mesh `<[], device_ids=[3]>`.

  As upstream's builder does, explicit device ids equal to
  iota(product of the axis sizes) are dropped when the mesh has axes.
  """

  axes: tuple[MeshAxis, ...] = ()
  device_ids: tuple[int, ...] = ()
  MNEMONIC = "mesh"

  def __post_init__(self):
    _freeze(self, "axes", "device_ids")
    if self.axes and self.device_ids == tuple(range(self.num_devices)):
      object.__setattr__(self, "device_ids", ())

  def body(self) -> str:
    text = "<[" + ", ".join(x.body() for x in self.axes) + "]"
    if self.device_ids:
      text += ", device_ids=[" + ", ".join(map(str, self.device_ids)) + "]"
    return text + ">"

  @property
  def axis_names(self) -> tuple[str, ...]:
    return tuple(x.name for x in self.axes)

  def axis_size(self, name: str) -> Optional[int]:
    for x in self.axes:
      if x.name == name:
        return x.size
    return None

  def has_axis(self, name: str) -> bool:
    return self.axis_size(name) is not None

  @property
  def num_devices(self) -> int:
    """Devices the mesh spans (1 for an empty or maximal mesh)."""
    return math.prod(x.size for x in self.axes)

  @property
  def is_maximal(self) -> bool:
    """No axes and one device id: everything runs on that device."""
    return not self.axes and len(self.device_ids) == 1

  @property
  def device_order(self) -> tuple[int, ...]:
    """The device id of each mesh position, in row-major order."""
    return self.device_ids or tuple(range(self.num_devices))


# --- axis references and dimension shardings -------------------------------------


@dataclasses.dataclass(frozen=True)
class SubAxisInfo(SdyAttr):
  """`(pre_size)size`: the sub-axis of size `size` after `pre_size`."""

  pre_size: int
  size: int
  MNEMONIC = "sub_axis_info"

  def body(self) -> str:
    return f"({self.pre_size}){self.size}"

  @property
  def next_pre_size(self) -> int:
    return self.pre_size * self.size


@dataclasses.dataclass(frozen=True)
class AxisRef(SdyAttr):
  """`"x"` or the sub-axis `"x":(1)2`."""

  name: str
  sub_axis_info: Optional[SubAxisInfo] = None
  MNEMONIC = "axis_ref"

  def body(self) -> str:
    if self.sub_axis_info is None:
      return quote(self.name)
    return f"{quote(self.name)}:{self.sub_axis_info.body()}"

  def size(self, mesh: Mesh) -> Optional[int]:
    """The axis' size in `mesh` (None for an unknown axis)."""
    if self.sub_axis_info is not None:
      return self.sub_axis_info.size
    return mesh.axis_size(self.name)

  def overlaps(self, other: "AxisRef", mesh: Mesh) -> bool:
    """Whether the two refer to a common part of one mesh axis."""
    if self.name != other.name:
      return False
    full = mesh.axis_size(self.name) or 1
    lo1, hi1 = _span(self, full)
    lo2, hi2 = _span(other, full)
    return lo1 < hi2 and lo2 < hi1

  def can_merge(self, other: "AxisRef") -> bool:
    """`"x":(1)2` followed by `"x":(2)2` (consecutive sub-axes)."""
    return (self.sub_axis_info is not None and
            other.sub_axis_info is not None and self.name == other.name and
            self.sub_axis_info.next_pre_size == other.sub_axis_info.pre_size)


def _span(ref: AxisRef, full: int) -> tuple[int, int]:
  """[start, end) of the ref on a log-free scale: sub-axis (m)k covers the
  factors between m and m*k of the full axis."""
  if ref.sub_axis_info is None:
    return 1, full
  return ref.sub_axis_info.pre_size, ref.sub_axis_info.next_pre_size


def mesh_axis_key(mesh: Mesh):
  """Sort key ordering axis refs as the mesh does (AxisRefAttr's mesh
  comparator): by axis position, then a full axis before its sub-axes,
  then by pre-size, then by size."""
  position = {name: i for i, name in enumerate(mesh.axis_names)}

  def key(ref: AxisRef):
    info = ref.sub_axis_info
    return (position.get(ref.name, len(position)), ref.name,
            0 if info is None else 1,
            0 if info is None else info.pre_size,
            0 if info is None else info.size)

  return key


@dataclasses.dataclass(frozen=True)
class DimensionSharding(SdyAttr):
  """`{"x", "y"}` (closed), `{"x", ?}` / `{?}` (open), `{"x"}p1` (with a
  priority; lower is stronger)."""

  axes: tuple[AxisRef, ...] = ()
  is_closed: bool = True
  priority: Optional[int] = None
  MNEMONIC = "dimension_sharding"

  def __post_init__(self):
    _freeze(self, "axes")

  def body(self) -> str:
    text = "{" + ", ".join(x.body() for x in self.axes)
    if not self.is_closed:
      text += ", ?" if self.axes else "?"
    text += "}"
    if self.priority is not None:
      text += f"p{self.priority}"
    return text

  def sharded_size(self, mesh: Mesh) -> int:
    return math.prod(x.size(mesh) or 1 for x in self.axes)


# --- tensor shardings ------------------------------------------------------------------


MeshOrRef = Union[str, Mesh]


@dataclasses.dataclass(frozen=True)
class TensorSharding(SdyAttr):
  """`#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}, unreduced={"z"}>`.

  `mesh_or_ref` is the name of an `sdy.mesh` symbol (a str) or an inline
  `Mesh`. There is one `DimensionSharding` per tensor dimension.
  """

  mesh_or_ref: MeshOrRef
  dim_shardings: tuple[DimensionSharding, ...] = ()
  replicated_axes: tuple[AxisRef, ...] = ()
  unreduced_axes: tuple[AxisRef, ...] = ()
  MNEMONIC = "sharding"

  def __post_init__(self):
    _freeze(self, "dim_shardings", "replicated_axes", "unreduced_axes")

  @classmethod
  def of(cls, mesh_or_ref: MeshOrRef, dims: Sequence[Sequence[str]],
         replicated: Sequence[str] = (), unreduced: Sequence[str] = ()
         ) -> "TensorSharding":
    """A sharding with closed dimensions over full axes, from names:
    `TensorSharding.of("mesh", [["x"], []])`."""
    return cls(mesh_or_ref,
               tuple(DimensionSharding(tuple(AxisRef(n) for n in d))
                     for d in dims),
               tuple(AxisRef(n) for n in replicated),
               tuple(AxisRef(n) for n in unreduced))

  def body(self) -> str:
    if isinstance(self.mesh_or_ref, Mesh):
      mesh = Mesh.MNEMONIC + self.mesh_or_ref.body()
    else:
      mesh = symbol(self.mesh_or_ref)
    text = (f"<{mesh}, [" + ", ".join(d.body() for d in self.dim_shardings) +
            "]")
    for keyword, axes in (("replicated", self.replicated_axes),
                          ("unreduced", self.unreduced_axes)):
      if axes:
        text += f", {keyword}={{" + ", ".join(x.body() for x in axes) + "}"
    return text + ">"

  @property
  def rank(self) -> int:
    return len(self.dim_shardings)

  @property
  def mesh_name(self) -> Optional[str]:
    return self.mesh_or_ref if isinstance(self.mesh_or_ref, str) else None

  def all_axis_refs(self) -> tuple[AxisRef, ...]:
    refs = [x for d in self.dim_shardings for x in d.axes]
    return tuple(refs) + self.replicated_axes + self.unreduced_axes

  def is_fully_replicated(self) -> bool:
    return all(not d.axes for d in self.dim_shardings)


@dataclasses.dataclass(frozen=True)
class TensorShardingPerValue(SdyAttr):
  """`#sdy.sharding_per_value<[<@mesh, [{"x"}]>, <@mesh, [{}]>]>`: one
  sharding per result of an op (or per operand of a region op)."""

  shardings: tuple[TensorSharding, ...] = ()
  MNEMONIC = "sharding_per_value"

  def __post_init__(self):
    _freeze(self, "shardings")

  def body(self) -> str:
    return "<" + self.stripped() + ">"

  def stripped(self) -> str:
    """`[<@mesh, [...]>, ...]`, as `in_shardings=` prints it."""
    return "[" + ", ".join(s.body() for s in self.shardings) + "]"


@dataclasses.dataclass(frozen=True)
class ManualAxes(SdyAttr):
  """`{"x", "y"}`: the axes an `sdy.manual_computation` is manual on."""

  axes: tuple[str, ...] = ()
  MNEMONIC = "manual_axes"

  def __post_init__(self):
    _freeze(self, "axes")

  def body(self) -> str:
    return "{" + ", ".join(quote(x) for x in self.axes) + "}"


# --- collective parameters -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AxisRefList(SdyAttr):
  """`{"x", "y":(1)2}`."""

  axes: tuple[AxisRef, ...] = ()
  MNEMONIC = "axis_ref_list"

  def __post_init__(self):
    _freeze(self, "axes")

  def body(self) -> str:
    return "{" + ", ".join(x.body() for x in self.axes) + "}"


@dataclasses.dataclass(frozen=True)
class ListOfAxisRefLists(SdyAttr):
  """`[{"x"}, {}]`: one axis list per dimension."""

  lists: tuple[AxisRefList, ...] = ()
  MNEMONIC = "list_of_axis_ref_lists"

  def __post_init__(self):
    _freeze(self, "lists")

  def body(self) -> str:
    return "[" + ", ".join(x.body() for x in self.lists) + "]"


@dataclasses.dataclass(frozen=True)
class AllToAllParam(SdyAttr):
  """`{"x"}: 0->1`."""

  axes: tuple[AxisRef, ...]
  src_dim: int
  tgt_dim: int
  MNEMONIC = "all_to_all_param"

  def __post_init__(self):
    _freeze(self, "axes")

  def body(self) -> str:
    return ("{" + ", ".join(x.body() for x in self.axes) +
            f"}}: {self.src_dim}->{self.tgt_dim}")


@dataclasses.dataclass(frozen=True)
class AllToAllParamList(SdyAttr):
  """`[{"x"}: 0->1, ...]`."""

  params: tuple[AllToAllParam, ...] = ()
  MNEMONIC = "all_to_all_param_list"

  def __post_init__(self):
    _freeze(self, "params")

  def body(self) -> str:
    return "[" + ", ".join(x.body() for x in self.params) + "]"


# --- sharding rules ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DimMapping(SdyAttr):
  """The factors one dimension maps to, printed as `ij`."""

  factor_indices: tuple[int, ...] = ()
  MNEMONIC = "dim_mapping"

  def __post_init__(self):
    _freeze(self, "factor_indices")

  def body(self) -> str:
    return "".join(factor_symbol(i) for i in self.factor_indices)


@dataclasses.dataclass(frozen=True)
class TensorMapping(SdyAttr):
  """`[i, jk]`: one DimMapping per dimension of a tensor."""

  dim_mappings: tuple[DimMapping, ...] = ()
  MNEMONIC = "tensor_mapping"

  def __post_init__(self):
    _freeze(self, "dim_mappings")

  def body(self) -> str:
    return "[" + ", ".join(x.body() for x in self.dim_mappings) + "]"


@dataclasses.dataclass(frozen=True)
class OpShardingRule(SdyAttr):
  """`#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=4, j=2, k=4}
  reduction={j}, custom>`."""

  factor_sizes: tuple[int, ...]
  operand_mappings: tuple[TensorMapping, ...]
  result_mappings: tuple[TensorMapping, ...]
  reduction_factors: tuple[int, ...] = ()
  need_replication_factors: tuple[int, ...] = ()
  permutation_factors: tuple[int, ...] = ()
  blocked_propagation_factors: tuple[int, ...] = ()
  is_custom_rule: bool = False
  MNEMONIC = "op_sharding_rule"

  FACTOR_KINDS = ("reduction", "need_replication", "permutation",
                  "blocked_propagation")

  def __post_init__(self):
    _freeze(self, "factor_sizes", "operand_mappings", "result_mappings",
            "reduction_factors", "need_replication_factors",
            "permutation_factors", "blocked_propagation_factors")

  def factors_of_kind(self, kind: str) -> tuple[int, ...]:
    return getattr(self, f"{kind}_factors")

  def body(self) -> str:
    text = ("<(" + ", ".join(m.body() for m in self.operand_mappings) +
            ")->(" + ", ".join(m.body() for m in self.result_mappings) + ")")
    if self.factor_sizes:
      text += " {" + ", ".join(f"{factor_symbol(i)}={s}" for i, s in
                               enumerate(self.factor_sizes)) + "}"
    for kind in self.FACTOR_KINDS:
      factors = self.factors_of_kind(kind)
      if factors:
        text += f" {kind}={{" + ", ".join(map(factor_symbol, factors)) + "}"
    if self.is_custom_rule:
      text += ", custom"
    return text + ">"


# --- helpers for the ops ------------------------------------------------------------------


def lookup_mesh(anchor, mesh_or_ref: MeshOrRef) -> Optional[Mesh]:
  """The mesh a sharding is bound to: an inline mesh, or the `sdy.mesh`
  symbol of that name in the module enclosing the op `anchor` (or in the
  module op / `core.Module` `anchor` itself)."""
  if isinstance(mesh_or_ref, Mesh):
    return mesh_or_ref
  for op in _module_body_ops(anchor):
    if op.name == "sdy.mesh":
      sym = op.attr("sym_name")
      mesh = op.attr("mesh")
      if (isinstance(sym, a.StringAttr) and sym.value == mesh_or_ref and
          isinstance(mesh, Mesh)):
        return mesh
  return None


def _module_body_ops(anchor):
  module = getattr(anchor, "op", anchor)  # core.Module -> its op
  while module is not None and module.name != "builtin.module":
    block = module.parent
    region = block.parent if block is not None else None
    module = region.parent if region is not None else None
  if module is None or not module.regions or not module.regions[0].blocks:
    return ()
  return module.regions[0].blocks[0].operations


def manual_axes_size(dim: DimensionSharding, manual: Sequence[str],
                     mesh: Mesh) -> int:
  """The product of the sizes of `dim`'s axes that are manual."""
  return math.prod(x.size(mesh) or 1 for x in dim.axes if x.name in manual)


def local_type(global_type: t.Type, sharding: TensorSharding,
               manual: Sequence[str], mesh: Mesh) -> t.Type:
  """The per-device type inside an `sdy.manual_computation` manual on
  `manual`: each static dimension divided by its manual axes' size."""
  if not isinstance(global_type, t.RankedTensorType):
    return global_type
  shape = tuple(
      None if size is None else size // manual_axes_size(d, manual, mesh)
      for size, d in zip(global_type.shape, sharding.dim_shardings))
  return dataclasses.replace(global_type, shape=shape)
