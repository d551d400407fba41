"""Tests for the HLO verifier: valid modules pass, each broken invariant
is reported with the instruction's name."""

import pytest

import support
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.hlo.parser import hlo_parser as hp
from xla.service import hlo_verifier as hv
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P

GOOD = """HloModule good
add { x = f32[] parameter(0)  y = f32[] parameter(1)
      ROOT sum = f32[] add(x, y) }
ENTRY e {
  p = f32[2,3] parameter(0)
  q = f32[3,2] parameter(1)
  t = f32[2,3] transpose(q), dimensions={1,0}
  s = f32[2,3] subtract(p, t)
  b = f32[2,3,4] broadcast(s), dimensions={0,1}
  r = f32[6,4] reshape(b)
  sl = f32[2,4] slice(r), slice={[0:4:2], [0:4]}
  cat = f32[8,4] concatenate(r, sl), dimensions={0}
  d = f32[8,8] dot(cat, cat), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  z = f32[] constant(0)
  red = f32[8] reduce(d, z), dimensions={1}, to_apply=add
  c = pred[8] compare(red, red), direction=GT
  sel = f32[8] select(c, red, red)
  cv = s32[8] convert(sel)
  tup = (s32[8], f32[8]) tuple(cv, sel)
  ROOT g = s32[8] get-tuple-element(tup), index=0
}
"""


def test_valid_module_passes():
  module = hp.parse_and_return_unverified_module(GOOD)
  hv.verify(module)
  assert hv.verify_or_none(module) is None


def _replace(old, new):
  assert old in GOOD
  return GOOD.replace(old, new)


@pytest.mark.parametrize("text,name,message", [
    (_replace("s = f32[2,3] subtract", "s = f32[3,2] subtract"), "s",
     "shape mismatch"),
    (_replace("subtract(p, t)", "subtract(p, q)"), "s",
     "incompatible shapes"),
    (_replace("f32[2,3,4] broadcast(s), dimensions={0,1}",
              "f32[2,3,4] broadcast(s), dimensions={1,0}"), "b",
     "does not match"),
    (_replace("f32[6,4] reshape(b)", "f32[6,5] reshape(b)"), "r",
     "element count"),
    (_replace("t = f32[2,3] transpose(q), dimensions={1,0}",
              "t = f32[2,3] transpose(q), dimensions={0,0}"), "t",
     "not a permutation"),
    (_replace("f32[2,4] slice(r)", "f32[3,4] slice(r)"), "sl",
     "shape mismatch"),
    (_replace("cat = f32[8,4]", "cat = f32[9,4]"), "cat", "shape mismatch"),
    (_replace("rhs_contracting_dims={1}", "rhs_contracting_dims={0}"), "d",
     "contracting dimension sizes"),
    (_replace("red = f32[8] reduce", "red = f32[4] reduce"), "red",
     "shape mismatch"),
    (_replace("c = pred[8] compare", "c = f32[8] compare"), "c",
     "shape mismatch"),
    (_replace("cv = s32[8] convert(sel)", "cv = s32[4] convert(sel)"), "cv",
     "changes dimensions"),
    (_replace("ROOT g = s32[8] get-tuple-element(tup), index=0",
              "ROOT g = s32[8] get-tuple-element(tup), index=1"), "g",
     "shape mismatch"),
    (_replace("tup = (s32[8], f32[8]) tuple", "tup = (s32[8]) tuple"),
     "tup", "shape mismatch"),
    (_replace("ROOT sum = f32[] add(x, y)", "ROOT sum = f32[] compare(x, "
              "y), direction=EQ"), "sum", "shape mismatch"),
    (_replace("red = f32[8] reduce(d, z), dimensions={1}, to_apply=add",
              "red = f32[8] reduce(d, z), dimensions={1}, to_apply=cmp"),
     "red", "returns pred"),
])
def test_broken_instructions_are_named(text, name, message):
  text = text.replace("ENTRY e {", "cmp { x = f32[] parameter(0)  "
                      "y = f32[] parameter(1)  ROOT lt = pred[] compare(x, y),"
                      " direction=LT }\nENTRY e {")
  module = hp.parse_and_return_unverified_module(text)
  with pytest.raises(hv.HloVerifierError, match=message) as e:
    hv.verify(module)
  assert f"instruction {name} (" in str(e.value)
  assert isinstance(e.value, support.InvalidArgumentError)


def test_structural_problems():
  module = hp.parse_and_return_unverified_module(GOOD)
  entry = module.entry_computation
  p = entry.parameter_instruction(0)
  # An operand/user mismatch created behind the IR's back.
  neg = hi.create_unary(p.shape, O.kNegate, p)
  neg.parent = entry
  entry._instructions[id(neg)] = neg  # pylint: disable=protected-access
  del p._users[neg]  # pylint: disable=protected-access
  with pytest.raises(hv.HloVerifierError, match="does not list it"):
    hv.verify(module)


def test_entry_layout_and_parameters():
  text = GOOD.replace("HloModule good",
                      "HloModule good, entry_computation_layout="
                      "{(f32[2,3]{1,0})->s32[8]{0}}")
  module = hp.parse_and_return_unverified_module(text)
  with pytest.raises(hv.HloVerifierError, match="1 parameters"):
    hv.verify(module)
  module = hp.parse_and_return_unverified_module(GOOD)
  entry = module.entry_computation
  entry.parameter_instruction(1).parameter_number = 5
  with pytest.raises(hv.HloVerifierError, match="parameter numbers"):
    hv.verify(module)


def test_fused_computation_called_twice():
  text = """HloModule f
neg { x = f32[] parameter(0)  ROOT n = f32[] negate(x) }
ENTRY e {
  p = f32[] parameter(0)
  a = f32[] fusion(p), kind=kLoop, calls=neg
  ROOT b = f32[] fusion(a), kind=kLoop, calls=neg
}
"""
  module = hp.parse_and_return_unverified_module(text)
  with pytest.raises(hv.HloVerifierError, match="2 fusions"):
    hv.verify(module)


def test_missing_attribute_and_constant_mismatch():
  module = hp.parse_and_return_unverified_module(
      "HloModule m\nENTRY e { ROOT i = s32[4] iota(), iota_dimension=0 }")
  root = module.entry_computation.root_instruction
  del root.attrs["iota_dimension"]
  with pytest.raises(hv.HloVerifierError, match="iota_dimension is missing"):
    hv.verify(module)
  module = hp.parse_and_return_unverified_module(
      "HloModule m\nENTRY e { ROOT c = s32[2] constant({1, 2}) }")
  module.entry_computation.root_instruction.shape = Shape.array(P.S32, (3,))
  with pytest.raises(hv.HloVerifierError, match="literal shape"):
    hv.verify(module)


def test_unchecked_opcodes_are_listed():
  unchecked = hv.unchecked_opcodes()
  assert O.kCustomCall in unchecked and O.kAdd not in unchecked
  assert O.kParameter not in unchecked and O.kConstant not in unchecked
