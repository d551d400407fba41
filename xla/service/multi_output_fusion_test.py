"""Tests for multi-output fusion: sibling and producer-consumer merges cut
operand reads; merges that would form cycles or mix loop shapes don't
happen."""

import numpy as np
import pytest

from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.service import cpu_instruction_fusion as cif
from xla.service import hlo_verifier
from xla.service import multi_output_fusion as mof

O = HloOpcode


def _parse(text):
  return hp.parse_and_return_verified_module(text)


def _run(module):
  changed = mof.MultiOutputFusion().run(module)
  hlo_verifier.verify(module)
  again = hp.parse_and_return_verified_module(module.to_string())
  assert again.to_string() == module.to_string()
  return changed


def _named(module, name):
  return module.entry_computation.get_instruction_with_name(name)


def _fusions(comp):
  return [i for i in comp.instructions if i.opcode == O.kFusion]


_SIBLINGS = """HloModule m
ENTRY e {
  p = f32[16] parameter(0)
  q = f32[16] parameter(1)
  a = f32[16] add(p, q)
  a2 = f32[16] negate(a)
  b = f32[16] multiply(p, p)
  b2 = f32[16] abs(b)
  ROOT t = (f32[16], f32[16]) tuple(a2, b2)
}"""


def test_sibling_fusion_reads_shared_operand_once():
  m = _parse(_SIBLINGS)
  assert cif.CpuInstructionFusion().run(m)
  p = _named(m, "p")
  assert mof.operand_reads(p) == 2  # two loop fusions read p
  assert _run(m)
  assert mof.operand_reads(p) == 1
  entry = m.entry_computation
  (fusion,) = _fusions(entry)
  assert fusion.shape.is_tuple() and len(fusion.shape.tuple_shapes) == 2
  assert fusion.fusion_kind == FusionKind.kLoop
  assert fusion.fused_computation.root_instruction.opcode == O.kTuple
  root = entry.root_instruction
  assert [o.opcode for o in root.operands] == [O.kGetTupleElement] * 2
  assert sorted(o.tuple_index for o in root.operands) == [0, 1]
  # Each get-tuple-element picks the right fused value.
  fused_root = fusion.fused_computation.root_instruction
  picked = [fused_root.operand(o.tuple_index).opcode for o in root.operands]
  assert picked == [O.kNegate, O.kAbs]


def test_producer_consumer_with_outside_user():
  m = _parse("""HloModule m
ENTRY e {
  p = f32[16] parameter(0)
  x = f32[16] exponential(p)
  n = f32[16] negate(x)
  ROOT t = (f32[16], f32[16]) tuple(n, x)
}""")
  x = _named(m, "x")
  assert mof.operand_reads(x) == 2  # negate and the tuple read x
  assert _run(m)
  entry = m.entry_computation
  (fusion,) = _fusions(entry)
  assert [o.name for o in fusion.operands] == ["p"]
  fused_ops = sorted(i.opcode.value
                     for i in fusion.fused_computation.instructions)
  assert fused_ops == ["exponential", "negate", "parameter", "tuple"]
  # x's value now comes out of the fusion: nothing reads a separate buffer.
  assert "exponential" not in [i.opcode.value for i in entry.instructions]
  assert all(o.opcode == O.kGetTupleElement
             for o in entry.root_instruction.operands)


def test_siblings_on_a_path_are_not_merged():
  # b reads a's result: merging a and b would make a cycle.
  m = _parse("""HloModule m
ENTRY e {
  p = f32[16] parameter(0)
  a = f32[16] negate(p)
  c = f32[16] custom-call(a), custom_call_target="foo"
  b = f32[16] add(p, c)
  ROOT t = (f32[16], f32[16]) tuple(a, b)
}""")
  assert not _run(m)


def test_different_loop_shapes_are_not_merged():
  m = _parse("""HloModule m
ENTRY e {
  p = f32[16] parameter(0)
  a = f32[16] negate(p)
  r = f32[4,4] reshape(p)
  b = f32[4,4] abs(r)
  ROOT t = (f32[16], f32[4,4]) tuple(a, b)
}""")
  assert not _run(m)


def test_scalar_shared_operand_is_not_a_reason():
  m = _parse("""HloModule m
ENTRY e {
  s = f32[] parameter(0)
  p = f32[16] parameter(1)
  q = f32[16] parameter(2)
  bs = f32[16] broadcast(s), dimensions={}
  a = f32[16] add(p, bs)
  b = f32[16] add(q, bs)
  ROOT t = (f32[16], f32[16]) tuple(a, b)
}""")
  assert cif.CpuInstructionFusion().run(m)
  assert not _run(m)


def test_side_effecting_users_are_left_alone():
  m = _parse("""HloModule m
ENTRY e {
  p = f32[16] parameter(0)
  a = f32[16] custom-call(p), custom_call_target="x", custom_call_has_side_effect=true
  b = f32[16] custom-call(p), custom_call_target="y", custom_call_has_side_effect=true
  ROOT t = (f32[16], f32[16]) tuple(a, b)
}""")
  assert not _run(m)


def test_reduce_siblings_become_input_fusion():
  m = _parse("""HloModule m
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[4,8] parameter(0)
  z = f32[] constant(0)
  r = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f
  n = f32[4,8] negate(p)
  ROOT t = (f32[4], f32[4,8]) tuple(r, n)
}""")
  p = _named(m, "p")
  assert mof.operand_reads(p) == 2
  assert _run(m)
  assert mof.operand_reads(p) == 1
  (fusion,) = _fusions(m.entry_computation)
  assert fusion.fusion_kind == FusionKind.kInput


def test_merged_module_evaluates_the_same():
  ev_mod = pytest.importorskip("xla.hlo.evaluator.hlo_evaluator")
  ev = ev_mod.HloEvaluator()
  rng = np.random.default_rng(1)
  args = [rng.standard_normal(16).astype(np.float32),
          rng.standard_normal(16).astype(np.float32)]
  base = _parse(_SIBLINGS)
  m = _parse(_SIBLINGS)
  assert cif.CpuInstructionFusion().run(m)
  assert _run(m)
  want = ev.evaluate(base, args)
  got = ev.evaluate(m, args)
  p, q = args
  np.testing.assert_allclose(want[0], -(p + q), rtol=1e-6)
  np.testing.assert_allclose(want[1], np.abs(p * p), rtol=1e-6)
  assert len(got) == 2
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-6)


def test_cost_of_a_merge_does_not_grow_with_the_module(monkeypatch):
  # n independent sibling fusion pairs (exp(-p_i), log|p_i|) each merge once.
  # A merge
  # used to scan every instruction of the module for callers of the fusion
  # computations it replaced, which made the pass quadratic (seconds on a
  # GPT training step); the number of called_computations() calls made
  # during the pass now grows linearly with n.
  def module(n):
    lines = ["HloModule m", "ENTRY e {"]
    outs = []
    for i in range(n):
      lines += [f"  p{i} = f32[16] parameter({i})",
                f"  n{i} = f32[16] negate(p{i})",
                f"  a{i} = f32[16] exponential(n{i})",
                f"  m{i} = f32[16] abs(p{i})",
                f"  b{i} = f32[16] log(m{i})"]
      outs += [f"a{i}", f"b{i}"]
    types = ", ".join(["f32[16]"] * len(outs))
    lines += [f"  ROOT t = ({types}) tuple({', '.join(outs)})", "}"]
    return _parse("\n".join(lines))

  from xla.hlo.ir import hlo_instruction
  calls = [0]
  original = hlo_instruction.HloInstruction.called_computations

  def counted(self):
    calls[0] += 1
    return original(self)

  monkeypatch.setattr(hlo_instruction.HloInstruction, "called_computations",
                      counted)
  counts = []
  for n in (10, 40):
    m = module(n)
    assert cif.CpuInstructionFusion().run(m)
    assert len(_fusions(m.entry_computation)) == 2 * n
    calls[0] = 0
    assert _run(m)
    assert len(_fusions(m.entry_computation)) == n
    counts.append(calls[0])
  # Linear growth gives about 4x for 4x the pairs; the old scan gave 16x.
  assert counts[1] <= 6 * max(counts[0], 1), counts


def test_a_reduction_does_not_fuse_into_a_consumer_of_its_result():
  # r = sum over rows, then c = p + broadcast(r) over the same [16,16] loop.
  # Fused into c's loop, r would be recomputed for every element of c.
  m = _parse("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[16,16] parameter(0)
  zero = f32[] constant(0)
  r = f32[16] reduce(p, zero), dimensions={1}, to_apply=add
  b = f32[16,16] broadcast(r), dimensions={0}
  c = f32[16,16] add(p, b)
  ROOT t = (f32[16], f32[16,16]) tuple(r, c)
}""")
  assert cif.CpuInstructionFusion().run(m)
  _run(m)
  for f in _fusions(m.entry_computation):
    ops = [i.opcode for i in f.fused_computation.instructions]
    assert not (O.kReduce in ops and O.kAdd in ops and
                O.kBroadcast in ops), f.fused_computation.to_string()


def test_token_values_are_no_siblings_to_merge():
  # A token parameter and after-all have no elements: the sibling sweep
  # passes over them (it counted elements of every non-tuple value).
  module = _parse("""HloModule m
ENTRY e {
  t = token[] parameter(1)
  a = token[] after-all(t)
  b = token[] after-all(t)
  p = f32[16] parameter(0)
  n = f32[16] negate(p)
  ROOT r = (f32[16], token[], token[]) tuple(n, a, b)
}""")
  _run(module)


def test_a_program_with_tokens_in_its_signature_compiles_and_runs():
  # XLA CPU's convention: a token is a zero-sized buffer; the executable
  # takes anything (or None) for it and returns None.
  from xla.service.cpu import cpu_testing  # pylint: disable=g-import-not-at-top
  _, exe = cpu_testing.compile_text("""HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  t = token[] parameter(1)
  n = f32[3] negate(p)
  a = token[] after-all(t)
  ROOT r = (f32[3], token[], token[]) tuple(n, a, t)
}""")
  out = exe.execute([np.arange(3, dtype=np.float32), None])
  np.testing.assert_array_equal(out[0], [0, -1, -2])
  assert out[1] is None and out[2] is None
