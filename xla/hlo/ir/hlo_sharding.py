"""HloSharding: how an HLO value is split across devices (XLA's hlo_sharding.h).

A sharding is one of

  * replicated: every device holds the whole value;
  * maximal: one device (`{maximal device=3}`) holds the whole value;
  * manual / unknown / unreduced: markers with no device mapping;
  * tiled: the value is cut into tiles along its dimensions, with a
    `TileAssignment` saying which device holds which tile. Trailing tile
    dimensions may be subgroups: `last_tile_dim_replicate` (the last tile
    dimension lists devices that hold the same tile) or `last_tile_dims={...}`
    (one subgroup type per trailing dimension: manual, replicated, ...);
  * a tuple of the above, one per leaf of a tuple shape.

The HLO text spelling is parsed by `HloSharding.parse` and printed by `str()`
exactly as XLA prints it (`HloSharding::ToString`), including the canonical
iota form `devices=[2,2]<=[2,2]T(1,0)` that XLA picks. `to_proto` /
`from_proto` read and write xla_data.proto's OpSharding.

Constructors normalise as XLA does: a partial tile whose replication group
spans every device becomes `{replicated}`, replication groups are sorted,
subgroup dimensions of the same type are merged and ordered, iota forms are
canonicalised. Equality and hashing ignore metadata, as in XLA.

Errors: malformed text raises `ShardingParseError` (a
support.InvalidArgumentError) naming the text and the column; `validate`
raises support.InvalidArgumentError; asking a sharding for something its kind
does not have (the tile offset of a manual sharding, the elements of a
non-tuple) raises support.FailedPreconditionError.

`of(instruction)` reads an instruction's `sharding=` attribute (kept as raw
text in the IR) as an HloSharding.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from typing import Any, Iterable, Iterator, Optional, Sequence

from google.protobuf import unknown_fields
import numpy as np

import support
from xla import xla_data
from xla.hlo.ir import hlo_printer
from xla.hlo.ir import text_util
from xla.hlo.proto import hlo_proto_schema as schema
from xla.shape import Shape

__all__ = [
    "HloSharding", "OpShardingType", "ShardGroup", "ShardingParseError",
    "TileAssignment", "of",
]


class OpShardingType(enum.IntEnum):
  """OpSharding.Type (xla_data.proto)."""

  REPLICATED = 0
  MAXIMAL = 1
  TUPLE = 2
  OTHER = 3
  MANUAL = 4
  UNKNOWN = 5
  UNREDUCED = 6


_T = OpShardingType

# How subgroup types are ordered when `subgroup` merges them: by enum value,
# except that replicated comes after all but unknown (so that a replicated
# subgroup can be sorted like a partial tile's last dimension).
_SUBGROUP_ORDER = (_T.MAXIMAL, _T.TUPLE, _T.OTHER, _T.MANUAL, _T.UNREDUCED,
                   _T.REPLICATED, _T.UNKNOWN)
_SUBGROUP_NAMES = {_T.MANUAL: "manual", _T.MAXIMAL: "maximal",
                   _T.REPLICATED: "replicated", _T.UNREDUCED: "unreduced"}
_SUBGROUP_BY_NAME = {v: k for k, v in _SUBGROUP_NAMES.items()}

# OpSharding.ShardGroupType.
_SHARD_GROUP_AS, _SHARD_GROUP_LIKE = 0, 1

_IntList = Sequence[int]


def _product(values: Iterable[int]) -> int:
  return math.prod(int(v) for v in values)


def _precondition(ok: bool, message: str) -> None:
  if not ok:
    raise support.FailedPreconditionError(message)


# -- tile assignments ----------------------------------------------------------


def _canonical_iota(reshape_dims: _IntList,
                    perm: _IntList) -> tuple[tuple[int, ...], tuple[int, ...]]:
  """The canonical (reshape_dims, transpose_perm) of an iota tile assignment.

  Size-one reshape dimensions are dropped, and reshape dimensions that stay
  adjacent and in order after the transpose are fused into one, until
  nothing changes: [3,4,5] -> [60]; [3,4,5]T(1,2,0) -> [3,20]T(1,0).
  """
  dims = [int(d) for d in reshape_dims]
  perm = [int(p) for p in perm]
  if len(dims) > 1:
    while True:
      kept = [i for i, d in enumerate(dims) if d != 1]
      if len(kept) != len(dims):
        new_index = {old: new for new, old in enumerate(kept)}
        dims = [dims[i] for i in kept]
        perm = [new_index[p] for p in perm if p in new_index]
      fused = False
      base = 0
      for i in range(1, len(dims)):
        if perm[base] + (i - base) == perm[i]:
          # perm[i] follows perm[base]'s run: fold it into the run's first dim.
          dims[perm[base]] *= dims[perm[i]]
          dims[perm[i]] = 1
          fused = True
        else:
          base = i
      if not fused:
        break
  if not dims:
    dims, perm = [1], [0]
  return tuple(dims), tuple(perm)


def _prime_factors(n: int) -> list[int]:
  """The prime factors of n >= 1 in increasing order ([] for 1)."""
  out = []
  while n % 2 == 0 and n > 1:
    out.append(2)
    n //= 2
  f = 3
  while f * f <= n:
    while n % f == 0:
      out.append(f)
      n //= f
    f += 2
  if n > 1:
    out.append(n)
  return out


def _transpose_kind(dims: _IntList, perm: _IntList) -> str:
  """'noop' (same array), 'reshape' (same flat order) or 'transpose'."""
  kind = "noop"
  last = -1
  for i, d in enumerate(perm):
    if dims[d] == 1:
      if d != i and dims[i] != 1:
        kind = "reshape"
      continue
    if d <= last:
      return "transpose"
    last = d
  return kind


class TileAssignment:
  """An immutable array of device ids, one per tile.

  Held either in iota form -- `arange(n).reshape(reshape_dims)
  .transpose(transpose_perm).reshape(dims)`, canonicalised as XLA does -- or
  as an explicit array. The iota form materialises its numpy array only when
  `array` (or something needing every element) is asked for.
  """

  __slots__ = ("_dims", "_reshape_dims", "_perm", "_array", "_hash")

  def __init__(self, dims, reshape_dims=None, perm=None, array=None):
    # Use the classmethods; this constructor trusts its arguments.
    set_ = object.__setattr__
    set_(self, "_dims", tuple(int(d) for d in dims))
    set_(self, "_reshape_dims", reshape_dims)
    set_(self, "_perm", perm)
    set_(self, "_array", array)
    set_(self, "_hash", None)

  def __setattr__(self, name, value):
    raise AttributeError("TileAssignment is immutable")

  # -- construction ------------------------------------------------------------

  @classmethod
  def iota(cls, dims: _IntList, reshape_dims: Optional[_IntList] = None,
           transpose_perm: Optional[_IntList] = None) -> "TileAssignment":
    """`arange(prod(dims)).reshape(reshape_dims).transpose(transpose_perm)`
    reshaped to `dims` (`reshape_dims` defaults to `[prod(dims)]`)."""
    dims = tuple(int(d) for d in dims)
    if any(d < 0 for d in dims):
      raise support.InvalidArgumentError(
          f"tile assignment dimensions {list(dims)} must not be negative")
    if reshape_dims is None:
      reshape_dims = (_product(dims),)
    reshape_dims = tuple(int(d) for d in reshape_dims)
    if transpose_perm is None or not len(transpose_perm):
      transpose_perm = tuple(range(len(reshape_dims)))
    transpose_perm = tuple(int(p) for p in transpose_perm)
    if any(d < 0 for d in reshape_dims):
      raise support.InvalidArgumentError(
          f"iota reshape dimensions {list(reshape_dims)} must not be negative")
    if sorted(transpose_perm) != list(range(len(reshape_dims))):
      raise support.InvalidArgumentError(
          f"iota transpose {list(transpose_perm)} is not a permutation of the "
          f"{len(reshape_dims)} reshape dimensions {list(reshape_dims)}")
    if _product(reshape_dims) != _product(dims):
      raise support.InvalidArgumentError(
          f"iota reshape dimensions {list(reshape_dims)} hold "
          f"{_product(reshape_dims)} devices but the tile assignment "
          f"dimensions {list(dims)} need {_product(dims)}")
    rd, perm = _canonical_iota(reshape_dims, transpose_perm)
    return cls(dims, rd, perm)

  @classmethod
  def from_array(cls, devices) -> "TileAssignment":
    """An explicit assignment from an int array (any nesting of sequences)."""
    if isinstance(devices, TileAssignment):
      return devices
    array = np.array(devices, dtype=np.int64)
    if array.ndim == 0:
      raise support.InvalidArgumentError(
          "a tile assignment needs at least one dimension")
    array.flags.writeable = False
    return cls(array.shape, array=array)

  @classmethod
  def _make(cls, value) -> "TileAssignment":
    return value if isinstance(value, TileAssignment) else cls.from_array(
        value)

  # -- queries -----------------------------------------------------------------

  @property
  def dimensions(self) -> tuple[int, ...]:
    return self._dims

  @property
  def num_dimensions(self) -> int:
    return len(self._dims)

  def dim(self, n: int) -> int:
    return self._dims[n]

  @property
  def num_elements(self) -> int:
    return _product(self._dims)

  @property
  def is_iota(self) -> bool:
    return self._reshape_dims is not None

  @property
  def reshape_dims(self) -> Optional[tuple[int, ...]]:
    """The iota reshape dimensions, or None for an explicit array."""
    return self._reshape_dims

  @property
  def transpose_perm(self) -> Optional[tuple[int, ...]]:
    """The iota transpose permutation, or None for an explicit array."""
    return self._perm

  @property
  def array(self) -> np.ndarray:
    """The device ids as a read-only int64 array of shape `dimensions`."""
    if self._array is None:
      a = np.arange(self.num_elements, dtype=np.int64)
      a = a.reshape(self._reshape_dims).transpose(self._perm).reshape(
          self._dims)
      a = np.ascontiguousarray(a)
      a.flags.writeable = False
      object.__setattr__(self, "_array", a)  # a cache of the iota form
    return self._array

  def devices(self) -> tuple[int, ...]:
    """The device ids in row-major order."""
    return tuple(int(d) for d in self.array.ravel())

  def value_at(self, index: _IntList) -> int:
    """The device at tile `index` (the iota form computes it directly)."""
    index = tuple(int(i) for i in index)
    if len(index) != len(self._dims) or any(
        not 0 <= i < d for i, d in zip(index, self._dims)):
      raise support.InvalidArgumentError(
          f"tile index {list(index)} is out of range for tile assignment "
          f"dimensions {list(self._dims)}")
    if self._array is not None or not self.is_iota:
      return int(self.array[index])
    linear = 0
    for i, d in zip(index, self._dims):
      linear = linear * d + i
    reshape_index = [0] * len(self._reshape_dims)
    for p in reversed(self._perm):
      size = self._reshape_dims[p]
      reshape_index[p] = linear % size
      linear //= size
    value = 0
    for i, d in zip(reshape_index, self._reshape_dims):
      value = value * d + i
    return value

  def first(self) -> int:
    return 0 if self.is_iota else int(self.array.ravel()[0])

  def uses_device(self, device: int) -> bool:
    if self.is_iota:
      return 0 <= device < self.num_elements
    return bool((self.array == device).any())

  # -- transformations ---------------------------------------------------------

  def reshape(self, new_dims: _IntList) -> "TileAssignment":
    new_dims = tuple(int(d) for d in new_dims)
    if _product(new_dims) != self.num_elements:
      raise support.InvalidArgumentError(
          f"cannot reshape tile assignment {list(self._dims)} to "
          f"{list(new_dims)}")
    if self.is_iota:
      return TileAssignment(new_dims, self._reshape_dims, self._perm)
    array = self.array.reshape(new_dims)
    return TileAssignment(new_dims, array=array)

  def _iota_transpose(self, perm: _IntList) -> Optional["TileAssignment"]:
    """The iota form of the transpose, or None where there is no simple one.

    `perm` is over the tile dimensions. Where the non-unit tile dimensions
    are exactly the (transposed) reshape dimensions, the transpose composes
    with the iota's own permutation; a one-dimensional iota takes the tile
    dimensions as its reshape dimensions.
    """
    dims = self._dims
    kind = _transpose_kind(dims, perm)
    if kind == "noop":
      return self
    new_dims = [dims[p] for p in perm]
    if kind == "reshape":
      return TileAssignment.iota(new_dims, self._reshape_dims, self._perm)
    if len(self._reshape_dims) == 1:
      return TileAssignment.iota(new_dims, dims, perm)
    # Position of each non-unit tile dimension among the non-unit ones.
    position = {}
    for i, d in enumerate(dims):
      if d != 1:
        position[i] = len(position)
    non_unit = [dims[i] for i in position]
    rd, rp = self._reshape_dims, self._perm
    if len(non_unit) == len(rd) and all(
        rd[rp[k]] == d for k, d in enumerate(non_unit)):
      # Each non-unit tile dimension is one transposed reshape dimension.
      new_perm = [rp[position[p]] for p in perm if dims[p] != 1]
      return TileAssignment.iota(new_dims, rd, new_perm)
    return self._iota_transpose_by_factors(perm, new_dims, position,
                                           non_unit)

  def _iota_transpose_by_factors(self, perm, new_dims, position, non_unit):
    """The transpose through the prime factors of the reshape dimensions.

    Every reshape dimension is split into its prime factors (in the
    transposed order); consecutive factors are grouped to make up each
    non-unit tile dimension, and the groups are permuted like the tile
    dimensions. Where a factor does not divide what is left of its tile
    dimension, a later factor of the same reshape dimension that does is
    swapped in first (the split of one dimension into factors may be
    reordered freely). None if the tile dimensions cut across factors.
    """
    factors: list[int] = []
    owner: list[int] = []  # transposed factor position -> reshape dim
    ranges = []
    for d in self._reshape_dims:
      start = len(factors)
      factors.extend(_prime_factors(d))
      ranges.append(range(start, len(factors)))
    fperm: list[int] = []
    positions_of = [[] for _ in self._reshape_dims]
    for p in self._perm:
      for f in ranges[p]:
        positions_of[p].append(len(fperm))
        fperm.append(f)
        owner.append(p)

    def candidate(target: int, at: int) -> Optional[int]:
      f = fperm[at]
      if target % factors[f] == 0:
        return f
      for later in positions_of[owner[at]]:
        if later > at and target % factors[fperm[later]] == 0:
          g = fperm[later]
          factors[f], factors[g] = factors[g], factors[f]
          return f
      return None

    groups: list[list[int]] = [[] for _ in non_unit]
    at = 0
    for i, target in enumerate(non_unit):
      if at >= len(fperm):
        break
      f = candidate(target, at)
      while f is not None:
        target //= factors[f]
        groups[i].append(f)
        at += 1
        if at >= len(fperm):
          break
        f = candidate(target, at)
      if target != 1:
        return None
    new_perm = []
    for p in perm:
      if p in position:
        new_perm.extend(groups[position[p]])
    if len(new_perm) != len(fperm):
      return None
    return TileAssignment.iota(new_dims, factors, new_perm)

  def transpose(self, perm: _IntList) -> "TileAssignment":
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(len(self._dims))):
      raise support.InvalidArgumentError(
          f"{list(perm)} is not a permutation of {len(self._dims)} tile "
          f"dimensions")
    if _transpose_kind(self._dims, perm) == "noop":
      return self
    if self.is_iota:
      transposed = self._iota_transpose(perm)
      if transposed is not None:
        return transposed
    array = np.ascontiguousarray(self.array.transpose(perm))
    array.flags.writeable = False
    return TileAssignment(array.shape, array=array)

  # -- printing, equality ------------------------------------------------------

  def to_string(self) -> str:
    """`devices=[2,2]<=[2,2]T(1,0)` or `devices=[2,2]0,2,1,3`."""
    head = "devices=[" + ",".join(map(str, self._dims)) + "]"
    if self.is_iota:
      text = head + "<=[" + ",".join(map(str, self._reshape_dims)) + "]"
      if len(self._reshape_dims) > 1:
        text += "T(" + ",".join(map(str, self._perm)) + ")"
      return text
    return head + ",".join(str(int(d)) for d in self.array.ravel())

  def __str__(self) -> str:
    return self.to_string()

  def __repr__(self) -> str:
    return f"TileAssignment({self.to_string()})"

  def __eq__(self, other) -> bool:
    if not isinstance(other, TileAssignment):
      return NotImplemented
    if self is other:
      return True
    if self._dims != other._dims:
      return False
    if self.is_iota and other.is_iota and (
        self._reshape_dims == other._reshape_dims and
        self._perm == other._perm):
      return True
    return bool(np.array_equal(self.array, other.array))

  def __hash__(self) -> int:
    if self._hash is None:
      object.__setattr__(self, "_hash",
                         hash((self._dims, self.array.tobytes())))
    return self._hash


# -- shardings -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ShardGroup:
  """`shard_as N` / `shard_like N`: values of one group get one sharding."""

  shard_group_id: int
  shard_as: bool

  @property
  def shard_like(self) -> bool:
    return not self.shard_as

  def to_string(self) -> str:
    return f"{'shard_as' if self.shard_as else 'shard_like'} " \
           f"{self.shard_group_id}"


def _dims_of(shape) -> tuple[int, ...]:
  if isinstance(shape, Shape):
    if not shape.is_array():
      raise support.InvalidArgumentError(
          f"expected an array shape, got {shape.to_string()}")
    return shape.dimensions
  return tuple(int(d) for d in shape)


def _leaf_count(shape: Shape) -> int:
  if shape.is_tuple():
    return sum(_leaf_count(s) for s in shape.tuple_shapes)
  return 1


def _ceil_div(a: int, b: int) -> int:
  return -(-a // b)


class HloSharding:
  """An immutable sharding; see the module docstring.

  Build one with the classmethods (`replicate`, `maximal`, `tile`,
  `iota_tile`, `partial_tile`, `subgroup`, `tuple_sharding`, ...), `parse`
  or `from_proto`.
  """

  __slots__ = ("_type", "_tile", "_replicate_last", "_subgroup_types",
               "_elements", "_metadata", "_shard_group", "_hash")

  def __init__(self, kind: OpShardingType, *, tile=None,
               replicate_on_last_tile_dim: bool = False,
               subgroup_types: Sequence[OpShardingType] = (),
               elements: Sequence["HloSharding"] = (),
               metadata: Sequence[xla_data.OpMetadata] = (),
               shard_group: Optional[ShardGroup] = None):
    # Internal: use the classmethods, which normalise as XLA does.
    set_ = object.__setattr__
    set_(self, "_type", OpShardingType(kind))
    set_(self, "_tile", tile)
    set_(self, "_replicate_last", bool(replicate_on_last_tile_dim))
    set_(self, "_subgroup_types",
         tuple(OpShardingType(t) for t in subgroup_types))
    set_(self, "_elements", tuple(elements))
    set_(self, "_metadata", tuple(metadata))
    set_(self, "_shard_group", shard_group)
    set_(self, "_hash", None)

  def __setattr__(self, name, value):
    raise AttributeError("HloSharding is immutable")

  def _replace(self, **changes) -> "HloSharding":
    fields = dict(tile=self._tile,
                  replicate_on_last_tile_dim=self._replicate_last,
                  subgroup_types=self._subgroup_types,
                  elements=self._elements, metadata=self._metadata,
                  shard_group=self._shard_group)
    fields.update(changes)
    return HloSharding(self._type, **fields)

  # -- constructors ------------------------------------------------------------

  @classmethod
  def replicate(cls, metadata: Sequence[xla_data.OpMetadata] = ()):
    return cls(_T.REPLICATED, metadata=metadata)

  @classmethod
  def manual(cls, metadata: Sequence[xla_data.OpMetadata] = ()):
    return cls(_T.MANUAL, metadata=metadata)

  @classmethod
  def unknown(cls, metadata: Sequence[xla_data.OpMetadata] = ()):
    return cls(_T.UNKNOWN, metadata=metadata)

  @classmethod
  def unreduced(cls, metadata: Sequence[xla_data.OpMetadata] = ()):
    return cls(_T.UNREDUCED, metadata=metadata)

  @classmethod
  def maximal(cls, device: int,
              metadata: Sequence[xla_data.OpMetadata] = ()):
    """The whole value on one device (`{maximal device=N}`)."""
    return cls(_T.MAXIMAL, tile=TileAssignment.from_array([int(device)]),
               metadata=metadata)

  assign_device = maximal

  @classmethod
  def tile(cls, tile_assignment,
           metadata: Sequence[xla_data.OpMetadata] = ()):
    """Tiles on every dimension; `tile_assignment` is a TileAssignment or
    an int array of device ids (one per tile), kept as given."""
    return cls(_T.OTHER, tile=TileAssignment._make(tile_assignment),
               metadata=metadata)

  @classmethod
  def iota_tile(cls, dims: _IntList, reshape_dims: Optional[_IntList] = None,
                transpose_perm: Optional[_IntList] = None,
                metadata: Sequence[xla_data.OpMetadata] = ()):
    """`tile` with an iota tile assignment (`devices=[dims]<=[...]T(...)`)."""
    return cls.tile(TileAssignment.iota(dims, reshape_dims, transpose_perm),
                    metadata)

  @classmethod
  def partial_tile(cls, tile_assignment_last_dim_replicate,
                   metadata: Sequence[xla_data.OpMetadata] = ()):
    """Tiled on all but the last tile dimension, whose devices hold the same
    tile (`last_tile_dim_replicate`). Each replication group is sorted; a
    single group is `{replicated}`, a last dimension of 1 is dropped."""
    ta = TileAssignment._make(tile_assignment_last_dim_replicate)
    n = ta.num_elements
    if ta.num_dimensions == 1 or ta.dimensions[-1] == n:
      return cls.replicate(metadata)
    if ta.dimensions[-1] == 1:
      return cls(_T.OTHER, tile=ta.reshape(ta.dimensions[:-1]),
                 metadata=metadata)
    group = ta.dimensions[-1]
    if ta.is_iota:
      # An iota's minor dimension is increasing; if it is the last
      # transposed reshape dimension, or several whole minor ones (with at
      # most one split), the groups are sorted by reordering those.
      if ta.reshape_dims[ta.transpose_perm[-1]] == group:
        return cls(_T.OTHER, tile=ta, replicate_on_last_tile_dim=True,
                   metadata=metadata)
      grouped = _group_minor_iota_dims(ta.reshape_dims, ta.transpose_perm,
                                       group)
      if grouped is not None:
        return cls(_T.OTHER,
                   tile=TileAssignment.iota(ta.dimensions, *grouped),
                   replicate_on_last_tile_dim=True, metadata=metadata)
    rows = np.sort(ta.array.reshape(-1, group), axis=1)
    return cls(_T.OTHER, tile=TileAssignment.from_array(
        rows.reshape(ta.dimensions)), replicate_on_last_tile_dim=True,
               metadata=metadata)

  @classmethod
  def subgroup(cls, tile_assignment, subgroup_types: Sequence[Any],
               metadata: Sequence[xla_data.OpMetadata] = ()):
    """Tiled on the leading dimensions; the last `len(subgroup_types)` tile
    dimensions are subgroups of the given types (`last_tile_dims={...}`).

    Normalised as XLA does: subgroup dimensions of size 1 are dropped, those
    of one type merged, types ordered (replicated last), a lone replicated
    subgroup becomes `last_tile_dim_replicate`, and an untiled sharding with
    one subgroup type becomes that type (`{manual}`, `{replicated}`...).
    """
    ta = TileAssignment._make(tile_assignment)
    types = tuple(OpShardingType(t) if not isinstance(t, str)
                  else _SUBGROUP_BY_NAME[t] for t in subgroup_types)
    if not types:
      return cls(_T.OTHER, tile=ta, metadata=metadata)
    if len(types) > ta.num_dimensions:
      raise support.InvalidArgumentError(
          f"{len(types)} subgroup types for a tile assignment of "
          f"{ta.num_dimensions} dimensions")
    data_rank = ta.num_dimensions - len(types)
    dims = ta.dimensions
    if len(set(types)) == 1 and _product(dims[:data_rank]) == 1:
      only = {_T.MANUAL: cls.manual, _T.REPLICATED: cls.replicate,
              _T.UNREDUCED: cls.unreduced}.get(types[0])
      if only is not None:
        return only(metadata)
    perm = list(range(data_rank))
    by_type: dict[OpShardingType, list[int]] = {}
    unit_dims = []
    needs_merging = False
    for i, t in enumerate(types):
      d = data_rank + i
      if dims[d] == 1:
        unit_dims.append(d)
        needs_merging = True
        continue
      if t in by_type:
        needs_merging = True
      by_type.setdefault(t, []).append(d)
    needs_merging |= len(by_type) > 1
    if not needs_merging:
      return cls._subgroup_sharding(ta, types, metadata)
    merged_shape = list(dims[:data_rank])
    merged_types = []
    for t in _SUBGROUP_ORDER:
      if t not in by_type:
        continue
      perm.extend(by_type[t])
      merged_shape.append(_product(dims[d] for d in by_type[t]))
      merged_types.append(t)
    full_perm = perm + unit_dims
    merged = None
    if ta.is_iota:
      transposed = ta._iota_transpose(full_perm)
      if transposed is not None:
        merged = TileAssignment.iota(merged_shape, transposed.reshape_dims,
                                     transposed.transpose_perm)
    if merged is None:
      merged = TileAssignment.from_array(
          ta.array.transpose(full_perm).reshape(merged_shape))
    return cls._subgroup_sharding(merged, tuple(merged_types), metadata)

  @classmethod
  def _subgroup_sharding(cls, ta: TileAssignment, types, metadata):
    if len(types) == 1 and types[0] == _T.REPLICATED:
      return cls.partial_tile(ta, metadata)
    if (len(types) == 1 and types[0] == _T.MANUAL and
        ta.num_elements == ta.dimensions[-1]):
      return cls.manual(metadata)
    if types and types[-1] == _T.REPLICATED:
      # Sort the replication groups as a partial tile does, then relabel.
      partial = cls.partial_tile(ta, metadata)
      return partial._replace(replicate_on_last_tile_dim=False,
                              subgroup_types=types)
    return cls(_T.OTHER, tile=ta, subgroup_types=types, metadata=metadata)

  @classmethod
  def tuple_sharding(cls, elements: Sequence["HloSharding"]):
    """A tuple sharding from the flat list of leaf shardings."""
    elements = tuple(elements)
    for e in elements:
      if not isinstance(e, HloSharding) or e.is_tuple:
        raise support.InvalidArgumentError(
            f"tuple sharding elements must be non-tuple shardings, got {e}")
    return cls(_T.TUPLE, elements=elements)

  flat_tuple = tuple_sharding

  @classmethod
  def single_tuple(cls, tuple_shape: Shape, sharding: "HloSharding"):
    """`sharding` on every leaf of `tuple_shape`."""
    if not tuple_shape.is_tuple():
      raise support.InvalidArgumentError(
          f"{tuple_shape.to_string()} is not a tuple shape")
    return cls.tuple_sharding([sharding] * max(1, _leaf_count(tuple_shape)))

  @classmethod
  def single(cls, shape: Shape, sharding: "HloSharding"):
    return cls.single_tuple(shape, sharding) if shape.is_tuple() else sharding

  def with_shard_group(self, group: Optional[ShardGroup]) -> "HloSharding":
    return self._replace(shard_group=group)

  def shard_as(self, group_id: int) -> "HloSharding":
    return self._replace(shard_group=ShardGroup(int(group_id), True))

  def shard_like(self, group_id: int) -> "HloSharding":
    return self._replace(shard_group=ShardGroup(int(group_id), False))

  def with_metadata(self, metadata: Sequence[xla_data.OpMetadata],
                    overwrite: bool = False) -> "HloSharding":
    """Sets metadata where there is none (or everywhere with `overwrite`);
    on a tuple, on its elements."""
    if self.is_tuple:
      return self._replace(elements=[
          e.with_metadata(metadata, overwrite) for e in self._elements])
    if self._metadata and not overwrite:
      return self
    return self._replace(metadata=tuple(metadata))

  def without_metadata(self) -> "HloSharding":
    return self._replace(
        metadata=(), elements=[e.without_metadata() for e in self._elements])

  # -- kind queries ------------------------------------------------------------

  @property
  def type(self) -> OpShardingType:
    """The OpSharding type (OTHER for tiled)."""
    return self._type

  @property
  def is_tuple(self) -> bool:
    return self._type == _T.TUPLE

  def _all(self, pred) -> bool:
    if self.is_tuple:
      return all(pred(e) for e in self._elements)
    return pred(self)

  @property
  def is_replicated(self) -> bool:
    """Every leaf is replicated on all devices."""
    return self._all(lambda s: s._type == _T.REPLICATED)

  @property
  def is_tile_maximal(self) -> bool:
    """One whole tile: replicated or on a single device. A tuple is when
    all its leaves are replicated or all are on single devices (as XLA
    has it; a mix of the two is not)."""
    if self.is_tuple:
      return self.is_replicated or self.is_maximal
    return self._type in (_T.REPLICATED, _T.MAXIMAL)

  @property
  def is_maximal(self) -> bool:
    """Every leaf sits whole on a single device (`{maximal device=N}`)."""
    return self._all(lambda s: s._type == _T.MAXIMAL)

  @property
  def is_manual(self) -> bool:
    return self._all(lambda s: s._type == _T.MANUAL)

  @property
  def is_unknown(self) -> bool:
    return self._all(lambda s: s._type == _T.UNKNOWN)

  @property
  def is_unreduced(self) -> bool:
    return self._all(lambda s: s._type == _T.UNREDUCED)

  @property
  def is_tiled(self) -> bool:
    """Split by a tile assignment (partial and subgroup tilings included);
    for a tuple, as XLA has it: some leaf tiled, not all manual, ..."""
    return not (self.is_tile_maximal or self.is_manual or self.is_unreduced or
                self.is_unknown)

  @property
  def is_manual_subgroup(self) -> bool:
    return self._all(lambda s: _T.MANUAL in s._subgroup_types)

  @property
  def is_unreduced_subgroup(self) -> bool:
    return self._all(lambda s: _T.UNREDUCED in s._subgroup_types)

  @property
  def has_partial_replication(self) -> bool:
    return self._replicate_last or _T.REPLICATED in self._subgroup_types

  @property
  def replicate_on_last_tile_dim(self) -> bool:
    return self._replicate_last

  @property
  def subgroup_types(self) -> tuple[OpShardingType, ...]:
    return self._subgroup_types

  @property
  def metadata(self) -> tuple[xla_data.OpMetadata, ...]:
    return self._metadata

  @property
  def shard_group(self) -> Optional[ShardGroup]:
    return self._shard_group

  @property
  def is_shard_group(self) -> bool:
    if self.is_tuple:
      return bool(self._elements) and all(
          e.is_shard_group for e in self._elements)
    return self._shard_group is not None

  # -- tuples ------------------------------------------------------------------

  @property
  def tuple_elements(self) -> tuple["HloSharding", ...]:
    """The leaf shardings of a tuple sharding, in pre-order."""
    _precondition(self.is_tuple, f"{self} is not a tuple sharding")
    return self._elements

  def get_sub_sharding(self, shape: Shape,
                       index: Sequence[int]) -> "HloSharding":
    """The sharding of the subshape of tuple `shape` at `index`."""
    _precondition(self.is_tuple, f"{self} is not a tuple sharding")
    self._check_leaf_count(shape)
    start = 0
    sub = shape
    for i in index:
      if not sub.is_tuple() or not 0 <= i < len(sub.tuple_shapes):
        raise support.InvalidArgumentError(
            f"invalid shape index {{{','.join(map(str, index))}}} for "
            f"{shape.to_string()}")
      start += sum(_leaf_count(s) for s in sub.tuple_shapes[:i])
      sub = sub.tuple_shapes[i]
    if sub.is_tuple():
      return HloSharding.tuple_sharding(
          self._elements[start:start + _leaf_count(sub)])
    return self._elements[start]

  def get_tuple_sharding(self, shape: Shape) -> "HloSharding":
    """Itself if a tuple sharding (checked against `shape`), else itself on
    every leaf of `shape`."""
    if self.is_tuple:
      self._check_leaf_count(shape)
      return self
    return HloSharding.single_tuple(shape, self)

  def extract_single_sharding(self) -> Optional["HloSharding"]:
    """Itself if not a tuple; the common element of a uniform tuple."""
    if not self.is_tuple:
      return self
    if not self._elements or any(
        e != self._elements[0] for e in self._elements[1:]):
      return None
    return self._elements[0]

  def _check_leaf_count(self, shape: Shape) -> None:
    if not shape.is_tuple():
      raise support.InvalidArgumentError(
          "Sharding is tuple-shaped but validation shape is not.")
    leaves = _leaf_count(shape)
    if leaves == 0 and len(self._elements) == 1:
      return
    if leaves != len(self._elements):
      raise support.InvalidArgumentError(
          f"Shape {shape.to_string()} has {leaves} leaf nodes while this "
          f"sharding has {len(self._elements)}")

  # -- tiles -------------------------------------------------------------------

  @property
  def tile_assignment(self) -> TileAssignment:
    """The tile assignment of a tiled or maximal sharding."""
    _precondition(self._tile is not None,
                  f"{self} has no tile assignment")
    return self._tile

  @property
  def dimensions(self) -> tuple[int, ...]:
    """The tile assignment dimensions (subgroup dimensions included)."""
    return self.tile_assignment.dimensions

  @property
  def num_dimensions(self) -> int:
    return self.tile_assignment.num_dimensions

  def dimension(self, i: int) -> int:
    return self.tile_assignment.dim(i)

  @property
  def num_devices(self) -> int:
    """The devices in the tile assignment (0 if there is none)."""
    return 0 if self._tile is None else self._tile.num_elements

  def _require_tiled(self, what: str) -> None:
    _precondition(self._type == _T.OTHER,
                  f"{what} needs a tiled sharding, not {self}")

  @property
  def tiled_data_rank(self) -> int:
    """The tile dimensions that cut data (subgroup dimensions excluded)."""
    self._require_tiled("tiled_data_rank")
    return (self._tile.num_dimensions - int(self._replicate_last) -
            len(self._subgroup_types))

  def _subgroup_dim(self, kind: OpShardingType) -> int:
    if kind in self._subgroup_types:
      return self.tiled_data_rank + self._subgroup_types.index(kind)
    if kind == _T.REPLICATED and self._replicate_last:
      return self._tile.num_dimensions - 1
    return -1

  @property
  def subgroup_replication_dim(self) -> int:
    """The tile dimension of replicated devices, or -1."""
    return self._subgroup_dim(_T.REPLICATED) if self._type == _T.OTHER else -1

  @property
  def subgroup_manual_dim(self) -> int:
    return self._subgroup_dim(_T.MANUAL) if self._type == _T.OTHER else -1

  @property
  def subgroup_unreduced_dim(self) -> int:
    return self._subgroup_dim(_T.UNREDUCED) if self._type == _T.OTHER else -1

  def num_tiles(self, dims: Optional[Sequence[int]] = None) -> int:
    """Distinct data tiles: the product of the data tile dimensions (or of
    `dims`). 1 for replicated and maximal shardings."""
    if self.is_tile_maximal:
      return 1
    self._require_tiled("num_tiles")
    if dims is None:
      return _product(self._tile.dimensions[:self.tiled_data_rank])
    for d in dims:
      if not 0 <= d < self._tile.num_dimensions or (
          self._replicate_last and d == self._tile.num_dimensions - 1):
        raise support.InvalidArgumentError(
            f"{d} is not a data tile dimension of {self}")
    return _product(self._tile.dim(d) for d in dims)

  def total_num_tiles(self) -> int:
    """Every tile, subgroups and replication included."""
    if self.is_tile_maximal:
      return 1
    self._require_tiled("total_num_tiles")
    return self._tile.num_elements

  def tile_index_for_device(self, device: int) -> tuple[int, ...]:
    """The data tile index of `device`."""
    self._require_tiled("tile_index_for_device")
    hits = np.argwhere(self._tile.array == device)
    if not len(hits):
      raise support.InvalidArgumentError(
          f"device {device} is not in the tile assignment of {self}")
    return tuple(int(i) for i in hits[-1][:self.tiled_data_rank])

  def device_for_tile_index(self, index: Sequence[int]) -> int:
    """The device of tile `index`: a data tile index (the first device of
    its subgroups) or a full tile assignment index."""
    _precondition(self._type in (_T.OTHER, _T.MAXIMAL),
                  f"device_for_tile_index needs a tiled or maximal "
                  f"sharding, not {self}")
    if self._type == _T.MAXIMAL:
      return self._tile.first()
    index = tuple(index)
    if len(index) == self.tiled_data_rank < self._tile.num_dimensions:
      index += (0,) * (self._tile.num_dimensions - len(index))
    return self._tile.value_at(index)

  def devices_for_tile_index(self, index: Sequence[int]) -> tuple[int, ...]:
    """Every device holding data tile `index` (all of its subgroups), in
    tile assignment order."""
    self._require_tiled("devices_for_tile_index")
    index = tuple(int(i) for i in index)
    if len(index) != self.tiled_data_rank:
      raise support.InvalidArgumentError(
          f"tile index {list(index)} has {len(index)} dimensions; {self} "
          f"tiles {self.tiled_data_rank}")
    return tuple(int(d) for d in self._tile.array[index].ravel())

  def replication_groups(self) -> tuple[tuple[int, ...], ...]:
    """The groups of devices holding identical data: devices that differ
    only along the replicated subgroup dimension. One device per group when
    there is no replication; groups in tile assignment order."""
    self._require_tiled("replication_groups")
    array = self._tile.array
    rdim = self.subgroup_replication_dim
    if rdim < 0:
      return tuple((int(d),) for d in array.ravel())
    moved = np.moveaxis(array, rdim, -1).reshape(-1, array.shape[rdim])
    return tuple(tuple(int(d) for d in row) for row in moved)

  def _check_rank(self, dims: tuple[int, ...]) -> None:
    if len(dims) != self.tiled_data_rank:
      raise support.InvalidArgumentError(
          f"shape rank {len(dims)} does not match the {self.tiled_data_rank} "
          f"tiled dimensions of {self}")

  def _bounds(self, shape, device: int, limit: bool):
    dims = _dims_of(shape)
    _precondition(not self.is_tuple and self._type not in (
        _T.MANUAL, _T.UNKNOWN, _T.UNREDUCED),
                  f"tile bounds need a tiled, replicated or maximal "
                  f"sharding, not {self}")
    if self._type in (_T.REPLICATED, _T.MAXIMAL):
      return dims if limit else (0,) * len(dims)
    self._check_rank(dims)
    index = self.tile_index_for_device(device)
    out = []
    for i, d in enumerate(dims):
      size = _ceil_div(d, self._tile.dim(i))
      out.append(min((index[i] + int(limit)) * size, d))
    return tuple(out)

  def tile_offset_for_device(self, shape, device: int) -> tuple[int, ...]:
    """Where the tile of `device` starts in `shape` (a Shape or dims).

    Tiles are ceil(dim / tiles) long; the last ones may be short or empty.
    """
    return self._bounds(shape, device, limit=False)

  def tile_limit_for_device(self, shape, device: int) -> tuple[int, ...]:
    """Where the tile of `device` ends (exclusive) in `shape`."""
    return self._bounds(shape, device, limit=True)

  def tile_shape(self, shape, device: Optional[int] = None):
    """The shape of one tile of `shape` (the largest, or that of `device`).

    Returns a Shape for a Shape, a tuple of dims for dims.
    """
    dims = _dims_of(shape)
    if self.is_tuple:
      raise support.FailedPreconditionError(
          f"tile_shape of tuple sharding {self}")
    if self._type == _T.OTHER:
      self._check_rank(dims)
      if device is None:
        dims = tuple(_ceil_div(d, self._tile.dim(i))
                     for i, d in enumerate(dims))
      else:
        lo = self.tile_offset_for_device(dims, device)
        hi = self.tile_limit_for_device(dims, device)
        dims = tuple(h - l for l, h in zip(lo, hi))
    if isinstance(shape, Shape):
      return dataclasses.replace(shape, dimensions=dims)
    return dims

  def each_tile(self, shape) -> Iterator[
      tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """(device, offset, limit) of every device of a tiled sharding, in tile
    assignment order."""
    dims = _dims_of(shape)
    self._require_tiled("each_tile")
    self._check_rank(dims)
    rank = len(dims)
    sizes = [_ceil_div(d, self._tile.dim(i)) for i, d in enumerate(dims)]
    for index in np.ndindex(*self._tile.dimensions):
      data = index[:rank]
      yield (int(self._tile.array[index]),
             tuple(min(i * s, d) for i, s, d in zip(data, sizes, dims)),
             tuple(min((i + 1) * s, d) for i, s, d in zip(data, sizes, dims)))

  def uses_device(self, device: int) -> bool:
    if self.is_tuple:
      return any(e.uses_device(device) for e in self._elements)
    if self._type in (_T.REPLICATED, _T.MANUAL):
      return True
    return self._tile is not None and self._tile.uses_device(device)

  def unique_device(self) -> Optional[int]:
    """The one device of a maximal sharding (of every tuple leaf), or None."""
    if self.is_tuple:
      devices = {e.unique_device() for e in self._elements}
      if len(devices) != 1 or None in devices:
        return None
      return devices.pop()
    return self._tile.first() if self._type == _T.MAXIMAL else None

  # -- validation --------------------------------------------------------------

  def validate(self, shape: Shape, num_devices: Optional[int] = None) -> None:
    """Raises support.InvalidArgumentError unless this sharding fits `shape`
    (and, if given, a program of `num_devices` devices)."""
    if shape.is_token():
      return
    try:
      if self.is_tuple:
        self._validate_tuple(shape, num_devices)
      else:
        self._validate_leaf(shape, num_devices)
    except support.InvalidArgumentError as e:
      raise support.InvalidArgumentError(
          f"{e.message}\nNote: While validating sharding {self} against "
          f"shape {shape.to_string()}") from None

  def _validate_tuple(self, shape: Shape, num_devices) -> None:
    self._check_leaf_count(shape)
    leaves = [s for _, s in _leaf_shapes(shape)]
    if not leaves:
      return
    for i, (leaf, sharding) in enumerate(zip(leaves, self._elements)):
      try:
        sharding._validate_leaf(leaf, num_devices)
      except support.InvalidArgumentError as e:
        raise support.InvalidArgumentError(
            f"{e.message}\nNote: While validating sharding tuple element {i} "
            f"which is {sharding}") from None

  def _validate_leaf(self, shape: Shape, num_devices) -> None:
    if shape.is_tuple():
      raise support.InvalidArgumentError(
          "Validation shape is a tuple but sharding is not.")
    if self._type in (_T.REPLICATED, _T.MANUAL, _T.UNREDUCED, _T.UNKNOWN):
      return
    if self._type == _T.MAXIMAL:
      _check_device(self._tile.first(), num_devices)
      return
    ta = self._tile
    if ta.num_elements <= 1:
      raise support.InvalidArgumentError(
          "Tile assignment only contains a single device. If a replicated "
          "sharding was intended, use HloSharding.replicate(). If a device "
          "placement was intended, use HloSharding.maximal()")
    if len(shape.dimensions) != self.tiled_data_rank:
      raise support.InvalidArgumentError(
          f"Number of tile assignment dimensions (excluding subgroups) is "
          f"different than the input rank. sharding={self}, "
          f"input_shape={shape.to_string()}")
    if ta.is_iota:
      if num_devices is not None and ta.num_elements != num_devices:
        raise support.InvalidArgumentError(
            f"tile_assignment should have {num_devices} devices but has "
            f"{ta.num_elements}")
      return
    seen = set()
    for d in ta.array.ravel():
      d = int(d)
      _check_device(d, num_devices)
      if d in seen:
        raise support.InvalidArgumentError(
            f"device {d} is not unique in tile assignment")
      seen.add(d)
    if num_devices is not None and len(seen) != num_devices:
      raise support.InvalidArgumentError(
          f"tile_assignment should have {num_devices} devices but has "
          f"{len(seen)}")

  # -- text --------------------------------------------------------------------

  @classmethod
  def parse(cls, text: str) -> "HloSharding":
    """Parses the HLO text of a sharding (`{devices=[2,2]<=[4]}`, ...)."""
    if not isinstance(text, str):
      raise support.InvalidArgumentError(
          f"a sharding is parsed from str, not {type(text).__name__}")
    return _parse_cached(text)

  def to_string(self, include_metadata: bool = False) -> str:
    """The HLO text, as XLA's HloSharding::ToString prints it."""
    if self.is_tuple:
      parts = []
      for i, e in enumerate(self._elements):
        prefix = f"/*index={i}*/" if i and i % 5 == 0 else ""
        parts.append(prefix + e.to_string(include_metadata))
      return "{" + ", ".join(parts) + "}"
    if self._type == _T.MAXIMAL:
      body = f"maximal device={self._tile.first()}"
    elif self._type == _T.OTHER:
      body = self._tile.to_string()
      if self._replicate_last:
        body += " last_tile_dim_replicate"
      if self._subgroup_types:
        body += " last_tile_dims={" + ", ".join(
            _SUBGROUP_NAMES.get(t, "error_type.")
            for t in self._subgroup_types) + "}"
    else:
      body = {_T.REPLICATED: "replicated", _T.MANUAL: "manual",
              _T.UNKNOWN: "unknown", _T.UNREDUCED: "unreduced"}[self._type]
    if self._shard_group is not None:
      body += " " + self._shard_group.to_string()
    if include_metadata and self._metadata:
      if len(self._metadata) == 1:
        body += " metadata=" + hlo_printer.metadata_to_string(
            self._metadata[0])
      else:
        body += " metadata={" + ", ".join(
            hlo_printer.metadata_to_string(m) for m in self._metadata) + "}"
    return "{" + body + "}"

  def __str__(self) -> str:
    return self.to_string()

  def __repr__(self) -> str:
    return f"HloSharding({self.to_string()})"

  # -- proto -------------------------------------------------------------------

  def to_proto(self):
    """An xla.OpSharding message (the repository's protobuf class)."""
    proto = schema.OpSharding()
    self._fill_proto(proto)
    return proto

  def _fill_proto(self, proto) -> None:
    if self.is_tuple:
      for e in self._elements:
        e._fill_proto(proto.tuple_shardings.add())
      proto.type = _T.TUPLE
      return
    for md in self._metadata:
      _metadata_to_proto(md, proto.metadata.add())
    ta = self._tile
    if ta is not None:
      if ta.is_iota:
        proto.iota_reshape_dims.extend(ta.reshape_dims)
        proto.iota_transpose_perm.extend(ta.transpose_perm)
      else:
        proto.tile_assignment_devices.extend(ta.devices())
    proto.type = self._type
    if self._type == _T.OTHER:
      proto.replicate_on_last_tile_dim = self._replicate_last
      proto.last_tile_dims.extend(int(t) for t in self._subgroup_types)
      proto.tile_assignment_dimensions.extend(ta.dimensions)
    if self._shard_group is not None:
      proto.is_shard_group = True
      proto.shard_group_id = self._shard_group.shard_group_id
      proto.shard_group_type = (_SHARD_GROUP_AS if self._shard_group.shard_as
                                else _SHARD_GROUP_LIKE)

  @classmethod
  def from_proto(cls, proto) -> "HloSharding":
    """From an OpSharding: the repository's message, serialized bytes, or any
    message with `SerializeToString` (e.g. another copy of XLA's protos)."""
    if not isinstance(proto, schema.OpSharding):
      data = proto if isinstance(proto, (bytes, bytearray, memoryview)) else (
          proto.SerializeToString())
      proto = schema.OpSharding()
      try:
        proto.ParseFromString(bytes(data))
      except Exception as e:  # pylint: disable=broad-except
        raise support.InvalidArgumentError(
            f"malformed OpSharding bytes: {e}") from None
    return _from_proto(proto)

  # -- equality ----------------------------------------------------------------

  def _key(self):
    return (self._type, self._tile, self._replicate_last,
            self._subgroup_types, self._elements, self._shard_group)

  def __eq__(self, other) -> bool:
    if not isinstance(other, HloSharding):
      return NotImplemented
    return self is other or self._key() == other._key()

  def __hash__(self) -> int:
    if self._hash is None:
      object.__setattr__(self, "_hash", hash(self._key()))
    return self._hash


def _leaf_shapes(shape: Shape):
  if shape.is_tuple():
    for i, s in enumerate(shape.tuple_shapes):
      for index, leaf in _leaf_shapes(s):
        yield (i,) + index, leaf
  else:
    yield (), shape


def _check_device(device: int, num_devices: Optional[int]) -> None:
  if device < 0:
    raise support.InvalidArgumentError(
        f"device {device} is negative in tile assignment")
  if num_devices is not None and device >= num_devices:
    raise support.InvalidArgumentError(
        f"device {device} >= num_devices ({num_devices}) in tile assignment")


def _group_minor_iota_dims(reshape_dims: _IntList, perm: _IntList,
                           group_size: int):
  """Reshape dims and perm of the same iota whose last `group_size` devices
  of each row come in increasing order, or None where that cannot be had by
  sorting whole minor dimensions (after splitting at most one in two)."""
  grouped = 0
  split = None  # (reshape dim, its major part)
  for p in reversed(perm):
    size = reshape_dims[p]
    if size <= group_size:
      if group_size % size:
        return None
      group_size //= size
      grouped += 1
    else:
      if size % group_size:
        return None
      split = (p, size // group_size)
      grouped += 1
      break
  if split is None:
    new_dims = list(reshape_dims)
    new_perm = list(perm)
  else:
    at, major = split
    new_dims = (list(reshape_dims[:at]) +
                [major, reshape_dims[at] // major] +
                list(reshape_dims[at + 1:]))
    new_perm = []
    for p in perm:
      if p == at:
        new_perm += [at, at + 1]
      else:
        new_perm.append(p if p < at else p + 1)
  new_perm[len(new_perm) - grouped:] = sorted(new_perm[len(new_perm) -
                                                       grouped:])
  return new_dims, new_perm


# -- proto helpers -------------------------------------------------------------

_MD_INT = ("source_line", "source_end_line", "source_column",
           "source_end_column", "stack_frame_id")
_MD_STR = ("op_type", "op_name", "source_file", "deduplicated_name",
           "scheduling_name")


def _metadata_to_proto(md: xla_data.OpMetadata, mp) -> None:
  for f in _MD_STR + _MD_INT:
    value = getattr(md, f)
    if value:
      setattr(mp, f, value)
  mp.profile_type.extend(md.profile_type)


def _metadata_from_proto(mp) -> xla_data.OpMetadata:
  fields = {f: getattr(mp, f) for f in _MD_STR + _MD_INT}
  return xla_data.OpMetadata(profile_type=tuple(mp.profile_type), **fields)


def _from_proto(p) -> HloSharding:
  numbers = sorted({f.field_number
                    for f in unknown_fields.UnknownFieldSet(p)})
  if numbers:
    raise support.UnimplementedError(
        f"Unimplemented: OpSharding field(s) number "
        f"{', '.join(map(str, numbers))} (e.g. named_sharding)")
  group = None
  if p.is_shard_group:
    group = ShardGroup(int(p.shard_group_id),
                       p.shard_group_type == _SHARD_GROUP_AS)
  metadata = tuple(_metadata_from_proto(m) for m in p.metadata)
  try:
    kind = OpShardingType(p.type)
  except ValueError:
    raise support.InvalidArgumentError(
        f"unknown OpSharding type {p.type}") from None
  if kind == _T.TUPLE:
    if metadata:
      raise support.InvalidArgumentError(
          "Tuple sharding is expected to have no metadata.")
    s = HloSharding.tuple_sharding([_from_proto(e) for e in p.tuple_shardings])
    return s.with_shard_group(group)
  simple = {_T.REPLICATED: HloSharding.replicate, _T.MANUAL: HloSharding.manual,
            _T.UNKNOWN: HloSharding.unknown,
            _T.UNREDUCED: HloSharding.unreduced}
  if kind in simple:
    return simple[kind](metadata).with_shard_group(group)
  devices = [int(d) for d in p.tile_assignment_devices]
  if kind == _T.MAXIMAL:
    if len(devices) != 1:
      raise support.InvalidArgumentError(
          f"Maximal sharding is expected to have single device assignment, "
          f"but {len(devices)} has provided.")
    return HloSharding.maximal(devices[0], metadata).with_shard_group(group)
  reshape = [int(d) for d in p.iota_reshape_dims]
  perm = [int(d) for d in p.iota_transpose_perm]
  dims = [int(d) for d in p.tile_assignment_dimensions]
  if reshape:
    if devices:
      raise support.InvalidArgumentError(
          "OpSharding has both iota_reshape_dims and tile_assignment_devices")
    if len(reshape) != len(perm):
      raise support.InvalidArgumentError(
          f"OpSharding iota_reshape_dims {reshape} and iota_transpose_perm "
          f"{perm} differ in length")
    if all(d == 1 for d in reshape):
      return HloSharding.replicate(metadata).with_shard_group(group)
  else:
    if not devices:
      raise support.InvalidArgumentError(
          "tiled OpSharding has no tile_assignment_devices")
    if len(devices) == 1:
      return HloSharding.replicate(metadata).with_shard_group(group)
  if not dims:
    raise support.InvalidArgumentError(
        "tiled OpSharding has no tile_assignment_dimensions")
  types = [int(t) for t in p.last_tile_dims]
  if types and p.replicate_on_last_tile_dim:
    raise support.InvalidArgumentError(
        "OpSharding has both last_tile_dims and replicate_on_last_tile_dim")
  return _tiled(dims, devices, reshape or None, perm or None,
                p.replicate_on_last_tile_dim, types, metadata).with_shard_group(
                    group)


def _tiled(dims, devices, reshape, perm, replicate_last, types,
           metadata) -> HloSharding:
  """The tiled sharding of parsed or proto fields."""
  if reshape is not None:
    ta = TileAssignment.iota(dims, reshape, perm)
  else:
    if any(d < 0 for d in dims) or _product(dims) != len(devices):
      raise support.InvalidArgumentError(
          f"tile assignment dimensions {list(dims)} need {_product(dims)} "
          f"devices but {len(devices)} are listed")
    ta = TileAssignment.from_array(np.array(devices).reshape(dims))
  if replicate_last:
    types = [_T.REPLICATED]
  try:
    types = [OpShardingType(t) for t in types]
  except ValueError as e:
    raise support.InvalidArgumentError(f"unknown subgroup type: {e}") from None
  if types:
    return HloSharding.subgroup(ta, types, metadata)
  return HloSharding(_T.OTHER, tile=ta, metadata=metadata)


# -- text parser ---------------------------------------------------------------


class ShardingParseError(support.InvalidArgumentError):
  """Malformed sharding text; `col` is the 1-based column of the error."""

  def __init__(self, text: str, pos: int, what: str):
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    source = text[start:] if end < 0 else text[start:end]
    col = pos - start + 1
    where = f"{line}:{col}" if line > 1 else f"column {col}"
    super().__init__(f"invalid sharding {text!r} at {where}: {what}\n"
                     f"{source}\n{' ' * (col - 1)}^")
    self.text, self.line, self.col, self.what = text, line, col, what


@dataclasses.dataclass
class _Tok:
  kind: str  # one of "{}[](),=" , "<=", "int", "ident", "string", "end"
  value: Any
  pos: int


_PUNCT = "{}[](),="


def _lex(text: str) -> list[_Tok]:
  toks = []
  i, n = 0, len(text)
  while i < n:
    c = text[i]
    if c.isspace():
      i += 1
    elif text.startswith("/*", i):
      j = text.find("*/", i + 2)
      if j < 0:
        raise ShardingParseError(text, i, "unterminated comment")
      i = j + 2
    elif text.startswith("//", i):
      j = text.find("\n", i)
      i = n if j < 0 else j + 1
    elif text.startswith("<=", i):
      toks.append(_Tok("<=", "<=", i))
      i += 2
    elif c in _PUNCT:
      toks.append(_Tok(c, c, i))
      i += 1
    elif c.isdigit() or (c == "-" and i + 1 < n and text[i + 1].isdigit()):
      j = i + 1
      while j < n and text[j].isdigit():
        j += 1
      toks.append(_Tok("int", int(text[i:j]), i))
      i = j
    elif c.isalpha() or c == "_":
      j = i + 1
      while j < n and (text[j].isalnum() or text[j] == "_"):
        j += 1
      toks.append(_Tok("ident", text[i:j], i))
      i = j
    elif c == '"':
      j = i + 1
      while j < n and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
      if j >= n:
        raise ShardingParseError(text, i, "unterminated string")
      value = text_util.c_unescape(text[i + 1:j])
      if value is None:
        raise ShardingParseError(text, i, "malformed escape in string")
      toks.append(_Tok("string", value, i))
      i = j + 1
    else:
      raise ShardingParseError(text, i, f"unexpected character {c!r}")
  toks.append(_Tok("end", None, n))
  return toks


_KINDS = {"replicated": _T.REPLICATED, "maximal": _T.MAXIMAL,
          "manual": _T.MANUAL, "unknown": _T.UNKNOWN,
          "unreduced": _T.UNREDUCED}


class _Parser:
  """Recursive descent over the tokens of one sharding."""

  def __init__(self, text: str):
    self.text = text
    self.toks = _lex(text)
    self.i = 0

  @property
  def tok(self) -> _Tok:
    return self.toks[self.i]

  def error(self, what: str, tok: Optional[_Tok] = None):
    raise ShardingParseError(self.text, (tok or self.tok).pos, what)

  def describe(self, tok: _Tok) -> str:
    if tok.kind == "end":
      return "end of text"
    if tok.kind == "string":
      return "a string"
    return repr(str(tok.value))

  def eat(self, kind: str) -> bool:
    if self.tok.kind == kind:
      self.i += 1
      return True
    return False

  def expect(self, kind: str, what: str) -> _Tok:
    tok = self.tok
    if tok.kind != kind:
      self.error(f"expected {what}, saw {self.describe(tok)}")
    self.i += 1
    return tok

  def ints(self, close: str, what: str) -> list[int]:
    """`int (',' int)*` then `close` (the opening token already eaten)."""
    values = []
    if self.tok.kind != close:
      values.append(self.expect("int", what).value)
      while self.eat(","):
        values.append(self.expect("int", what).value)
    self.expect(close, f"'{close}' to end the {what} list")
    return values

  # sharding ::= '{' '}' | '{' single_body '}' | '{' single (',' single)* '}'
  def sharding(self) -> HloSharding:
    self.expect("{", "'{' to start a sharding")
    if self.eat("}"):
      return HloSharding.tuple_sharding([])
    if self.tok.kind != "{":
      result = self.single_body()
    else:
      elements = [self.single()]
      while self.eat(","):
        elements.append(self.single())
      self.expect("}", "'}' to end the tuple sharding")
      result = HloSharding.tuple_sharding(elements)
    if self.tok.kind != "end":
      self.error(f"unexpected {self.describe(self.tok)} after the sharding")
    return result

  def single(self) -> HloSharding:
    self.expect("{", "'{' to start a sharding")
    return self.single_body()

  def single_body(self) -> HloSharding:
    start = self.tok
    kinds: list[tuple[OpShardingType, _Tok]] = []
    seen: dict[str, _Tok] = {}
    device = None
    dims = devices = reshape = perm = None
    types = None
    replicate_last = False
    group = None
    metadata: list[xla_data.OpMetadata] = []

    def once(name: str, tok: _Tok):
      if name in seen:
        self.error(f"{name} given twice in one sharding", tok)
      seen[name] = tok

    while not self.eat("}"):
      tok = self.tok
      if tok.kind != "ident":
        self.error(f"unexpected {self.describe(tok)} in sharding")
      name = tok.value
      self.i += 1
      if self.tok.kind == "=" and name not in _KINDS:
        self.i += 1
        once(name, tok)
        if name == "device":
          device = self.expect("int", "an integer after device=").value
        elif name == "devices":
          dims, devices, reshape, perm = self.tile_assignment()
        elif name == "metadata":
          metadata = self.metadata_list()
        elif name == "last_tile_dims":
          types = self.subgroup_types()
        else:
          self.error(f"unknown attribute {name}= in sharding: expected "
                     "device=, devices=, metadata= or last_tile_dims=", tok)
      elif name in _KINDS:
        once(name, tok)
        kinds.append((_KINDS[name], tok))
      elif name == "last_tile_dim_replicate":
        once(name, tok)
        replicate_last = True
      elif name in ("shard_as", "shard_like"):
        if group is not None:
          self.error("a sharding has at most one shard_as / shard_like", tok)
        gid = self.expect("int", f"a shard group id after {name}").value
        group = ShardGroup(gid, name == "shard_as")
      else:
        self.error(f"unexpected {name!r} in sharding", tok)

    if len(kinds) > 1:
      self.error(f"conflicting sharding kinds "
                 f"{' and '.join(t.value for _, t in kinds)}", kinds[1][1])
    has_devices = device is not None or dims is not None
    tiled_only = [n for n in ("last_tile_dim_replicate", "last_tile_dims")
                  if n in seen]
    if kinds:
      kind, tok = kinds[0]
      name = tok.value
      if kind == _T.MAXIMAL:
        if device is None or dims is not None:
          self.error("maximal shardings should have exactly one device "
                     "assigned (device=N)", tok)
        result = HloSharding.maximal(device, metadata)
      else:
        if has_devices:
          self.error(f"{name} shardings should not have any devices "
                     f"assigned", seen.get("devices", seen.get("device")))
        result = {_T.REPLICATED: HloSharding.replicate,
                  _T.MANUAL: HloSharding.manual,
                  _T.UNKNOWN: HloSharding.unknown,
                  _T.UNREDUCED: HloSharding.unreduced}[kind](metadata)
      if tiled_only:
        self.error(f"{tiled_only[0]} needs a tiled sharding",
                   seen[tiled_only[0]])
    else:
      if device is not None:
        self.error("device= needs 'maximal'", seen["device"])
      if dims is None:
        self.error("non-maximal shardings must have a tile assignment list "
                   "including dimensions (devices=[...])", start)
      if replicate_last and types is not None:
        self.error("a sharding cannot have both last_tile_dim_replicate "
                   "and last_tile_dims", seen["last_tile_dims"])
      if reshape is None and len(devices) <= 1:
        self.error("non-maximal shardings must have more than one device "
                   "assigned", seen["devices"])
      if types is not None and len(types) > len(dims):
        self.error(f"last_tile_dims names {len(types)} subgroups but the "
                   f"tile assignment has {len(dims)} dimensions",
                   seen["last_tile_dims"])
      if replicate_last and not dims:
        self.error("last_tile_dim_replicate needs a tile dimension",
                   seen["last_tile_dim_replicate"])
      try:
        result = _tiled(dims, devices, reshape, perm, replicate_last,
                        types or [], metadata)
      except ShardingParseError:
        raise
      except support.InvalidArgumentError as e:
        self.error(e.message, seen["devices"])
    return result.with_shard_group(group) if group is not None else result

  def tile_assignment(self):
    """`[dims] (int (',' int)* | '<=' '[' dims ']' ('T' '(' perm ')')?)`."""
    bracket = self.expect("[", "'[' to start the tile assignment dimensions")
    dims = self.ints("]", "tile assignment dimension")
    if not dims:
      self.error("the tile assignment needs at least one dimension", bracket)
    if any(d < 0 for d in dims):
      self.error(f"negative tile assignment dimension in {dims}", bracket)
    if self.eat("<="):
      bracket = self.expect("[", "'[' to start the iota reshape dimensions")
      reshape = self.ints("]", "iota reshape dimension")
      if not reshape:
        self.error("the iota needs at least one reshape dimension", bracket)
      perm = None
      if len(reshape) > 1:
        # XLA spells the transpose out whenever there is more than one
        # reshape dimension, T(0,1,...) included, and never otherwise.
        if not (self.tok.kind == "ident" and self.tok.value == "T"):
          self.error("expected 'T(' to start the iota transpose of "
                     f"[{','.join(map(str, reshape))}]")
        self.i += 1
        self.expect("(", "'(' after T")
        perm_tok = self.tok
        perm = self.ints(")", "iota transpose dimension")
        if len(perm) != len(reshape):
          self.error(f"iota transpose T({','.join(map(str, perm))}) needs "
                     f"{len(reshape)} dimensions, one per reshape dimension",
                     perm_tok)
        for p in perm:
          if not 0 <= p < len(reshape):
            self.error(f"out of range iota transpose dimension {p}, "
                       f"expecting a value in [0, {len(reshape)})", perm_tok)
      return dims, [], reshape, perm
    devices = [self.expect("int", "a device id").value]
    while self.eat(","):
      devices.append(self.expect("int", "a device id").value)
    return dims, devices, None, None

  def subgroup_types(self) -> list[OpShardingType]:
    self.expect("{", "'{' to start last_tile_dims")
    types = []
    while not self.eat("}"):
      if types:
        self.expect(",", "',' between subgroup types")
      tok = self.tok
      if tok.kind != "ident" or tok.value not in _SUBGROUP_BY_NAME:
        self.error(f"expected a subgroup type (manual, replicated, "
                   f"unreduced, maximal), saw {self.describe(tok)}")
      self.i += 1
      types.append(_SUBGROUP_BY_NAME[tok.value])
    return types

  def metadata_list(self) -> list[xla_data.OpMetadata]:
    """`{fields}` or `{{fields}, {fields}, ...}`."""
    if self.tok.kind == "{" and self.toks[self.i + 1].kind == "{":
      self.i += 1
      result = [self.metadata()]
      while self.eat(","):
        result.append(self.metadata())
      self.expect("}", "'}' to end the metadata list")
      return result
    return [self.metadata()]

  def metadata(self) -> xla_data.OpMetadata:
    self.expect("{", "'{' to start metadata")
    fields: dict[str, Any] = {}
    while not self.eat("}"):
      self.eat(",")
      tok = self.expect("ident", "a metadata field name")
      self.expect("=", f"'=' after {tok.value}")
      name = tok.value
      if name in fields:
        self.error(f"metadata field {name} given twice", tok)
      if name in _MD_STR:
        fields[name] = self.expect("string", f"a string for {name}").value
      elif name in _MD_INT:
        fields[name] = self.expect("int", f"an integer for {name}").value
      elif name == "profile_type":
        self.expect("{", "'{' to start profile_type")
        fields[name] = tuple(self.ints("}", "profile type"))
      else:
        self.error(f"unexpected metadata field {name!r}", tok)
    return xla_data.OpMetadata(**fields)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> HloSharding:
  return _Parser(text).sharding()


def of(instruction) -> Optional[HloSharding]:
  """The sharding of an HLO instruction (None if it has none).

  The IR keeps `sharding=` as its text; this parses it (parses are cached
  by text, nothing is stored on the instruction).
  """
  raw = getattr(instruction, "sharding", None)
  if raw is None:
    return None
  return HloSharding.parse(str(raw))
