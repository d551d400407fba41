"""Shardings of a StableHLO program as HLO shardings.

A program JAX compiles for several devices is a *global* program: its
values carry shardings that say how they are split across the devices, and
the SPMD partitioner (xla/service/spmd) makes each device's program from
them. The StableHLO -> HLO import keeps them as HLO `sharding=` attributes,
as XLA's importer and Shardy's export to GSPMD
(xla/service/spmd/shardy/stablehlo_round_trip) do:

  * GSPMD form: `mhlo.sharding = "{devices=[2,2]<=[4]}"` on function
    arguments, results and ops (the `@Sharding`, `@SPMDFullToShardShape`
    and `@SPMDShardToFullShape` custom calls among them) is the HLO
    sharding text itself;
  * Shardy form: `#sdy.sharding<@mesh, [{"x"}, {"y"}]>` on arguments,
    results and ops, bound to an `sdy.mesh`, converts with `from_sdy`;
    `sdy.sharding_constraint` / `sdy.reshard` become `@Sharding` custom
    calls, and `sdy.manual_computation` (shard_map) becomes the GSPMD manual
    pattern: per operand `@Sharding` (its in-sharding) then
    `@SPMDFullToShardShape` (`{manual}`), the body inlined on the local
    shapes, per result `@Sharding` (`{manual}`) then `@SPMDShardToFullShape`
    (its out-sharding); every op of the body is `{manual}`, as Shardy's
    export marks it.

`from_sdy` follows Shardy's `convertToHloSharding`: the tile dimension of a
tensor dimension is the product of its axes' sizes; the mesh's axes,
split where sub-axes (`"x":(2)2`) need it, form the reshape dimensions of
an iota tile assignment over the mesh's device order (explicit
`device_ids` give an explicit assignment instead), transposed so that the
axes sharding dimensions come first (in dimension order), then the manual
axes (a `manual` subgroup), then every other axis (a `replicated`
subgroup). Open dimensions (`{"x", ?}`) convert as their axes; a
constraint whose dimensions are all open and empty says nothing and is
dropped, and one with some open empty dimensions (`{?}`) names them in
the custom call's `backend_config` (`unspecified_dims=[...]`, as JAX's
GSPMD lowering does); an open dimension with axes keeps them (it could
only be split further). Priorities are hints and are ignored.

A sharding never changes a value, only where its parts live, so shardings
inside a manual computation's body (other than `{manual}`) and inside
scalar computations (a reduction's body) are dropped: there is nothing
left to split.

A partially manual computation (manual on some mesh axes only) whose
operands and results are not split over the other, automatic, axes is
imported as manual on every axis: its body then computes the same value
on each device along the automatic axes, which is what the partially
manual program computes too (its collectives name global device ids).

Unreduced axes (`unreduced={"x"}`: each device along them holds a partial
result, and the value is their sum) become an `unreduced` subgroup, after
the manual one and before the replicated one (XLA's order), and `{unreduced}`
when every device holds a partial of the whole value.

A manual computation nested in another (manual on other axes) runs inside
the outer one, which is manual on every axis: each device takes its tile
of each operand (a dynamic-slice at offsets looked up by partition id),
runs the body, and the results are all-gathered along the axes that split
them.

Refused with support.UnimplementedError, naming what: unreduced axes on a
computation manual on other axes, partially manual computations with
operands or results split over automatic axes, nested ones splitting
unevenly, and Shardy's explicit collectives (`sdy.all_gather`, ...), which
only Shardy's own export emits.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

import support
from stablehlo import attributes as a
from stablehlo import sdy
from stablehlo.ops import registry
from xla import shape_util
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.ir.hlo_sharding import OpShardingType
from xla.hlo.ir.hlo_sharding import TileAssignment
from xla.literal import Literal
from xla.translate import type_conversion as tc
from xla.xla_data import PrimitiveType

MHLO_SHARDING = "mhlo.sharding"
SDY_SHARDING = "sdy.sharding"
SHARDING_TARGET = "Sharding"
FULL_TO_SHARD_TARGET = "SPMDFullToShardShape"
SHARD_TO_FULL_TARGET = "SPMDShardToFullShape"
MANUAL = hlo_attrs.RawText("{manual}")


# -- sdy -> HloSharding ------------------------------------------------------


def _pieces(mesh: sdy.Mesh, refs: Sequence[sdy.AxisRef]
            ) -> list[tuple[str, int, int]]:
  """The mesh's axes in mesh order, each split into consecutive
  (name, pre_size, size) pieces at every boundary a sub-axis of `refs`
  has (an axis no sub-axis splits is one piece)."""
  cuts: dict[str, set[int]] = {}
  for ref in refs:
    info = ref.sub_axis_info
    if info is not None:
      cuts.setdefault(ref.name, set()).update(
          (info.pre_size, info.pre_size * info.size))
  pieces = []
  for axis in mesh.axes:
    points = sorted({1, axis.size} | {
        p for p in cuts.get(axis.name, ()) if 1 <= p <= axis.size})
    for lo, hi_ in zip(points, points[1:]):
      if hi_ % lo:
        raise support.InvalidArgumentError(
            f"sub-axes of mesh axis {axis.name!r} (size {axis.size}) do not "
            f"divide each other (boundaries {points})")
      pieces.append((axis.name, lo, hi_ // lo))
  return pieces


def _pieces_of(ref: sdy.AxisRef, mesh: sdy.Mesh,
               pieces: Sequence[tuple[str, int, int]]) -> list[int]:
  """Indices into `pieces` that `ref` covers, in order."""
  size = mesh.axis_size(ref.name)
  if size is None:
    raise support.InvalidArgumentError(
        f"sharding names axis {ref.name!r}, which mesh {mesh} does not have")
  info = ref.sub_axis_info
  lo, hi_ = (1, size) if info is None else (
      info.pre_size, info.pre_size * info.size)
  out = [i for i, (name, pre, n) in enumerate(pieces)
         if name == ref.name and lo <= pre and pre * n <= hi_]
  if math.prod(pieces[i][2] for i in out) != hi_ // lo:
    raise support.InvalidArgumentError(
        f"axis reference {ref} does not fit mesh axis {ref.name!r} of size "
        f"{size}")
  return out


def from_sdy(sharding: sdy.TensorSharding, mesh: sdy.Mesh,
             manual_axes: Sequence[str] = ()) -> HloSharding:
  """The HloSharding of Shardy sharding `sharding` over `mesh`, with the
  mesh axes `manual_axes` manual (see the module docstring).

  Raises:
    support.UnimplementedError: unreduced axes with manual ones.
    support.InvalidArgumentError: axes the mesh does not have.
  """
  if not mesh.axes:
    return (HloSharding.maximal(mesh.device_ids[0]) if mesh.device_ids
            else HloSharding.replicate())
  manual_axes = tuple(manual_axes)
  for name in manual_axes:
    if not mesh.has_axis(name):
      raise support.InvalidArgumentError(
          f"manual axis {name!r} is not an axis of mesh {mesh}")
  if len(set(manual_axes)) == len(mesh.axes):
    return HloSharding.manual()
  refs = [r for d in sharding.dim_shardings for r in d.axes]
  refs += list(sharding.replicated_axes)
  refs += list(sharding.unreduced_axes)
  pieces = _pieces(mesh, refs)
  tile_dims: list[int] = []
  order: list[int] = []  # pieces in tile-dimension order
  for dim in sharding.dim_shardings:
    size = 1
    for ref in dim.axes:
      for i in _pieces_of(ref, mesh, pieces):
        if i in order:
          raise support.InvalidArgumentError(
              f"sharding {sharding} uses axis {ref} twice")
        order.append(i)
        size *= pieces[i][2]
    tile_dims.append(size)
  types: list[OpShardingType] = []
  if manual_axes:
    size = 1
    for name in manual_axes:
      for i in _pieces_of(sdy.AxisRef(name), mesh, pieces):
        if i in order:
          raise support.InvalidArgumentError(
              f"sharding {sharding} splits a dimension over manual axis "
              f"{name!r}")
        order.append(i)
        size *= pieces[i][2]
    tile_dims.append(size)
    types.append(OpShardingType.MANUAL)
  if sharding.unreduced_axes:
    if manual_axes:
      raise support.UnimplementedError(
          f"Unimplemented: Shardy sharding {sharding} with unreduced axes "
          f"inside a computation manual on {', '.join(manual_axes)}")
    size = 1
    for ref in sharding.unreduced_axes:
      for i in _pieces_of(ref, mesh, pieces):
        if i in order:
          raise support.InvalidArgumentError(
              f"sharding {sharding} both splits and leaves unreduced axis "
              f"{ref}")
        order.append(i)
        size *= pieces[i][2]
    tile_dims.append(size)
    types.append(OpShardingType.UNREDUCED)
  rest = [i for i in range(len(pieces)) if i not in order]
  replicated = math.prod(pieces[i][2] for i in rest)
  order += rest
  if replicated > 1:
    tile_dims.append(replicated)
    types.append(OpShardingType.REPLICATED)
  if not tile_dims:  # rank 0, nothing manual or replicated: one device
    tile_dims.append(1)
  reshape = [n for _, _, n in pieces]
  if mesh.device_ids:
    array = np.asarray(mesh.device_ids, dtype=np.int64).reshape(
        reshape).transpose(order).reshape(tile_dims)
    tiles = TileAssignment.from_array(array)
  else:
    tiles = TileAssignment.iota(tile_dims, reshape, order)
  if not sharding.dim_shardings and not types:
    return HloSharding.replicate()
  return HloSharding.subgroup(tiles, types)


def mesh_for(anchor, sharding: sdy.TensorSharding) -> sdy.Mesh:
  """The mesh `sharding` is bound to, seen from op (or module) `anchor`.

  Raises:
    support.InvalidArgumentError: no such `sdy.mesh`.
  """
  mesh = sdy.lookup_mesh(anchor, sharding.mesh_or_ref)
  if mesh is None:
    raise support.InvalidArgumentError(
        f"sharding {sharding} names mesh @{sharding.mesh_or_ref}, which the "
        "module does not define")
  return mesh


def _unreadable(attr) -> support.UnimplementedError:
  return support.UnimplementedError(
      f"Unimplemented: Shardy attribute {attr} was not read into a sharding "
      "the HLO import understands")


def attribute_sharding(anchor, attr, count: int = 1
                       ) -> Optional[list[HloSharding]]:
  """The HloShardings (one per value, `count` values) of a sharding
  attribute: an `mhlo.sharding` string (a tuple sharding gives its
  elements), an sdy TensorSharding or TensorShardingPerValue; None for
  anything else."""
  if isinstance(attr, a.StringAttr):
    s = HloSharding.parse(attr.value)
    if count != 1 and s.is_tuple:
      if len(s.tuple_elements) != count:
        raise support.InvalidArgumentError(
            f"mhlo.sharding {attr.value} has {len(s.tuple_elements)} "
            f"elements for {count} values")
      return list(s.tuple_elements)
    return [s] * count if count != 1 else [s]
  if isinstance(attr, sdy.TensorSharding):
    attr = sdy.TensorShardingPerValue((attr,))
  if isinstance(attr, sdy.TensorShardingPerValue):
    if len(attr.shardings) != count:
      raise support.InvalidArgumentError(
          f"{attr} has {len(attr.shardings)} shardings for {count} values")
    return [from_sdy(s, mesh_for(anchor, s)) for s in attr.shardings]
  if isinstance(attr, a.OpaqueAttr) and attr.text.startswith("#sdy"):
    raise _unreadable(attr.text)
  return None


def entry_sharding(anchor, attrs: dict) -> Optional[HloSharding]:
  """The sharding an argument's or result's attribute dictionary gives
  (`mhlo.sharding`, else `sdy.sharding`), or None."""
  for key in (MHLO_SHARDING, SDY_SHARDING):
    attr = attrs.get(key)
    if attr is not None:
      found = attribute_sharding(anchor, attr)
      if found is not None:
        return found[0]
  return None


def op_shardings(op) -> Optional[list[HloSharding]]:
  """The shardings of `op`'s results its attributes give, or None."""
  for key in (MHLO_SHARDING, SDY_SHARDING):
    attr = op.attr(key)
    if attr is not None:
      return attribute_sharding(op, attr, max(1, len(op.results)))
  return None


def text(sharding: HloSharding) -> hlo_attrs.RawText:
  """`sharding` as an instruction's `sharding=` attribute."""
  return hlo_attrs.RawText(str(sharding))


def set_result_shardings(imp, op, results: Sequence) -> None:
  """Gives the instructions `op` lowered to the shardings of its
  `mhlo.sharding` / `sdy.sharding` attribute (if any): a single result
  its own, the results of one tuple-shaped instruction (its elements) a
  tuple sharding on it. An instruction the lowering did not create (an
  operand passed through) keeps its own."""
  if not results or imp.drops_shardings():
    return
  shardings = op_shardings(op)
  if shardings is None:
    return
  operands = {id(x) for x in imp.operands(op)}
  if len(results) == 1:
    instr = results[0]
    if id(instr) not in operands and instr.opcode.value != "parameter":
      instr.sharding = text(shardings[0])
    return
  gtes = all(r.opcode.value == "get-tuple-element" for r in results)
  owner = results[0].operand(0) if gtes else None
  if (owner is not None and id(owner) not in operands and
      all(r.operand(0) is owner and r.attrs.get("index") == i
          for i, r in enumerate(results)) and
      len(owner.shape.tuple_shapes) == len(results)):
    owner.sharding = text(HloSharding.tuple_sharding(shardings))
    return
  for instr, s in zip(results, shardings):
    if id(instr) not in operands and instr.opcode.value != "parameter":
      instr.sharding = text(s)


# -- sdy ops -----------------------------------------------------------------


def _register(name):
  def deco(fn):
    registry.register_hlo_lowering(name, fn)
    return fn
  return deco


def _sharding_call(imp, operand, shape, sharding: HloSharding,
                   backend_config: str = ""):
  instr = hi.create_custom_call(shape, [operand], SHARDING_TARGET)
  instr.sharding = text(sharding)
  instr.backend_config = backend_config
  return imp.add(instr)


def _constraint(imp, op, sharding: sdy.TensorSharding):
  operand = imp.operand(op, 0)
  if imp.drops_shardings():
    return [operand]
  dims = sharding.dim_shardings
  # An open dimension with axes (`{"y", ?}`) keeps them (it may only be
  # split further, which propagation here does not do): only the empty
  # open ones (`{?}`) are left to propagation.
  open_dims = [i for i, d in enumerate(dims) if not d.is_closed and
               not d.axes]
  if (len(open_dims) == len(dims) and not sharding.replicated_axes and
      not any(d.axes for d in dims)):
    return [operand]  # Says nothing: left to propagation.
  config = ""
  if open_dims:
    config = f"unspecified_dims=[{','.join(map(str, open_dims))}]"
  hs = from_sdy(sharding, mesh_for(op, sharding))
  return [_sharding_call(imp, operand, tc.shape(op.result.type), hs, config)]


def _tensor_sharding(op, name: str) -> sdy.TensorSharding:
  attr = op.attr(name)
  if isinstance(attr, sdy.TensorShardingPerValue) and len(
      attr.shardings) == 1:
    attr = attr.shardings[0]
  if not isinstance(attr, sdy.TensorSharding):
    raise _unreadable(attr)
  return attr


@_register("sdy.sharding_constraint")
def _sharding_constraint(imp, op):
  return _constraint(imp, op, _tensor_sharding(op, "sharding"))


@_register("sdy.reshard")
def _reshard(imp, op):
  return _constraint(imp, op, _tensor_sharding(op, "sharding"))


@_register("sdy.propagation_barrier")
def _propagation_barrier(imp, op):
  return [imp.operand(op, 0)]


@_register("sdy.sharding_group")
def _sharding_group(imp, op):
  del imp, op  # A hint for Shardy's propagation; no value.
  return []


@_register("sdy.named_computation")
def _named_computation(imp, op):
  # Its in/out shardings are hints; the body computes the results.
  return imp.inline_region(op.regions[0], imp.operands(op))


def _shardings_of(op, name: str) -> tuple[sdy.TensorSharding, ...]:
  attr = op.attr(name)
  if isinstance(attr, sdy.TensorShardingPerValue):
    return attr.shardings
  if attr is None:
    return ()
  raise _unreadable(attr)


@_register("sdy.manual_computation")
def _manual_computation(imp, op):
  ins = _shardings_of(op, "in_shardings")
  outs = _shardings_of(op, "out_shardings")
  manual = op.attr("manual_axes")
  manual = tuple(manual.axes) if isinstance(manual, sdy.ManualAxes) else ()
  body = op.regions[0].entry
  if not ins and not outs:
    return imp.inline_region(op.regions[0], imp.operands(op))
  if imp.in_manual_computation():
    return _nested_manual_computation(imp, op, ins, outs, manual)
  mesh = mesh_for(op, (ins + outs)[0])
  free = [x for x in mesh.axis_names if x not in manual]
  if free:
    # Manual on some axes only: exact as manual on all of them when no
    # operand or result is split over the others (the body then computes
    # the same on every device along them).
    used = sorted({r.name for s in ins + outs for d in s.dim_shardings
                   for r in d.axes if r.name in free})
    if used:
      raise support.UnimplementedError(
          f"Unimplemented: HLO import of a partially manual "
          f"sdy.manual_computation (manual_axes={{{', '.join(manual)}}} of "
          f"mesh {mesh}) whose operands or results are split over the "
          f"automatic axes {', '.join(used)}")
  if len(ins) != len(op.operands) or len(outs) != len(op.results):
    raise support.InvalidArgumentError(
        f"sdy.manual_computation has {len(ins)} in_shardings for "
        f"{len(op.operands)} operands and {len(outs)} out_shardings for "
        f"{len(op.results)} results")
  manual_sharding = HloSharding.manual()
  locals_ = []
  for operand, s, arg in zip(imp.operands(op), ins, body.arguments):
    full = _sharding_call(imp, operand, operand.shape,
                          from_sdy(s, mesh_for(op, s)))
    shard = hi.create_custom_call(tc.shape(arg.type), [full],
                                  FULL_TO_SHARD_TARGET)
    shard.sharding = text(manual_sharding)
    locals_.append(imp.add(shard))
  with imp.manual_computation():
    values = imp.inline_region(op.regions[0], locals_)
  results = []
  for value, s, result in zip(values, outs, op.results):
    local = _sharding_call(imp, value, value.shape, manual_sharding)
    full = hi.create_custom_call(tc.shape(result.type), [local],
                                 SHARD_TO_FULL_TARGET)
    full.sharding = text(from_sdy(s, mesh_for(op, s)))
    results.append(imp.add(full))
  return results


# -- a manual computation inside another ---------------------------------------


def _device_tiles(hs: HloSharding, rank: int, n: int, what: str):
  """(tile counts per dimension, the tile array, device -> tile index) of
  a replicated or tiled `hs` over devices 0..n-1."""
  if hs.is_replicated:
    return (1,) * rank, None, [(0,) * rank] * n
  if (hs.type != OpShardingType.OTHER or any(
      t != OpShardingType.REPLICATED for t in hs.subgroup_types)):
    raise support.UnimplementedError(
        f"Unimplemented: HLO import of a nested sdy.manual_computation with "
        f"{what} sharded {hs}")
  array = hs.tile_assignment.array
  index = [None] * n
  for pos in np.ndindex(*array.shape):
    index[int(array[pos])] = tuple(int(i) for i in pos[:rank])
  if any(i is None for i in index):
    raise support.InvalidArgumentError(
        f"sharding {hs} does not name each of the {n} devices")
  return tuple(int(c) for c in array.shape[:rank]), array, index


def _s32(imp, value) -> "hi.HloInstruction":
  return imp.add(hi.create_constant(Literal.from_array(
      np.asarray(value, np.int32), PrimitiveType.S32)))


def _take_tile(imp, x, hs: HloSharding, local, n: int):
  """Each device's tile of `x` (a value every device holds whole) under
  `hs`: a dynamic-slice at offsets looked up by partition id."""
  rank = len(local.dimensions)
  counts, _, index = _device_tiles(hs, rank, n, "an operand")
  if all(c == 1 for c in counts):
    return x
  full = x.shape.dimensions
  if any(f != c * l for f, c, l in zip(full, counts, local.dimensions)):
    raise support.UnimplementedError(
        f"Unimplemented: HLO import of a nested sdy.manual_computation "
        f"splitting {x.shape.to_string()} unevenly ({hs})")
  pid = imp.add(hi.create(O.kPartitionId, shape_util.scalar(PrimitiveType.U32)))
  pid = imp.add(hi.create_convert(shape_util.scalar(PrimitiveType.S32), pid))
  starts = []
  for d in range(rank):
    if counts[d] == 1:
      starts.append(_s32(imp, 0))
      continue
    table = _s32(imp, [index[p][d] * local.dimensions[d] for p in range(n)])
    one = imp.add(hi.create(
        O.kDynamicSlice, shape_util.make_shape_with_default_layout(
            PrimitiveType.S32, (1,)), (table, pid), dynamic_slice_sizes=(1,)))
    starts.append(imp.add(hi.create_reshape(
        shape_util.scalar(PrimitiveType.S32), one)))
  return imp.add(hi.create(
      O.kDynamicSlice, shape_util.make_shape_with_default_layout(
          x.shape.element_type, local.dimensions), [x] + starts,
      dynamic_slice_sizes=tuple(local.dimensions)))


def _gather_tiles(imp, x, hs: HloSharding, full, n: int):
  """The whole value of which each device holds its tile `x` under `hs`:
  an all-gather along each split dimension, over the devices that differ
  only there (in tile order)."""
  rank = len(full.dimensions)
  counts, array, _ = _device_tiles(hs, rank, n, "a result")
  for d in range(rank):
    if counts[d] == 1:
      continue
    groups = np.moveaxis(array, d, -1).reshape(-1, counts[d])
    dims = list(x.shape.dimensions)
    dims[d] *= counts[d]
    x = imp.add(hi.create(
        O.kAllGather, shape_util.make_shape_with_default_layout(
            x.shape.element_type, dims), (x,),
        channel_id=1, dimensions=(d,), use_global_device_ids=True,
        replica_groups=tuple(tuple(int(v) for v in g) for g in groups)))
  if x.shape.dimensions != full.dimensions:
    raise support.UnimplementedError(
        f"Unimplemented: HLO import of a nested sdy.manual_computation "
        f"gathering {x.shape.to_string()} into {full.to_string()}")
  return x


def _nested_manual_computation(imp, op, ins, outs, manual):
  """A manual computation inside another. The outer one is manual on every
  axis (see the module docstring), so each device already holds its whole
  operands along the inner computation's axes: it takes its own tile of
  each operand (by partition id), runs the body, and the results are
  all-gathered back along the axes that split them."""
  if len(ins) != len(op.operands) or len(outs) != len(op.results):
    raise support.InvalidArgumentError(
        f"sdy.manual_computation has {len(ins)} in_shardings for "
        f"{len(op.operands)} operands and {len(outs)} out_shardings for "
        f"{len(op.results)} results")
  body = op.regions[0].entry
  locals_ = []
  for operand, s, arg in zip(imp.operands(op), ins, body.arguments):
    mesh = mesh_for(op, s)
    locals_.append(_take_tile(imp, operand, from_sdy(s, mesh),
                              tc.shape(arg.type), mesh.num_devices))
  with imp.manual_computation():
    values = imp.inline_region(op.regions[0], locals_)
  results = []
  for value, s, result in zip(values, outs, op.results):
    mesh = mesh_for(op, s)
    results.append(_gather_tiles(imp, value, from_sdy(s, mesh),
                                 tc.shape(result.type), mesh.num_devices))
  del manual
  return results
