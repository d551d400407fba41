"""Tests for HloModule: naming, computation orders, layouts, cloning."""

import pytest

import support
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_module import HloModule
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.hlo.parser import hlo_parser
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P

S = Shape.array(P.F32)


def _adder(name="add"):
  c = HloComputation(name)
  x = c.add_instruction(hi.create_parameter(0, S, "x"))
  y = c.add_instruction(hi.create_parameter(1, S, "y"))
  c.set_root_instruction(c.add_instruction(
      hi.create_binary(S, O.kAdd, x, y)))
  return c


def test_names_become_unique():
  m = HloModule("m")
  a = m.add_embedded_computation(_adder())
  b = m.add_embedded_computation(_adder())
  assert (a.name, b.name) == ("add", "add.1")
  assert [i.name for i in b.instructions] == ["x.1", "y.1", "add.1"]
  late = b.add_instruction(hi.create_unary(S, O.kNegate, b.instructions[0]))
  assert late.name == "negate"
  with pytest.raises(support.FailedPreconditionError, match="already"):
    m.add_embedded_computation(a)


def test_orders_and_removal():
  m = HloModule("m")
  add = m.add_embedded_computation(_adder())
  entry = HloComputation("main")
  p = entry.add_instruction(hi.create_parameter(
      0, Shape.array(P.F32, (4,), (0,)), "p"))
  zero = entry.add_instruction(hi.create_parameter(1, S, "z"))
  red = entry.add_instruction(hi.create_reduce(S, [p], [zero], [0], add))
  entry.set_root_instruction(red)
  m.add_entry_computation(entry)
  unused = m.add_embedded_computation(_adder("unused"))
  assert [c.name for c in m.make_computation_post_order()] == [
      "add", "main", "unused"]
  assert [c.name for c in m.computations_in_stable_order()] == [
      "add", "main", "unused"]
  with pytest.raises(support.FailedPreconditionError, match="called by"):
    m.remove_computation(add)
  m.remove_computation(unused)
  assert m.computation_count == 2
  layout = m.entry_computation_layout()
  assert str(layout.parameters[0]) == "f32[4]{0}" and str(
      layout.result) == "f32[]"
  assert entry.is_entry_computation() and not add.is_entry_computation()


def test_text_and_clone():
  text = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[]}

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  p0 = f32[4]{0} parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[] reduce(p0, c), dimensions={0}, to_apply=add
}

"""
  m = hlo_parser.parse_and_return_unverified_module(text)
  assert m.to_string() == text
  clone = m.clone()
  assert clone.to_string() == text and clone is not m
  assert clone.entry_computation is not m.entry_computation
  old_reduce = m.entry_computation.root_instruction
  new_reduce = clone.entry_computation.root_instruction
  assert new_reduce is not old_reduce
  assert new_reduce.to_apply is clone.get_computation_with_name("add")
  assert new_reduce.operand(0).parent is clone.entry_computation
  # Changing the clone leaves the original alone.
  new_reduce.set_attr("dimensions", ())
  assert old_reduce.dimensions == (0,)
