"""Tests for HloPassPipeline: order, verification naming the guilty pass,
disabling passes by flag, dumping after each pass."""

import os

import pytest

import support
from support import flags
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.pass_ import hlo_pass_pipeline as hpp
from xla.service import hlo_verifier
from xla.shape import Shape
from xla.xla_data import PrimitiveType as P

TEXT = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}
"""


class NegateRoot(hpi.HloModulePass):
  """Wraps the entry root in a negate; records each run in `log`."""

  def __init__(self, name, log=None):
    self._name = name
    self.log = log if log is not None else []

  @property
  def name(self):
    return self._name

  def run(self, module, execution_threads=frozenset()):
    self.log.append(self._name)
    comp = module.entry_computation
    root = comp.root_instruction
    new = comp.add_instruction(
        hi.create_unary(root.shape, HloOpcode.kNegate, root))
    comp.set_root_instruction(new)
    return True


class NoOp(hpi.HloModulePass):

  def __init__(self, name="noop", log=None):
    self._name = name
    self.log = log if log is not None else []

  @property
  def name(self):
    return self._name

  def run(self, module, execution_threads=frozenset()):
    self.log.append(self._name)
    return False


class BreakShape(hpi.HloModulePass):
  """Gives the root a wrong shape (f32[4] negate labelled f32[5])."""

  @property
  def name(self):
    return "breaker"

  def run(self, module, execution_threads=frozenset()):
    module.entry_computation.root_instruction.shape = Shape.array(
        P.F32, (5,))
    return True


def _negate_depth(module):
  depth, instr = 0, module.entry_computation.root_instruction
  while instr.opcode == HloOpcode.kNegate:
    depth, instr = depth + 1, instr.operand(0)
  return depth


def _module():
  return hp.parse_and_return_verified_module(TEXT)


def test_runs_passes_in_order_and_ors_changed():
  log = []
  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(NoOp("a", log))
  pipeline.add_pass(NegateRoot("b", log))
  pipeline.add_pass(NoOp("c", log))
  module = _module()
  assert pipeline.run(module) is True
  assert log == ["a", "b", "c"]
  assert pipeline.run_history == [("a", False), ("b", True), ("c", False)]
  assert _negate_depth(module) == 2
  assert pipeline.is_pass_pipeline()
  assert [p.name for p in pipeline.passes] == ["a", "b", "c"]


def test_unchanged_pipeline_returns_false():
  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(NoOp())
  module = _module()
  before = module.to_string()
  assert pipeline.run(module) is False
  assert module.to_string() == before


def test_add_pass_returns_pass_and_rejects_non_passes():
  pipeline = hpp.HloPassPipeline("pipe")
  p = NoOp()
  assert pipeline.add_pass(p) is p
  with pytest.raises(support.InvalidArgumentError, match="HloPassInterface"):
    pipeline.add_pass(object())


def test_verifier_error_names_the_pass():
  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(NoOp("fine"))
  pipeline.add_pass(BreakShape())
  pipeline.add_pass(NoOp("never"))
  with pytest.raises(hlo_verifier.HloVerifierError,
                     match=r"pipeline 'pipe' after pass 'breaker'") as e:
    pipeline.run(_module())
  assert "shape mismatch" in str(e.value)
  assert pipeline.run_history == [("fine", False), ("breaker", True)]


def test_broken_input_is_reported_before_first_pass():
  module = _module()
  module.entry_computation.root_instruction.shape = Shape.array(P.F32, (3,))
  pipeline = hpp.HloPassPipeline("pipe")
  log = []
  pipeline.add_pass(NoOp("a", log))
  with pytest.raises(hlo_verifier.HloVerifierError,
                     match="before its first pass"):
    pipeline.run(module)
  assert not log


def test_verify_false_skips_the_verifier():
  pipeline = hpp.HloPassPipeline("pipe", verify=False)
  pipeline.add_pass(BreakShape())
  assert pipeline.run(_module()) is True


def test_invariant_checker_runs_after_each_pass():
  seen = []

  def at_most_one_negate(module):
    seen.append(_negate_depth(module))
    if _negate_depth(module) > 1:
      raise support.FailedPreconditionError("too many negates")

  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_invariant_checker(at_most_one_negate)
  pipeline.add_pass(NoOp("a"))
  pipeline.add_pass(NegateRoot("b"))
  with pytest.raises(hlo_verifier.HloVerifierError,
                     match=r"at_most_one_negate failed .* after pass 'b'.*"
                     r"too many negates"):
    pipeline.run(_module())
  assert seen == [1, 1, 2]  # start, after a, after b


def test_disable_flag_skips_named_passes():
  log = []
  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(NegateRoot("x", log))
  pipeline.add_pass(NegateRoot("y", log))
  pipeline.add_pass(NegateRoot("z", log))
  module = _module()
  with flags.override(xla_disable_hlo_passes="x,z"):
    assert pipeline.run(module) is True
  assert log == ["y"]
  assert _negate_depth(module) == 2
  with flags.override(xla_disable_hlo_passes="y"):
    pipeline.run(module)
  assert log == ["y", "x", "z"]


def test_disabling_every_pass_leaves_module_unchanged():
  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(NegateRoot("x"))
  module = _module()
  with flags.override(xla_disable_hlo_passes=["x"]):
    assert pipeline.run(module) is False
  assert _negate_depth(module) == 1


def test_enable_only_flag():
  log = []
  pipeline = hpp.HloPassPipeline("pipe")
  for name in ("x", "y", "z"):
    pipeline.add_pass(NoOp(name, log))
  with flags.override(xla_enable_hlo_passes_only="y"):
    pipeline.run(_module())
  assert log == ["y"]


def test_nested_pipeline_is_a_pass_and_can_be_disabled():
  log = []
  inner = hpp.HloPassPipeline("inner")
  inner.add_pass(NegateRoot("i1", log))
  inner.add_pass(NegateRoot("i2", log))
  outer = hpp.HloPassPipeline("outer")
  outer.add_pass(NoOp("o1", log))
  outer.add_pass(inner)
  module = _module()
  assert outer.run(module) is True
  assert log == ["o1", "i1", "i2"]
  assert outer.run_history == [("o1", False), ("inner", True)]
  with flags.override(xla_disable_hlo_passes="inner"):
    assert outer.run(module) is False
  assert _negate_depth(module) == 3


def test_dump_after_each_pass(tmp_path):
  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(NegateRoot("neg/one"))
  pipeline.add_pass(NoOp("noop"))
  pipeline.add_pass(NegateRoot("neg2"))
  module = _module()
  out = tmp_path / "dumps"
  with flags.override(xla_dump_to=str(out)):
    pipeline.run(module)
  names = sorted(os.listdir(out))
  # '/' is not allowed in a file name: it becomes '_'.
  assert names == ["m.0000.neg_one.txt", "m.0001.noop.txt", "m.0002.neg2.txt"]
  depths = []
  for name in names:
    dumped = hp.parse_and_return_verified_module((out / name).read_text())
    depths.append(_negate_depth(dumped))
  assert depths == [2, 2, 3]
  assert (out / names[-1]).read_text() == module.to_string()
  # Numbers keep counting for the same module.
  with flags.override(xla_dump_to=str(out)):
    pipeline.run(module)
  assert "m.0005.neg2.txt" in os.listdir(out)


def test_dump_pass_regex_filters(tmp_path):
  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(NegateRoot("simplify"))
  pipeline.add_pass(NoOp("dce"))
  with flags.override(xla_dump_to=str(tmp_path),
                      xla_dump_hlo_pass_re="^simp"):
    pipeline.run(_module())
  assert os.listdir(tmp_path) == ["m.0000.simplify.txt"]


def test_no_dump_without_flag(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(NegateRoot("x"))
  pipeline.run(_module())
  assert os.listdir(tmp_path) == []


def test_dump_file_name():
  assert hpp.dump_file_name("mod", 7, "algsimp") == "mod.0007.algsimp.txt"
  assert hpp.dump_file_name("a b", 12345, "x:y") == "a_b.12345.x_y.txt"


def test_pass_errors_propagate():

  class Fails(NoOp):

    def run(self, module, execution_threads=frozenset()):
      raise support.UnimplementedError("no rule for foo")

  pipeline = hpp.HloPassPipeline("pipe")
  pipeline.add_pass(Fails("failing"))
  with pytest.raises(support.UnimplementedError, match="no rule for foo"):
    pipeline.run(_module())
