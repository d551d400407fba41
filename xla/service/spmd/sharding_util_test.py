"""Tests for the tile-map view of shardings."""

import numpy as np
import pytest

import support
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.service.spmd import sharding_util as su


def _s(text):
  return HloSharding.parse(text)


def test_tile_map_matches_tile_offsets_of_hlo_sharding():
  # The map's offsets agree with HloSharding's own tile geometry.
  for text in ("{devices=[2,2]<=[4]}", "{devices=[2,2]<=[2,2]T(1,0)}",
               "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
               "{devices=[1,4]3,1,0,2}"):
    s = _s(text)
    m = su.tile_map(s, 2, 4)
    for dev in range(4):
      assert m.offsets((5, 7), dev) == s.tile_offset_for_device((5, 7), dev)


def test_round_trip_to_sharding():
  for text in ("{devices=[2,2]<=[4]}", "{devices=[4,1]3,1,0,2}",
               "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
               "{replicated}"):
    s = _s(text)
    assert su.tile_map(s, 2, 4).to_sharding() == s


def test_replicate_dims_makes_replicas():
  m = su.tile_map(_s("{devices=[2,2]<=[4]}"), 2, 4).replicate_dims([1])
  assert m.counts == (2, 1)
  s = m.to_sharding()
  assert s == _s("{devices=[2,1,2]<=[4] last_tile_dim_replicate}")
  assert s.replication_groups() == ((0, 1), (2, 3))


def test_transpose():
  m = su.tile_map(_s("{devices=[2,1]<=[2]}"), 2, 2).transpose([1, 0])
  assert m.to_sharding() == _s("{devices=[1,2]<=[2]}")


def test_irregular_map_has_no_sharding():
  m = su.TileMap.from_indices([2], [[0], [0], [0], [1]])
  assert not m.is_regular()
  assert su.sharding_or_none(m) is None
  with pytest.raises(support.InvalidArgumentError):
    m.to_sharding()


def test_maximal_is_unimplemented():
  with pytest.raises(support.UnimplementedError, match="maximal"):
    su.tile_map(_s("{maximal device=1}"), 2, 4)


@pytest.mark.parametrize("src,dst,counts,want", [
    # Split the major dim: 2 tiles of 8 rows -> 2 tiles of the leading 2.
    ((8, 4), (2, 4, 4), (2, 1), (2, 1, 1)),
    # 4 tiles of 8 -> [2, 4]: 2 along the first, 2 along the second.
    ((8,), (2, 4), (4,), (2, 2)),
    # Merge: tiled leading dim stays contiguous.
    ((2, 4, 4), (8, 4), (2, 1, 1), (2, 1)),
    ((2, 4, 4), (32,), (2, 2, 1), (4,)),
    # Size-1 dims are their own groups.
    ((1, 8), (8, 1), (1, 2), (2, 1)),
])
def test_reshape_keeps_tiles_contiguous(src, dst, counts, want):
  n = int(np.prod(counts))
  index = [tuple(int(i) for i in np.unravel_index(d, counts))
           for d in range(n)]
  m = su.TileMap.from_indices(counts, index)
  out = su.reshape_tile_map(m, src, dst)
  assert out is not None and out.counts == want
  # Each device's elements are the same before and after: check with data.
  data = np.arange(int(np.prod(src))).reshape(src)
  for dev in range(n):
    a = m.offsets(src, dev)
    sa = m.tile_sizes(src)
    before = data[tuple(slice(o, o + t) for o, t in zip(a, sa))]
    b = out.offsets(dst, dev)
    sb = out.tile_sizes(dst)
    after = data.reshape(dst)[tuple(slice(o, o + t) for o, t in zip(b, sb))]
    assert sorted(before.ravel()) == sorted(after.ravel())


@pytest.mark.parametrize("src,dst,counts", [
    ((8, 4), (4, 8), (1, 2)),     # minor dim tiled across a regrouping
    ((2, 4), (8,), (1, 2)),       # merged minor tiling is not contiguous
    ((6,), (2, 3), (4,)),         # 4 tiles do not fit [2, 3]
])
def test_reshape_without_contiguous_tiles(src, dst, counts):
  n = int(np.prod(counts))
  index = [tuple(int(i) for i in np.unravel_index(d, counts))
           for d in range(n)]
  m = su.TileMap.from_indices(counts, index)
  assert su.reshape_tile_map(m, src, dst) is None


def test_reduction_groups_one_device_per_partial():
  # [2 rows, 2 cols] + 2 replicas: summing over the columns needs groups of
  # one device per column tile, replicas kept apart.
  s = _s("{devices=[2,2,2]<=[8] last_tile_dim_replicate}")
  m = su.tile_map(s, 2, 8)
  groups = su.reduction_groups(m, [1])
  assert sorted(len(g) for g in groups) == [2] * 4
  for g in groups:
    assert [m.index[d][1] for d in g] == [0, 1]
    assert len({m.index[d][0] for d in g}) == 1
  assert sorted(d for g in groups for d in g) == list(range(8))


def test_dot_output_map_needs_matching_contraction():
  dd = su.DotDims((), (), (1,), (0,), (0,), (1,))
  lhs = su.tile_map(_s("{devices=[1,2]<=[2]}"), 2, 2)
  rhs = su.tile_map(_s("{devices=[2,1]<=[2]}"), 2, 2)
  out = su.dot_output_map(dd, lhs, rhs)
  assert out.is_replicated  # partial sums on both devices
  rhs_swapped = su.tile_map(_s("{devices=[2,1]1,0}"), 2, 2)
  assert su.dot_output_map(dd, lhs, rhs_swapped) is None
