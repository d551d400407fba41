"""Tests of the Shardy attribute values: spelling, normalization, helpers."""

import dataclasses

import pytest

from stablehlo._src.ir import core
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.ir import attributes as a

X, Y = sdy.AxisRef("x"), sdy.AxisRef("y")
MESH = sdy.Mesh((sdy.MeshAxis("x", 2), sdy.MeshAxis("y", 4)))


def test_mesh_spelling_and_iota_device_ids_dropped():
  assert str(MESH) == '#sdy.mesh<["x"=2, "y"=4]>'
  assert MESH.body() == '<["x"=2, "y"=4]>'
  assert str(sdy.Mesh()) == "#sdy.mesh<[]>"
  maximal = sdy.Mesh((), (3,))
  assert str(maximal) == "#sdy.mesh<[], device_ids=[3]>"
  assert maximal.is_maximal and not MESH.is_maximal
  permuted = sdy.Mesh([sdy.MeshAxis("a", 2), sdy.MeshAxis("b", 2)],
                      [0, 2, 1, 3])
  assert permuted.device_ids == (0, 2, 1, 3)
  assert permuted.device_order == (0, 2, 1, 3)
  assert str(permuted) == ('#sdy.mesh<["a"=2, "b"=2], '
                           'device_ids=[0, 2, 1, 3]>')
  # iota(product of sizes) is what no list means: upstream drops it.
  iota = sdy.Mesh(permuted.axes, (0, 1, 2, 3))
  assert iota.device_ids == () and iota == sdy.Mesh(permuted.axes)
  # A list of the wrong length is kept (and rejected by the verifier).
  assert sdy.Mesh(permuted.axes, (0, 1, 2)).device_ids == (0, 1, 2)
  assert MESH.axis_size("y") == 4 and MESH.axis_size("z") is None
  assert MESH.num_devices == 8


def test_axis_refs_and_dimension_shardings():
  sub = sdy.AxisRef("y", sdy.SubAxisInfo(2, 2))
  assert sub.body() == '"y":(2)2' and str(sub) == '#sdy<axis_ref"y":(2)2>'
  assert sub.size(MESH) == 2 and Y.size(MESH) == 4
  assert sub.overlaps(Y, MESH)
  assert not sub.overlaps(sdy.AxisRef("y", sdy.SubAxisInfo(1, 2)), MESH)
  assert sdy.AxisRef("y", sdy.SubAxisInfo(1, 2)).can_merge(sub)
  cases = {
      sdy.DimensionSharding((X, sub)): '{"x", "y":(2)2}',
      sdy.DimensionSharding((X,), is_closed=False): '{"x", ?}',
      sdy.DimensionSharding((), is_closed=False, priority=2): "{?}p2",
      sdy.DimensionSharding((Y,), priority=0): '{"y"}p0',
      sdy.DimensionSharding(): "{}",
  }
  for dim, text in cases.items():
    assert dim.body() == text
  assert str(sdy.DimensionSharding((X,))) == '#sdy<dimension_sharding{"x"}>'
  assert sdy.DimensionSharding((X, Y)).sharded_size(MESH) == 8


def test_tensor_sharding_spelling():
  s = sdy.TensorSharding.of("mesh", [["x"], []], replicated=["y"])
  assert str(s) == '#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}>'
  assert s.body() == '<@mesh, [{"x"}, {}], replicated={"y"}>'
  inline = sdy.TensorSharding(sdy.Mesh((sdy.MeshAxis("q", 2),)), [
      sdy.DimensionSharding()], unreduced_axes=[sdy.AxisRef("q")])
  assert str(inline) == ('#sdy.sharding<mesh<["q"=2]>, [{}], '
                         'unreduced={"q"}>')
  assert str(sdy.TensorSharding("odd name", [])) == \
      '#sdy.sharding<@"odd name", []>'
  assert s.rank == 2 and s.mesh_name == "mesh" and inline.mesh_name is None
  assert s.all_axis_refs() == (X, Y)
  per_value = sdy.TensorShardingPerValue([s, sdy.TensorSharding("m", [])])
  assert str(per_value) == ('#sdy.sharding_per_value<[<@mesh, [{"x"}, {}], '
                            'replicated={"y"}>, <@m, []>]>')
  assert per_value.stripped() == per_value.body()[1:-1]
  # Values are immutable and compare by content (lists become tuples).
  assert s == sdy.TensorSharding.of("mesh", (("x",), ()), ("y",))
  assert hash(s) == hash(sdy.TensorSharding.of("mesh", [["x"], []], ["y"]))
  with pytest.raises(dataclasses.FrozenInstanceError):
    s.mesh_or_ref = "other"  # type: ignore[misc]


def test_other_attributes_spelling():
  assert str(sdy.ManualAxes(["x", "y"])) == '#sdy<manual_axes{"x", "y"}>'
  assert str(sdy.ListOfAxisRefLists([sdy.AxisRefList([X]),
                                     sdy.AxisRefList()])) == \
      '#sdy<list_of_axis_ref_lists[{"x"}, {}]>'
  assert str(sdy.AllToAllParamList([sdy.AllToAllParam([X], 0, 1)])) == \
      '#sdy<all_to_all_param_list[{"x"}: 0->1]>'
  rule = sdy.OpShardingRule(
      (4, 2, 4), [sdy.TensorMapping([sdy.DimMapping([0]),
                                     sdy.DimMapping([1])]),
                  sdy.TensorMapping([sdy.DimMapping([1]),
                                     sdy.DimMapping([2])])],
      [sdy.TensorMapping([sdy.DimMapping([0]), sdy.DimMapping([2])])],
      reduction_factors=[1], is_custom_rule=True)
  assert str(rule) == ("#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) "
                       "{i=4, j=2, k=4} reduction={j}, custom>")
  assert [sdy.factor_symbol(i) for i in (0, 17, 18, 20)] == [
      "i", "z", "z_1", "z_3"]
  assert sdy.quote('a"b\\c\n\xe9') == '"a\\22b\\\\c\\0A\\C3\\A9"'


def _module(*ops):
  block = core.Block()
  for op in ops:
    block.append(op)
  return core.Module(core.Operation("builtin.module",
                                    regions=[core.Region([block])]))


def test_lookup_mesh_and_local_type():
  mesh_op = core.Operation("sdy.mesh", properties={
      "sym_name": a.StringAttr("mesh"), "mesh": MESH})
  other = core.Operation("func.func", regions=[core.Region([core.Block()])])
  module = _module(mesh_op, other)
  inner = other.regions[0].blocks[0].append(core.Operation("func.return"))
  assert sdy.lookup_mesh(module, "mesh") is MESH
  assert sdy.lookup_mesh(inner, "mesh") is MESH
  assert sdy.lookup_mesh(inner, "nope") is None
  assert sdy.lookup_mesh(inner, MESH) is MESH
  s = sdy.TensorSharding.of("mesh", [["x", "y"], ["y"]])
  ty = t.RankedTensorType((16, None), t.f32)
  # Only manual axes divide; dynamic dimensions stay dynamic.
  assert sdy.local_type(ty, s, ["x"], MESH) == t.RankedTensorType(
      (8, None), t.f32)
  assert sdy.local_type(t.RankedTensorType((16, 8), t.f32), s, ["x", "y"],
                        MESH) == t.RankedTensorType((2, 2), t.f32)
  assert sdy.local_type(t.token, s, ["x"], MESH) == t.token
