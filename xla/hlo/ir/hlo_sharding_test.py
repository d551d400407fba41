"""Tests of HloSharding: unit tests, then a differential test against jaxlib.

The differential part parses a generated list of sharding strings with both
this module and jaxlib's XLA (`xla_client.HloSharding.from_string`) and
compares the printed text, the serialized OpSharding, the device lists and
the tile shapes. It is skipped where jax is not installed.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import support
from xla import xla_data
from xla.hlo.ir import hlo_sharding
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.ir.hlo_sharding import OpShardingType as T
from xla.hlo.ir.hlo_sharding import TileAssignment
from xla.hlo.parser import hlo_parser
from xla.hlo.proto import hlo_proto
from xla.hlo.proto import hlo_proto_schema as schema
from xla.shape import Shape
from xla.xla_data import PrimitiveType

F32 = PrimitiveType.F32


def parse(text: str) -> HloSharding:
  return HloSharding.parse(text)


def iota_array(reshape_dims, perm, dims):
  return np.arange(math.prod(dims)).reshape(reshape_dims).transpose(
      perm).reshape(dims)


# -- tile assignments ----------------------------------------------------------


@pytest.mark.parametrize("reshape,perm,canonical", [
    # The examples of XLA's CanonicalizeIotaDims.
    ([3, 4, 5], [0, 1, 2], ([60], [0])),
    ([3, 4, 5], [2, 1, 0], ([3, 4, 5], [2, 1, 0])),
    ([3, 4, 5], [1, 2, 0], ([3, 20], [1, 0])),
    ([3, 4, 5], [1, 0, 2], ([3, 4, 5], [1, 0, 2])),
    ([3, 4, 5], [2, 0, 1], ([12, 5], [1, 0])),
    ([1, 3, 1, 4, 1, 5], [4, 3, 2, 5, 1, 0], ([3, 20], [1, 0])),
    ([1, 1], [1, 0], ([1], [0])),
])
def test_iota_is_canonicalised_without_changing_devices(reshape, perm,
                                                         canonical):
  ta = TileAssignment.iota([math.prod(reshape)], reshape, perm)
  assert (list(ta.reshape_dims), list(ta.transpose_perm)) == (
      list(canonical[0]), list(canonical[1]))
  np.testing.assert_array_equal(
      ta.array, iota_array(reshape, perm, [math.prod(reshape)]))


def test_iota_materialises_lazily_and_read_only():
  ta = TileAssignment.iota([4, 6], [4, 6], [1, 0])
  assert ta._array is None  # pylint: disable=protected-access
  expected = iota_array([4, 6], [1, 0], [4, 6])
  # value_at works from the iota form alone.
  for index in np.ndindex(4, 6):
    assert ta.value_at(index) == expected[index]
  assert ta._array is None  # pylint: disable=protected-access
  np.testing.assert_array_equal(ta.array, expected)
  assert not ta.array.flags.writeable
  with pytest.raises(ValueError):
    ta.array[0, 0] = 7
  assert ta.to_string() == "devices=[4,6]<=[4,6]T(1,0)"


def test_tile_assignment_transpose_matches_numpy():
  rng = random.Random(0)
  for _ in range(200):
    dims = [rng.choice([1, 2, 3, 4, 6]) for _ in range(rng.randint(1, 4))]
    n = math.prod(dims)
    reshape = _factorize(n, rng.randint(1, 3), rng)
    perm = list(range(len(reshape)))
    rng.shuffle(perm)
    ta = TileAssignment.iota(dims, reshape, perm)
    tperm = list(range(len(dims)))
    rng.shuffle(tperm)
    transposed = ta.transpose(tperm)
    np.testing.assert_array_equal(
        transposed.array, iota_array(reshape, perm, dims).transpose(tperm))
    assert transposed == TileAssignment.from_array(
        iota_array(reshape, perm, dims).transpose(tperm))


def test_tile_assignment_equality_is_by_devices():
  iota = TileAssignment.iota([2, 2], [2, 2], [1, 0])
  explicit = TileAssignment.from_array([[0, 2], [1, 3]])
  assert iota == explicit and hash(iota) == hash(explicit)
  assert iota != TileAssignment.iota([2, 2])
  assert iota != TileAssignment.iota([4], [2, 2], [1, 0])
  assert not explicit.is_iota and iota.is_iota


# -- printing and normalisation ------------------------------------------------


@pytest.mark.parametrize("text,printed", [
    ("{replicated}", "{replicated}"),
    ("{manual}", "{manual}"),
    ("{unknown}", "{unknown}"),
    ("{maximal device=3}", "{maximal device=3}"),
    ("{ devices=[2,2] <=[4] }", "{devices=[2,2]<=[4]}"),
    ("{devices=[2,2]<=[2,2]T(0,1)}", "{devices=[2,2]<=[4]}"),
    ("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
     "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    ("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}",
     "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}"),
    # Replication groups are sorted.
    ("{devices=[2,1,2]3,2,1,0 last_tile_dim_replicate}",
     "{devices=[2,1,2]2,3,0,1 last_tile_dim_replicate}"),
    # One replication group is replication; a size-1 group is no group.
    ("{devices=[1,1,4]<=[4] last_tile_dim_replicate}", "{replicated}"),
    ("{devices=[2,2,1]<=[4] last_tile_dim_replicate}", "{devices=[2,2]<=[4]}"),
    ("{devices=[2,1,2]<=[4] last_tile_dims={replicated}}",
     "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
    ("{devices=[1,1,4]<=[4] last_tile_dims={manual}}", "{manual}"),
    # Subgroup types are sorted (replicated last) and merged.
    ("{devices=[2,2,2]<=[8] last_tile_dims={replicated, manual}}",
     "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}"),
    ("{devices=[2,1,2]<=[4] last_tile_dims={replicated, replicated}}",
     "{devices=[2,2]<=[4] last_tile_dim_replicate}"),
    ("{devices=[2,1,1,2]<=[4] last_tile_dims={manual, replicated}}",
     "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"),
    ("{{replicated}, {manual}}", "{{replicated}, {manual}}"),
    ("{}", "{}"),
    ("{devices=[2,2]<=[4] shard_like 1}", "{devices=[2,2]<=[4] shard_like 1}"),
    ("{replicated metadata={op_name=\"a\"}}", "{replicated}"),
])
def test_print(text, printed):
  s = parse(text)
  assert str(s) == printed
  assert parse(printed) == s


def test_tuple_prints_index_comments_and_reparses():
  text = "{" + ", ".join(["{replicated}"] * 5 +
                         ["{maximal device=1}"] * 2) + "}"
  s = parse(text)
  assert str(s) == ("{{replicated}, {replicated}, {replicated}, {replicated}, "
                    "{replicated}, /*index=5*/{maximal device=1}, "
                    "{maximal device=1}}")
  assert parse(str(s)) == s
  assert len(s.tuple_elements) == 7 and s.tuple_elements[5].is_maximal


def test_metadata_is_kept_printed_on_request_and_ignored_by_equality():
  s = parse('{devices=[2]<=[2] metadata={op_name="f/x" source_line=3}}')
  assert s.metadata == (xla_data.OpMetadata(op_name="f/x", source_line=3),)
  assert str(s) == "{devices=[2]<=[2]}"
  assert s.to_string(include_metadata=True) == (
      '{devices=[2]<=[2] metadata={op_name="f/x" source_line=3}}')
  two = parse('{manual metadata={{op_name="a"}, {op_type="b"}}}')
  assert two.to_string(include_metadata=True) == (
      '{manual metadata={{op_name="a"}, {op_type="b"}}}')
  assert s == parse("{devices=[2]<=[2]}")
  assert hash(s) == hash(parse("{devices=[2]<=[2]}"))
  assert s.without_metadata().metadata == ()


def test_equality_and_hash():
  iota = parse("{devices=[2,2]<=[2,2]T(1,0)}")
  explicit = parse("{devices=[2,2]0,2,1,3}")
  assert iota == explicit and hash(iota) == hash(explicit)
  assert str(iota) != str(explicit)  # each keeps its own form
  assert iota != parse("{devices=[2,2]<=[4]}")
  assert parse("{replicated}") != parse("{manual}")
  assert parse("{replicated}") != parse("{replicated shard_as 0}")
  assert parse("{replicated shard_as 0}") != parse("{replicated shard_like 0}")
  assert len({iota, explicit, parse("{replicated}")}) == 2


def test_immutable():
  s = parse("{devices=[2,2]<=[4]}")
  with pytest.raises(AttributeError):
    s._type = T.REPLICATED  # pylint: disable=protected-access
  with pytest.raises(ValueError):
    s.tile_assignment.array[0, 0] = 3


# -- constructors --------------------------------------------------------------


def test_constructors():
  assert HloSharding.replicate().is_replicated
  assert HloSharding.manual().is_manual
  assert HloSharding.unknown().is_unknown
  m = HloSharding.maximal(5)
  assert m.is_maximal and m.is_tile_maximal and m.unique_device() == 5
  t = HloSharding.tile(np.array([[3, 1], [0, 2]]))
  assert str(t) == "{devices=[2,2]3,1,0,2}" and t.is_tiled
  assert HloSharding.iota_tile([4, 2], [2, 4], [1, 0]) == HloSharding.tile(
      iota_array([2, 4], [1, 0], [4, 2]))
  p = HloSharding.partial_tile(np.array([[[5, 4]], [[1, 0]]]))
  assert str(p) == "{devices=[2,1,2]4,5,0,1 last_tile_dim_replicate}"
  sg = HloSharding.subgroup(TileAssignment.iota([2, 2, 2]),
                            [T.REPLICATED, T.MANUAL])
  assert sg.subgroup_types == (T.MANUAL, T.REPLICATED)
  tup = HloSharding.tuple_sharding([t, m])
  assert tup.is_tuple and tup.tuple_elements == (t, m)
  with pytest.raises(support.InvalidArgumentError):
    HloSharding.tuple_sharding([tup])
  assert t.shard_as(2).shard_group == hlo_sharding.ShardGroup(2, True)


def test_subgroup_keeps_what_each_device_holds():
  # Reordering and merging subgroup dimensions moves devices around in the
  # tile assignment but must not change each device's data tile or manual
  # group.
  rng = random.Random(1)
  for _ in range(100):
    data = [rng.choice([1, 2, 3]) for _ in range(rng.randint(1, 2))]
    types = [rng.choice([T.MANUAL, T.REPLICATED]) for _ in range(2)]
    sub = [rng.choice([1, 2, 3]) for _ in types]
    devices = np.arange(math.prod(data + sub))
    rng.shuffle(devices)
    array = devices.reshape(data + sub)
    s = HloSharding.subgroup(array, types)
    if not s.is_tiled:
      continue

    def groups(arr, tps):
      out = {}
      for index in np.ndindex(*arr.shape):
        manual = tuple(i for i, t in zip(index[len(data):], tps)
                       if t == T.MANUAL)
        out[int(arr[index])] = (index[:len(data)], manual)
      return out

    before = groups(array, types)
    after_types = list(s.subgroup_types) or (
        [T.REPLICATED] if s.replicate_on_last_tile_dim else [])
    after = groups(s.tile_assignment.array, after_types)
    assert {d: v[0] for d, v in after.items()} == {
        d: v[0] for d, v in before.items()}
    # Devices grouped together by manual coordinates stay together.
    def partition(g):
      blocks = {}
      for d, (_, m) in g.items():
        blocks.setdefault(m, set()).add(d)
      return sorted(sorted(b) for b in blocks.values())
    assert partition(after) == partition(before)


# -- queries -------------------------------------------------------------------


def test_tile_offsets_limits_and_shapes_uneven():
  s = parse("{devices=[2,3]<=[6]}")
  shape = Shape.array(F32, [5, 7])
  # ceil(5/2)=3, ceil(7/3)=3: the last tiles are short.
  assert s.tile_shape(shape) == Shape.array(F32, [3, 3])
  assert s.tile_offset_for_device(shape, 5) == (3, 6)
  assert s.tile_limit_for_device(shape, 5) == (5, 7)
  assert s.tile_shape(shape, 5) == Shape.array(F32, [2, 1])
  assert s.tile_index_for_device(4) == (1, 1)
  assert s.device_for_tile_index([1, 2]) == 5
  # 2 elements over 4 tiles: tiles of 1, the last two empty.
  four = parse("{devices=[4]<=[4]}")
  assert [four.tile_offset_for_device([2], d) for d in range(4)] == [
      (0,), (1,), (2,), (2,)]
  assert [four.tile_shape([2], d) for d in range(4)] == [(1,), (1,), (0,),
                                                         (0,)]
  rep = parse("{replicated}")
  assert rep.tile_offset_for_device(shape, 3) == (0, 0)
  assert rep.tile_limit_for_device(shape, 3) == (5, 7)
  assert rep.tile_shape(shape) == shape
  with pytest.raises(support.FailedPreconditionError):
    parse("{manual}").tile_offset_for_device(shape, 0)


def test_partial_and_subgroup_queries():
  s = parse("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
  assert s.tile_assignment.devices() == (0, 2, 1, 3)
  assert s.tiled_data_rank == 2 and s.num_tiles() == 2
  assert s.total_num_tiles() == 4 and s.num_devices == 4
  assert s.subgroup_replication_dim == 2 and s.has_partial_replication
  assert s.replication_groups() == ((0, 2), (1, 3))
  assert s.devices_for_tile_index([1, 0]) == (1, 3)
  assert s.device_for_tile_index([1, 0]) == 1
  assert s.tile_offset_for_device([4, 3], 3) == (2, 0)
  m = parse("{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}")
  assert m.tiled_data_rank == 1 and m.num_tiles() == 2
  assert m.subgroup_manual_dim == 1 and m.subgroup_replication_dim == 2
  assert m.is_manual_subgroup and not m.is_manual
  assert m.replication_groups() == ((0, 1), (2, 3), (4, 5), (6, 7))
  assert m.devices_for_tile_index([0]) == (0, 1, 2, 3)


def test_each_tile_covers_the_shape_once_per_replica():
  s = parse("{devices=[3,2,2]<=[2,6]T(1,0) last_tile_dim_replicate}")
  dims = (7, 5)
  count = np.zeros(dims, dtype=int)
  seen = []
  for device, lo, hi in s.each_tile(dims):
    count[lo[0]:hi[0], lo[1]:hi[1]] += 1
    seen.append(device)
    assert lo == s.tile_offset_for_device(dims, device)
    assert hi == s.tile_limit_for_device(dims, device)
  assert sorted(seen) == list(range(12))
  assert (count == 2).all()


def test_tuple_sub_shardings():
  shape = Shape.tuple_of([
      Shape.array(F32, [4]),
      Shape.tuple_of([Shape.array(F32, [2]), Shape.array(F32, [8])]),
      Shape.array(F32, [6])])
  s = parse("{{replicated}, {maximal device=0}, {devices=[2]0,1}, {manual}}")
  assert s.get_sub_sharding(shape, [0]) == parse("{replicated}")
  assert s.get_sub_sharding(shape, [1, 1]) == parse("{devices=[2]0,1}")
  assert s.get_sub_sharding(shape, [1]) == parse(
      "{{maximal device=0}, {devices=[2]0,1}}")
  assert s.get_sub_sharding(shape, [2]) == parse("{manual}")
  assert not s.is_replicated and not s.is_manual and s.is_tiled
  assert s.extract_single_sharding() is None
  r = HloSharding.single_tuple(shape, parse("{replicated}"))
  assert len(r.tuple_elements) == 4 and r.is_replicated
  assert r.extract_single_sharding() == parse("{replicated}")
  with pytest.raises(support.InvalidArgumentError, match="4 leaf nodes"):
    parse("{{replicated}}").get_sub_sharding(shape, [0])
  with pytest.raises(support.FailedPreconditionError):
    _ = parse("{replicated}").tuple_elements


# -- validation ----------------------------------------------------------------


def test_validate_accepts():
  parse("{devices=[2,2]<=[4]}").validate(Shape.array(F32, [4, 4]), 4)
  parse("{devices=[2,1,2]3,1,2,0 last_tile_dim_replicate}").validate(
      Shape.array(F32, [4, 4]), 4)
  parse("{maximal device=3}").validate(Shape.array(F32, [4]), 4)
  parse("{{replicated}, {manual}}").validate(
      Shape.tuple_of([Shape.array(F32, [4]), Shape.array(F32, [])]))
  parse("{devices=[2]0,1}").validate(Shape.token())


@pytest.mark.parametrize("text,shape,num_devices,message", [
    ("{devices=[2,2]<=[4]}", Shape.array(F32, [4]), None,
     "different than the input rank"),
    ("{devices=[2,2]<=[4]}", Shape.array(F32, [4, 4]), 8,
     "should have 8 devices but has 4"),
    ("{devices=[2]0,0}", Shape.array(F32, [4]), None,
     "device 0 is not unique"),
    ("{devices=[2]0,5}", Shape.array(F32, [4]), 4, "device 5 >= num_devices"),
    ("{devices=[2]-1,0}", Shape.array(F32, [4]), None, "negative"),
    ("{maximal device=4}", Shape.array(F32, [4]), 4, "device 4 >= num_devices"),
    ("{devices=[1]<=[1]}", Shape.array(F32, [4]), None, "single device"),
    ("{{replicated}}", Shape.tuple_of([Shape.array(F32, [1])] * 2), None,
     "2 leaf nodes"),
    ("{replicated}", Shape.tuple_of([Shape.array(F32, [1])]), None,
     "shape is a tuple but sharding is not"),
    ("{{replicated}, {devices=[2]<=[2]}}",
     Shape.tuple_of([Shape.array(F32, [1]), Shape.array(F32, [2, 2])]), None,
     "tuple element 1"),
])
def test_validate_rejects(text, shape, num_devices, message):
  with pytest.raises(support.InvalidArgumentError, match=message) as e:
    parse(text).validate(shape, num_devices)
  assert "While validating sharding" in str(e.value)


# -- parse errors --------------------------------------------------------------


@pytest.mark.parametrize("text,col,message", [
    ("", 1, "expected '{'"),
    ("replicated", 1, "expected '{'"),
    ("{replicated", 12, "unexpected end of text"),
    ("{replicated} x", 14, "after the sharding"),
    ("{foo}", 2, "unexpected 'foo'"),
    ("{devices=[2,2]<=[4] foo=1}", 21, "unknown attribute foo="),
    ("{devices=[2,2]0,1,2}", 2, "need 4 devices but 3 are listed"),
    ("{devices=[2,2]<=[8]}", 2, "hold 8 devices"),
    ("{devices=[2,2]<=[2,2]}", 22, r"expected 'T\('"),
    ("{devices=[2,2]<=[2,2]T(2,0)}", 24, "out of range iota transpose"),
    ("{devices=[2,2]<=[2,2]T(0)}", 24, "one per reshape dimension"),
    ("{devices=[2,2]<=[2,2]T(1,1)}", 2, "not a permutation"),
    ("{devices=[2]0}", 2, "more than one device"),
    ("{devices=[]0,1}", 10, "at least one dimension"),
    ("{maximal}", 2, "exactly one device"),
    ("{maximal device=x}", 17, "an integer after device="),
    ("{replicated devices=[2]0,1}", 13, "should not have any devices"),
    ("{replicated manual}", 13, "conflicting sharding kinds"),
    ("{devices=[2,2]<=[4] last_tile_dim_replicate last_tile_dims={manual}}",
     45, "both last_tile_dim_replicate and last_tile_dims"),
    ("{devices=[2,2]<=[4] last_tile_dims={foo}}", 37, "subgroup type"),
    ("{devices=[2]<=[2] last_tile_dims={manual, manual, manual}}", 19,
     "3 subgroups"),
    ("{devices=[2]<=[2] metadata={op_name=1}}", 37, "a string for op_name"),
    ("{devices=[2]<=[2] metadata={color=\"x\"}}", 29, "metadata field"),
    ("{{replicated}, {}}", 17, "tile assignment list"),
    ("{{replicated}, {{manual}}}", 17, "unexpected '{'"),
    ("{replicated shard_as}", 21, "shard group id"),
    ("{devices=[2]0,1 /* no end}", 17, "unterminated comment"),
    ("{devices=[2]0,1 #}", 17, "unexpected character"),
])
def test_parse_errors_name_text_and_column(text, col, message):
  with pytest.raises(support.InvalidArgumentError, match=message) as e:
    parse(text)
  assert isinstance(e.value, hlo_sharding.ShardingParseError)
  assert e.value.col == col, str(e.value)
  assert repr(text) in str(e.value)


def test_parse_rejects_non_text():
  with pytest.raises(support.InvalidArgumentError):
    HloSharding.parse(None)


# -- protos --------------------------------------------------------------------


ROUND_TRIP = [
    "{replicated}", "{manual}", "{unknown}", "{unreduced}",
    "{maximal device=2}", "{devices=[2,2]<=[4]}", "{devices=[2,2]3,1,0,2}",
    "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
    "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}",
    "{devices=[2,2]0,1,2,3 last_tile_dims={manual}}",
    "{{replicated}, {maximal device=1}, {devices=[2]1,0}}",
    "{devices=[2]<=[2] shard_as 3 metadata={op_name=\"x\" source_line=2}}",
    "{manual shard_like 1}",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_proto_round_trip(text):
  s = parse(text)
  proto = s.to_proto()
  assert isinstance(proto, schema.OpSharding)
  back = HloSharding.from_proto(proto)
  assert back == s and str(back) == str(s)
  assert back.to_string(True) == s.to_string(True)
  assert HloSharding.from_proto(proto.SerializeToString()) == s


def test_proto_fields():
  p = parse("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}").to_proto()
  assert p.type == T.OTHER
  assert list(p.tile_assignment_dimensions) == [2, 1, 2]
  assert list(p.iota_reshape_dims) == [2, 2]
  assert list(p.iota_transpose_perm) == [1, 0]
  assert not p.tile_assignment_devices and p.replicate_on_last_tile_dim
  p = parse("{devices=[2,2]3,1,0,2 last_tile_dims={manual}}").to_proto()
  assert list(p.tile_assignment_devices) == [3, 1, 0, 2]
  assert list(p.last_tile_dims) == [T.MANUAL]
  p = parse("{maximal device=4}").to_proto()
  assert p.type == T.MAXIMAL and list(p.tile_assignment_devices) == [4]
  p = parse("{{replicated}, {manual}}").to_proto()
  assert p.type == T.TUPLE and [e.type for e in p.tuple_shardings] == [
      T.REPLICATED, T.MANUAL]


def test_from_proto_normalises_and_rejects():
  p = schema.OpSharding(type=T.OTHER, tile_assignment_dimensions=[1, 1],
                        iota_reshape_dims=[1], iota_transpose_perm=[0])
  assert HloSharding.from_proto(p).is_replicated
  p = schema.OpSharding(type=T.OTHER, tile_assignment_dimensions=[2, 2],
                        tile_assignment_devices=[0, 1, 2])
  with pytest.raises(support.InvalidArgumentError, match="3 are listed"):
    HloSharding.from_proto(p)
  p = schema.OpSharding(type=T.MAXIMAL)
  with pytest.raises(support.InvalidArgumentError, match="single device"):
    HloSharding.from_proto(p)
  with pytest.raises(support.InvalidArgumentError, match="malformed"):
    HloSharding.from_proto(b"\xff\xff")
  p = schema.OpSharding(type=T.OTHER, tile_assignment_dimensions=[2],
                        iota_reshape_dims=[2], iota_transpose_perm=[0, 1])
  with pytest.raises(support.InvalidArgumentError, match="differ in length"):
    HloSharding.from_proto(p)
  # named_sharding (field 14, HloShardingV3) has no form here.
  with pytest.raises(support.UnimplementedError, match="number 14"):
    HloSharding.from_proto(b"\x08\x03\x72\x00")


# -- the IR --------------------------------------------------------------------


MODULE = """HloModule m, num_partitions=4

ENTRY main {
  p = f32[8,4]{1,0} parameter(0), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  q = f32[8,4]{1,0} parameter(1), sharding={devices=[2,2]<=[4] last_tile_dims={manual}}
  a = f32[8,4]{1,0} add(p, q)
  ROOT t = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(a, q), sharding={{replicated}, {maximal device=1}}
}
"""


def test_of_instruction_reads_the_raw_text():
  module = hlo_parser.parse_and_return_unverified_module(MODULE)
  entry = module.entry_computation
  by_name = {i.name: i for i in entry.instructions}
  p = hlo_sharding.of(by_name["p"])
  assert p == parse("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}")
  p.validate(by_name["p"].shape, 4)
  assert hlo_sharding.of(by_name["a"]) is None
  t = hlo_sharding.of(entry.root_instruction)
  assert t.get_sub_sharding(entry.root_instruction.shape, [1]).is_maximal
  # The instruction keeps its text; printing is unchanged.
  assert "sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}" in (
      module.to_string())


def test_hlo_proto_writes_and_reads_iota_and_subgroup_shardings():
  module = hlo_parser.parse_and_return_unverified_module(MODULE)
  data = hlo_proto.hlo_module_to_proto(module)
  proto = schema.HloModuleProto.FromString(data)
  shardings = {i.name: i.sharding for c in proto.computations
               for i in c.instructions if i.HasField("sharding")}
  assert list(shardings["p"].iota_transpose_perm) == [1, 0]
  assert list(shardings["q"].last_tile_dims) == [T.MANUAL]
  assert shardings["t"].type == T.TUPLE
  back = hlo_proto.hlo_module_from_proto(data)
  for instr in back.entry_computation.instructions:
    original = next(i for i in module.entry_computation.instructions
                    if i.name == instr.name)
    assert hlo_sharding.of(instr) == hlo_sharding.of(original)


def _factorize(n, k, rng):
  """n as a product of k factors (some 1), at random."""
  primes, m, p = [], n, 2
  while m > 1:
    while m % p == 0:
      primes.append(p)
      m //= p
    p += 1
  factors = [1] * k
  for q in primes:
    factors[rng.randrange(k)] *= q
  return factors


# -- differential test against jaxlib ------------------------------------------


def _tile_text(rng, dims, explicit):
  n = math.prod(dims)
  head = "devices=[" + ",".join(map(str, dims)) + "]"
  if explicit:
    devices = list(range(n))
    rng.shuffle(devices)
    return head + ",".join(map(str, devices))
  k = rng.randint(1, 4)
  reshape = _factorize(n, k, rng)
  perm = list(range(k))
  rng.shuffle(perm)
  text = head + "<=[" + ",".join(map(str, reshape)) + "]"
  if k > 1:
    text += "T(" + ",".join(map(str, perm)) + ")"
  return text


def _random_leaf(rng):
  if rng.random() < 0.12:
    body = rng.choice(["replicated", "manual", "unknown",
                       f"maximal device={rng.randrange(8)}"])
  else:
    dims = [rng.choice([1, 1, 2, 2, 3, 4]) for _ in range(rng.randint(1, 4))]
    mode = rng.random()
    suffix = ""
    if 0.35 <= mode < 0.6:
      dims.append(rng.choice([1, 2, 2, 3, 4]))
      suffix = " last_tile_dim_replicate"
    elif mode >= 0.6:
      types = [rng.choice(["manual", "replicated", "unreduced"])
               for _ in range(rng.randint(1, 2))]
      dims += [rng.choice([1, 2, 2, 3]) for _ in types]
      suffix = " last_tile_dims={" + ", ".join(types) + "}"
    explicit = math.prod(dims) >= 2 and rng.random() < 0.35
    body = _tile_text(rng, dims, explicit) + suffix
  if rng.random() < 0.1:
    body += f" {rng.choice(['shard_as', 'shard_like'])} {rng.randrange(4)}"
  if rng.random() < 0.1:
    body += f' metadata={{op_name="f/x" source_line={rng.randrange(1, 99)}}}'
  return "{" + body + "}"


def generated_shardings(seed=2024, count=400):
  rng = random.Random(seed)
  out = []
  for _ in range(count):
    if rng.random() < 0.15:
      out.append("{" + ", ".join(_random_leaf(rng)
                                 for _ in range(rng.randint(1, 7))) + "}")
    else:
      out.append(_random_leaf(rng))
  return out


SPECIAL = [
    # JAX's P('y', None) on a 2x2 mesh.
    "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
    "{devices=[2,1,2]<=[4] last_tile_dims={manual}}",
    "{devices=[2,2,2]<=[8] last_tile_dims={replicated, unreduced}}",
    "{devices=[2,3,4]<=[2,3,4]T(2,1,0) last_tile_dim_replicate}",
    "{devices=[2,3,4]<=[4,6]T(1,0) last_tile_dim_replicate}",
    "{devices=[4,2,2]<=[8,2]T(1,0) last_tile_dims={unreduced, manual}}",
    "{devices=[2,2,2,2]<=[2,8]T(1,0) last_tile_dims={replicated, unreduced}}",
    "{devices=[2,2]<=[4] last_tile_dims={maximal}}",
    "{devices=[1,1]<=[1]}", "{devices=[2,1]<=[2]}", "{unreduced}", "{}",
    "{devices=[16,2]<=[2,4,4]T(2,0,1)}",
]


@pytest.fixture(scope="module")
def xc():
  pytest.importorskip("jax")
  from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
  return xla_client


def _leaves(s):
  return s.tuple_elements if s.is_tuple else (s,)


def test_generated_list_is_varied():
  cases = generated_shardings()
  assert len(set(cases)) >= 350
  for needle in ("T(", "last_tile_dim_replicate", "last_tile_dims={",
                 "{{", "manual", "shard_as", "metadata="):
    assert sum(needle in c for c in cases) >= 10, needle
  # Explicit device lists too, not only iota forms.
  assert sum("devices=" in c and "<=" not in c for c in cases) >= 10


@pytest.mark.parametrize("chunk", range(4))
def test_matches_jaxlib(xc, chunk):
  cases = SPECIAL + generated_shardings()
  cases = cases[chunk::4]
  rng = random.Random(chunk)
  for text in cases:
    ours = parse(text)
    theirs = xc.HloSharding.from_string(text)
    assert str(ours) == str(theirs), text
    their_bytes = theirs.to_proto().SerializeToString()
    assert ours.to_proto().SerializeToString() == their_bytes, text
    # Reading the proto back normalises as XLA's FromProto does, which can
    # differ from the parse (a lone unreduced subgroup becomes {unreduced},
    # a one-device iota {replicated}).
    from_theirs = HloSharding.from_proto(their_bytes)
    their_back = xc.HloSharding.from_proto(theirs.to_proto())
    assert str(from_theirs) == str(their_back), text
    assert from_theirs.to_proto().SerializeToString() == (
        their_back.to_proto().SerializeToString()), text
    assert from_theirs.metadata == ours.metadata
    assert ours.is_replicated == theirs.is_replicated()
    assert ours.is_manual == theirs.is_manual()
    assert ours.is_unknown == theirs.is_unknown()
    assert ours.is_tile_maximal == theirs.is_maximal(), text
    assert ours.is_tiled == theirs.is_tiled(), text
    their_leaves = theirs.tuple_elements() if ours.is_tuple else [theirs]
    for leaf, their_leaf in zip(_leaves(ours), their_leaves):
      _check_leaf(xc, leaf, their_leaf, rng, text)


def _check_leaf(xc, leaf, their_leaf, rng, text):
  assert leaf.is_maximal == (their_leaf.is_maximal() and
                             not their_leaf.is_replicated())
  assert leaf.is_unknown == their_leaf.is_unknown()
  assert leaf.num_devices == their_leaf.num_devices()
  if not leaf.is_tiled:
    return
  assert list(leaf.tile_assignment.devices()) == list(
      their_leaf.tile_assignment_devices()), text
  assert list(leaf.dimensions) == list(their_leaf.tile_assignment_dimensions())
  assert leaf.replicate_on_last_tile_dim == (
      their_leaf.replicate_on_last_tile_dim())
  assert [int(t) for t in leaf.subgroup_types] == [
      int(t) for t in their_leaf.subgroup_types()]
  dims = [rng.randint(0, 9) for _ in range(leaf.tiled_data_rank)]
  shape = Shape.array(F32, dims)
  their_tile = their_leaf.tile(xc.Shape.array_shape(np.dtype("float32"),
                                                     dims))
  assert list(leaf.tile_shape(shape).dimensions) == list(
      their_tile.dimensions())
  _check_offsets_against_numpy(leaf, dims)


def _check_offsets_against_numpy(leaf, dims):
  """Offsets from the device's position in the array and ceil-div tiles; and
  every element covered once per copy of the data."""
  array = leaf.tile_assignment.array
  rank = len(dims)
  copies = array.size // max(1, math.prod(array.shape[:rank]))
  count = np.zeros(dims, dtype=int)
  for device in array.ravel():
    where = np.argwhere(array == device)[0][:rank]
    tiles = np.array(array.shape[:rank])
    size = -(-np.array(dims, dtype=int) // tiles)
    lo = np.minimum(where * size, dims)
    hi = np.minimum((where + 1) * size, dims)
    assert leaf.tile_offset_for_device(dims, int(device)) == tuple(lo)
    assert leaf.tile_limit_for_device(dims, int(device)) == tuple(hi)
    assert leaf.tile_shape(dims, int(device)) == tuple(hi - lo)
    count[tuple(slice(a, b) for a, b in zip(lo, hi))] += 1
  if array.size == len(set(array.ravel().tolist())):
    assert (count == copies).all()


def test_constructors_match_jaxlib(xc):
  rng = random.Random(7)
  type_of = {T.MANUAL: xc.OpSharding.Type.MANUAL,
             T.REPLICATED: xc.OpSharding.Type.REPLICATED}
  for _ in range(150):
    data = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 3))]
    types = [rng.choice([T.MANUAL, T.REPLICATED])
             for _ in range(rng.randint(0, 2))]
    dims = data + [rng.choice([1, 2, 3]) for _ in types]
    n = math.prod(dims)
    reshape = _factorize(n, rng.randint(1, 3), rng)
    perm = list(range(len(reshape)))
    rng.shuffle(perm)
    ours = HloSharding.subgroup(TileAssignment.iota(dims, reshape, perm),
                                types)
    theirs = xc.HloSharding.iota_tile(dims, reshape, perm,
                                      [type_of[t] for t in types])
    assert str(ours) == str(theirs), (dims, reshape, perm, types)
    if n > 1:
      devices = np.arange(n)
      rng.shuffle(devices)
      array = devices.reshape(dims)
      ours = HloSharding.subgroup(array, types)
      theirs = xc.HloSharding.subgroup_with_device_ordering(
          array.astype(np.int64), [type_of[t] for t in types])
      assert str(ours) == str(theirs), (array.tolist(), types)
