"""Tests for the named-attribute view of VHLO ops."""

import dataclasses

import pytest

import support
from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import writer
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import vhlo_ir
from support import env


@pytest.mark.parametrize("version", ["0_9_0", "0_14_0", "1_16_0", "1_20_0"])
def test_corpus_files_round_trip_through_named_attributes(version):
  root = env.stablehlo_corpus("vhlo")
  if root is None:
    pytest.skip(env.missing_corpus_reason("vhlo"))
  path = root / f"stablehlo_legalize_to_vhlo.{version}.mlir.bc"
  data = path.read_bytes()
  f = reader.read(data)
  named_root = vhlo_ir.from_file(f)
  compare = next(op for op in named_root.walk()
                 if op.name == "vhlo.compare_v1")
  assert set(compare.named) == {"comparison_direction", "compare_type"}
  out = vhlo_ir.to_file(named_root, f.version, f.producer)
  assert writer.write(out) == data


def test_properties_hold_declared_attributes_sorted():
  op = vhlo_ir.VhloOp(
      name="vhlo.compare_v1", location=ac.va("UnknownLoc"),
      named={"comparison_direction": ac.enum("ComparisonDirectionV1Attr",
                                             "EQ"),
             "compare_type": ac.enum("ComparisonTypeV1Attr", "FLOAT"),
             "my.tag": ac.string("x")})
  vhlo_ir.finalize(op, 6)
  assert op.properties.values == (op.named["compare_type"],
                                  op.named["comparison_direction"])
  assert op.attrs.fields[0][0][0].fields == ("my.tag",)
  vhlo_ir.finalize(op, 4)  # No native properties before bytecode 5.
  assert op.properties is None
  assert [k.fields[0] for k, _ in op.attrs.fields[0]] == [
      "compare_type", "comparison_direction", "my.tag"]
  del op.named["compare_type"]
  with pytest.raises(support.InternalError):
    vhlo_ir.finalize(op, 6)


def test_make_is_the_keyword_constructor():
  loc = object()
  operands, named = [object()], {"a": 1}
  made = vhlo_ir.VhloOp.make("vhlo.add_v1", loc, operands, named)
  expected = vhlo_ir.VhloOp(name="vhlo.add_v1", location=loc,
                            operands=operands, named=named)
  for field in dataclasses.fields(vhlo_ir.VhloOp):
    assert getattr(made, field.name) == getattr(expected, field.name), field
  assert made.operands is operands and made.named is named
