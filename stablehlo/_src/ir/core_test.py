"""Operation's containers: regions and successors without and with items."""

from stablehlo._src.ir import core
from stablehlo._src.ir import types as t


def test_ops_without_regions_or_successors_share_an_empty_tuple():
  a = core.Operation("t.a", result_types=[t.f32])
  b = core.Operation("t.b", [a.results[0]], (t.f32,), successors=())
  for op in (a, b):
    assert op.regions == () and op.successors == ()
    assert not op.regions and len(op.successors) == 0
    assert list(op.walk()) == [op]
  assert a.regions is b.regions
  assert [v.type for v in b.results] == [t.f32]
  assert b.operands == [a.results[0]] and a.results[0].owner is a


def test_add_region_gives_the_op_its_own_list():
  a = core.Operation("t.a")
  b = core.Operation("t.b")
  region = core.Region([core.Block()])
  assert a.add_region(region) is region
  assert a.regions == [region] and region.parent is a
  assert b.regions == ()  # the shared empty tuple is untouched
  with_regions = core.Operation("t.c", regions=[core.Region(),
                                                core.Region()])
  assert len(with_regions.regions) == 2
  assert all(r.parent is with_regions for r in with_regions.regions)
  block = core.Block()
  br = core.Operation("t.br", successors=[block])
  assert br.successors == [block]
  br.successors = [block, block]  # successors are set by assignment
  assert len(br.successors) == 2


def test_result_types_from_any_iterable():
  op = core.Operation("t.gen", result_types=(ty for ty in (t.f32, t.i32)))
  assert [v.type for v in op.results] == [t.f32, t.i32]
  assert [v.index for v in op.results] == [0, 1]
  one = core.Operation("t.one", result_types=[t.i1])
  assert one.results[0].owner is one and one.results[0].index == 0
  assert core.Operation("t.none", attributes=(), properties={}).attributes == {}
