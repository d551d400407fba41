"""Tests for HloComputation: membership, removal, replacement, orders."""

import numpy as np
import pytest

import support
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.literal import Literal
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P

V = Shape.array(P.F32, (4,), (0,))


def _build():
  """p0, p1 -> add(p0, p1) -> neg -> root tuple(neg, p1)."""
  c = HloComputation("c")
  p0 = c.add_instruction(hi.create_parameter(0, V, "p0"))
  p1 = c.add_instruction(hi.create_parameter(1, V, "p1"))
  add = c.add_instruction(hi.create_binary(V, O.kAdd, p0, p1))
  neg = c.add_instruction(hi.create_unary(V, O.kNegate, add))
  root = c.add_instruction(hi.create_tuple([neg, p1]))
  c.set_root_instruction(root)
  return c, (p0, p1, add, neg, root)


def test_membership_rules():
  c, (p0, *_) = _build()
  stranger = hi.create_parameter(0, V, "x")
  with pytest.raises(support.InvalidArgumentError, match="does not belong"):
    c.add_instruction(hi.create_unary(V, O.kNegate, stranger))
  with pytest.raises(support.InvalidArgumentError, match="already has"):
    c.add_instruction(hi.create_parameter(1, V, "dup"))
  with pytest.raises(support.FailedPreconditionError, match="already"):
    c.add_instruction(p0)
  assert c.num_parameters == 2 and c.parameter_instruction(1).name == "p1"
  with pytest.raises(support.NotFoundError):
    c.parameter_instruction(5)


def test_remove_instruction_rules():
  c, (p0, p1, add, neg, root) = _build()
  with pytest.raises(support.FailedPreconditionError, match="used by neg"):
    c.remove_instruction(add)
  with pytest.raises(support.FailedPreconditionError, match="root"):
    c.remove_instruction(root)
  dead = c.add_instruction(hi.create_unary(V, O.kExp, p0))
  c.remove_instruction(dead)
  assert dead not in c.instructions and p0.users == (add,)
  with pytest.raises(support.FailedPreconditionError, match="parameter"):
    c.remove_instruction(c.add_instruction(hi.create_parameter(2, V, "p2")))


def test_replace_instruction_removes_dead_operands():
  c, (p0, p1, add, neg, root) = _build()
  zero = c.add_instruction(hi.create_constant(
      Literal.from_array(np.zeros(4, np.float32))))
  c.replace_instruction(neg, zero)
  assert root.operands == (zero, p1)
  # neg and add became dead and are gone; parameters stay.
  assert [i.name for i in c.instructions] == ["p0", "p1", "tuple",
                                              "constant"]
  ints = c.add_instruction(
      hi.create_parameter(2, Shape.array(P.S32, (4,)), "p2"))
  with pytest.raises(support.InvalidArgumentError, match="cannot replace"):
    c.replace_instruction(zero, ints)


def test_remove_parameter_renumbers():
  c = HloComputation("c")
  ps = [c.add_instruction(hi.create_parameter(i, V, f"p{i}"))
        for i in range(3)]
  c.set_root_instruction(ps[2])
  c.remove_parameter(1)
  assert [p.parameter_number for p in c.parameter_instructions] == [0, 1]
  assert c.parameter_instruction(1) is ps[2]


def test_post_order_matches_xla():
  # XLA visits user-less instructions in order, operands first to last.
  c = HloComputation("c")
  p0 = c.add_instruction(hi.create_parameter(0, V, "p0"))
  p1 = c.add_instruction(hi.create_parameter(1, V, "p1"))
  b = c.add_instruction(hi.create_unary(V, O.kNegate, p1))
  a = c.add_instruction(hi.create_unary(V, O.kExp, p0))
  dead = c.add_instruction(hi.create_unary(V, O.kAbs, p1))
  root = c.add_instruction(hi.create_binary(V, O.kAdd, a, b))
  c.set_root_instruction(root)
  order = [i.name for i in c.make_instruction_post_order()]
  assert order == ["p1", "abs", "p0", "exponential", "negate", "add"]
  del dead


def test_stable_order_moves_only_what_it_must():
  c, (p0, p1, add, neg, root) = _build()
  # A new instruction appended last but used by `add` must move before it.
  late = c.add_instruction(hi.create_unary(V, O.kCopy, p1))
  add.replace_operand_with(1, late)
  names = [i.name for i in c.instructions_in_stable_order()]
  assert names == ["p0", "p1", "copy", "add", "negate", "tuple"]
  ps = c.program_shape()
  assert ps.parameter_names == ("p0", "p1") and ps.result == root.shape
