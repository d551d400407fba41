"""Tests for the simplified LayoutAssignment."""

from xla import shape_util
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import layout_assignment as la
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck


def _check(text, expected, **kwargs):
  """Runs layout assignment on `text` and FileChecks the result against
  `expected`; returns the pass (for `copies_added`) and the module."""
  pass_ = la.LayoutAssignment(**kwargs)
  _, module = run_and_filecheck(text, pass_, expected)
  return pass_, module


def _all_have_layouts(module):
  for instr in module.instructions():
    for _, s in shape_util.leaf_shapes(instr.shape):
      if s.is_array() and s.layout is None:
        return False
  return True


def test_default_layouts_need_no_copies():
  p, module = _check("""HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT n = f32[2,4] negate(d)
}""", """
  CHECK:     HloModule m, entry_computation_layout={{.*}}->f32[2,4]{1,0}}
  CHECK-NOT: copy""")
  assert p.copies_added == 0
  assert _all_have_layouts(module)


def test_column_major_dot_operand_is_copied():
  p, _ = _check("""HloModule m, entry_computation_layout={(f32[2,3]{0,1}, f32[3,4]{1,0})->f32[2,4]{1,0}}
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", """
  CHECK: a = f32[2,3]{0,1} parameter(0)
  CHECK: b = f32[3,4]{1,0} parameter(1)
  CHECK: [[COPY:copy[.0-9]*]] = f32[2,3]{1,0} copy(a)
  CHECK: ROOT d = f32[2,4]{1,0} dot([[COPY]], b)""")
  assert p.copies_added == 1


def test_elementwise_propagates_parameter_layout():
  p, _ = _check("""HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{0,1}}
ENTRY e {
  a = f32[2,3] parameter(0)
  n = f32[2,3] negate(a)
  ROOT x = f32[2,3] exponential(n)
}""", """
  CHECK: n = f32[2,3]{0,1} negate(a)
  CHECK: ROOT x = f32[2,3]{0,1} exponential(n)""")
  assert p.copies_added == 0


def test_elementwise_conflict_copies_second_operand():
  p, _ = _check("""HloModule m, entry_computation_layout={(f32[2,3]{0,1}, f32[2,3]{1,0})->f32[2,3]{0,1}}
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ROOT s = f32[2,3] add(a, b)
}""", """
  CHECK: [[COPY:copy[.0-9]*]] = f32[2,3]{0,1} copy(b)
  CHECK: ROOT s = f32[2,3]{0,1} add(a, [[COPY]])""")
  assert p.copies_added == 1


def test_result_layout_is_enforced_with_copy():
  p, _ = _check("""HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[3,2]{0,1}}
ENTRY e {
  a = f32[2,3] parameter(0)
  ROOT t = f32[3,2] transpose(a), dimensions={1,0}
}""", """
  CHECK: t = f32[3,2]{1,0} transpose(a), dimensions={1,0}
  CHECK: ROOT {{.*}} = f32[3,2]{0,1} copy(t)""")
  assert p.copies_added == 1


def test_tuple_result_copies_only_the_mismatched_leaf():
  _check("""HloModule m, entry_computation_layout={(f32[2,3]{1,0})->(f32[2,3]{1,0}, f32[2,3]{0,1})}
ENTRY e {
  a = f32[2,3] parameter(0)
  n = f32[2,3] negate(a)
  ROOT t = (f32[2,3], f32[2,3]) tuple(a, n)
}""", """
  CHECK-DAG: [[G0:[a-z.0-9-]+]] = f32[2,3]{1,0} get-tuple-element(t), index=0
  CHECK-DAG: [[G1:[a-z.0-9-]+]] = f32[2,3]{1,0} get-tuple-element(t), index=1
  CHECK:     [[COPY:copy[.0-9]*]] = f32[2,3]{0,1} copy([[G1]])
  CHECK:     ROOT {{.*}} = {{.*}} tuple([[G0]], [[COPY]])""")


def test_explicit_pass_layout_overrides_config():
  ecl = hp.parse_and_return_verified_module("""HloModule x, entry_computation_layout={(f32[2,2]{0,1})->f32[2,2]{1,0}}
ENTRY e {
  a = f32[2,2] parameter(0)
  ROOT r = f32[2,2] reshape(a)
}""").config.entry_computation_layout
  # reshape needs a row-major operand: the column-major parameter is copied.
  p, module = _check("""HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  ROOT r = f32[2,2] reshape(a)
}""", """
  CHECK: [[COPY:copy[.0-9]*]] = f32[2,2]{1,0} copy(a)
  CHECK: ROOT r = f32[2,2]{1,0} reshape([[COPY]])""",
                     entry_computation_layout=ecl)
  assert p.copies_added == 1
  assert module.config.entry_computation_layout == ecl


def test_while_carry_uses_default_layouts():
  p, module = _check("""HloModule m, entry_computation_layout={(f32[2,2]{0,1})->f32[2,2]{1,0}}
cond {
  p = (f32[2,2]) parameter(0)
  ROOT c = pred[] constant(false)
}
body {
  p = (f32[2,2]) parameter(0)
  x = f32[2,2] get-tuple-element(p), index=0
  n = f32[2,2] negate(x)
  ROOT t = (f32[2,2]) tuple(n)
}
ENTRY e {
  a = f32[2,2] parameter(0)
  t = (f32[2,2]) tuple(a)
  w = (f32[2,2]) while(t), condition=cond, body=body
  ROOT r = f32[2,2] get-tuple-element(w), index=0
}""", "CHECK: while(")
  assert _all_have_layouts(module)
  w = [i for i in module.instructions() if i.opcode == HloOpcode.kWhile][0]
  assert w.shape.tuple_shapes[0].layout.minor_to_major == (1, 0)
  # The loop's operand (a tuple of a column-major value) was converted.
  assert w.operand(0).shape == w.shape
  assert w.while_body.parameter_instruction(0).shape == w.shape
  assert p.copies_added >= 1
