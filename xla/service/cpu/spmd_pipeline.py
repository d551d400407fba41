"""The CPU compiler's SPMD partitioning hook.

XLA's CPU compiler partitions a program compiled for more than one
partition before its own passes (cpu_compiler.cc: sharding propagation,
then the SPMD partitioner). Here the same step is `partition_if_sharded`,
called by `cpu_compiler.compile_artifact` on its copy of the module:

* one partition, or a module without shardings (or only replicated ones):
  nothing to do. A program already written per device (HLO with
  collectives, replica-id / partition-id, and no shardings) runs as it is,
  one instance per participant;
* more than one partition and shardings: the module is a global program.
  It is partitioned with `ShardingPropagation` then `SpmdPartitioner` from
  the package `xla.service.spmd` (the names exported by the package, else
  by its modules `sharding_propagation` / `spmd_partitioner`). Where they
  cannot be imported the compile fails with UNIMPLEMENTED, saying that
  partitioning is not available: a global program run per device would
  compute the wrong thing. `entry_shardings` then says how the partitioned
  program's parameters and outputs are split (the compiler keeps it with
  the executable, for PJRT's parameter / output shardings).

A partially manual sharding that splits no data (only a manual subgroup
and replicated devices: shard_map manual on some mesh axes, whose
operands and results are not split over the others) is taken as manual
on every device before partitioning (`manual_where_unsplit`): each device
along the other axes then computes the same, as the partially manual
program does. Partially manual shardings that split data stay
UNIMPLEMENTED in the partitioner.

For one partition, the SPMD custom calls a program lowered for one device
may still carry (`Sharding`, and the manual-shape conversions, which are
the identity there) are removed, as XLA's ShardingRemover does: they are
annotations, not computations.
"""

from __future__ import annotations

import importlib
from typing import Optional

import support
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir import hlo_sharding
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface

# Custom calls of a GSPMD program (jax shard_map / with_sharding_constraint)
# that only the partitioner understands.
SPMD_CUSTOM_CALLS = frozenset({"Sharding", "SPMDFullToShardShape",
                               "SPMDShardToFullShape"})
# A Shardy program exported to HLO (what jax's `compiler_ir("hlo")` gives
# by default) keeps its shardings in frontend attributes and custom calls
# whose names start with this.
SDY_PREFIX = "xla.sdy."

_PACKAGE = "xla.service.spmd"


def _replicated(sharding) -> bool:
  if isinstance(sharding, hlo_sharding.HloSharding):
    return sharding.is_replicated
  try:
    return hlo_sharding.HloSharding.parse(str(sharding)).is_replicated
  except support.XlaError:
    return False  # Whatever it is, the partitioner must see it.


def _sdy_splits(text: str) -> bool:
  """Whether a Shardy attribute's text names a mesh axis (a dimension
  sharded over it, or manual axes); `[{}, {}]` is replicated."""
  return '{"' in text.replace(" ", "")


def sharded_instructions(module) -> list:
  """The instructions that make `module` a global program: those with a
  sharding that is not replicated everywhere, the SPMD custom calls, and
  the Shardy custom calls and frontend attributes that split a value."""
  out = []
  for comp in module.computations:
    for instr in comp.instructions:
      if instr.sharding is not None and not _replicated(instr.sharding):
        out.append(instr)
      elif (instr.opcode.value == "custom-call" and
            (instr.custom_call_target in SPMD_CUSTOM_CALLS or
             (instr.custom_call_target or "").startswith(SDY_PREFIX))):
        out.append(instr)
      elif any(k.startswith(SDY_PREFIX) and _sdy_splits(str(v))
               for k, v in (instr.frontend_attributes or {}).items()):
        out.append(instr)
  return out


def _find(name: str) -> Optional[type]:
  """`name` from the partitioner package, or from its module of that
  pass; None if not importable."""
  try:
    package = importlib.import_module(_PACKAGE)
  except ImportError:
    return None
  found = getattr(package, name, None)
  if found is not None:
    return found
  module = {"ShardingPropagation": "sharding_propagation",
            "SpmdPartitioner": "spmd_partitioner"}[name]
  try:
    return getattr(importlib.import_module(f"{_PACKAGE}.{module}"), name,
                   None)
  except ImportError:
    return None


def remove_spmd_custom_calls(module) -> int:
  """Replaces the SPMD custom calls of a one-partition program by their
  operands (see the module docstring); returns how many."""
  found = [i for c in module.computations for i in c.instructions
           if i.opcode.value == "custom-call" and
           i.custom_call_target in SPMD_CUSTOM_CALLS]
  removed = 0
  for instr in found:
    if instr.operand_count != 1 or (
        instr.operand(0).shape.dimensions != instr.shape.dimensions):
      continue
    comp = instr.parent
    instr.replace_all_uses_with(instr.operand(0))
    comp.remove_instruction(instr)
    removed += 1
  return removed


def _unsplit_manual(s) -> bool:
  """A partially manual leaf sharding that splits no data dimension."""
  if s.is_tuple or not s.is_tiled or hlo_sharding.OpShardingType.MANUAL not in (
      s.subgroup_types):
    return False
  dims = s.tile_assignment.dimensions
  return all(d == 1 for d in dims[:s.tiled_data_rank])


def manual_where_unsplit(module) -> int:
  """Makes partially manual shardings that split no data `{manual}` (see
  the module docstring); returns how many instructions changed."""
  changed = 0
  for comp in module.computations:
    for instr in comp.instructions:
      raw = instr.sharding
      if raw is None or "manual" not in str(raw) or (
          "last_tile_dims" not in str(raw)):
        continue
      s = hlo_sharding.of(instr)
      leaves = s.tuple_elements if s.is_tuple else (s,)
      if not any(_unsplit_manual(x) for x in leaves):
        continue
      manual = hlo_sharding.HloSharding.manual()
      leaves = [manual if _unsplit_manual(x) else x for x in leaves]
      new = (hlo_sharding.HloSharding.tuple_sharding(leaves) if s.is_tuple
             else leaves[0])
      instr.sharding = type(raw)(str(new))
      changed += 1
  return changed


def entry_shardings(module) -> dict:
  """{"parameters": [...], "outputs": [...]}: the HLO sharding text of each
  entry parameter and of each leaf of the entry root of a partitioned
  module (replicated where one has none)."""
  entry = module.entry_computation

  def of(instr):
    s = hlo_sharding.of(instr)
    return s if s is not None else hlo_sharding.HloSharding.replicate()

  params = [str(of(p)) for p in entry.parameter_instructions]
  root = entry.root_instruction
  s = of(root)
  if root.shape.is_tuple():
    leaves = (s.tuple_elements if s.is_tuple else
              (s,) * len(root.shape.tuple_shapes))
  else:
    leaves = (s.extract_single_sharding() or s,) if s.is_tuple else (s,)
  return {"parameters": params, "outputs": [str(x) for x in leaves]}


class SpmdPartitioning(hlo_pass_interface.HloModulePass):
  """`partition_if_sharded` as a pass, for tools that run passes by name
  (hlo_opt's "spmd-partitioning"): the number of partitions is the
  module's (`num_partitions=N` in the HLO text header)."""

  @property
  def name(self) -> str:
    return "cpu-spmd-partitioning"

  def run(self, module, execution_threads=frozenset()) -> bool:
    del execution_threads
    return partition_if_sharded(module)


def partition_if_sharded(module) -> bool:
  """Partitions `module` in place when it is a global program for more
  than one partition (see the module docstring); returns whether it did.

  Raises:
    support.UnimplementedError: a global program and no partitioner.
  """
  config = getattr(module, "config", None)
  partitions = int(getattr(config, "num_partitions", 1) or 1)
  if partitions <= 1:
    if int(getattr(config, "replica_count", 1) or 1) <= 1:
      remove_spmd_custom_calls(module)
    return False
  sharded = sharded_instructions(module)
  if not sharded:
    return False
  # -- SPMD partitioning hook: xla.service.spmd's passes ----------------------
  propagation = _find("ShardingPropagation")
  partitioner = _find("SpmdPartitioner")
  if propagation is None or partitioner is None:
    names = ", ".join(i.name for i in sharded[:3])
    raise support.UnimplementedError(
        f"module {module.name} is a global program with shardings ({names}"
        f"{', ...' if len(sharded) > 3 else ''}) for {partitions} "
        f"partitions, and SPMD partitioning is not available (the "
        f"{_PACKAGE} passes ShardingPropagation and SpmdPartitioner cannot "
        "be imported); compile a per-device program instead")
  manual_where_unsplit(module)
  propagation(num_partitions=partitions).run(module)
  root_sharding = hlo_sharding.of(module.entry_computation.root_instruction)
  partitioner(num_partitions=partitions).run(module)
  _keep_root_sharding(module, root_sharding)
  return True


def _keep_root_sharding(module, sharding) -> None:
  """The partitioned entry's root says how the outputs are split
  (`entry_shardings`), except a root that is a parameter (a program whose
  manual computation returns its operand's shard as it is): it keeps the
  parameter's sharding, so a copy carries the output's."""
  entry = module.entry_computation
  root = entry.root_instruction
  if (sharding is None or root.opcode != HloOpcode.kParameter or
      hlo_sharding.of(root) == sharding):
    return
  copy = hi.create(HloOpcode.kCopy, root.shape, (root,))
  copy.sharding = hlo_attrs.RawText(str(sharding))
  entry.add_instruction(copy)
  entry.set_root_instruction(copy)
