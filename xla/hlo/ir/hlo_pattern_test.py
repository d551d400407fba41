"""Tests for the HLO pattern matcher and rewrite rules."""

import numpy as np
import pytest

from xla.hlo.ir import hlo_pattern as m
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp

TEXT = """HloModule m
ENTRY e {
  x = s32[4] parameter(0)
  y = s32[4] parameter(1)
  z = s32[] constant(0)
  zeros = s32[4] broadcast(z), dimensions={}
  ones = s32[4] constant({1, 1, 1, 1})
  mixed = s32[4] constant({1, 0, 1, 1})
  add0 = s32[4] add(x, zeros)
  add1 = s32[4] add(zeros, x)
  mul = s32[4] multiply(x, ones)
  mulm = s32[4] multiply(x, mixed)
  xx = s32[4] add(x, x)
  xy = s32[4] add(x, y)
  n1 = s32[4] negate(xy)
  n2 = s32[4] negate(n1)
  ROOT t = (s32[4], s32[4], s32[4], s32[4], s32[4], s32[4], s32[4]) tuple(add0, add1, mul, mulm, xx, xy, n2)
}
"""


@pytest.fixture(name="get")
def _get():
  comp = hp.parse_and_return_verified_module(TEXT).entry_computation
  return lambda name: next(i for i in comp.instructions if i.name == name)


def test_op_with_operands_and_captures(get):
  p = m.op(HloOpcode.kAdd, m.any("x"), m.constant_splat(0, "zero"))
  got = p.match(get("add0"))
  assert got["x"] is get("x") and got["zero"] is get("zeros")
  # Operands are matched in order: add(0, x) is another pattern.
  assert p.match(get("add1")) is None
  assert p.match(get("mul")) is None  # opcode differs


def test_constant_splat_sees_through_broadcast_and_needs_all_equal(get):
  assert m.constant_splat(0).match(get("zeros")) == {}
  assert m.constant_splat(1).match(get("ones")) == {}
  assert m.constant_splat(1).match(get("mixed")) is None
  assert m.constant_splat(1).match(get("x")) is None
  assert m.splat_value(get("zeros")) == 0
  assert m.splat_value(get("mixed")) is None
  assert m.is_all(get("ones"), np.int32(1))


def test_repeated_name_must_bind_the_same_instruction(get):
  same = m.op(HloOpcode.kAdd, m.any("a"), m.any("a"))
  assert same.match(get("xx"))["a"] is get("x")
  assert same.match(get("xy")) is None


def test_nested_patterns_and_where(get):
  p = m.op(HloOpcode.kNegate, m.op(HloOpcode.kNegate, m.any("x")))
  assert p.match(get("n2"))["x"] is get("xy")
  assert p.match(get("n1")) is None
  # No operands given: only the opcode (and `where`) are checked.
  assert m.op(HloOpcode.kAdd).match(get("xy")) == {}
  assert m.op(HloOpcode.kAdd, name="a",
              where=lambda i: i.operand(0) is i.operand(1)).match(
                  get("xx")) == {"a": get("xx")}
  assert m.op(HloOpcode.kAdd,
              where=lambda i: i.operand(0) is i.operand(1)).match(
                  get("xy")) is None
  # A given operand list must have the instruction's operand count.
  assert m.op(HloOpcode.kAdd, m.any()).match(get("xy")) is None


def test_any_of_keeps_only_the_captures_of_the_alternative_that_matched(get):
  # add(x, 0) in either order; the first alternative binds "x" to the
  # splat before it fails on add1, and that binding must not survive.
  either = m.any_of(
      m.op(HloOpcode.kAdd, m.any("x"), m.constant_splat(0, "zero")),
      m.op(HloOpcode.kAdd, m.constant_splat(0, "zero"), m.any("x")),
      name="add")
  assert either.match(get("add0")) == {"x": get("x"), "zero": get("zeros"),
                                       "add": get("add0")}
  assert either.match(get("add1")) == {"x": get("x"), "zero": get("zeros"),
                                       "add": get("add1")}
  assert either.match(get("xy")) is None
  # Inside a larger pattern, names bound outside still constrain it.
  p = m.op(HloOpcode.kAdd, m.any("x"),
           m.any_of(m.op(HloOpcode.kNegate, m.any("x")), m.any("x")))
  assert p.match(get("xx")) == {"x": get("x")}
  assert p.match(get("xy")) is None


def test_pattern_matcher_tries_rules_in_order(get):
  calls = []

  def never(captures, instr, context):
    calls.append((instr.name, context))
    return None

  pm = m.PatternMatcher([
      m.Rule(m.op(HloOpcode.kAdd, m.any(), m.any()), never),
      m.Rule(m.op(HloOpcode.kAdd, m.any("x"), m.constant_splat(0)), "x"),
      m.Rule(m.op(HloOpcode.kAdd, m.constant_splat(0), m.any("x")), "x"),
  ])
  assert pm.opcodes == {HloOpcode.kAdd}
  assert pm.rewrite(get("add0"), "ctx") is get("x")
  assert pm.rewrite(get("add1")) is get("x")
  assert pm.rewrite(get("xy")) is None
  assert pm.rewrite(get("mul")) is None
  assert calls == [("add0", "ctx"), ("add1", None), ("xy", None)]


def test_rule_root_must_be_an_op():
  with pytest.raises(TypeError, match="op"):
    m.Rule(m.any("x"), "x")
