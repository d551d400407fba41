"""Tests for run_and_filecheck: what it demands of a pass's result."""

import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.transforms.simplifiers.pass_test_util import entry_module
from xla.hlo.transforms.simplifiers.pass_test_util import run_and_filecheck

TEXT = entry_module("""p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT r = f32[4] negate(n)""")


class DropDoubleNegate(hpi.HloComputationPass):
  """negate(negate(x)) -> x; `report` overrides the changed flag."""

  def __init__(self, report=None):
    self.report = report

  @property
  def name(self):
    return "drop-double-negate"

  def run_on_computation(self, comp, context=None):
    root = comp.root_instruction
    changed = False
    if (root.opcode == HloOpcode.kNegate and
        root.operand(0).opcode == HloOpcode.kNegate):
      comp.replace_instruction(root, root.operand(0).operand(0))
      changed = True
    return changed if self.report is None else self.report


def test_matches_and_returns_the_module():
  changed, module = run_and_filecheck(
      TEXT, DropDoubleNegate(), """CHECK: ENTRY e {
                                   CHECK-NEXT: ROOT p = f32[4]{0} parameter(0)
                                   CHECK-NEXT: }""", check_results=True)
  assert changed
  assert module.entry_computation.root_instruction.name == "p"


def test_mismatch_shows_the_module():
  with pytest.raises(AssertionError, match="(?s)CHECK.*negate.*ROOT p"):
    run_and_filecheck(TEXT, DropDoubleNegate(), "CHECK: negate")


def test_expected_change_not_reported():
  with pytest.raises(AssertionError, match="reported no change"):
    run_and_filecheck(TEXT, DropDoubleNegate(report=False), "CHECK: ROOT p")


def test_none_means_unchanged():
  untouched = entry_module("""p = f32[4] parameter(0)
  ROOT r = f32[4] negate(p)""")
  changed, _ = run_and_filecheck(untouched, DropDoubleNegate(), None)
  assert not changed
  with pytest.raises(AssertionError, match="where none was expected"):
    run_and_filecheck(TEXT, DropDoubleNegate(), None)
  # A silent change (reported as none) is caught by the printed text.
  with pytest.raises(AssertionError, match="reported no change"):
    run_and_filecheck(TEXT, DropDoubleNegate(report=False), None)
