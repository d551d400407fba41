"""Tests for HloCSE: identical instructions merge; instructions that differ
in anything that matters, or have side effects, do not."""

import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import hlo_cse
from xla.service import hlo_verifier


def _run(body, extra="", **kwargs):
  module = hp.parse_and_return_verified_module(
      f"HloModule m\n{extra}\nENTRY e {{\n{body}\n}}")
  changed = hlo_cse.HloCSE(**kwargs).run(module)
  hlo_verifier.verify(module)
  return changed, module


def _count(module, opcode):
  return sum(1 for i in module.entry_computation.instructions
             if i.opcode == opcode)


def test_merges_identical_chain():
  changed, m = _run("""
  p = f32[4] parameter(0)
  e1 = f32[4] exponential(p)
  e2 = f32[4] exponential(p)
  n1 = f32[4] negate(e1)
  n2 = f32[4] negate(e2)
  ROOT r = f32[4] add(n1, n2)""")
  assert changed
  root = m.entry_computation.root_instruction
  assert root.operand(0) is root.operand(1)
  assert root.operand(0).name == "n1"
  assert root.operand(0).operand(0).name == "e1"
  assert m.entry_computation.instruction_count == 4


def test_merges_equal_constants():
  changed, m = _run("""
  c1 = f32[3] constant({1, 2, 3})
  c2 = f32[3] constant({1, 2, 3})
  ROOT r = f32[3] add(c1, c2)""")
  assert changed
  assert _count(m, HloOpcode.kConstant) == 1


@pytest.mark.parametrize("a,b", [
    ("f32[3] constant({1, 2, 3})", "f32[3] constant({1, 2, 4})"),
    ("f32[] constant(0)", "f32[] constant(-0)"),
    ("s32[] constant(1)", "s32[] constant(2)"),
])
def test_different_constants_stay(a, b):
  shape = a.split(" ")[0]
  changed, m = _run(f"""
  c1 = {a}
  c2 = {b}
  ROOT r = {shape} add(c1, c2)""")
  assert not changed
  assert _count(m, HloOpcode.kConstant) == 2


def test_constants_of_different_types_stay():
  changed, m = _run("""
  c1 = f32[] constant(1)
  c2 = s32[] constant(1)
  ROOT r = (f32[], s32[]) tuple(c1, c2)""")
  assert not changed


@pytest.mark.parametrize("second", [
    "f32[4] sine(p)",                  # other opcode
    "f32[4] exponential(q)",           # other operand
])
def test_different_instructions_stay(second):
  changed, m = _run(f"""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a = f32[4] exponential(p)
  b = {second}
  ROOT r = f32[4] add(a, b)""")
  assert not changed


def test_different_attributes_stay():
  changed, m = _run("""
  p = f32[2,3] parameter(0)
  a = f32[4,2,3] broadcast(p), dimensions={1,2}
  b = f32[2,4,3] broadcast(p), dimensions={0,2}
  c = f32[2,4,3] broadcast(p), dimensions={0,2}
  ROOT r = (f32[4,2,3], f32[2,4,3], f32[2,4,3]) tuple(a, b, c)""")
  assert changed
  root = m.entry_computation.root_instruction
  assert root.operand(0) is not root.operand(1)
  assert root.operand(1) is root.operand(2)


def test_compare_direction_matters():
  changed, _ = _run("""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a = pred[4] compare(p, q), direction=LT
  b = pred[4] compare(p, q), direction=GT
  ROOT r = (pred[4], pred[4]) tuple(a, b)""")
  assert not changed


def test_shape_matters():
  changed, _ = _run("""
  p = f32[4] parameter(0)
  a = f32[2,2] reshape(p)
  b = f32[4,1] reshape(p)
  ROOT r = (f32[2,2], f32[4,1]) tuple(a, b)""")
  assert not changed


def test_layout_sensitivity():
  body = """
  p = f32[2,2] parameter(0)
  a = f32[2,2]{1,0} copy(p)
  b = f32[2,2]{0,1} copy(p)
  ROOT r = (f32[2,2]{1,0}, f32[2,2]{0,1}) tuple(a, b)"""
  changed, _ = _run(body, is_layout_sensitive=True)
  assert not changed
  changed, m = _run(body, is_layout_sensitive=False)
  assert changed
  assert _count(m, HloOpcode.kCopy) == 1


@pytest.mark.parametrize("op", [
    "f32[4] rng(z, o), distribution=rng_uniform",
    "f32[4] custom-call(p), custom_call_target=\"t\", "
    "custom_call_has_side_effect=true",
])
def test_side_effecting_not_merged(op):
  changed, m = _run(f"""
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  o = f32[] constant(1)
  a = {op}
  b = {op}
  ROOT r = f32[4] add(a, b)""")
  assert not changed
  root = m.entry_computation.root_instruction
  assert root.operand(0) is not root.operand(1)


def test_pure_custom_call_merged():
  changed, _ = _run("""
  p = f32[4] parameter(0)
  a = f32[4] custom-call(p), custom_call_target="t"
  b = f32[4] custom-call(p), custom_call_target="t"
  ROOT r = f32[4] add(a, b)""")
  assert changed


def test_call_to_side_effecting_computation_not_merged():
  changed, _ = _run("""
  p = f32[4] parameter(0)
  a = f32[4] call(p), to_apply=effect
  b = f32[4] call(p), to_apply=effect
  ROOT r = f32[4] add(a, b)""", extra="""
effect {
  x = f32[4] parameter(0)
  t = token[] after-all()
  o = token[] outfeed(x, t)
  ROOT y = f32[4] negate(x)
}""")
  assert not changed


def test_same_called_computation_merged_other_not():
  extra = """
add1 { a = f32[] parameter(0)  b = f32[] parameter(1)
       ROOT s = f32[] add(a, b) }
add2 { a = f32[] parameter(0)  b = f32[] parameter(1)
       ROOT s = f32[] add(a, b) }"""
  changed, m = _run("""
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  r1 = f32[] reduce(p, z), dimensions={0}, to_apply=add1
  r2 = f32[] reduce(p, z), dimensions={0}, to_apply=add1
  r3 = f32[] reduce(p, z), dimensions={0}, to_apply=add2
  ROOT t = (f32[], f32[], f32[]) tuple(r1, r2, r3)""", extra=extra)
  assert changed
  root = m.entry_computation.root_instruction
  assert root.operand(0) is root.operand(1)
  assert root.operand(2) is not root.operand(0)


def test_parameters_never_merged():
  changed, _ = _run("""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  ROOT r = f32[4] add(p, q)""")
  assert not changed


def test_control_dependencies_block_merging():
  changed, _ = _run("""
  p = f32[4] parameter(0)
  a = f32[4] exponential(p)
  b = f32[4] exponential(p), control-predecessors={a}
  ROOT r = f32[4] add(a, b)""")
  assert not changed


def test_commutative_canonicalization():
  body = """
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a = f32[4] add(p, q)
  b = f32[4] add(q, p)
  d1 = f32[4] subtract(p, q)
  d2 = f32[4] subtract(q, p)
  ROOT r = (f32[4], f32[4], f32[4], f32[4]) tuple(a, b, d1, d2)"""
  changed, _ = _run(body)
  assert not changed  # off by default, as in XLA
  changed, m = _run(body, canonicalize_commutative=True)
  assert changed
  root = m.entry_computation.root_instruction
  assert root.operand(0) is root.operand(1)
  assert root.operand(2) is not root.operand(3)  # subtract is not commutative


def test_root_replaced():
  changed, m = _run("""
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  b = f32[4] negate(p)
  t = (f32[4]) tuple(a)
  ROOT r = f32[4] negate(p)""")
  assert changed
  comp = m.entry_computation
  assert _count(m, HloOpcode.kNegate) == 1
  root = comp.root_instruction
  assert root.opcode == HloOpcode.kNegate
  assert comp.get_instruction_with_name("t").operand(0) is root


def test_does_not_merge_across_computations():
  changed, m = _run("""
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  c = f32[4] call(p), to_apply=f
  ROOT r = f32[4] add(a, c)""", extra="""
f {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}""")
  assert not changed
