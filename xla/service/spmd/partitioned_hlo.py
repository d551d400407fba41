"""Per-partition values and resharding for the SPMD partitioner.

A `PartitionedHlo` is the per-partition form of one value of the global
program: `hlo` is the instruction of the partitioned computation that holds
this partition's shard, `base_shape` the global shape, `sharding` how the
global value is cut. The shard of a tiled sharding always has the padded
tile shape (ceil(D / tiles) along each dimension, as
`HloSharding.tile_shape` gives); positions past the end of the global value
hold unspecified data ("padding"), which handlers mask where it would
change a result (reductions, contractions).

`reshard(builder, value, target)` moves a value to another sharding with
collectives over partition ids (`use_global_device_ids=true` and a fresh
`channel_id`, the flattened-id mode of a program of one replica):

  * a target tile that lies within the tile a partition already holds
    (replicated -> tiled, partially replicated -> refined) is a
    dynamic-slice at per-partition offsets read from a constant table
    indexed by `partition-id`;
  * the same tiling on other devices is a collective-permute;
  * tiling moved from one dimension to another is an all-to-all;
  * anything else all-gathers the dimensions in the way (tiled ->
    replicated is all-gathers only) and then slices locally.

`Builder` appends instructions to one partitioned computation; `SpmdState`
holds what the whole run shares (partition count, channel ids, the scalar
reducers of all-reduces). Handlers, one per opcode, are registered in
`HANDLERS` with `@register_handler(opcode, ...)`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional, Sequence

import numpy as np

import support
from xla import primitive_util
from xla import shape_util
from xla import xla_data
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.ir.hlo_sharding import OpShardingType
from xla.hlo.ir.hlo_sharding import TileAssignment
from xla.literal import Literal
from xla.service.spmd import sharding_util as su
from xla.shape import Shape
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType


# -- shared state --------------------------------------------------------------


class SpmdState:
  """What one partitioner run shares across computations."""

  def __init__(self, module, num_partitions: int):
    self.module = module
    self.n = int(num_partitions)
    used = [i.attrs.get("channel_id") or 0 for i in module.instructions()]
    self._next_channel = max(used, default=0) + 1
    self._reducers: dict[tuple, HloComputation] = {}

  def channel_id(self) -> int:
    cid = self._next_channel
    self._next_channel += 1
    return cid

  def reducer(self, opcode: HloOpcode, element_type: PrimitiveType
              ) -> HloComputation:
    """A scalar computation `opcode(x, y)` (add, or, ...) for all-reduces."""
    key = (opcode, element_type)
    comp = self._reducers.get(key)
    if comp is None:
      scalar = shape_util.scalar(element_type)
      name = f"{opcode.value}.{primitive_util.lowercase_name(element_type)}"
      comp = HloComputation(name)
      self.module.add_embedded_computation(comp)
      x = comp.add_instruction(hi.create_parameter(0, scalar, "x"))
      y = comp.add_instruction(hi.create_parameter(1, scalar, "y"))
      comp.set_root_instruction(comp.add_instruction(
          hi.create_binary(scalar, opcode, x, y)))
      self._reducers[key] = comp
    return comp

  def sum_reducer(self, element_type: PrimitiveType) -> HloComputation:
    op = O.kOr if element_type == P.PRED else O.kAdd
    return self.reducer(op, element_type)


def shard_shape(shape: Shape, sharding: HloSharding) -> Shape:
  """The per-partition shape of `shape` under `sharding` (tuples leaf by
  leaf; manual and replicated leaves keep their shape)."""
  if shape.is_tuple():
    leaves = (sharding.get_tuple_sharding(shape).tuple_elements
              if shape.tuple_shapes else ())
    out = []
    at = 0
    for s in shape.tuple_shapes:
      k = max(1, shape_util.leaf_count(s)) if s.is_tuple() else 1
      sub = leaves[at:at + k]
      at += k
      if s.is_tuple():
        out.append(shard_shape(s, HloSharding.tuple_sharding(sub)))
      else:
        out.append(shard_shape(s, sub[0]))
    return dataclasses.replace(shape, tuple_shapes=tuple(out))
  if (not shape.is_array() or sharding.is_manual or sharding.is_replicated
      or sharding.is_unreduced):
    return shape
  return sharding.tile_shape(shape)


@dataclasses.dataclass
class PartitionedHlo:
  """One partition's view of a global value (see the module docstring)."""

  hlo: HloInstruction
  base_shape: Shape
  sharding: HloSharding

  @property
  def rank(self) -> int:
    return self.base_shape.rank

  def with_sharding(self, sharding: HloSharding) -> "PartitionedHlo":
    return PartitionedHlo(self.hlo, self.base_shape, sharding)


# -- the builder ---------------------------------------------------------------


class Builder:
  """Appends instructions to one partitioned computation."""

  def __init__(self, state: SpmdState, comp: HloComputation):
    self.state = state
    self.comp = comp
    self._pid: Optional[HloInstruction] = None
    self._tables: dict[tuple[int, ...], HloInstruction] = {}

  @property
  def n(self) -> int:
    return self.state.n

  def add(self, instr: HloInstruction) -> HloInstruction:
    return self.comp.add_instruction(instr)

  def emit(self, opcode: HloOpcode, shape: Shape,
           operands: Sequence[HloInstruction] = (), **attrs
           ) -> HloInstruction:
    return self.add(hi.create(opcode, shape, operands, **attrs))

  def constant(self, array, element_type: PrimitiveType) -> HloInstruction:
    return self.add(hi.create_constant(Literal.from_array(
        np.asarray(array), element_type)))

  def scalar(self, value, element_type: PrimitiveType) -> HloInstruction:
    return self.constant(np.asarray(value), element_type)

  def broadcast_scalar(self, scalar: HloInstruction, shape: Shape
                       ) -> HloInstruction:
    return self.emit(O.kBroadcast, array_shape(scalar.shape.element_type,
                                          shape.dimensions), (scalar,),
                     dimensions=())

  def partition_id(self) -> HloInstruction:
    """This partition's number as s32[] (one per computation)."""
    if self._pid is None:
      pid = self.emit(O.kPartitionId, shape_util.scalar(P.U32))
      self._pid = self.emit(O.kConvert, shape_util.scalar(P.S32), (pid,))
    return self._pid

  def per_partition(self, values: Sequence[int]) -> HloInstruction:
    """An s32[] holding values[partition id]: a constant when all agree,
    else a lookup in a constant table."""
    values = tuple(int(v) for v in values)
    if len(set(values)) == 1:
      return self.scalar(values[0], P.S32)
    hit = self._tables.get(values)
    if hit is not None:
      return hit
    table = self.constant(np.array(values, np.int32), P.S32)
    one = self.emit(O.kDynamicSlice, array_shape(P.S32, (1,)),
                    (table, self.partition_id()), dynamic_slice_sizes=(1,))
    value = self.emit(O.kReshape, shape_util.scalar(P.S32), (one,))
    self._tables[values] = value
    return value

  # -- local data movement -----------------------------------------------------

  def slice(self, x: HloInstruction, starts, limits) -> HloInstruction:
    dims = [b - a for a, b in zip(starts, limits)]
    return self.add(hi.create_slice(array_shape(x.shape.element_type, dims, x),
                                    x, starts, limits))

  def pad_high(self, x: HloInstruction, sizes: Sequence[int]
               ) -> HloInstruction:
    """`x` padded at the end of each dimension to `sizes` (zeros)."""
    dims = x.shape.dimensions
    if tuple(sizes) == tuple(dims):
      return x
    zero = self.scalar(0, x.shape.element_type)
    cfg = xla_data.PaddingConfig(tuple(
        xla_data.PaddingDimension(0, s - d, 0) for d, s in zip(dims, sizes)))
    return self.emit(O.kPad, array_shape(x.shape.element_type, sizes, x),
                     (x, zero), padding=cfg)

  def reshape(self, x: HloInstruction, dims: Sequence[int]
              ) -> HloInstruction:
    if tuple(dims) == x.shape.dimensions:
      return x
    return self.emit(O.kReshape, array_shape(x.shape.element_type, dims),
                     (x,))

  def transpose(self, x: HloInstruction, perm: Sequence[int]
                ) -> HloInstruction:
    if list(perm) == list(range(len(perm))):
      return x
    dims = [x.shape.dimensions[p] for p in perm]
    return self.emit(O.kTranspose, array_shape(x.shape.element_type, dims),
                     (x,), dimensions=tuple(perm))

  def gte(self, x: HloInstruction, index: int) -> HloInstruction:
    return self.add(hi.create_get_tuple_element(x, index))

  def tuple(self, elements: Sequence[HloInstruction]) -> HloInstruction:
    return self.add(hi.create_tuple(list(elements)))


def array_shape(element_type, dims, like: Optional[HloInstruction] = None
           ) -> Shape:
  """An array shape with the default layout (as parsed HLO has)."""
  del like
  return shape_util.make_shape_with_default_layout(element_type, tuple(dims))


def local_shape(instr_shape: Shape, sharding: HloSharding) -> Shape:
  return shard_shape(instr_shape, sharding)


# -- masks ---------------------------------------------------------------------


def valid_mask(b: Builder, m: su.TileMap, base_dims: Sequence[int],
               local_dims: Sequence[int], dims: Sequence[int]
               ) -> Optional[HloInstruction]:
  """A pred array of `local_dims`, true where the element lies inside the
  global shape `base_dims` along `dims` (for tile map `m`); None when no
  tile along those dims has padding."""
  mask = None
  sizes = m.tile_sizes(base_dims)
  for d in dims:
    k, t, size = m.counts[d], sizes[d], base_dims[d]
    if k == 1 or k * t == size and local_dims[d] == t:
      continue
    offs = [m.index[p][d] * t for p in range(m.num_devices)]
    limits = [max(0, min(t, size - o)) for o in offs]
    shape_s32 = array_shape(P.S32, local_dims)
    iota = b.emit(O.kIota, shape_s32, iota_dimension=d)
    limit = b.broadcast_scalar(b.per_partition(limits), shape_s32)
    cmp = b.add(hi.create_compare(array_shape(P.PRED, local_dims), iota, limit,
                                  xla_data.ComparisonDirection.LT))
    mask = cmp if mask is None else b.emit(
        O.kAnd, array_shape(P.PRED, local_dims), (mask, cmp))
  return mask


def mask_padding(b: Builder, ph: PartitionedHlo, dims: Sequence[int],
                 fill: HloInstruction) -> PartitionedHlo:
  """`ph` with its padding along `dims` replaced by the scalar `fill`."""
  if ph.sharding.is_replicated or ph.sharding.is_manual:
    return ph
  m = su.tile_map(ph.sharding, ph.rank, b.n)
  local = ph.hlo.shape.dimensions
  mask = valid_mask(b, m, ph.base_shape.dimensions, local, dims)
  if mask is None:
    return ph
  filled = b.broadcast_scalar(fill, ph.hlo.shape)
  sel = b.emit(O.kSelect, ph.hlo.shape, (mask, ph.hlo, filled))
  return PartitionedHlo(sel, ph.base_shape, ph.sharding)


# -- collectives ---------------------------------------------------------------


def _groups_attr(groups) -> tuple[tuple[int, ...], ...]:
  return tuple(tuple(int(d) for d in g) for g in groups)


def all_gather(b: Builder, x: HloInstruction, dim: int, groups
               ) -> HloInstruction:
  size = len(groups[0])
  dims = list(x.shape.dimensions)
  dims[dim] *= size
  return b.emit(O.kAllGather, array_shape(x.shape.element_type, dims, x), (x,),
                channel_id=b.state.channel_id(),
                replica_groups=_groups_attr(groups), dimensions=(dim,),
                use_global_device_ids=True)


def all_reduce(b: Builder, x: HloInstruction, groups,
               reducer: HloComputation) -> HloInstruction:
  return b.emit(O.kAllReduce, x.shape, (x,),
                channel_id=b.state.channel_id(),
                replica_groups=_groups_attr(groups),
                use_global_device_ids=True, to_apply=reducer)


def all_to_all(b: Builder, x: HloInstruction, dim: int, groups
               ) -> HloInstruction:
  return b.emit(O.kAllToAll, x.shape, (x,), channel_id=b.state.channel_id(),
                replica_groups=_groups_attr(groups), dimensions=(dim,))


def collective_permute(b: Builder, x: HloInstruction,
                       pairs: Sequence[tuple[int, int]]) -> HloInstruction:
  return b.emit(O.kCollectivePermute, x.shape, (x,),
                channel_id=b.state.channel_id(),
                source_target_pairs=tuple(tuple(p) for p in pairs))


# -- resharding ----------------------------------------------------------------


def _map(ph: PartitionedHlo, n: int) -> su.TileMap:
  return su.tile_map(ph.sharding, ph.rank, n)


def _interval(i: int, t: int, size: int) -> tuple[int, int]:
  """The valid part [lo, hi) of tile i of length t in a dim of `size`."""
  lo = min(i * t, size)
  return lo, min((i + 1) * t, size)


def _slice_plan(src: su.TileMap, dst: su.TileMap, dims: Sequence[int]
                ) -> Optional[list[tuple[list[int], int]]]:
  """For a local slice from tiles of `src` to tiles of `dst`: per
  dimension, the offset of each device's target tile within its source
  tile and the local size the source must have; None if some target tile
  is not within its device's source tile."""
  plan = []
  ss, ts = src.tile_sizes(dims), dst.tile_sizes(dims)
  for d, size in enumerate(dims):
    offs = []
    for p in range(src.num_devices):
      s_lo, s_hi = _interval(src.index[p][d], ss[d], size)
      t_lo, t_hi = _interval(dst.index[p][d], ts[d], size)
      if t_lo < t_hi:
        if t_lo < s_lo or t_hi > s_hi:
          return None
        offs.append(t_lo - s_lo)
      else:
        offs.append(0)
    need = max(o + ts[d] for o in offs)
    plan.append((offs, max(need, ss[d])))
  return plan


def _local_slice(b: Builder, ph: PartitionedHlo, src: su.TileMap,
                 dst: su.TileMap, target: HloSharding
                 ) -> Optional[PartitionedHlo]:
  dims = ph.base_shape.dimensions
  plan = _slice_plan(src, dst, dims)
  if plan is None:
    return None
  x = ph.hlo
  x = b.pad_high(x, [need for _, need in plan])
  sizes = dst.tile_sizes(dims)
  if all(all(o == 0 for o in offs) for offs, _ in plan):
    if tuple(sizes) != x.shape.dimensions:
      x = b.slice(x, [0] * len(dims), sizes)
  elif all(len(set(offs)) == 1 for offs, _ in plan):
    starts = [offs[0] for offs, _ in plan]
    x = b.slice(x, starts, [s + t for s, t in zip(starts, sizes)])
  else:
    starts = [b.per_partition(offs) for offs, _ in plan]
    x = b.emit(O.kDynamicSlice, array_shape(x.shape.element_type, sizes, x),
               [x] + starts, dynamic_slice_sizes=tuple(sizes))
  return PartitionedHlo(x, ph.base_shape, target)


def _permute_pairs(src: su.TileMap, dst: su.TileMap
                   ) -> list[tuple[int, int]]:
  """Source -> target pairs that give every device its `dst` tile from a
  device holding it under `src` (same counts); devices keep what they
  already hold."""
  s_hold, t_hold = src.holders(), dst.holders()
  pairs = []
  for idx, targets in t_hold.items():
    sources = s_hold[idx]
    common = [d for d in targets if d in sources]
    pairs += [(d, d) for d in common]
    rest_s = [d for d in sources if d not in common]
    rest_t = [d for d in targets if d not in common]
    pairs += list(zip(rest_s, rest_t))
  return sorted(pairs)


def _all_to_all_dims(src: su.TileMap, dst: su.TileMap
                     ) -> Optional[tuple[int, int]]:
  """(a, b) when `dst` moves the tiling of `src` from dim a to dim b."""
  diff = [d for d in range(src.rank) if src.counts[d] != dst.counts[d]]
  if len(diff) != 2:
    return None
  a, c = diff
  if src.counts[c] > 1:
    a, c = c, a
  k = src.counts[a]
  if src.counts[c] == 1 and dst.counts[a] == 1 and dst.counts[c] == k:
    return a, c
  return None


def _do_all_to_all(b: Builder, ph: PartitionedHlo, src: su.TileMap, a: int,
                   c: int) -> tuple[PartitionedHlo, su.TileMap]:
  """Moves the tiling of dim a to dim c with one all-to-all."""
  dims = list(ph.base_shape.dimensions)
  k = src.counts[a]
  x = ph.hlo
  local = list(x.shape.dimensions)
  ta = local[a]
  tc = su.ceil_div(dims[c], k)
  padded = list(local)
  padded[c] = k * tc
  x = b.pad_high(x, padded)
  split = local[:c] + [k, tc] + local[c + 1:]
  split[a if a < c else a + 1] = ta
  x = b.reshape(x, split)
  # The k axis (at position c) to the front.
  perm = [c] + [i for i in range(len(split)) if i != c]
  x = b.transpose(x, perm)
  x = all_to_all(b, x, 0, su.gather_groups(src, a))
  # Now [k] + local dims with a: ta, c: tc. Put k just before a and merge.
  rank = len(dims)
  order = list(range(1, a + 1)) + [0] + list(range(a + 1, rank + 1))
  x = b.transpose(x, order)
  merged = [x.shape.dimensions[i] for i in range(rank + 1)]
  merged = merged[:a] + [k * ta] + merged[a + 2:]
  x = b.reshape(x, merged)
  if k * ta != dims[a]:
    limits = list(merged)
    limits[a] = dims[a]
    x = b.slice(x, [0] * rank, limits)
  new = src.with_dims(
      [1 if d == a else k if d == c else n for d, n in enumerate(src.counts)],
      lambda idx: [0 if d == a else idx[a] if d == c else i
                   for d, i in enumerate(idx)])
  return PartitionedHlo(x, ph.base_shape, new.to_sharding()), new


def _gather_dim(b: Builder, ph: PartitionedHlo, m: su.TileMap, d: int
                ) -> tuple[PartitionedHlo, su.TileMap]:
  """All-gathers dim d: every device then holds it whole."""
  x = all_gather(b, ph.hlo, d, su.gather_groups(m, d))
  size = ph.base_shape.dimensions[d]
  if x.shape.dimensions[d] != size:
    limits = list(x.shape.dimensions)
    limits[d] = size
    x = b.slice(x, [0] * len(limits), limits)
  new = m.replicate_dims([d])
  return PartitionedHlo(x, ph.base_shape, new.to_sharding()), new


def _dim_contained(src: su.TileMap, dst: su.TileMap, dims, d: int) -> bool:
  ss, ts = src.tile_sizes(dims)[d], dst.tile_sizes(dims)[d]
  for p in range(src.num_devices):
    s_lo, s_hi = _interval(src.index[p][d], ss, dims[d])
    t_lo, t_hi = _interval(dst.index[p][d], ts, dims[d])
    if t_lo < t_hi and (t_lo < s_lo or t_hi > s_hi):
      return False
  return True


# -- unreduced values ------------------------------------------------------------


def has_unreduced(s: HloSharding) -> bool:
  """Whether `s` (an array sharding) leaves partial results unreduced:
  `{unreduced}`, or an `unreduced` subgroup."""
  return not s.is_tuple and (s.is_unreduced or (
      s.type == OpShardingType.OTHER and
      OpShardingType.UNREDUCED in s.subgroup_types))


def split_unreduced(s: HloSharding, n: int
                    ) -> tuple[HloSharding, list[list[int]]]:
  """(the sharding of the reduced value, the groups of devices whose
  partial results add up to it) of an unreduced sharding `s`: the
  unreduced subgroup read as a replicated one."""
  if s.is_unreduced:
    return HloSharding.replicate(), [list(range(n))]
  types = list(s.subgroup_types)
  if OpShardingType.MANUAL in types:
    raise support.UnimplementedError(
        f"Unimplemented: SPMD partitioning with sharding {s} (unreduced and "
        f"manual at once)")
  arr = s.tile_assignment.array
  u = s.tiled_data_rank + types.index(OpShardingType.UNREDUCED)
  moved = np.moveaxis(arr, u, -1)
  groups = sorted(sorted(int(d) for d in g)
                  for g in moved.reshape(-1, moved.shape[-1]).tolist())
  rest = [t for t in types if t != OpShardingType.UNREDUCED]
  base = HloSharding.subgroup(TileAssignment.from_array(moved),
                              rest + [OpShardingType.REPLICATED])
  return base, groups


def reduce_unreduced(b: Builder, ph: PartitionedHlo) -> PartitionedHlo:
  """An unreduced value summed over its groups (an all-reduce)."""
  base, groups = split_unreduced(ph.sharding, b.n)
  x = ph.hlo
  if len(groups[0]) > 1:
    x = all_reduce(b, x, groups, b.state.sum_reducer(x.shape.element_type))
  return PartitionedHlo(x, ph.base_shape, base)


def _keep_on_first(b: Builder, ph: PartitionedHlo, target: HloSharding
                   ) -> PartitionedHlo:
  """`ph` (already under the reduced form of `target`) as the unreduced
  `target`: the first device of each group keeps the value, the others
  hold zeros, so the partials still add up to it (what JAX's device_put
  makes of an unreduced array)."""
  _, groups = split_unreduced(target, b.n)
  x = ph.hlo
  if len(groups[0]) > 1:
    first = {g[0] for g in groups}
    flag = b.per_partition([int(d in first) for d in range(b.n)])
    keep = b.add(hi.create_compare(
        shape_util.scalar(P.PRED), flag, b.scalar(0, P.S32),
        xla_data.ComparisonDirection.NE))
    keep = b.broadcast_scalar(keep, x.shape)
    zeros = b.broadcast_scalar(b.scalar(0, x.shape.element_type), x.shape)
    x = b.emit(O.kSelect, x.shape, (keep, x, zeros))
  return PartitionedHlo(x, ph.base_shape, target)


def _scatter_to_unreduced(b: Builder, ph: PartitionedHlo,
                          target: HloSharding) -> Optional[PartitionedHlo]:
  """A tiled value as the unreduced `target` without moving data, where
  its tiles cut the target's (reduced) tiles evenly and each group holds
  every piece of its tile: each device places its tile at its place in a
  zero tile of the target's, and of the devices of a group holding the
  same piece only the first keeps it (what XLA makes of it). None where
  the tilings do not fit so."""
  base, groups = split_unreduced(target, b.n)
  dims = ph.base_shape.dimensions
  rank = len(dims)
  sm = su.tile_map(ph.sharding, rank, b.n)
  bm = su.tile_map(base, rank, b.n)
  if any(dims[d] % sm.counts[d] or sm.counts[d] % bm.counts[d]
         for d in range(rank)):
    return None
  ratio = [sm.counts[d] // bm.counts[d] for d in range(rank)]
  if any(sm.index[p][d] // ratio[d] != bm.index[p][d]
         for p in range(b.n) for d in range(rank)):
    return None
  keep = [0] * b.n
  for group in groups:
    seen = set()
    for p in group:
      piece = tuple(sm.index[p][d] % ratio[d] for d in range(rank))
      if piece not in seen:
        seen.add(piece)
        keep[p] = 1
    if len(seen) != math.prod(ratio):
      return None
  x = ph.hlo
  zero = b.scalar(0, x.shape.element_type)
  if any(r > 1 for r in ratio):
    tile = local_shape(ph.base_shape, base)
    starts = [b.per_partition([(sm.index[p][d] % ratio[d]) *
                               (dims[d] // sm.counts[d]) for p in range(b.n)])
              for d in range(rank)]
    x = b.emit(O.kDynamicUpdateSlice, tile, (b.broadcast_scalar(zero, tile),
                                             x, *starts))
  if not all(keep):
    flag = b.add(hi.create_compare(
        shape_util.scalar(P.PRED), b.per_partition(keep), b.scalar(0, P.S32),
        xla_data.ComparisonDirection.NE))
    x = b.emit(O.kSelect, x.shape, (b.broadcast_scalar(flag, x.shape), x,
                                    b.broadcast_scalar(zero, x.shape)))
  return PartitionedHlo(x, ph.base_shape, target)


def _reshard_unreduced(b: Builder, ph: PartitionedHlo, target: HloSharding
                       ) -> PartitionedHlo:
  if has_unreduced(ph.sharding):
    ph = reduce_unreduced(b, ph)
  if not has_unreduced(target):
    return reshard(b, ph, target)
  scattered = _scatter_to_unreduced(b, ph, target)
  if scattered is not None:
    return scattered
  base, _ = split_unreduced(target, b.n)
  return _keep_on_first(b, reshard(b, ph, base), target)


def reshard(b: Builder, ph: PartitionedHlo, target: HloSharding
            ) -> PartitionedHlo:
  """`ph` under sharding `target` (see the module docstring)."""
  shape = ph.base_shape
  if shape.is_tuple():
    return _reshard_tuple(b, ph, target)
  src = ph.sharding
  if src == target:
    return ph
  if not shape.is_array():
    return ph.with_sharding(target)
  if has_unreduced(src) or has_unreduced(target):
    return _reshard_unreduced(b, ph, target)
  if src.is_manual or target.is_manual:
    if src.is_manual and target.is_manual:
      return ph.with_sharding(target)
    if target.is_manual and src.is_replicated:
      return ph.with_sharding(target)  # the full value is the local one
    if src.is_manual and target.is_replicated and not shape.dimensions:
      return ph.with_sharding(target)
    raise support.UnimplementedError(
        f"Unimplemented: SPMD resharding of {ph.hlo.name} from {src} to "
        f"{target} (manual and automatic shardings meet outside "
        f"SPMDFullToShardShape / SPMDShardToFullShape)")
  sm, tm = _map(ph, b.n), su.tile_map(target, shape.rank, b.n)
  if sm == tm:
    return ph.with_sharding(target)
  return _reshard_maps(b, ph, sm, tm, target, allow_all_to_all=True)


def _reshard_maps(b: Builder, ph: PartitionedHlo, sm: su.TileMap,
                  tm: su.TileMap, target: HloSharding,
                  allow_all_to_all: bool) -> PartitionedHlo:
  dims = ph.base_shape.dimensions
  if sm == tm:
    return ph.with_sharding(target)
  local = _local_slice(b, ph, sm, tm, target)
  if local is not None:
    return local
  if sm.counts == tm.counts:
    x = collective_permute(b, ph.hlo, _permute_pairs(sm, tm))
    return PartitionedHlo(x, ph.base_shape, target)
  if allow_all_to_all:
    ac = _all_to_all_dims(sm, tm)
    if ac is not None:
      moved, mm = _do_all_to_all(b, ph, sm, *ac)
      return _reshard_maps(b, moved, mm, tm, target, allow_all_to_all=False)
  # Gather the dims whose target tiles are not within the source tiles,
  # then (if that is not enough) every tiled dim, and slice.
  for d in range(len(dims)):
    if sm.counts[d] > 1 and not _dim_contained(sm, tm, dims, d):
      ph, sm = _gather_dim(b, ph, sm, d)
  local = _local_slice(b, ph, sm, tm, target)
  if local is not None:
    return local
  for d in sm.tiled_dims():
    ph, sm = _gather_dim(b, ph, sm, d)
  local = _local_slice(b, ph, sm, tm, target)
  if local is None:
    raise support.InternalError(
        f"SPMD: no local slice from replicated to {target}")
  return local


def _reshard_tuple(b: Builder, ph: PartitionedHlo, target: HloSharding
                   ) -> PartitionedHlo:
  shape = ph.base_shape
  if ph.sharding == target:
    return ph
  elements = []
  changed = False
  for i, s in enumerate(shape.tuple_shapes):
    src_i = ph.sharding.get_sub_sharding(shape, (i,))
    dst_i = target.get_sub_sharding(shape, (i,))
    elem = PartitionedHlo(b.gte(ph.hlo, i), s, src_i)
    out = reshard(b, elem, dst_i)
    changed |= out.hlo is not elem.hlo
    elements.append(out.hlo)
  if not changed:
    for e in elements:
      b.comp.remove_instruction(e)
    return ph.with_sharding(target)
  return PartitionedHlo(b.tuple(elements), shape, target)


def replicate(b: Builder, ph: PartitionedHlo) -> PartitionedHlo:
  if ph.base_shape.is_tuple():
    leaves = [HloSharding.replicate()] * max(
        1, shape_util.leaf_count(ph.base_shape))
    return reshard(b, ph, HloSharding.tuple_sharding(leaves))
  return reshard(b, ph, HloSharding.replicate())


# -- costs ---------------------------------------------------------------------


def reshard_cost(shape: Shape, src: su.TileMap, dst: su.TileMap) -> float:
  """A rough count of the elements a reshard moves between partitions."""
  if src == dst:
    return 0.0
  dims = shape.dimensions
  if _slice_plan(src, dst, dims) is not None:
    return 0.0
  elements = float(math.prod(dims))
  if src.counts == dst.counts or _all_to_all_dims(src, dst) is not None:
    return elements / max(1, dst.num_tiles)
  return elements


# -- handler registry ----------------------------------------------------------

Handler = Callable[..., PartitionedHlo]
HANDLERS: dict[HloOpcode, Handler] = {}


def register_handler(*opcodes: HloOpcode):
  """Registers the decorated `fn(partitioner, instr) -> PartitionedHlo`
  as the SPMD handler of `opcodes`."""
  def deco(fn):
    for op in opcodes:
      if op in HANDLERS:
        raise support.InternalError(
            f"two SPMD handlers for {op.value}")
      HANDLERS[op] = fn
    return fn
  return deco
