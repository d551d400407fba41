"""Tests for CPU instruction fusion: loop fusion (kLoop), reduction input
fusion (kInput), and the cases it must leave alone."""

import numpy as np
import pytest

from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser as hp
from xla.service import cpu_instruction_fusion as cif
from xla.service import hlo_verifier

O = HloOpcode

_ADD = """add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _run(text):
  module = hp.parse_and_return_verified_module(text)
  changed = cif.CpuInstructionFusion().run(module)
  hlo_verifier.verify(module)
  again = hp.parse_and_return_verified_module(module.to_string())
  assert again.to_string() == module.to_string()
  return changed, module


def _opcodes(comp):
  return sorted(i.opcode.value for i in comp.instructions)


def _fusions(comp):
  return [i for i in comp.instructions if i.opcode == O.kFusion]


_LOOP_CHAIN = """HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  q = f32[3] parameter(1)
  c = f32[] constant(2)
  bc = f32[2,3] broadcast(c), dimensions={}
  bq = f32[2,3] broadcast(q), dimensions={1}
  io = s32[2,3] iota(), iota_dimension=1
  fi = f32[2,3] convert(io)
  m1 = f32[2,3] multiply(p, bc)
  a1 = f32[2,3] add(m1, bq)
  a2 = f32[2,3] add(a1, fi)
  t = f32[3,2] transpose(a2), dimensions={1,0}
  r = f32[6] reshape(t)
  s = f32[4] slice(r), slice={[1:5]}
  ROOT n = f32[4] negate(s)
}"""


def test_loop_fusion_takes_elementwise_and_data_movement():
  changed, m = _run(_LOOP_CHAIN)
  assert changed
  entry = m.entry_computation
  assert _opcodes(entry) == ["fusion", "parameter", "parameter"]
  (fusion,) = _fusions(entry)
  assert fusion.fusion_kind == FusionKind.kLoop
  fused_ops = set(_opcodes(fusion.fused_computation))
  assert {"broadcast", "constant", "iota", "convert", "multiply", "add",
          "transpose", "reshape", "slice", "negate"} <= fused_ops


def test_reduce_input_fusion():
  changed, m = _run("HloModule m\n" + _ADD + """
ENTRY e {
  p = f32[4,8] parameter(0)
  q = f32[8] parameter(1)
  bq = f32[4,8] broadcast(q), dimensions={1}
  m1 = f32[4,8] multiply(p, bq)
  e1 = f32[4,8] exponential(m1)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(e1, z), dimensions={1}, to_apply=add_f
}""")
  assert changed
  entry = m.entry_computation
  (fusion,) = _fusions(entry)
  assert entry.root_instruction is fusion
  assert fusion.fusion_kind == FusionKind.kInput
  fused = fusion.fused_computation
  assert fused.root_instruction.opcode == O.kReduce
  assert {"broadcast", "multiply", "exponential"} <= set(_opcodes(fused))
  # The init value stays outside; it is a fusion operand.
  assert "constant" in _opcodes(entry)
  assert any(o.opcode == O.kConstant for o in fusion.operands)


def test_reduce_output_is_not_fused_into_consumer():
  changed, m = _run("HloModule m\n" + _ADD + """
ENTRY e {
  p = f32[4,8] parameter(0)
  z = f32[] constant(0)
  r = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f
  ROOT n = f32[4] negate(r)
}""")
  assert not changed
  assert "reduce" in _opcodes(m.entry_computation)


def test_dot_is_not_fused():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  q = f32[3,4] parameter(1)
  d = f32[2,4] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT n = f32[2,4] negate(d)
}""")
  assert not changed
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  q = f32[3,4] parameter(1)
  np = f32[2,3] negate(p)
  ROOT d = f32[2,4] dot(np, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
  assert not changed
  assert _opcodes(m.entry_computation) == ["dot", "negate", "parameter",
                                           "parameter"]


def test_expensive_producer_not_fused_into_broadcast():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  x = f32[8] exponential(p)
  ROOT b = f32[16,8] broadcast(x), dimensions={1}
}""")
  assert not changed
  # A cheap producer into the same broadcast is fine.
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  x = f32[8] negate(p)
  ROOT b = f32[16,8] broadcast(x), dimensions={1}
}""")
  assert changed


def test_expensive_shared_producer_stays_single():
  changed, m = _run("""HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  x = f32[8] tanh(p)
  a = f32[8] negate(x)
  b = f32[8] abs(x)
  ROOT s = f32[8] add(a, b)
}""")
  # tanh has two users inside what becomes one fusion: a, b and s fuse
  # together, and then tanh's only user is that fusion, so it fuses once.
  assert changed
  entry = m.entry_computation
  assert _opcodes(entry) == ["fusion", "parameter"]
  (fusion,) = _fusions(entry)
  assert _opcodes(fusion.fused_computation).count("tanh") == 1


def test_side_effecting_and_rng_not_fused():
  changed, m = _run("""HloModule m
ENTRY e {
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[8] rng(lo, hi), distribution=rng_uniform
  ROOT n = f32[8] negate(r)
}""")
  assert not changed


def _evaluator():
  mod = pytest.importorskip("xla.hlo.evaluator.hlo_evaluator")
  return mod.HloEvaluator()


def test_fused_and_unfused_evaluate_the_same():
  ev = _evaluator()
  rng = np.random.default_rng(0)
  args = [rng.standard_normal((2, 3)).astype(np.float32),
          rng.standard_normal((3,)).astype(np.float32)]
  unfused = hp.parse_and_return_verified_module(_LOOP_CHAIN)
  fused = hp.parse_and_return_verified_module(_LOOP_CHAIN)
  assert cif.CpuInstructionFusion().run(fused)
  want = ev.evaluate(unfused, args)
  got = ev.evaluate(fused, args)
  assert len(want) == len(got) == 1
  np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
  # And against numpy directly.
  p, q = args
  a2 = p * 2 + q[None, :] + np.arange(3, dtype=np.float32)[None, :]
  expect = -a2.T.reshape(6)[1:5]
  np.testing.assert_allclose(got[0], expect, rtol=1e-6)


def _roll_chain(n):
  """x_{k+1} = roll(x_k, 8) + x_k: each step reads x_k at three indices
  (two shifted by the slices / concatenate, one its own)."""
  lines = ["HloModule m", "ENTRY e {", "  x0 = u32[16] parameter(0)"]
  for k in range(n):
    lines += [f"  lo{k} = u32[8] slice(x{k}), slice={{[0:8]}}",
              f"  hi{k} = u32[8] slice(x{k}), slice={{[8:16]}}",
              f"  c{k} = u32[16] concatenate(hi{k}, lo{k}), dimensions={{0}}",
              f"  x{k + 1} = u32[16] add(c{k}, x{k})"]
  lines[-1] = lines[-1].replace(f"  x{n} =", f"  ROOT x{n} =")
  return "\n".join(lines + ["}"])


def _generations(fusion):
  """How often the loop emitter would generate each fused instruction:
  once per distinct index it is read at (same-index readers share)."""
  fused = fusion.fused_computation
  count = {}
  for instr in reversed(fused.make_instruction_post_order()):
    if instr is fused.root_instruction:
      count[id(instr)] = 1
      continue
    total = 0
    for u in instr.users:
      total += count[id(u)] * sum(1 for o in u.operands if o is instr)
    count[id(instr)] = total
  return count


def test_code_duplication_splits_roll_chain():
  # One fusion of the whole chain would generate x_0 3^16 times (a shared
  # value read at several indices per step); fusion stops where a producer
  # would be generated more than ALLOWED_CODE_DUPLICATION times.
  n = 16
  _, m = _run(_roll_chain(n))
  fusions = [i for i in m.entry_computation.instructions
             if i.opcode == O.kFusion]
  assert len(fusions) > 1
  for f in fusions:
    # An upper bound (same-index readers counted separately).
    worst = max(_generations(f).values())
    assert worst <= 3 * cif.ALLOWED_CODE_DUPLICATION, (f.name, worst)
  total = sum(len(list(f.fused_computation.instructions)) for f in fusions)
  assert total <= 6 * n, total


def test_same_index_sharing_does_not_split():
  # x_{k+1} = x_k ^ (x_k << 3) + x_k: every value read three times, all at
  # its own index: one fusion however long the chain.
  n = 40
  lines = ["HloModule m", "ENTRY e {", "  x0 = u32[16] parameter(0)",
           "  c = u32[] constant(3)",
           "  b = u32[16] broadcast(c), dimensions={}"]
  for k in range(n):
    lines += [f"  l{k} = u32[16] shift-left(x{k}, b)",
              f"  e{k} = u32[16] xor(x{k}, l{k})",
              f"  x{k + 1} = u32[16] add(e{k}, x{k})"]
  lines[-1] = lines[-1].replace(f"  x{n} =", f"  ROOT x{n} =")
  _, m = _run("\n".join(lines + ["}"]))
  fusions = [i for i in m.entry_computation.instructions
             if i.opcode == O.kFusion]
  assert len(fusions) == 1
  assert len(list(fusions[0].fused_computation.instructions)) == 3 * n + 3


def _shared_chain(n):
  """A chain of n cheap elementwise ops read by two reductions over
  different axes (which cannot share one fusion)."""
  lines = ["HloModule m", _ADD, "ENTRY e {",
           "  x0 = f32[8,16] parameter(0)", "  z = f32[] constant(0)"]
  for k in range(n):
    op = "add" if k % 2 else "multiply"
    lines.append(f"  x{k + 1} = f32[8,16] {op}(x{k}, x0)")
  lines += [f"  r0 = f32[16] reduce(x{n}, z), dimensions={{0}}, "
            "to_apply=add_f",
            f"  r1 = f32[8] reduce(x{n}, z), dimensions={{1}}, "
            "to_apply=add_f",
            "  ROOT t = (f32[16], f32[8]) tuple(r0, r1)", "}"]
  return "\n".join(lines)


def _elementwise_count(fusion):
  return sum(1 for i in fusion.fused_computation.instructions
             if i.opcode in (O.kAdd, O.kMultiply) and i.shape.dimensions)


def test_shared_chain_is_duplicated_up_to_the_budget(monkeypatch):
  # Each reduction would otherwise recompute the whole chain; past the
  # budget the rest of the chain is computed once, in a fusion of its own.
  monkeypatch.setattr(cif, "DUPLICATION_BUDGET", 8)
  n = 40
  _, m = _run(_shared_chain(n))
  fusions = _fusions(m.entry_computation)
  counts = sorted(_elementwise_count(f) for f in fusions)
  assert sum(counts) <= n + cif.DUPLICATION_BUDGET, counts
  assert len(fusions) == 3, counts
  # A short chain is still duplicated whole into both reductions.
  short = cif.DUPLICATION_BUDGET // 2
  _, m = _run(_shared_chain(short))
  fusions = _fusions(m.entry_computation)
  assert sorted(_elementwise_count(f) for f in fusions) == [short, short]


def test_shared_chain_is_duplicated_whole_without_a_budget(monkeypatch):
  monkeypatch.setattr(cif, "DUPLICATION_BUDGET", None)
  _, m = _run(_shared_chain(20))
  fusions = _fusions(m.entry_computation)
  assert sorted(_elementwise_count(f) for f in fusions) == [20, 20]


def test_chain_read_by_one_reduction_is_not_split():
  # The budget is for chains that sibling reductions each recompute. A
  # long chain read by one reduction and by an elementwise output (as in
  # jax.scipy.special's programs) stays whole in the reduction's fusion:
  # splitting it cost that workload 4x.
  assert cif.DUPLICATION_BUDGET is not None
  n = 40
  text = _shared_chain(n).replace(
      "  r1 = f32[8] reduce(x{0}, z), dimensions={{1}}, to_apply=add_f"
      .format(n).replace("{{", "{").replace("}}", "}"),
      f"  r1 = f32[8,16] negate(x{n})").replace(
          "(f32[16], f32[8]) tuple(r0, r1)", "(f32[16], f32[8,16]) tuple(r0, r1)")
  assert "negate" in text
  _, m = _run(text)
  fusions = _fusions(m.entry_computation)
  counts = sorted(_elementwise_count(f) for f in fusions)
  assert max(counts) >= n, counts


@pytest.mark.parametrize("budget", [None, 8])
def test_shared_chain_evaluates_the_same(monkeypatch, budget):
  monkeypatch.setattr(cif, "DUPLICATION_BUDGET", budget)
  ev = _evaluator()
  text = _shared_chain(30)
  x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
  fused = hp.parse_and_return_verified_module(text)
  assert cif.CpuInstructionFusion().run(fused)
  want = ev.evaluate(hp.parse_and_return_verified_module(text), [x])
  got = ev.evaluate(fused, [x])
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-5)


def test_refused_operands_are_not_asked_again_after_each_fusion():
  # A fusion that takes a chain of k producers, one at a time, asked
  # should_fuse again of every operand it had refused after each step:
  # O(k * refused) questions, most of the pass on unrolled PRNG code. Only
  # operands of a fused producer can change their answer; the result is
  # the same.
  refused = 40
  lines = ["HloModule m", "ENTRY e {", "  x = f32[8] parameter(0)"]
  # Parameters (never fusible) the root reads directly.
  params = [f"  prm{i} = f32[8] parameter({i + 1})" for i in range(refused)]
  lines += params
  chain = "x"
  for i in range(30):
    lines.append(f"  neg{i} = f32[8] negate({chain})")
    chain = f"neg{i}"
  total = chain
  for i in range(refused):
    lines.append(f"  sum{i} = f32[8] add({total}, prm{i})")
    total = f"sum{i}"
  lines.append(f"  ROOT r = f32[8] negate({total})")
  lines.append("}")
  text = "\n".join(lines)

  asked = []

  class Counting(cif.CpuInstructionFusion):

    def should_fuse(self, consumer, operand_index):
      asked.append(consumer.operand(operand_index))
      return super().should_fuse(consumer, operand_index)

  module = hp.parse_and_return_verified_module(text)
  assert Counting().run(module)
  hlo_verifier.verify(module)
  fusions = _fusions(module.entry_computation)
  assert len(fusions) == 1
  assert len(fusions[0].fused_computation.instructions) == 1 + 30 + 40 + 41
  # Each parameter is refused once, not once per fused producer.
  counts = {}
  for producer in asked:
    if producer.opcode == O.kParameter:
      counts[producer.name] = counts.get(producer.name, 0) + 1
  assert counts and max(counts.values()) <= 2, counts
