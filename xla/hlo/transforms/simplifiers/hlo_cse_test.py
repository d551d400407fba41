"""Tests for HloCSE: identical instructions merge; instructions that differ
in anything that matters, or have side effects, do not."""

import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.transforms.simplifiers import hlo_cse
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _check(body, expected, extra="", **kwargs):
  """Runs CSE on a module of `extra` computations and ENTRY { body };
  FileChecks the result against `expected` (None: nothing may change)."""
  return run_and_filecheck(f"HloModule m\n{extra}\nENTRY e {{\n{body}\n}}",
                           hlo_cse.HloCSE(**kwargs), expected)


def _count(module, opcode):
  return sum(1 for i in module.entry_computation.instructions
             if i.opcode == opcode)


def test_merges_identical_chain():
  _check("""
  p = f32[4] parameter(0)
  e1 = f32[4] exponential(p)
  e2 = f32[4] exponential(p)
  n1 = f32[4] negate(e1)
  n2 = f32[4] negate(e2)
  ROOT r = f32[4] add(n1, n2)""", """
  CHECK:      ENTRY e {
  CHECK-NEXT:   p = f32[4]{0} parameter(0)
  CHECK-NEXT:   e1 = f32[4]{0} exponential(p)
  CHECK-NEXT:   n1 = f32[4]{0} negate(e1)
  CHECK-NEXT:   ROOT r = f32[4]{0} add(n1, n1)
  CHECK-NEXT: }""")


def test_merges_equal_constants():
  _, m = _check("""
  c1 = f32[3] constant({1, 2, 3})
  c2 = f32[3] constant({1, 2, 3})
  ROOT r = f32[3] add(c1, c2)""", """
  CHECK: [[C:c[12]]] = f32[3]{0} constant({1, 2, 3})
  CHECK: ROOT r = f32[3]{0} add([[C]], [[C]])""")
  assert _count(m, HloOpcode.kConstant) == 1


@pytest.mark.parametrize("a,b", [
    ("f32[3] constant({1, 2, 3})", "f32[3] constant({1, 2, 4})"),
    ("f32[] constant(0)", "f32[] constant(-0)"),
    ("s32[] constant(1)", "s32[] constant(2)"),
])
def test_different_constants_stay(a, b):
  shape = a.split(" ")[0]
  _, m = _check(f"""
  c1 = {a}
  c2 = {b}
  ROOT r = {shape} add(c1, c2)""", None)
  assert _count(m, HloOpcode.kConstant) == 2


def test_constants_of_different_types_stay():
  _check("""
  c1 = f32[] constant(1)
  c2 = s32[] constant(1)
  ROOT r = (f32[], s32[]) tuple(c1, c2)""", None)


@pytest.mark.parametrize("second", [
    "f32[4] sine(p)",                  # other opcode
    "f32[4] exponential(q)",           # other operand
])
def test_different_instructions_stay(second):
  _check(f"""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a = f32[4] exponential(p)
  b = {second}
  ROOT r = f32[4] add(a, b)""", None)


def test_different_attributes_stay():
  _check("""
  p = f32[2,3] parameter(0)
  a = f32[4,2,3] broadcast(p), dimensions={1,2}
  b = f32[2,4,3] broadcast(p), dimensions={0,2}
  c = f32[2,4,3] broadcast(p), dimensions={0,2}
  ROOT r = (f32[4,2,3], f32[2,4,3], f32[2,4,3]) tuple(a, b, c)""",
         "CHECK: ROOT r = {{.*}} tuple(a, [[B:[bc]]], [[B]])")


def test_compare_direction_matters():
  _check("""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a = pred[4] compare(p, q), direction=LT
  b = pred[4] compare(p, q), direction=GT
  ROOT r = (pred[4], pred[4]) tuple(a, b)""", None)


def test_shape_matters():
  _check("""
  p = f32[4] parameter(0)
  a = f32[2,2] reshape(p)
  b = f32[4,1] reshape(p)
  ROOT r = (f32[2,2], f32[4,1]) tuple(a, b)""", None)


def test_layout_sensitivity():
  body = """
  p = f32[2,2] parameter(0)
  a = f32[2,2]{1,0} copy(p)
  b = f32[2,2]{0,1} copy(p)
  ROOT r = (f32[2,2]{1,0}, f32[2,2]{0,1}) tuple(a, b)"""
  _check(body, None, is_layout_sensitive=True)
  _check(body, """CHECK:     [[C:[ab]]] = f32[2,2]{{.*}} copy(p)
                  CHECK-NOT: copy(
                  CHECK:     ROOT r = {{.*}} tuple([[C]], [[C]])""",
         is_layout_sensitive=False)


@pytest.mark.parametrize("op", [
    "f32[4] rng(z, o), distribution=rng_uniform",
    "f32[4] custom-call(p), custom_call_target=\"t\", "
    "custom_call_has_side_effect=true",
])
def test_side_effecting_not_merged(op):
  _check(f"""
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  o = f32[] constant(1)
  a = {op}
  b = {op}
  ROOT r = f32[4] add(a, b)""", None)


def test_pure_custom_call_merged():
  _check("""
  p = f32[4] parameter(0)
  a = f32[4] custom-call(p), custom_call_target="t"
  b = f32[4] custom-call(p), custom_call_target="t"
  ROOT r = f32[4] add(a, b)""", """
  CHECK:     [[C:[ab]]] = f32[4]{0} custom-call(p)
  CHECK-NOT: custom-call
  CHECK:     ROOT r = f32[4]{0} add([[C]], [[C]])""")


def test_call_to_side_effecting_computation_not_merged():
  _check("""
  p = f32[4] parameter(0)
  a = f32[4] call(p), to_apply=effect
  b = f32[4] call(p), to_apply=effect
  ROOT r = f32[4] add(a, b)""", None, extra="""
effect {
  x = f32[4] parameter(0)
  t = token[] after-all()
  o = token[] outfeed(x, t)
  ROOT y = f32[4] negate(x)
}""")


def test_same_called_computation_merged_other_not():
  extra = """
add1 { a = f32[] parameter(0)  b = f32[] parameter(1)
       ROOT s = f32[] add(a, b) }
add2 { a = f32[] parameter(0)  b = f32[] parameter(1)
       ROOT s = f32[] add(a, b) }"""
  _check("""
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  r1 = f32[] reduce(p, z), dimensions={0}, to_apply=add1
  r2 = f32[] reduce(p, z), dimensions={0}, to_apply=add1
  r3 = f32[] reduce(p, z), dimensions={0}, to_apply=add2
  ROOT t = (f32[], f32[], f32[]) tuple(r1, r2, r3)""",
         "CHECK: ROOT t = {{.*}} tuple([[R:r[12]]], [[R]], r3)", extra=extra)


def test_parameters_never_merged():
  _check("""
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  ROOT r = f32[4] add(p, q)""", None)


def test_control_dependencies_block_merging():
  _check("""
  p = f32[4] parameter(0)
  a = f32[4] exponential(p)
  b = f32[4] exponential(p), control-predecessors={a}
  ROOT r = f32[4] add(a, b)""", None)


def test_commutative_canonicalization():
  body = """
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  a = f32[4] add(p, q)
  b = f32[4] add(q, p)
  d1 = f32[4] subtract(p, q)
  d2 = f32[4] subtract(q, p)
  ROOT r = (f32[4], f32[4], f32[4], f32[4]) tuple(a, b, d1, d2)"""
  _check(body, None)  # off by default, as in XLA
  # subtract is not commutative: d1 and d2 stay.
  _check(body, "CHECK: ROOT r = {{.*}} tuple([[A:[ab]]], [[A]], d1, d2)",
         canonicalize_commutative=True)


def test_root_replaced():
  # One negate is left; it is the root, and t reads it.
  _check("""
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  b = f32[4] negate(p)
  t = (f32[4]) tuple(a)
  ROOT r = f32[4] negate(p)""", """
  CHECK:     ENTRY e {
  CHECK-NOT: negate
  CHECK:     ROOT [[N:[a-z.0-9]+]] = f32[4]{0} negate(p)
  CHECK-NOT: negate
  CHECK:     t = (f32[4]{0}) tuple([[N]])
  CHECK-NOT: negate""")


def test_does_not_merge_across_computations():
  _check("""
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  c = f32[4] call(p), to_apply=f
  ROOT r = f32[4] add(a, c)""", None, extra="""
f {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
}""")
