"""The sdy attribute encodings, against bytes jaxlib 0.10.2 writes."""

import pytest

from stablehlo._src.bytecode import builtin_codec
from stablehlo._src.bytecode import codec
from stablehlo._src.bytecode import encoding
from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import sdy_codec
from stablehlo._src.bytecode import text_dump
from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import writer


class _Indices(codec.EncodeContext, codec.DecodeContext):
  """Attribute / string references as fixed numbers (no file around)."""

  def __init__(self, attrs=None, strings=None):
    self.attrs = attrs or {}
    self.strings = strings or {}

  def attr_index(self, attr):
    return self.attrs[attr]

  def string_index(self, value):
    return self.strings[value]

  def attr(self, index, r):
    return {v: k for k, v in self.attrs.items()}[index]

  def string(self, index, r):
    return {v: k for k, v in self.strings.items()}[index]


def _encode(attr: tree.Attr, ctx) -> bytes:
  code = sdy_codec.CODEC.attr_codes[attr.kind]
  spec = sdy_codec.CODEC.attrs[code][1]
  e = encoding.Emitter()
  e.varint(code)
  codec.write_fields(sdy_codec.CODEC, spec, attr.fields, e, ctx)
  return bytes(e.buf)


def _decode(data: bytes, ctx) -> tree.Attr:
  r = encoding.Reader(data)
  kind, spec = sdy_codec.CODEC.attrs[r.varint()]
  fields = codec.read_fields(sdy_codec.CODEC, spec, r, ctx)
  assert r.at_end()
  return tree.Attr("sdy", kind, fields)


X = tree.Attr("sdy", "AxisRefAttr", ("x", None))
# Entries of a jaxlib-written artifact of a 2x2 mesh program: attribute 56
# is the axis ref "x" (string 13), 4 and 7 the strings "x" and "y".
_JAXLIB = [
    (tree.Attr("sdy", "DimensionShardingAttr", ((X,), 1, None)),
     b"\x0b\x03\x71\x01\x01", {X: 56}, {}),
    (tree.Attr("sdy", "DimensionShardingAttr", ((), 1, None)),
     b"\x0b\x01\x01\x01", {}, {}),
    (X, b"\x09\x1b\x01", {}, {"x": 13}),
    (tree.Attr("sdy", "MeshAxisAttr", ("x", 2)), b"\x03\x1b\x09", {},
     {"x": 13}),
    (tree.Attr("sdy", "ManualAxesAttr", ((builtin_codec.string("x"),
                                          builtin_codec.string("y")),)),
     b"\x01\x05\x09\x0f", {builtin_codec.string("x"): 4,
                           builtin_codec.string("y"): 7}, {}),
]


@pytest.mark.parametrize("attr, data, attrs, strings", _JAXLIB)
def test_encodings_match_jaxlib(attr, data, attrs, strings):
  ctx = _Indices(attrs, strings)
  assert _encode(attr, ctx) == data
  assert _decode(data, ctx) == attr


def test_optional_fields_round_trip():
  sub = tree.Attr("sdy", "SubAxisInfoAttr", (2, 4))
  ref = tree.Attr("sdy", "AxisRefAttr", ("x", sub))
  dim = tree.Attr("sdy", "DimensionShardingAttr", ((ref,), 0, 3))
  ctx = _Indices({sub: 5, ref: 6}, {"x": 1})
  for attr in (ref, dim):
    assert _decode(_encode(attr, ctx), ctx) == attr
  # A priority is a varint with a presence flag: 3 -> (3 << 1 | 1) = 7.
  assert _encode(dim, ctx).endswith(b"\x00\x0f")


def test_sdy_ops_round_trip_through_a_file():
  mesh = tree.Attr("sdy", "MeshAttr", ((tree.Attr(
      "sdy", "MeshAxisAttr", ("x", 4)),), ()))
  loc = builtin_codec.unknown_loc()
  op = tree.Op("sdy.mesh", loc, properties=tree.Properties(
      ("attr", "attr"), (mesh, builtin_codec.string("mesh"))))
  root = tree.Op("builtin.module", loc,
                 regions=[tree.Region([tree.Block(ops=[op])])],
                 properties=tree.Properties(("opt_attr", "opt_attr"),
                                            (None, None)))
  f = tree.BytecodeFile(version=6, producer="test", root=root)
  data = writer.write(f)
  again = reader.read(data)
  read_op = again.root.regions[0].blocks[0].ops[0]
  assert read_op.properties.values == (mesh, builtin_codec.string("mesh"))
  assert writer.write(again) == data
  assert "sdy.MeshAttr" in text_dump.dump(again)


def test_property_names_follow_ods_order():
  assert sdy_codec.property_names("sdy.manual_computation") == (
      "in_shardings", "manual_axes", "out_shardings")
  assert sdy_codec.property_names("sdy.return") == ()
  assert sdy_codec.property_names("sdy.unknown") is None
