"""Running partitioned HLO on every partition, for tests.

`run_partitions(module, args_per_partition)` runs a module of
`num_partitions` partitions (one replica) with the HLO evaluator, one thread
per partition. The evaluator's kernels are extended by `partition-id` and
the collectives (all-reduce, all-gather, all-to-all, collective-permute),
which meet in the StableHLO interpreter's `process_grid` (its public API):
every member of a group contributes its operand and gets everyone's back,
so a collective inside a loop matches the same iteration on the others, and
a partition that fails or waits forever aborts the run instead of hanging.
Replica groups are read as XLA does for one replica: without a channel id
they are replica ids (every partition in a group of its own), with one they
are partition ids (`use_global_device_ids` flattens replica and partition,
the same ids here).

`check_partitioning(text, num_partitions, args)` is the test oracle: it
runs the global module, propagates shardings and partitions it, prints and
parses the result back, runs every partition on its shards of the arguments (with NaN or other junk in the
padding of uneven shards, so that a missing mask shows), reassembles the
result from the partitions' shards (checking that partitions holding the
same tile agree) and compares it with the global result.
"""

from __future__ import annotations

import threading
from typing import Optional, Sequence

import numpy as np

import support
from stablehlo.interpreter import process_grid
from xla import primitive_util
from xla.hlo.evaluator.hlo_evaluator import HloEvaluator
from xla.hlo.ir import hlo_sharding
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.parser import hlo_parser
from xla.service import hlo_verifier
from xla.service.spmd import sharding_propagation as sp
from xla.service.spmd import sharding_util as su
from xla.service.spmd import spmd_partitioner

O = HloOpcode


def _groups(instr, n: int, pid: int) -> list[int]:
  """The partitions of `pid`'s group in a collective, in group order."""
  raw = instr.attrs.get("replica_groups") or ()
  if hasattr(raw, "replica_groups"):
    raw = raw.replica_groups()
  groups = [list(g) for g in raw if len(g)]
  if instr.attrs.get("channel_id") is None:
    # Cross-replica: the groups name replicas, and there is one.
    for g in groups or [[0]]:
      if any(r != 0 for r in g):
        raise support.InvalidArgumentError(
            f"{instr.name}: replica group {g} in a program of one replica")
    return [pid]
  if not groups:
    return list(range(n))
  for g in groups:
    if pid in g:
      return g
  raise support.InvalidArgumentError(
      f"{instr.name}: partition {pid} is in none of the groups {raw}")


class PartitionEvaluator(HloEvaluator):
  """The HLO evaluator as one partition of a `ProcessGrid`."""

  def __init__(self, grid: process_grid.ProcessGrid, partition: int):
    super().__init__()
    self.grid = grid
    self.pid = process_grid.ProcessId(0, partition)
    self.n = grid.num_partitions

  def evaluate_instruction(self, instr, operands: list):
    op = instr.opcode
    if op == O.kPartitionId:
      return np.uint32(self.pid.partition_id)
    if op == O.kReplicaId:
      return np.uint32(0)
    fn = _COLLECTIVES.get(op)
    if fn is not None:
      return fn(self, instr, operands)
    return super().evaluate_instruction(instr, operands)

  def _exchange(self, instr, value, group: Sequence[int]) -> list:
    """Every member's value, in group order."""
    pids = [process_grid.ProcessId(0, p) for p in group]
    got = self.grid.rendezvous(self.pid, instr.opcode.value,
                               instr.attrs.get("channel_id") or 0, pids,
                               value, where=f" {instr.name}")
    return [got[p] for p in pids]

  def _all_reduce(self, instr, operands):
    group = _groups(instr, self.n, self.pid.partition_id)
    values = self._exchange(instr, [np.asarray(x) for x in operands], group)
    out = []
    for k in range(len(operands)):
      acc = values[0][k]
      for v in values[1:]:
        acc = self.apply(instr.to_apply, [acc, v[k]])[0]
      out.append(np.asarray(acc).astype(values[0][k].dtype))
    return out[0] if len(out) == 1 else tuple(out)

  def _all_gather(self, instr, operands):
    group = _groups(instr, self.n, self.pid.partition_id)
    (dim,) = instr.dimensions
    values = self._exchange(instr, [np.asarray(x) for x in operands], group)
    out = [np.concatenate([v[k] for v in values], axis=dim)
           for k in range(len(operands))]
    return out[0] if len(out) == 1 else tuple(out)

  def _all_to_all(self, instr, operands):
    if len(operands) != 1 or not instr.dimensions:
      raise support.UnimplementedError(
          f"Unimplemented: tuple all-to-all in the SPMD test evaluator "
          f"({instr.name})")
    group = _groups(instr, self.n, self.pid.partition_id)
    (dim,) = instr.dimensions
    x = np.asarray(operands[0])
    pieces = np.split(x, len(group), axis=dim)
    values = self._exchange(instr, pieces, group)
    me = group.index(self.pid.partition_id)
    return np.concatenate([v[me] for v in values], axis=dim)

  def _collective_permute(self, instr, operands):
    pairs = instr.attr("source_target_pairs")
    everyone = list(range(self.n))
    x = np.asarray(operands[0])
    values = self._exchange(instr, x, everyone)
    me = self.pid.partition_id
    for src, dst in pairs:
      if dst == me:
        return values[src].copy()
    return np.zeros_like(x)


_COLLECTIVES = {
    O.kAllReduce: PartitionEvaluator._all_reduce,
    O.kAllGather: PartitionEvaluator._all_gather,
    O.kAllToAll: PartitionEvaluator._all_to_all,
    O.kCollectivePermute: PartitionEvaluator._collective_permute,
}


def run_partitions(module, args_per_partition: Sequence[Sequence],
                   timeout_s: float = 120.0) -> list[list[np.ndarray]]:
  """Each partition's (flattened) results; see the module docstring."""
  n = len(args_per_partition)
  grid = process_grid.ProcessGrid(1, n, barrier_timeout_s=timeout_s)
  results: list[Optional[list]] = [None] * n
  errors: list[Optional[BaseException]] = [None] * n
  for p in range(n):
    grid.start(process_grid.ProcessId(0, p))

  def work(p: int):
    pid = process_grid.ProcessId(0, p)
    try:
      results[p] = PartitionEvaluator(grid, p).evaluate(
          module, list(args_per_partition[p]))
    except BaseException as e:  # pylint: disable=broad-except
      errors[p] = e
      grid.abort(pid, e)
    finally:
      grid.finish(pid)

  threads = [threading.Thread(target=work, args=(p,), daemon=True)
             for p in range(n)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout_s + 10)
  if grid.root_pid is not None:
    raise errors[grid.root_pid.partition_id] or support.InternalError(
        "a partition failed")
  for p, e in enumerate(errors):
    if e is not None:
      raise e
    if results[p] is None:
      raise support.DeadlineExceededError(f"partition {p} did not finish")
  return results


# -- shards of global values ---------------------------------------------------


def _junk(dtype: np.dtype):
  if np.issubdtype(dtype, np.floating) or np.issubdtype(
      dtype, np.complexfloating) or dtype.kind == "V":
    return np.nan
  if dtype == np.bool_:
    return True
  return 77


def shard_of(value: np.ndarray, sharding: HloSharding, partition: int,
             n: int) -> np.ndarray:
  """Partition `partition`'s shard of `value`: its tile, padded to the
  full tile shape with junk."""
  value = np.asarray(value)
  if sharding.is_replicated or sharding.is_manual or value.ndim == 0:
    return value.copy()
  m = su.tile_map(sharding, value.ndim, n)
  sizes = m.tile_sizes(value.shape)
  offs = m.offsets(value.shape, partition)
  tile = value[tuple(slice(o, o + t) for o, t in zip(offs, sizes))]
  out = np.full(sizes, _junk(value.dtype), dtype=value.dtype)
  out[tuple(slice(0, s) for s in tile.shape)] = tile
  return out


def assemble(shards: Sequence[np.ndarray], shape: Sequence[int],
             sharding: HloSharding, n: int, name: str = "result"
             ) -> np.ndarray:
  """The global value from every partition's shard; partitions that hold
  the same tile must agree (NaN equal to NaN)."""
  shape = tuple(shape)
  if sharding.is_replicated or len(shape) == 0:
    m = su.TileMap.replicated(len(shape), n)
  else:
    m = su.tile_map(sharding, len(shape), n)
  out = None
  seen = {}
  sizes = m.tile_sizes(shape)
  for p, shard in enumerate(shards):
    shard = np.asarray(shard)
    if out is None:
      out = np.zeros(shape, shard.dtype)
    offs = m.offsets(shape, p)
    region = tuple(slice(o, min(o + t, d))
                   for o, t, d in zip(offs, sizes, shape))
    valid = shard[tuple(slice(0, r.stop - r.start) for r in region)]
    key = m.index[p]
    if key in seen:
      np.testing.assert_array_equal(
          valid, seen[key][1],
          err_msg=f"{name}: partitions {seen[key][0]} and {p} hold tile "
          f"{key} with different values")
      continue
    seen[key] = (p, valid)
    out[region] = valid
  return out


def _random_arg(shape, rng: np.random.Generator) -> np.ndarray:
  dt = primitive_util.numpy_dtype(shape.element_type)
  dims = tuple(shape.dimensions)
  if dt == np.bool_:
    return rng.random(dims) < 0.5
  if np.issubdtype(dt, np.integer):
    return rng.integers(-5 if np.issubdtype(dt, np.signedinteger) else 0, 9,
                        size=dims).astype(dt)
  return rng.standard_normal(dims).astype(dt)


def random_args(module, seed: int = 0) -> list[np.ndarray]:
  rng = np.random.default_rng(seed)
  return [_random_arg(p.shape, rng)
          for p in module.entry_computation.parameter_instructions]


def global_evaluator() -> HloEvaluator:
  """The HLO evaluator for a global program: `Sharding` custom calls are
  annotations that pass their operand through."""
  return HloEvaluator(custom_calls={
      sp.SHARDING_TARGET: lambda instr, operands: operands[0]})


def _leaf_shardings(instr) -> list[HloSharding]:
  s = hlo_sharding.of(instr) or HloSharding.replicate()
  return [x or HloSharding.replicate() for x in sp.leaves_of(s, instr.shape)]


def check_partitioning(text_or_module, num_partitions: int,
                       args: Optional[Sequence] = None, *, seed: int = 0,
                       rtol: float = 1e-5, atol: float = 1e-5,
                       propagate: bool = True,
                       expected: Optional[Sequence[np.ndarray]] = None):
  """Partitions a module and checks it against the global program (see
  the module docstring). `expected` replaces the global run where the
  evaluator cannot run the global program (manual regions). Returns the
  partitioned module."""
  if isinstance(text_or_module, str):
    module = hlo_parser.parse_and_return_verified_module(text_or_module)
  else:
    module = text_or_module
  global_module = module.clone()
  if args is None:
    args = random_args(module, seed)
  if expected is None:
    expected = global_evaluator().evaluate(global_module, list(args))
  if propagate:
    sp.ShardingPropagation(num_partitions).run(module)
  spmd_partitioner.SpmdPartitioner(num_partitions).run(module)
  hlo_verifier.verify(module)
  # What runs is the printed module read back: the collectives and tables
  # the partitioner emits must be HLO text our parser accepts.
  module = hlo_parser.parse_and_return_verified_module(module.to_string())
  entry = module.entry_computation
  params = entry.parameter_instructions
  per_partition = []
  for p in range(num_partitions):
    per_partition.append([
        shard_of(a, _leaf_shardings(param)[0], p, num_partitions)
        for a, param in zip(args, params)])
  results = run_partitions(module, per_partition)
  root = entry.root_instruction
  leaves = sp.leaf_shapes(root.shape)
  shardings = _leaf_shardings(root)
  for k, (leaf, s) in enumerate(zip(leaves, shardings)):
    got = assemble([r[k] for r in results], expected[k].shape, s,
                   num_partitions, name=f"result {k}")
    want = np.asarray(expected[k])
    if want.dtype.kind in "fc" or want.dtype.kind == "V":
      np.testing.assert_allclose(np.asarray(got, np.float64),
                                 np.asarray(want, np.float64), rtol=rtol,
                                 atol=atol, err_msg=f"result {k}")
    else:
      np.testing.assert_array_equal(got, want, err_msg=f"result {k}")
  return module
