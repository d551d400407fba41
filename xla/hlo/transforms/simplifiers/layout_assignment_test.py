"""Tests for the simplified LayoutAssignment."""

from xla import shape_util
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import layout_assignment as la
from xla.service import hlo_verifier


def _run(text, **kwargs):
  module = hp.parse_and_return_verified_module(text)
  pass_ = la.LayoutAssignment(**kwargs)
  pass_.run(module)
  hlo_verifier.verify(module)
  return pass_, module


def _m2m(instr):
  return instr.shape.layout.minor_to_major


def _all_have_layouts(module):
  for instr in module.instructions():
    for _, s in shape_util.leaf_shapes(instr.shape):
      if s.is_array() and s.layout is None:
        return False
  return True


def test_default_layouts_need_no_copies():
  p, module = _run("""HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT n = f32[2,4] negate(d)
}""")
  assert p.copies_added == 0
  assert _all_have_layouts(module)
  assert not any(i.opcode == HloOpcode.kCopy for i in module.instructions())
  ecl = module.config.entry_computation_layout
  assert ecl.result.layout.minor_to_major == (1, 0)


def test_column_major_dot_operand_is_copied():
  p, module = _run("""HloModule m, entry_computation_layout={(f32[2,3]{0,1}, f32[3,4]{1,0})->f32[2,4]{1,0}}
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
  assert p.copies_added == 1
  entry = module.entry_computation
  a = entry.parameter_instruction(0)
  assert _m2m(a) == (0, 1)
  dot = entry.root_instruction
  copy = dot.operand(0)
  assert copy.opcode == HloOpcode.kCopy and copy.operand(0) is a
  assert _m2m(copy) == (1, 0)
  assert dot.operand(1).opcode == HloOpcode.kParameter


def test_elementwise_propagates_parameter_layout():
  p, module = _run("""HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{0,1}}
ENTRY e {
  a = f32[2,3] parameter(0)
  n = f32[2,3] negate(a)
  ROOT x = f32[2,3] exponential(n)
}""")
  assert p.copies_added == 0
  root = module.entry_computation.root_instruction
  assert _m2m(root) == (0, 1) and _m2m(root.operand(0)) == (0, 1)


def test_elementwise_conflict_copies_second_operand():
  p, module = _run("""HloModule m, entry_computation_layout={(f32[2,3]{0,1}, f32[2,3]{1,0})->f32[2,3]{0,1}}
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ROOT s = f32[2,3] add(a, b)
}""")
  assert p.copies_added == 1
  add = module.entry_computation.root_instruction
  assert add.operand(0).opcode == HloOpcode.kParameter
  assert add.operand(1).opcode == HloOpcode.kCopy
  assert _m2m(add.operand(1)) == (0, 1)


def test_result_layout_is_enforced_with_copy():
  p, module = _run("""HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[3,2]{0,1}}
ENTRY e {
  a = f32[2,3] parameter(0)
  ROOT t = f32[3,2] transpose(a), dimensions={1,0}
}""")
  root = module.entry_computation.root_instruction
  assert root.opcode == HloOpcode.kCopy
  assert _m2m(root) == (0, 1)
  assert _m2m(root.operand(0)) == (1, 0)
  assert p.copies_added == 1


def test_tuple_result_copies_only_the_mismatched_leaf():
  p, module = _run("""HloModule m, entry_computation_layout={(f32[2,3]{1,0})->(f32[2,3]{1,0}, f32[2,3]{0,1})}
ENTRY e {
  a = f32[2,3] parameter(0)
  n = f32[2,3] negate(a)
  ROOT t = (f32[2,3], f32[2,3]) tuple(a, n)
}""")
  root = module.entry_computation.root_instruction
  assert root.opcode == HloOpcode.kTuple
  first, second = root.operands
  assert first.opcode == HloOpcode.kGetTupleElement
  assert second.opcode == HloOpcode.kCopy and _m2m(second) == (0, 1)


def test_explicit_pass_layout_overrides_config():
  ecl = hp.parse_and_return_verified_module("""HloModule x, entry_computation_layout={(f32[2,2]{0,1})->f32[2,2]{1,0}}
ENTRY e {
  a = f32[2,2] parameter(0)
  ROOT r = f32[2,2] reshape(a)
}""").config.entry_computation_layout
  p, module = _run("""HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  ROOT r = f32[2,2] reshape(a)
}""", entry_computation_layout=ecl)
  # reshape needs a row-major operand: the column-major parameter is copied.
  assert p.copies_added == 1
  assert module.entry_computation.root_instruction.operand(0).opcode == (
      HloOpcode.kCopy)
  assert module.config.entry_computation_layout == ecl


def test_while_carry_uses_default_layouts():
  p, module = _run("""HloModule m, entry_computation_layout={(f32[2,2]{0,1})->f32[2,2]{1,0}}
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
}""")
  assert _all_have_layouts(module)
  w = [i for i in module.instructions() if i.opcode == HloOpcode.kWhile][0]
  assert w.shape.tuple_shapes[0].layout.minor_to_major == (1, 0)
  # The loop's operand (a tuple of a column-major value) was converted.
  assert w.operand(0).shape == w.shape
  assert w.while_body.parameter_instruction(0).shape == w.shape
  assert p.copies_added >= 1
