"""Tests for HloPassFix: iterate to a fixed point, cap the iterations."""

import pytest

import support
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.pass_ import hlo_pass_fix
from xla.hlo.pass_ import hlo_pass_interface as hpi

TEXT = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
"""


class NegateUntil(hpi.HloModulePass):
  """Adds one negate to the root per run while fewer than `limit` are
  stacked (None: forever)."""

  def __init__(self, limit):
    self.limit = limit
    self.runs = 0

  @property
  def name(self):
    return "negate-until"

  def run(self, module, execution_threads=frozenset()):
    self.runs += 1
    comp = module.entry_computation
    depth, instr = 0, comp.root_instruction
    while instr.opcode == HloOpcode.kNegate:
      depth, instr = depth + 1, instr.operand(0)
    if self.limit is not None and depth >= self.limit:
      return False
    root = comp.root_instruction
    comp.set_root_instruction(comp.add_instruction(
        hi.create_unary(root.shape, HloOpcode.kNegate, root)))
    return True


def _depth(module):
  depth, instr = 0, module.entry_computation.root_instruction
  while instr.opcode == HloOpcode.kNegate:
    depth, instr = depth + 1, instr.operand(0)
  return depth


def test_runs_until_no_change():
  inner = NegateUntil(limit=4)
  fix = hlo_pass_fix.HloPassFix(inner)
  module = hp.parse_and_return_verified_module(TEXT)
  assert fix.run(module) is True
  assert _depth(module) == 4
  assert inner.runs == 4  # three changing runs, then one that changes nothing
  assert fix.iterations_run == 4
  assert fix.name == "negate-until"
  assert not fix.is_pass_pipeline()


def test_no_change_runs_once():
  inner = NegateUntil(limit=1)
  fix = hlo_pass_fix.HloPassFix(inner)
  assert fix.run(hp.parse_and_return_verified_module(TEXT)) is False
  assert inner.runs == 1


def test_cap_warns_and_stops(monkeypatch):
  warnings = []
  monkeypatch.setattr(hlo_pass_fix.log, "warning",
                      lambda msg, *args: warnings.append(msg % args))
  inner = NegateUntil(limit=None)
  fix = hlo_pass_fix.HloPassFix(inner, max_iterations=5)
  module = hp.parse_and_return_verified_module(TEXT)
  assert fix.run(module) is True
  assert inner.runs == 5
  assert _depth(module) == 6
  assert len(warnings) == 1
  assert "negate-until" in warnings[0] and "5 iterations" in warnings[0]


def test_cap_can_raise():
  fix = hlo_pass_fix.HloPassFix(NegateUntil(limit=None), max_iterations=3,
                                on_limit="error")
  with pytest.raises(support.InternalError, match="after 3 iterations"):
    fix.run(hp.parse_and_return_verified_module(TEXT))


def test_converging_exactly_at_cap_does_not_warn(monkeypatch):
  warnings = []
  monkeypatch.setattr(hlo_pass_fix.log, "warning",
                      lambda msg, *args: warnings.append(msg))
  # Needs 2 changing runs + 1 confirming run = 3 iterations.
  fix = hlo_pass_fix.HloPassFix(NegateUntil(limit=3), max_iterations=3)
  assert fix.run(hp.parse_and_return_verified_module(TEXT)) is True
  assert not warnings


@pytest.mark.parametrize("kwargs", [dict(max_iterations=0),
                                    dict(on_limit="ignore")])
def test_bad_arguments(kwargs):
  with pytest.raises(support.InvalidArgumentError):
    hlo_pass_fix.HloPassFix(NegateUntil(1), **kwargs)


def test_default_cap_is_xla_limit():
  assert hlo_pass_fix.HloPassFix(NegateUntil(1)).max_iterations == 25
