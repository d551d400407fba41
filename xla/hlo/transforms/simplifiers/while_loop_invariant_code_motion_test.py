"""Tests for WhileLoopInvariantCodeMotion."""

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import pass_test_util
from xla.hlo.transforms.simplifiers import (
    while_loop_invariant_code_motion as licm)
from xla.service import hlo_verifier


def _module(body_ops, out="x2", entry_root=None):
  """Loop state (i, x, y): i counts, x is updated with `out`, y is passed
  through unchanged (invariant)."""
  entry_root = entry_root or "ROOT r = f32[4] get-tuple-element(w), index=1"
  return f"""HloModule m

cond {{
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT c = pred[] compare(i, n), direction=LT
}}

body {{
  p = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  y = f32[4] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  {body_ops}
  ROOT t = (s32[], f32[4], f32[4]) tuple(i2, {out}, y)
}}

ENTRY e {{
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  z = s32[] constant(0)
  t = (s32[], f32[4], f32[4]) tuple(z, a, b)
  w = (s32[], f32[4], f32[4]) while(t), condition=cond, body=body
  {entry_root}
}}
"""


def _run(text, **kwargs):
  module = hp.parse_and_return_verified_module(text)
  before = module.clone()
  changed = licm.WhileLoopInvariantCodeMotion(**kwargs).run(module)
  hlo_verifier.verify(module)
  if not any(i.opcode == HloOpcode.kRng for i in module.instructions()):
    pass_test_util.assert_same_results(before, module)
  w = [i for i in module.instructions() if i.opcode == HloOpcode.kWhile][0]
  return changed, module, w


def test_invariant_exp_is_hoisted():
  changed, module, w = _run(_module("""e = f32[4] exponential(y)
  x2 = f32[4] add(x, e)"""))
  assert changed
  assert len(w.shape.tuple_shapes) == 4
  hoisted = w.operand(0).operand(3)
  assert hoisted.opcode == HloOpcode.kExp
  assert hoisted.parent is module.entry_computation
  assert hoisted.operand(0).name == "b"
  body = w.while_body
  assert not any(i.opcode == HloOpcode.kExp
                 for i in body.instructions)
  add = body.get_instruction_with_name("x2")
  g = add.operand(1)
  assert g.opcode == HloOpcode.kGetTupleElement and g.tuple_index == 3
  # The new element is passed through.
  assert body.root_instruction.operand(3).tuple_index == 3
  # Outside users still read element 1.
  root = module.entry_computation.root_instruction
  assert root.operand(0) is w and root.tuple_index == 1


def test_chain_is_hoisted_with_cheap_operands():
  changed, _, w = _run(_module("""c = f32[] constant(2)
  bc = f32[4] broadcast(c), dimensions={}
  m = f32[4] multiply(y, bc)
  e = f32[4] exponential(m)
  x2 = f32[4] add(x, e)"""))
  assert changed
  hoisted = w.operand(0).operand(3)
  assert hoisted.opcode == HloOpcode.kExp
  assert hoisted.operand(0).opcode == HloOpcode.kMultiply
  assert hoisted.operand(0).operand(1).opcode == HloOpcode.kBroadcast
  assert len(w.shape.tuple_shapes) == 4  # only the boundary value


def test_variant_operand_blocks_hoisting():
  changed, _, w = _run(_module("""e = f32[4] exponential(x)
  x2 = f32[4] add(x, e)"""))
  assert not changed
  assert len(w.shape.tuple_shapes) == 3


def test_cheap_op_alone_is_not_hoisted():
  changed, _, _ = _run(_module("""r = f32[2,2] reshape(y)
  r2 = f32[4] reshape(r)
  x2 = f32[4] add(x, r2)"""))
  assert not changed


def test_constants_only_with_flag():
  ops = """c = f32[4] constant({1, 2, 3, 4})
  x2 = f32[4] add(x, c)"""
  changed, _, _ = _run(_module(ops))
  assert not changed
  changed, _, w = _run(_module(ops), hoist_constants=True)
  assert changed
  assert w.operand(0).operand(3).opcode == HloOpcode.kConstant


def test_side_effecting_op_is_not_hoisted():
  changed, _, _ = _run(_module("""e = f32[4] rng(y, y), distribution=rng_uniform
  x2 = f32[4] add(x, e)"""))
  assert not changed


def test_size_inflation_threshold():
  ops = """s = f32[] reduce(y, z0), dimensions={0}, to_apply=add_f32
  e = f32[] exponential(s)
  bc = f32[4] broadcast(e), dimensions={}
  x2 = f32[4] add(x, bc)"""
  text = _module(ops.replace("z0", "zero"))
  text = text.replace("  one = s32[] constant(1)",
                      "  one = s32[] constant(1)\n"
                      "  zero = f32[] constant(0)")
  text = text.replace("cond {", "add_f32 {\n  l = f32[] parameter(0)\n"
                      "  r = f32[] parameter(1)\n"
                      "  ROOT s = f32[] add(l, r)\n}\n\ncond {")
  # Default: the whole chain (ending in the broadcast) is hoisted.
  changed, _, w = _run(text)
  assert changed
  assert w.operand(0).operand(3).opcode == HloOpcode.kBroadcast
  # Without size-inflating hoists: the broadcast (16 bytes from 16 bytes of
  # loop state) is fine at ratio 1; at ratio 0.5 it stays in the body and
  # only the scalar exponential (4 bytes) is hoisted.
  changed, _, w = _run(text, hoist_size_inflating_ops=False,
                       size_inflation_ratio=0.5)
  assert changed
  hoisted = w.operand(0).operand(3)
  assert hoisted.opcode == HloOpcode.kExp
  assert hoisted.shape.dimensions == ()
  assert any(i.opcode == HloOpcode.kBroadcast
             for i in w.while_body.instructions)


def test_non_gte_user_of_loop_gets_original_tuple():
  text = _module("""e = f32[4] exponential(y)
  x2 = f32[4] add(x, e)""", entry_root=(
      "ROOT r = ((s32[], f32[4], f32[4])) tuple(w)"))
  changed, module, w = _run(text)
  assert changed
  root = module.entry_computation.root_instruction
  inner = root.operand(0)
  assert inner.opcode == HloOpcode.kTuple
  assert len(inner.shape.tuple_shapes) == 3
  assert all(o.operand(0) is w for o in inner.operands)
