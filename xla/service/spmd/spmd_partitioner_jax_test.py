"""The SPMD passes on programs that JAX 0.10.2 lowers in GSPMD form.

For each program of `jax_spmd_programs` (four host devices, shardings
given with `jax.jit(in_shardings=..., out_shardings=...)`, sharding
constraints and `shard_map`):

  * our parser reads the HLO text and the verifier accepts it;
  * our evaluator's global result equals JAX's own result (XLA's
    partitioned run), so the global program is understood;
  * propagated and partitioned for 4 partitions, the program gives that
    result on every partition (`spmd_testing.check_partitioning`; for
    shard_map programs, whose global form our evaluator cannot run,
    against JAX's result directly);
  * where our strategy is XLA's, the partitioned program uses the same
    collectives as XLA's (`compile().as_text()`; read as text, since XLA
    prints some replica groups in a mesh-axes form, e.g.
    `replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_1'}`, that our HLO
    parser does not read).

Skipped when jax is not installed.
"""

import re

import numpy as np
import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser
from xla.service import hlo_verifier
from xla.service.spmd import jax_spmd_programs
from xla.service.spmd import spmd_testing

pytest.importorskip("jax")

O = HloOpcode

# Programs where we partition as XLA does (same collectives). Others are
# correct but choose differently (e.g. an all-to-all where XLA
# all-gathers).
SAME_COLLECTIVES_AS_XLA = {
    "matmul", "sum_axis1", "mlp", "softmax", "transpose_reshape",
    "iota_broadcast", "fori_loop", "shard_map_psum", "shard_map_then_reduce",
}

_COLLECTIVES = {O.kAllGather, O.kAllReduce, O.kAllToAll,
                O.kCollectivePermute, O.kReduceScatter}
_COLLECTIVE_TEXT = re.compile(
    r" (all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)"
    r"(?:-start)?\(")


def _collectives(module) -> list[str]:
  return sorted(i.opcode.value for c in module.computations
                for i in c.instructions if i.opcode in _COLLECTIVES)


def _xla_collectives(text: str) -> list[str]:
  out = []
  for line in text.splitlines():
    m = _COLLECTIVE_TEXT.search(line.split("metadata=")[0])
    if m:
      out.append(m.group(1))
  return sorted(out)


@pytest.fixture(scope="module")
def programs():
  return jax_spmd_programs.programs()


def _args(p):
  return [np.asarray(a, dtype=d) for a, d in zip(p["args"], p["dtypes"])]


def _expected(p):
  return [np.asarray(e, dtype=d)
          for e, d in zip(p["expected"], p["expected_dtypes"])]


NAMES = ["matmul", "sum_axis1", "constraint", "mlp", "softmax", "argmax",
         "transpose_reshape", "slices_concat", "iota_broadcast", "uneven",
         "fori_loop", "shard_map_psum", "shard_map_then_reduce"]


def test_every_program_is_listed(programs):
  assert sorted(programs) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_jax_program_partitions_correctly(programs, name):
  p = programs[name]
  module = hlo_parser.parse_and_return_verified_module(p["text"])
  hlo_verifier.verify(module)
  args, expected = _args(p), _expected(p)
  manual = "SPMDFullToShardShape" in p["text"]
  if not manual:
    got = spmd_testing.global_evaluator().evaluate(module.clone(), args)
    for g, e in zip(got, expected):
      np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
  partitioned = spmd_testing.check_partitioning(
      module, jax_spmd_programs.NUM_DEVICES, args,
      expected=expected if manual else None, rtol=1e-4, atol=1e-5)
  xla = _xla_collectives(p["compiled"])
  assert xla or not _collectives(partitioned), "XLA's collectives not found"
  if name in SAME_COLLECTIVES_AS_XLA:
    assert _collectives(partitioned) == xla
