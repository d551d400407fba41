"""Who takes part in a collective: group modes and participant groups.

An HLO program compiled for R replicas x P partitions runs as R * P
*participants*; participant (replica r, partition p) has the flattened id
r * P + p (replica-major, as StableHLO's `flattened_ids` and XLA's global
device ids number them). A collective's `replica_groups` name ids whose
meaning depends on its *group mode* (StableHLO spec, "Collective ops";
XLA's `GetCollectiveOpGroupMode`):

  mode                          when                          ids are
  cross_replica                 no channel id                 replica ids; the
                                                              groups repeat in
                                                              every partition
  cross_partition               channel id, and the op has    partition ids;
                                no use_global_device_ids      they repeat in
                                (all-to-all, collective-      every replica
                                permute, collective-
                                broadcast)
  cross_replica_and_partition   channel id and                replica ids; a
                                use_global_device_ids=false   group holds every
                                                              partition of its
                                                              replicas
  flattened_ids                 channel id and                flattened ids
                                use_global_device_ids=true

Empty `replica_groups` mean one group of every id. `participant_groups`
expands a collective's groups into lists of flattened ids, in the order
the results use (the order of the ids in the group); `permute_pairs` does
the same for collective-permute's source -> target pairs.
"""

from __future__ import annotations

import enum
from typing import Optional, Sequence

import support
from xla import xla_data
from xla.hlo.ir.hlo_opcode import HloOpcode

O = HloOpcode


class GroupMode(enum.Enum):
  CROSS_REPLICA = "cross_replica"
  CROSS_PARTITION = "cross_partition"
  CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
  FLATTENED_IDS = "flattened_ids"


# Collectives whose HLO form has a use_global_device_ids attribute.
_HAS_GLOBAL_IDS = frozenset({O.kAllReduce, O.kAllReduceStart, O.kAllGather,
                             O.kAllGatherStart, O.kReduceScatter})


def _describe(instr) -> str:
  return f"{instr.opcode.value} {instr.name}"


def channel_id(instr) -> Optional[int]:
  value = instr.attr("channel_id") if instr.has_attr("channel_id") else None
  return int(value) if value is not None and int(value) > 0 else None


def group_mode(instr) -> GroupMode:
  """The group mode of collective `instr` (see the module docstring).

  Raises:
    support.InvalidArgumentError: use_global_device_ids without a channel
      id (XLA rejects it too).
  """
  has_channel = channel_id(instr) is not None
  global_ids = bool(instr.attr("use_global_device_ids")) if instr.has_attr(
      "use_global_device_ids") else False
  if not has_channel:
    if global_ids:
      raise support.InvalidArgumentError(
          f"{_describe(instr)}: use_global_device_ids needs a channel id")
    return GroupMode.CROSS_REPLICA
  if instr.opcode not in _HAS_GLOBAL_IDS:
    return GroupMode.CROSS_PARTITION
  if global_ids:
    return GroupMode.FLATTENED_IDS
  return GroupMode.CROSS_REPLICA_AND_PARTITION


def replica_groups(instr) -> list[list[int]]:
  """The explicit groups of `instr`'s replica_groups attribute (an iota
  list expanded); [] for none."""
  value = instr.attr("replica_groups") if instr.has_attr(
      "replica_groups") else None
  if value is None:
    return []
  if isinstance(value, xla_data.IotaReplicaGroupList):
    value = value.replica_groups()
  groups = []
  for g in value:
    ids = getattr(g, "replica_ids", g)
    groups.append([int(x) for x in ids])
  return groups


def _check_ids(instr, groups, limit: int, what: str, total: str) -> None:
  for g in groups:
    for x in g:
      if not 0 <= x < limit:
        raise support.InvalidArgumentError(
            f"{_describe(instr)}: replica group {list(g)} names {what} {x}, "
            f"outside the program's {total}")


def participant_groups(instr, num_replicas: int, num_partitions: int,
                       groups: Optional[Sequence[Sequence[int]]] = None,
                       mode: Optional[GroupMode] = None
                       ) -> list[list[int]]:
  """The groups of flattened participant ids that `instr` combines (each in
  result order), for a program of num_replicas x num_partitions.

  Raises:
    support.InvalidArgumentError: an id outside the program, or an id
      listed twice.
  """
  r_count, p_count = int(num_replicas), int(num_partitions)
  mode = group_mode(instr) if mode is None else mode
  groups = replica_groups(instr) if groups is None else [
      list(g) for g in groups]
  total = f"{r_count} replica(s) x {p_count} partition(s)"
  if not groups or all(not g for g in groups):
    n = {GroupMode.CROSS_PARTITION: p_count,
         GroupMode.FLATTENED_IDS: r_count * p_count}.get(mode, r_count)
    groups = [list(range(n))]
  if mode == GroupMode.CROSS_REPLICA:
    _check_ids(instr, groups, r_count, "replica", total)
    out = [[r * p_count + p for r in g] for p in range(p_count)
           for g in groups]
  elif mode == GroupMode.CROSS_PARTITION:
    _check_ids(instr, groups, p_count, "partition", total)
    out = [[r * p_count + p for p in g] for r in range(r_count)
           for g in groups]
  elif mode == GroupMode.CROSS_REPLICA_AND_PARTITION:
    _check_ids(instr, groups, r_count, "replica", total)
    out = [[r * p_count + p for r in g for p in range(p_count)]
           for g in groups]
  else:
    _check_ids(instr, groups, r_count * p_count, "participant", total)
    out = [list(g) for g in groups]
  seen: set[int] = set()
  for g in out:
    for x in g:
      if x in seen:
        raise support.InvalidArgumentError(
            f"{_describe(instr)}: participant {x} appears in more than one "
            f"place of the replica groups {groups} ({mode.value})")
      seen.add(x)
  return out


def permute_pairs(instr, num_replicas: int, num_partitions: int
                  ) -> list[tuple[int, int]]:
  """collective-permute's (source, target) pairs as flattened participant
  ids: replica ids repeated in every partition without a channel id,
  partition ids repeated in every replica with one.

  Raises:
    support.InvalidArgumentError: an id outside the program, or two pairs
      with one source or one target.
  """
  r_count, p_count = int(num_replicas), int(num_partitions)
  pairs = [(int(s), int(t)) for s, t in (instr.attr("source_target_pairs")
                                         or ())]
  mode = group_mode(instr)
  total = f"{r_count} replica(s) x {p_count} partition(s)"
  limit, what = ((p_count, "partition") if mode == GroupMode.CROSS_PARTITION
                 else (r_count, "replica"))
  for s, t in pairs:
    for x in (s, t):
      if not 0 <= x < limit:
        raise support.InvalidArgumentError(
            f"{_describe(instr)}: source_target_pairs ({s}, {t}) names "
            f"{what} {x}, outside the program's {total}")
  sources = [s for s, _ in pairs]
  targets = [t for _, t in pairs]
  if len(set(sources)) != len(sources) or len(set(targets)) != len(targets):
    raise support.InvalidArgumentError(
        f"{_describe(instr)}: source_target_pairs {pairs} repeat a source or "
        "a target")
  if mode == GroupMode.CROSS_PARTITION:
    return [(r * p_count + s, r * p_count + t) for r in range(r_count)
            for s, t in pairs]
  return [(s * p_count + p, t * p_count + p) for p in range(p_count)
          for s, t in pairs]
