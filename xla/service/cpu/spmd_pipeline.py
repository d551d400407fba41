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
  compute the wrong thing.
"""

from __future__ import annotations

import importlib
from typing import Optional

import support
from xla.hlo.ir import hlo_sharding

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


def partition_if_sharded(module) -> bool:
  """Partitions `module` in place when it is a global program for more
  than one partition (see the module docstring); returns whether it did.

  Raises:
    support.UnimplementedError: a global program and no partitioner.
  """
  config = getattr(module, "config", None)
  partitions = int(getattr(config, "num_partitions", 1) or 1)
  if partitions <= 1:
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
  propagation(num_partitions=partitions).run(module)
  partitioner(num_partitions=partitions).run(module)
  return True
