"""Tests for HloConstantFolding (uses the HLO evaluator)."""

import numpy as np
import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.transforms.simplifiers import hlo_constant_folding as hcf
from xla.service import hlo_verifier


def _run(body, **kwargs):
  module = hp.parse_and_return_verified_module(
      f"HloModule m\nENTRY e {{\n{body}\n}}")
  changed = hcf.HloConstantFolding(**kwargs).run(module)
  hlo_verifier.verify(module)
  return changed, module.entry_computation.root_instruction


def test_add_of_constants_folds():
  changed, root = _run("""a = s32[3] constant({1, 2, 3})
  b = s32[3] constant({10, 20, 30})
  ROOT r = s32[3] add(a, b)""")
  assert changed
  assert root.opcode == HloOpcode.kConstant
  np.testing.assert_array_equal(root.literal.array, [11, 22, 33])
  assert len(root.parent.instructions) == 1


def test_chain_folds_in_one_run():
  changed, root = _run("""a = f32[2,2] constant({{1, 2}, {3, 4}})
  t = f32[2,2] transpose(a), dimensions={1,0}
  n = f32[2,2] negate(t)
  ROOT r = f32[4] reshape(n)""")
  assert changed
  assert root.opcode == HloOpcode.kConstant
  np.testing.assert_array_equal(root.literal.array, [-1, -3, -2, -4])


def test_partial_fold_keeps_parameter_use():
  changed, root = _run("""p = f32[2] parameter(0)
  a = f32[2] constant({1, 2})
  b = f32[2] constant({3, 4})
  m = f32[2] multiply(a, b)
  ROOT r = f32[2] add(p, m)""")
  assert changed
  assert root.opcode == HloOpcode.kAdd
  assert root.operand(0).opcode == HloOpcode.kParameter
  np.testing.assert_array_equal(root.operand(1).literal.array, [3, 8])


NEGATIVE = [
    ("parameter_operand", """p = f32[2] parameter(0)
  a = f32[2] constant({1, 2})
  ROOT r = f32[2] add(p, a)"""),
    ("broadcast_of_constant", """a = f32[] constant(1)
  ROOT r = f32[100] broadcast(a), dimensions={}"""),
    ("iota", """ROOT r = s32[4] iota(), iota_dimension=0"""),
    ("tuple", """a = f32[] constant(1)
  ROOT r = (f32[]) tuple(a)"""),
    ("rng_side_effect", """a = f32[] constant(0)
  b = f32[] constant(1)
  ROOT r = f32[4] rng(a, b), distribution=rng_uniform"""),
]


@pytest.mark.parametrize("name,body", NEGATIVE, ids=[n for n, _ in NEGATIVE])
def test_does_not_fold(name, body):
  changed, _ = _run(body)
  assert not changed, name


def test_max_elements_limits_growth():
  body = """a = f32[2] constant({1, 2})
  b = f32[3] constant({3, 4, 5})
  ROOT r = f32[5] concatenate(a, b), dimensions={0}"""
  assert _run(body)[0]
  # 5 elements from 5: not a growth, folded even with a tiny limit.
  assert _run(body, max_elements=1)[0]
  pad = """a = f32[2] constant({1, 2})
  z = f32[] constant(0)
  ROOT r = f32[10] pad(a, z), padding=0_8"""
  assert _run(pad)[0]
  assert not _run(pad, max_elements=4)[0]
