"""Tests for values, positions and must-alias buffers."""

import pytest

import support
from xla.hlo.parser import hlo_parser as hp
from xla.service import hlo_dataflow_analysis as dfa
from xla.service import memory_test_util

parse = hp.parse_and_return_unverified_module


def _instr(module, name, comp=None):
  comp = comp or module.entry_computation
  instr = comp.get_instruction_with_name(name)
  assert instr is not None, name
  return instr


def test_tuple_gte_bitcast_forward_values():
  m = parse("""HloModule m
ENTRY e {
  p = f32[4,2] parameter(0)
  a = f32[4,2] negate(p)
  b = f32[8] bitcast(a)
  t = (f32[4,2], f32[8]) tuple(a, b)
  g = f32[8] get-tuple-element(t), index=1
  ROOT r = f32[8] abs(g)
}
""")
  an = dfa.HloDataflowAnalysis.run(m)
  a, b, t, g, r = (_instr(m, n) for n in "a b t g r".split())
  va = an.value_at(a)
  assert an.value_at(b) is va and an.value_at(g) is va
  assert an.value_at(t, (0,)) is va and an.value_at(t, (1,)) is va
  assert an.defines_value(t, ()) and not an.defines_value(t, (0,))
  assert not an.defines_value(b) and not an.defines_value(g)
  assert an.value_at(t).size == 16  # two pointers
  assert va.size == 32
  assert {str(p) for p in va.positions} == {"a{}", "b{}", "t{0}", "t{1}",
                                           "g{}"}
  # Forwarding ops are not reads: only abs reads a's value.
  assert an.uses(va) == [r]
  # p, a, t{} and r define values.
  assert len(an.values) == 4 and len(an.buffers) == 4


def test_while_carry_must_alias_but_init_does_not():
  m = parse(memory_test_util.while_loop())
  an = dfa.HloDataflowAnalysis.run(m)
  body = m.get_computation_with_name("body")
  cond = m.get_computation_with_name("cond")
  w, init = _instr(m, "w"), _instr(m, "init")
  for idx in [(), (0,), (1,)]:
    assert an.must_alias(w, idx, body.parameter_instruction(0), idx)
    assert an.must_alias(w, idx, cond.parameter_instruction(0), idx)
    assert an.must_alias(w, idx, body.root_instruction, idx)
    assert not an.must_alias(w, idx, init, idx)
  assert an.must_alias(w, (1,), _instr(m, "x2", body), ())
  assert an.must_alias(w, (1,), _instr(m, "g"), ())
  assert not an.must_alias(w, (0,), w, (1,))
  assert {c.name for c in an.computations} == {"e", "body", "cond"}
  assert an.computations[0].name == "e"


def test_conditional_and_call_alias():
  m = parse("""HloModule m
neg { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }
ab { x = f32[4] parameter(0)  ROOT n = f32[4] abs(x) }
callee { x = f32[4] parameter(0)  ROOT n = f32[4] sine(x) }
ENTRY e {
  b = s32[] parameter(0)
  p = f32[4] parameter(1)
  q = f32[4] exponential(p)
  c = f32[4] conditional(b, p, q), branch_computations={neg, ab}
  ROOT k = f32[4] call(c), to_apply=callee
}
""")
  an = dfa.HloDataflowAnalysis.run(m)
  neg, ab = m.get_computation_with_name("neg"), m.get_computation_with_name(
      "ab")
  callee = m.get_computation_with_name("callee")
  c, p, q, k = (_instr(m, n) for n in "c p q k".split())
  assert an.must_alias(c, (), neg.root_instruction, ())
  assert an.must_alias(c, (), ab.root_instruction, ())
  assert an.must_alias(p, (), neg.parameter_instruction(0), ())
  assert an.must_alias(q, (), ab.parameter_instruction(0), ())
  assert not an.must_alias(p, (), q, ())
  assert an.must_alias(c, (), callee.parameter_instruction(0), ())
  assert an.must_alias(k, (), callee.root_instruction, ())
  assert not an.must_alias(k, (), c, ())


def test_fusion_and_reduce_bodies_are_not_analysed():
  m = parse("""HloModule m
add { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
}
""")
  an = dfa.HloDataflowAnalysis.run(m)
  assert [c.name for c in an.computations] == ["e"]
  add = m.get_computation_with_name("add")
  with pytest.raises(support.NotFoundError):
    an.value_at(add.root_instruction)


def test_swapping_carry_needs_copy_insertion():
  text = memory_test_util.while_loop().replace(
      "x2 = f32[100] negate(x)\n  ROOT t = (s32[], f32[100]) tuple(i2, x2)",
      "ROOT t = (s32[], f32[100]) tuple(i2, x)")
  # A pass-through carry is fine.
  dfa.HloDataflowAnalysis.run(parse(text))
  swap = """HloModule s
body {
  p = (f32[4], f32[4]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = f32[4] get-tuple-element(p), index=1
  ROOT t = (f32[4], f32[4]) tuple(b, a)
}
cond {
  p = (f32[4], f32[4]) parameter(0)
  ROOT f = pred[] constant(false)
}
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  init = (f32[4], f32[4]) tuple(p0, p1)
  ROOT w = (f32[4], f32[4]) while(init), condition=cond, body=body
}
"""
  with pytest.raises(support.FailedPreconditionError, match="copy insertion"):
    dfa.HloDataflowAnalysis.run(parse(swap))


def test_shared_control_flow_computation_is_unimplemented():
  m = parse("""HloModule m
callee { x = f32[4] parameter(0)  ROOT n = f32[4] sine(x) }
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] call(p), to_apply=callee
  ROOT b = f32[4] call(a), to_apply=callee
}
""")
  with pytest.raises(support.UnimplementedError, match="callee"):
    dfa.HloDataflowAnalysis.run(m)
