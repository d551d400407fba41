"""Tests for builtin attributes and locations in portable artifacts."""

import numpy as np
import pytest

import support
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.vhlo import builtin_conversion as bc


@pytest.mark.parametrize("text", [
    '"a"("f.py":1:2)',
    'callsite("x" at fused["y", "z.py":3:4])',
    'fused<"meta">["q"]',
    '"n"',
    "unknown",
])
def test_location_text_round_trip(text):
  attr = bc.location_to_builtin(a.Location("name", text=text))
  assert bc.location_text(attr) == text
  assert bc.location_text(bc.location_to_builtin(
      bc.location_from_builtin(attr))) == text


def test_file_location_and_aliases():
  loc = a.Location("file", "m.py", 3, 4, text='"m.py":3:4')
  attr = bc.location_to_builtin(loc)
  assert attr == bc.ba("FileLineColLoc", bc.string("m.py"), 3, 4)
  back = bc.location_from_builtin(attr)
  assert (back.kind, back.filename, back.line, back.col) == ("file", "m.py",
                                                             3, 4)
  aliased = bc.location_to_builtin(
      a.Location("callsite", text="callsite(#loc1 at #loc2)"),
      {"loc1": a.Location("name", text='"f"'),
       "loc2": a.Location("file", "g.py", 1, 1, text='"g.py":1:1')})
  assert bc.location_text(aliased) == 'callsite("f" at "g.py":1:1)'
  assert bc.location_to_builtin(None) == bc.UNKNOWN_LOC
  with pytest.raises(support.InvalidArgumentError):
    bc.location_to_builtin(a.Location("callsite", text="callsite(#nope)"))


@pytest.mark.parametrize("attr", [
    # What a flipped attribute index in a corrupt artifact produces: a
    # location where a string belongs, or a non-location inside a location.
    bc.ba("FileLineColLoc", bc.UNKNOWN_LOC, 1, 2),
    bc.ba("FileLineColLoc", bc.string("f"), bc.string("x"), 2),
    bc.ba("FileLineColLoc", bc.string("f")),
    bc.ba("FileLineColRange", bc.ba("FileLineColLoc", bc.string("f"), 1, 2),
          (1, 2)),
    bc.ba("NameLoc", bc.string("n"), bc.string("not a location")),
    bc.ba("CallSiteLoc", bc.string("a"), bc.UNKNOWN_LOC),
    bc.ba("FusedLoc", bc.UNKNOWN_LOC),
    bc.string("not a location"),
])
def test_corrupt_locations_are_invalid_argument(attr):
  with pytest.raises(support.InvalidArgumentError):
    bc.location_from_builtin(attr)
  with pytest.raises(support.InvalidArgumentError):
    bc.location_text(attr)


def test_module_attributes():
  cases = [
      (a.IntegerAttr(1, t.i32),
       bc.ba("IntegerAttr", bc.bt("IntegerType", 32 << 2), 1)),
      (a.BoolAttr(True), bc.ba("IntegerAttr", bc.bt("IntegerType", 1 << 2),
                               1)),
      (a.UnitAttr(), bc.ba("UnitAttr")),
      (a.StringAttr("{replicated}"), bc.string("{replicated}")),
      (a.SymbolRefAttr("f"), bc.ba("FlatSymbolRefAttr", bc.string("f"))),
      (a.FloatAttr(1.5, t.f32), bc.ba("FloatAttr", bc.bt("Float32Type"),
                                      0x3FC00000)),
  ]
  for ours, builtin in cases:
    assert bc.attr_to_builtin(ours) == builtin
    assert bc.attr_from_builtin(builtin) == ours
  dense = a.DenseElementsAttr(t.RankedTensorType((2,), t.i32),
                              np.array([1, 2], np.int32))
  back = bc.attr_from_builtin(bc.attr_to_builtin(dense))
  assert back == dense
  arr = a.DenseArrayAttr(t.i64, (1, -2))
  assert bc.attr_from_builtin(bc.attr_to_builtin(arr)) == arr
  with pytest.raises(support.UnimplementedError):
    bc.attr_to_builtin(a.OpaqueAttr("#foo.bar<[]>"))
  # Shardy attributes (mixed serialization) keep their own encoding; one our
  # IR holds as text is written as text.
  mesh = sdy.Mesh((sdy.MeshAxis("x", 2),))
  assert bc.attr_from_builtin(bc.attr_to_builtin(mesh)) == mesh
  edges = a.OpaqueAttr("#sdy.propagation_edges<[]>")
  assert bc.attr_from_builtin(bc.attr_to_builtin(edges)) == edges


def test_corrupt_nested_locations_are_rejected_at_any_depth():
  # Each location is checked where it is read: a corrupt one deep in a
  # call-site chain (or named) is as much an error as one on top.
  bc.forget_locations()
  good = bc.ba("FileLineColLoc", bc.string("f.py"), 3, 4)
  bad_line = bc.ba("FileLineColLoc", bc.string("f.py"), "3", 4)
  not_a_location = bc.string("oops")
  chain = bc.ba("CallSiteLoc", good, good)
  for bad in (bad_line, not_a_location):
    for corrupt in (
        bc.ba("NameLoc", bc.string("n"), bad),
        bc.ba("CallSiteLoc", good, bc.ba("CallSiteLoc", chain, bad)),
        bc.ba("CallSiteLoc", bc.ba("NameLoc", bc.string("n"), bad), good),
        bc.ba("FusedLoc", (good, bad))):
      with pytest.raises(bc.ConversionError):
        bc.location_from_builtin(corrupt)
      with pytest.raises(bc.ConversionError):
        bc.location_text(corrupt)
  deep = good
  for i in range(40):
    deep = bc.ba("CallSiteLoc", bc.ba("NameLoc", bc.string(f"f{i}"), good),
                 deep)
  assert bc.location_from_builtin(deep).text.count("callsite(") == 40
