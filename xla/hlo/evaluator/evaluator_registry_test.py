"""The evaluator's kernel table: one kernel per opcode, registered where it
is defined, and the evaluator calls each in its convention."""

import inspect

import numpy as np
import pytest

from xla.hlo.evaluator import elementwise
from xla.hlo.evaluator import evaluator_registry as reg
from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.evaluator import structural
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.hlo.parser import hlo_parser


def test_each_kernel_is_registered_from_the_module_that_defines_it():
  where = {O.kAbs: elementwise, O.kAdd: elementwise, O.kCopy: elementwise,
           O.kSlice: structural, O.kDomain: structural,
           O.kWhile: hlo_evaluator, O.kCustomCall: hlo_evaluator}
  for opcode, module in where.items():
    fn = reg.kernel_function(opcode)
    assert inspect.getsourcefile(fn) == inspect.getsourcefile(module), opcode
  assert reg.kernel_function(O.kParameter) is None


def test_elementwise_kernels_are_the_elementwise_module():
  ew = reg.elementwise_opcodes()
  assert O.kAdd in ew and O.kCompare in ew and O.kSelect in ew
  assert not ew & {O.kSlice, O.kWhile, O.kTuple, O.kReduce}
  for opcode in ew:
    assert inspect.getsourcefile(reg.kernel_function(opcode)) == (
        inspect.getsourcefile(elementwise))


def test_an_opcode_has_one_kernel():
  with pytest.raises(ValueError, match="second kernel for add"):
    reg.register_kernel(O.kAdd, lambda instr, x, y: x)
  with pytest.raises(ValueError, match="second kernel for slice"):
    reg.evaluator_kernel(O.kSlice)(lambda ev, instr, ops: ops[0])
  assert inspect.getsourcefile(reg.kernel_function(O.kSlice)) == (
      inspect.getsourcefile(structural))


def test_both_conventions_run():
  module = hlo_parser.parse_and_return_verified_module("""HloModule m
ENTRY e {
  p = s32[4] parameter(0)
  s = s32[2] slice(p), slice={[1:3]}
  n = s32[2] negate(s)
  ROOT t = (s32[2], s32[2]) tuple(s, n)
}""")
  s, n = hlo_evaluator.HloEvaluator().evaluate(
      module, [np.arange(4, dtype=np.int32)])
  np.testing.assert_array_equal(s, [1, 2])
  np.testing.assert_array_equal(n, [-1, -2])
  assert n.dtype == np.int32
