"""Tests for computations_to_run and the HloComputationPass base."""

from xla.hlo.parser import hlo_parser as hp
from xla.hlo.pass_ import hlo_pass_interface as hpi

TEXT = """HloModule m
fused {
  a = f32[4] parameter(0)
  ROOT n = f32[4] negate(a)
}
side {
  b = f32[4] parameter(0)
  ROOT n = f32[4] negate(b)
}, execution_thread="other"
ENTRY e {
  p = f32[4] parameter(0)
  f = f32[4] fusion(p), kind=kLoop, calls=fused
  ROOT c = f32[4] call(f), to_apply=side
}
"""


class Recorder(hpi.HloComputationPass):
  """Records the computations it visits and the context it is handed."""

  def __init__(self, changes=(), skip_fusion=True):
    self.seen = []
    self.contexts = []
    self.finished = []
    self.changes = set(changes)
    self.skip_fusion_computations = skip_fusion

  @property
  def name(self):
    return "recorder"

  def module_context(self, module):
    return {"module": module.name}

  def run_on_computation(self, comp, context=None):
    self.seen.append(comp.name)
    self.contexts.append(context)
    return comp.name in self.changes

  def finish_module(self, module, execution_threads, changed):
    self.finished.append(changed)
    return changed


def _module():
  return hp.parse_and_return_verified_module(TEXT)


def test_skips_fusion_computations_by_default_callees_first():
  p = Recorder()
  assert not p.run(_module())
  assert p.seen == ["side", "e"]
  assert p.contexts == [{"module": "m"}] * 2
  assert p.finished == [False]


def test_fusion_computations_on_request():
  p = Recorder(skip_fusion=False)
  p.run(_module())
  assert p.seen == ["fused", "side", "e"]


def test_execution_threads_filter():
  p = Recorder()
  p.run(_module(), frozenset({"main"}))
  assert p.seen == ["e"]
  p = Recorder()
  p.run(_module(), frozenset({"other"}))
  assert p.seen == ["side"]


def test_changed_is_the_or_of_the_computations():
  p = Recorder(changes={"side"})
  assert p.run(_module())
  assert p.finished == [True]


def test_computations_to_run_order_and_threads():
  module = _module()
  assert [c.name for c in hpi.computations_to_run(module)] == [
      "fused", "side", "e"]
  assert [c.name for c in hpi.computations_to_run(module, {"other"})] == [
      "side"]
