"""Sharding algebra for SPMD propagation and partitioning.

A tiled (or replicated) sharding of an array of rank R over N devices is
viewed here as a `TileMap`: the number of tiles along each dimension
(`counts`) and, for every device 0..N-1, the index of the tile it holds
(`index[device]`). Devices with the same tile index are replicas. This view
makes the rules of both passes one-liners over per-device indices: a
transpose permutes each index, a reduce drops the reduced dimensions (devices
that differed only there become replicas), a dot combines the indices of its
operands, and so on. `TileMap.to_sharding()` turns the result back into an
`HloSharding` (a tile assignment with a replicated last dimension where
devices share tiles), which is possible exactly when every tile is held by
the same number of devices (`is_regular`).

Tile geometry follows XLA: along a dimension of size D cut into k tiles,
every tile is ceil(D / k) long and tile i starts at i * ceil(D / k); the last
tiles may reach past D (their tail is padding) or lie wholly past it.

Shardings this module does not model (maximal, manual subgroups, unreduced,
unknown) raise support.UnimplementedError naming the sharding; a fully
manual sharding is handled by the passes themselves.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Optional, Sequence

import numpy as np

import support
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.ir.hlo_sharding import OpShardingType

_Index = tuple[int, ...]


def ceil_div(a: int, b: int) -> int:
  return -(-a // b)


@dataclasses.dataclass(frozen=True)
class TileMap:
  """Tile counts per dimension and the tile index of every device."""

  counts: tuple[int, ...]
  index: tuple[_Index, ...]  # index[device] has len(counts) entries

  # -- construction ------------------------------------------------------------

  @classmethod
  def replicated(cls, rank: int, num_devices: int) -> "TileMap":
    return cls((1,) * rank, ((0,) * rank,) * num_devices)

  @classmethod
  def from_sharding(cls, sharding: HloSharding, rank: int,
                    num_devices: int) -> "TileMap":
    """The map of a replicated or tiled (possibly partially replicated)
    sharding of a rank-`rank` array over devices 0..num_devices-1."""
    if sharding.is_tuple:
      raise support.InvalidArgumentError(
          f"a tile map needs an array sharding, not the tuple {sharding}")
    if sharding.is_replicated:
      return cls.replicated(rank, num_devices)
    if sharding.type != OpShardingType.OTHER or any(
        t != OpShardingType.REPLICATED for t in sharding.subgroup_types):
      raise support.UnimplementedError(
          f"Unimplemented: SPMD partitioning with sharding {sharding} "
          f"(only replicated, tiled and partially replicated shardings)")
    data_rank = sharding.tiled_data_rank
    if data_rank != rank:
      raise support.InvalidArgumentError(
          f"sharding {sharding} tiles {data_rank} dimensions but the value "
          f"has rank {rank}")
    array = sharding.tile_assignment.array
    if array.size != num_devices or sorted(array.ravel().tolist()) != list(
        range(num_devices)):
      raise support.InvalidArgumentError(
          f"sharding {sharding} does not use each of the {num_devices} "
          f"partitions exactly once")
    index: list[Optional[_Index]] = [None] * num_devices
    for pos in np.ndindex(*array.shape):
      index[int(array[pos])] = tuple(int(i) for i in pos[:rank])
    return cls(tuple(int(d) for d in array.shape[:rank]), tuple(index))

  @classmethod
  def from_indices(cls, counts: Sequence[int],
                   index: Iterable[Sequence[int]]) -> "TileMap":
    return cls(tuple(int(c) for c in counts),
               tuple(tuple(int(i) for i in idx) for idx in index))

  # -- queries -----------------------------------------------------------------

  @property
  def rank(self) -> int:
    return len(self.counts)

  @property
  def num_devices(self) -> int:
    return len(self.index)

  @property
  def num_tiles(self) -> int:
    return math.prod(self.counts)

  @property
  def is_replicated(self) -> bool:
    return all(c == 1 for c in self.counts)

  def tiled_dims(self) -> tuple[int, ...]:
    return tuple(d for d, c in enumerate(self.counts) if c > 1)

  def holders(self) -> dict[_Index, list[int]]:
    """Tile index -> the devices holding it, in increasing order."""
    out: dict[_Index, list[int]] = {}
    for dev, idx in enumerate(self.index):
      out.setdefault(idx, []).append(dev)
    return out

  def is_regular(self) -> bool:
    """Every tile is held, and by the same number of devices."""
    holders = self.holders()
    if len(holders) != self.num_tiles:
      return False
    sizes = {len(v) for v in holders.values()}
    return len(sizes) == 1

  def to_sharding(self) -> HloSharding:
    """The HloSharding of this map; InvalidArgumentError if irregular."""
    if not self.is_regular():
      raise support.InvalidArgumentError(
          f"tile map {self} has tiles held by different numbers of devices")
    if self.is_replicated:
      return HloSharding.replicate()
    holders = self.holders()
    rep = self.num_devices // self.num_tiles
    array = np.zeros(self.counts + (rep,), dtype=np.int64)
    for idx, devs in holders.items():
      array[idx] = devs
    if rep == 1:
      flat = array.reshape(self.counts)
      if np.array_equal(flat.ravel(), np.arange(flat.size)):
        return HloSharding.iota_tile(self.counts)
      return HloSharding.tile(flat)
    return HloSharding.partial_tile(array)

  # -- transformations ---------------------------------------------------------

  def with_dims(self, counts: Sequence[int], fn) -> "TileMap":
    """A map of new `counts` whose index for each device is `fn(old)`."""
    return TileMap.from_indices(counts, (fn(idx) for idx in self.index))

  def transpose(self, perm: Sequence[int]) -> "TileMap":
    """Dimension i of the result is dimension perm[i] of this map."""
    return self.with_dims([self.counts[p] for p in perm],
                          lambda idx: [idx[p] for p in perm])

  def replicate_dims(self, dims: Iterable[int]) -> "TileMap":
    """Untiles `dims`: their devices become replicas."""
    dims = set(dims)
    if not any(self.counts[d] > 1 for d in dims):
      return self
    return self.with_dims(
        [1 if d in dims else c for d, c in enumerate(self.counts)],
        lambda idx: [0 if d in dims else i for d, i in enumerate(idx)])

  def project(self, dims: Sequence[int]) -> "TileMap":
    """The map of the dimensions `dims` of this one (others dropped)."""
    return self.with_dims([self.counts[d] for d in dims],
                          lambda idx: [idx[d] for d in dims])

  def embed(self, rank: int, dims: Sequence[int]) -> "TileMap":
    """A rank-`rank` map whose dimension dims[i] is dimension i of this map
    and whose other dimensions are untiled."""
    counts = [1] * rank
    for i, d in enumerate(dims):
      counts[d] = self.counts[i]

    def fn(idx):
      out = [0] * rank
      for i, d in enumerate(dims):
        out[d] = idx[i]
      return out

    return self.with_dims(counts, fn)

  # -- tile geometry -----------------------------------------------------------

  def tile_sizes(self, dims: Sequence[int]) -> tuple[int, ...]:
    """The (padded) tile length along each dimension of a shape `dims`."""
    return tuple(ceil_div(d, c) for d, c in zip(dims, self.counts))

  def offsets(self, dims: Sequence[int], device: int) -> tuple[int, ...]:
    """Where the tile of `device` starts in a shape `dims`."""
    return tuple(i * t for i, t in zip(self.index[device],
                                       self.tile_sizes(dims)))

  def __str__(self) -> str:
    return f"TileMap(counts={list(self.counts)}, index={list(self.index)})"


def tile_map(sharding: HloSharding, rank: int, num_devices: int) -> TileMap:
  return TileMap.from_sharding(sharding, rank, num_devices)


def sharding_or_none(m: TileMap) -> Optional[HloSharding]:
  """`m.to_sharding()`, or None where `m` is irregular."""
  return m.to_sharding() if m.is_regular() else None


def touched_dims(instr) -> list[int]:
  """Dims of operand 0 that a slicing op changes (non-trivially)."""
  op = instr.operand(0).shape
  if instr.opcode == HloOpcode.kSlice:
    return [d for d, (a, b, c) in enumerate(instr.attr("slice"))
            if (a, b, c) != (0, op.dimensions[d], 1)]
  if instr.opcode == HloOpcode.kPad:
    cfg = instr.padding_config
    return [d for d, p in enumerate(cfg.dimensions)
            if (p.edge_padding_low, p.edge_padding_high,
                p.interior_padding) != (0, 0, 0)]
  if instr.opcode == HloOpcode.kDynamicSlice:
    return [d for d, n in enumerate(instr.dynamic_slice_sizes)
            if n != op.dimensions[d]]
  if instr.opcode == HloOpcode.kDynamicUpdateSlice:
    upd = instr.operand(1).shape
    return [d for d in range(op.rank) if upd.dimensions[d] != op.dimensions[d]]
  if instr.opcode in (HloOpcode.kReverse, HloOpcode.kSort,
                      HloOpcode.kConcatenate):
    return list(instr.dimensions)
  return []


# -- reshape -------------------------------------------------------------------


def _reshape_groups(src: Sequence[int], dst: Sequence[int]
                    ) -> Optional[list[tuple[list[int], list[int]]]]:
  """Splits the dimensions of a reshape into minimal groups of equal
  element count: [([src dims], [dst dims]), ...] covering both in order.
  Size-1 dimensions form groups of their own. None for empty shapes."""
  if math.prod(src) != math.prod(dst) or 0 in src:
    return None
  groups = []
  i = j = 0
  while i < len(src) or j < len(dst):
    if i < len(src) and src[i] == 1:
      groups.append(([i], []))
      i += 1
      continue
    if j < len(dst) and dst[j] == 1:
      groups.append(([], [j]))
      j += 1
      continue
    gs, gd = [i], [j]
    ps, pd = src[i], dst[j]
    i += 1
    j += 1
    while ps != pd:
      if ps < pd:
        gs.append(i)
        ps *= src[i]
        i += 1
      else:
        gd.append(j)
        pd *= dst[j]
        j += 1
    groups.append((gs, gd))
  return groups


def _split_counts(k: int, sizes: Sequence[int]) -> Optional[list[int]]:
  """How k contiguous tiles of a dimension split into tiles of the dims
  `sizes` (major to minor) it is reshaped into, or None."""
  out = []
  for s in sizes:
    if k % s == 0:
      out.append(s)
      k //= s
    elif s % k == 0:
      out.append(k)
      k = 1
    else:
      return None
  return out if k == 1 else None


def _merge_count(counts: Sequence[int], sizes: Sequence[int]
                 ) -> Optional[int]:
  """The tile count of the dimension that dims `sizes` (tiled `counts`)
  merge into, where tiles stay contiguous; None otherwise."""
  total = 1
  for n, (c, s) in enumerate(zip(counts, sizes)):
    if c == 1:
      if any(cc != 1 for cc in counts[n + 1:]):
        return None
      break
    total *= c
    if c != s:
      if s % c or any(cc != 1 for cc in counts[n + 1:]):
        return None
      break
  return total


def reshape_tile_map(m: TileMap, src: Sequence[int], dst: Sequence[int],
                     require_even: bool = False) -> Optional[TileMap]:
  """The map of a reshape from `src` to `dst` dims that keeps every tile of
  `m` contiguous (each device's data reshapes locally), or None.

  With `require_even`, every tiled dimension of both shapes must divide
  evenly (no padding), as a local reshape of padded tiles needs."""
  groups = _reshape_groups(src, dst)
  if groups is None:
    return None
  if require_even and any(s % c for s, c in zip(src, m.counts)):
    return None
  counts = [1] * len(dst)
  # For each group, how the source indices map to destination indices.
  plans = []
  for gs, gd in groups:
    src_counts = [m.counts[d] for d in gs]
    if all(c == 1 for c in src_counts):
      continue
    if not gd:
      return None  # a tiled size-1 dimension cannot be
    if len(gs) == 1:
      split = _split_counts(src_counts[0], [dst[d] for d in gd])
      if split is None:
        return None
      for d, c in zip(gd, split):
        counts[d] = c
      plans.append(("split", gs, gd, split))
    elif len(gd) == 1:
      merged = _merge_count(src_counts, [src[d] for d in gs])
      if merged is None:
        return None
      counts[gd[0]] = merged
      plans.append(("merge", gs, gd, src_counts))
    else:
      return None
  if require_even and any(d % c for d, c in zip(dst, counts)):
    return None

  def fn(idx):
    out = [0] * len(dst)
    for kind, gs, gd, cs in plans:
      if kind == "split":
        rest = idx[gs[0]]
        for d, c in reversed(list(zip(gd, cs))):
          out[d] = rest % c
          rest //= c
      else:
        value = 0
        for d, c in zip(gs, cs):
          value = value * c + idx[d]
        out[gd[0]] = value
    return out

  return m.with_dims(counts, fn)


# -- dot -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DotDims:
  """The dimension roles of a dot: operand dims by role, and where each
  role lands in the output ([batch..., lhs free..., rhs free...])."""

  lhs_batch: tuple[int, ...]
  rhs_batch: tuple[int, ...]
  lhs_contracting: tuple[int, ...]
  rhs_contracting: tuple[int, ...]
  lhs_free: tuple[int, ...]
  rhs_free: tuple[int, ...]

  @classmethod
  def of(cls, instr) -> "DotDims":
    lhs_rank = instr.operand(0).shape.rank
    rhs_rank = instr.operand(1).shape.rank
    lb = tuple(instr.attr("lhs_batch_dims") or ())
    rb = tuple(instr.attr("rhs_batch_dims") or ())
    lc = tuple(instr.attr("lhs_contracting_dims") or ())
    rc = tuple(instr.attr("rhs_contracting_dims") or ())
    lf = tuple(d for d in range(lhs_rank) if d not in lb and d not in lc)
    rf = tuple(d for d in range(rhs_rank) if d not in rb and d not in rc)
    return cls(lb, rb, lc, rc, lf, rf)

  @property
  def out_batch(self) -> tuple[int, ...]:
    return tuple(range(len(self.lhs_batch)))

  @property
  def out_lhs_free(self) -> tuple[int, ...]:
    n = len(self.lhs_batch)
    return tuple(range(n, n + len(self.lhs_free)))

  @property
  def out_rhs_free(self) -> tuple[int, ...]:
    n = len(self.lhs_batch) + len(self.lhs_free)
    return tuple(range(n, n + len(self.rhs_free)))

  @property
  def out_rank(self) -> int:
    return len(self.lhs_batch) + len(self.lhs_free) + len(self.rhs_free)


def dot_output_map(dd: DotDims, lhs: Optional[TileMap],
                   rhs: Optional[TileMap]) -> Optional[TileMap]:
  """The output map of a dot whose operands are tiled as `lhs` / `rhs`
  (either may be None: its dimensions are then untiled), or None where the
  two disagree on the batch or contracting dimensions. Tiles of the
  contracting dimensions become replicas (of partial sums)."""
  if lhs is None and rhs is None:
    return None
  if lhs is not None and rhs is not None:
    for a, b in ((dd.lhs_batch, dd.rhs_batch),
                 (dd.lhs_contracting, dd.rhs_contracting)):
      if [lhs.counts[d] for d in a] != [rhs.counts[d] for d in b]:
        return None
      if any([i[d] for d in a] != [j[d] for d in b]
             for i, j in zip(lhs.index, rhs.index)):
        return None
  counts = []
  if lhs is not None:
    counts += [lhs.counts[d] for d in dd.lhs_batch]
    counts += [lhs.counts[d] for d in dd.lhs_free]
  else:
    counts += [rhs.counts[d] for d in dd.rhs_batch]
    counts += [1] * len(dd.lhs_free)
  counts += ([rhs.counts[d] for d in dd.rhs_free] if rhs is not None else
             [1] * len(dd.rhs_free))
  n = (lhs or rhs).num_devices
  index = []
  for dev in range(n):
    idx = []
    if lhs is not None:
      li = lhs.index[dev]
      idx += [li[d] for d in dd.lhs_batch] + [li[d] for d in dd.lhs_free]
    else:
      ri = rhs.index[dev]
      idx += [ri[d] for d in dd.rhs_batch] + [0] * len(dd.lhs_free)
    if rhs is not None:
      ri = rhs.index[dev]
      idx += [ri[d] for d in dd.rhs_free]
    else:
      idx += [0] * len(dd.rhs_free)
    index.append(idx)
  return TileMap.from_indices(counts, index)


def dot_operand_map_from_output(dd: DotDims, out: TileMap, side: str,
                                rank: int) -> TileMap:
  """The operand (`side` "lhs" or "rhs") map under which a local dot gives
  exactly the output map `out`: batch and free dims as in `out`,
  contracting dims untiled."""
  if side == "lhs":
    dims = list(dd.lhs_batch) + list(dd.lhs_free)
    src = list(dd.out_batch) + list(dd.out_lhs_free)
  else:
    dims = list(dd.rhs_batch) + list(dd.rhs_free)
    src = list(dd.out_batch) + list(dd.out_rhs_free)
  return out.project(src).embed(rank, dims)


def dot_other_operand_map(dd: DotDims, m: TileMap, side: str,
                          other_rank: int) -> TileMap:
  """The map of the other operand that matches operand `side`'s map `m` on
  the batch and contracting dimensions, its free dims untiled."""
  if side == "lhs":
    mine = list(dd.lhs_batch) + list(dd.lhs_contracting)
    theirs = list(dd.rhs_batch) + list(dd.rhs_contracting)
  else:
    mine = list(dd.rhs_batch) + list(dd.rhs_contracting)
    theirs = list(dd.lhs_batch) + list(dd.lhs_contracting)
  return m.project(mine).embed(other_rank, theirs)


# -- partial results -----------------------------------------------------------


def reduction_groups(partial: TileMap, reduced_dims: Sequence[int]
                     ) -> Optional[list[list[int]]]:
  """Device groups for an all-reduce that combines the partial results of
  a map tiled along `reduced_dims`: each group holds exactly one device per
  tile of the reduced dims and all its devices share the other indices.
  None where the devices cannot be grouped so (then an all-reduce would
  count some partials twice)."""
  reduced = list(reduced_dims)
  kept = [d for d in range(partial.rank) if d not in reduced]
  num_parts = math.prod(partial.counts[d] for d in reduced)
  by_key: dict[tuple, dict[tuple, list[int]]] = {}
  for dev, idx in enumerate(partial.index):
    key = tuple(idx[d] for d in kept)
    part = tuple(idx[d] for d in reduced)
    by_key.setdefault(key, {}).setdefault(part, []).append(dev)
  groups = []
  for key in sorted(by_key):
    parts = by_key[key]
    if len(parts) != num_parts:
      return None
    sizes = {len(v) for v in parts.values()}
    if len(sizes) != 1:
      return None
    ordered = [parts[p] for p in sorted(parts)]
    for r in range(sizes.pop()):
      groups.append([devs[r] for devs in ordered])
  return groups


def gather_groups(m: TileMap, dim: int) -> list[list[int]]:
  """Device groups for an all-gather along `dim` of map `m`: each group has
  one device per tile index along `dim`, in tile order, and its devices
  agree on every other index."""
  groups = reduction_groups(m, [dim])
  if groups is None:
    raise support.InternalError(f"cannot group the devices of {m} along "
                                f"dimension {dim}")
  return groups


# -- merging -------------------------------------------------------------------


def sharding_score(s: Optional[HloSharding]) -> int:
  """How specific a sharding is: the number of distinct data tiles (0 for
  none; manual counts as most specific)."""
  if s is None:
    return 0
  if s.is_manual:
    return 1 << 30
  if s.is_tuple:
    return sum(sharding_score(e) for e in s.tuple_elements)
  if s.is_tile_maximal or s.type != OpShardingType.OTHER:
    return 1
  return s.num_tiles()


def same_sharding(a: Optional[HloSharding], b: Optional[HloSharding],
                  rank: int, num_devices: int) -> bool:
  """Whether two array shardings put the same data on every device."""
  if a is None or b is None:
    return a is b
  if a == b:
    return True
  try:
    return tile_map(a, rank, num_devices) == tile_map(b, rank, num_devices)
  except support.XlaError:
    return False
