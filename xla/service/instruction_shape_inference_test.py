"""Tests for the per-opcode shape rules over HloInstructions."""

import pytest

import support
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.hlo.parser import hlo_parser as hp
from xla.service import instruction_shape_inference as isi


def S(text):
  return hp.parse_shape(text).without_layout()


def _root(body, helpers=""):
  m = hp.parse_and_return_unverified_module(
      f"HloModule m\n{helpers}ENTRY e {{\n{body}\n}}")
  return m.entry_computation.root_instruction


def test_instruction_rules_need_declared_shapes_where_xla_does():
  r = _root("p = f32[4] parameter(0)\nROOT r = f32[2,2] reshape(p)")
  assert isi.infer_instruction_shape(r, r.shape) == S("f32[2,2]")
  with pytest.raises(support.InvalidArgumentError, match="cannot infer"):
    isi.infer_instruction_shape(r)
  bad = _root("p = f32[4] parameter(0)\nROOT r = f32[3] reshape(p)")
  with pytest.raises(support.InvalidArgumentError, match="element count"):
    isi.infer_instruction_shape(bad, bad.shape)
  b = _root("p = f32[3] parameter(0)\nROOT r = f32[2,3] broadcast(p), "
            "dimensions={0}")
  with pytest.raises(support.InvalidArgumentError, match="does not match"):
    isi.infer_instruction_shape(b, b.shape)
  bc = _root("p = f32[4] parameter(0)\nROOT r = u16[4,2] "
             "bitcast-convert(p)")
  assert isi.infer_instruction_shape(bc, bc.shape) == S("u16[4,2]")


def test_instruction_rules_for_calls():
  helpers = ("c { x = f32[] parameter(0) ROOT y = f32[] negate(x) }\n")
  r = _root("p = f32[] parameter(0)\nROOT r = f32[] call(p), to_apply=c",
            helpers)
  assert isi.infer_instruction_shape(r) == S("f32[]")
  bad = _root("p = s32[] parameter(0)\nROOT r = f32[] call(p), to_apply=c",
              helpers)
  with pytest.raises(support.InvalidArgumentError, match="parameter 0"):
    isi.infer_instruction_shape(bad)


def test_brief_opcodes_are_covered():
  assert {O.kAdd, O.kDot, O.kReduce, O.kBroadcast, O.kReshape, O.kTranspose,
          O.kSlice, O.kConcatenate, O.kCompare, O.kSelect, O.kConvert,
          O.kTuple, O.kGetTupleElement} <= isi.covered_opcodes()
  assert O.kCustomCall not in isi.covered_opcodes()


def test_malformed_structure_is_an_error_not_a_crash():
  gds = _root("p = f32[4] parameter(0)\n"
              "ROOT r = s32[] get-dimension-size(p), dimensions={0}")
  gds.set_attr("dimensions", ())
  with pytest.raises(support.InvalidArgumentError, match="one dimension"):
    isi.infer_instruction_shape(gds, gds.shape)
  red = _root("p = f32[4] parameter(0)\nz = f32[] constant(0)\n"
              "ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add",
              "add { x = f32[] parameter(0) y = f32[] parameter(1) "
              "ROOT s = f32[] add(x, y) }\n")
  red.detach_operands()
  with pytest.raises(support.InvalidArgumentError, match="at least 2"):
    isi.infer_instruction_shape(red, red.shape)
