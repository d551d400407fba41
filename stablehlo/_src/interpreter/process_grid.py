"""The StableHLO process grid of the reference interpreter (spec sections
"Execution" / "Collective ops"): `num_replicas x num_partitions` processes
that run concurrently, one OS thread each, and meet in collectives.

A `ProcessGrid` holds what the processes share:

* rendezvous slots: every member of a process group contributes a value and
  gets everyone's values back (all_reduce, all_gather, ...). A slot is keyed
  by (collective kind, channel id, process group) plus a per-process count
  of how often that key was used, so the n-th call of each member matches
  the n-th call of the others even when a fast process already races ahead
  to the next collective with the same key;
* mailboxes: FIFO queues keyed by anything hashable (send / recv channels,
  collective_permute source -> target pairs). Posting never blocks, taking
  waits for a value;
* the infeed queue (shared by all processes, as upstream's interpreter does)
  and the outfeed records.

Nothing here can hang. Every wait is a predicate checked under one grid-wide
condition variable, and the grid knows which processes are still running:

* when every running process is waiting and no wait can be satisfied, that
  is a deadlock, reported at once with what each process waits for;
* when a process fails, `abort` releases every waiting process with a
  `CancelledError` naming the failed process;
* a wait also ends at the run's deadline (`Options.timeout_s`), or else
  after `barrier_timeout_s` seconds (default 60) as a backstop.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Hashable, Iterable, NamedTuple, Optional

import support

DEFAULT_BARRIER_TIMEOUT_S = 60.0

# Longest single sleep in a wait: a missed notification can cost at most
# this much, never a hang.
_POLL_S = 2.0


class ProcessId(NamedTuple):
  """StableHLO `process_id`: (replica_id, partition_id)."""

  replica_id: int
  partition_id: int

  def __str__(self):
    return f"({self.replica_id}, {self.partition_id})"


class DeadlockError(support.AbortedError):
  """Every running process waits for something no process will provide."""


class BarrierTimeoutError(support.DeadlineExceededError):
  """A process waited in a collective longer than the limit."""


def _fmt_group(group) -> str:
  return "[" + ", ".join(str(p) for p in group) + "]"


class _Slot:
  __slots__ = ("values", "readers")

  def __init__(self, n: int):
    self.values: dict = {}
    self.readers = n


class ProcessGrid:
  """The shared state of one `interpreter.run_parallel` (or of a plain run,
  as a 1x1 grid)."""

  def __init__(self, num_replicas: int, num_partitions: int,
               infeed: Iterable[Any] = (),
               barrier_timeout_s: Optional[float] = DEFAULT_BARRIER_TIMEOUT_S):
    if num_replicas <= 0 or num_partitions <= 0:
      raise support.InvalidArgumentError(
          f"a process grid needs at least one replica and one partition, got "
          f"{num_replicas}x{num_partitions}")
    self.num_replicas = int(num_replicas)
    self.num_partitions = int(num_partitions)
    self.barrier_timeout_s = barrier_timeout_s
    self.outfeed: list[tuple[ProcessId, tuple]] = []
    self._infeed = collections.deque(infeed)
    self._cond = threading.Condition(threading.Lock())
    self._slots: dict = {}
    self._generation: dict = {}
    self._mail: dict = collections.defaultdict(collections.deque)
    self._running: set = set()
    self._waiting: dict = {}  # pid -> (predicate, describe)
    self._aborted = False
    self.root_pid: Optional[ProcessId] = None  # the process that failed first
    self._root_error: Optional[BaseException] = None
    self._deadlock_msg: Optional[str] = None

  # --- the grid ---------------------------------------------------------------

  @property
  def num_processes(self) -> int:
    return self.num_replicas * self.num_partitions

  def process_ids(self) -> list[ProcessId]:
    """All processes, replica-major: (0, 0), (0, 1), ..., (1, 0), ..."""
    return [ProcessId(r, p) for r in range(self.num_replicas)
            for p in range(self.num_partitions)]

  def process(self, pid) -> "Process":
    return Process(ProcessId(*pid), self)

  @property
  def aborted(self) -> bool:
    return self._aborted

  # --- process groups (spec "Collective ops") ---------------------------------

  def _check_ids(self, groups, limit: int, what: str):
    for g in groups:
      for x in g:
        if not 0 <= x < limit:
          raise support.InvalidArgumentError(
              f"{what} id {x} in {[list(g) for g in groups]} is out of range "
              f"[0, {limit})")

  def cross_replica(self, replica_groups) -> list[list[ProcessId]]:
    groups = _or_all(replica_groups, self.num_replicas)
    self._check_ids(groups, self.num_replicas, "replica")
    return [[ProcessId(r, p) for r in g] for g in groups
            for p in range(self.num_partitions)]

  def cross_partition(self, partition_groups) -> list[list[ProcessId]]:
    groups = _or_all(partition_groups, self.num_partitions)
    self._check_ids(groups, self.num_partitions, "partition")
    return [[ProcessId(r, p) for p in g] for g in groups
            for r in range(self.num_replicas)]

  def cross_replica_and_partition(self, replica_groups
                                  ) -> list[list[ProcessId]]:
    groups = _or_all(replica_groups, self.num_replicas)
    self._check_ids(groups, self.num_replicas, "replica")
    return [[ProcessId(r, p) for p in range(self.num_partitions) for r in g]
            for g in groups]

  def flattened_ids(self, flattened_id_groups) -> list[list[ProcessId]]:
    groups = _or_all(flattened_id_groups, self.num_processes)
    self._check_ids(groups, self.num_processes, "flattened process")
    n = self.num_partitions
    return [[ProcessId(x // n, x % n) for x in g] for g in groups]

  # --- lifecycle --------------------------------------------------------------

  def start(self, pid: ProcessId) -> None:
    """Marks `pid` as running (call before any process thread starts, so
    that deadlock detection sees every process)."""
    with self._cond:
      self._running.add(pid)

  def finish(self, pid: ProcessId) -> None:
    """Marks `pid` as done; the others may now be deadlocked on it."""
    with self._cond:
      self._running.discard(pid)
      self._waiting.pop(pid, None)
      self._detect_deadlock()
      self._cond.notify_all()

  def abort(self, pid: Optional[ProcessId], error: BaseException) -> None:
    """Process `pid` failed with `error`: every wait now ends with a
    CancelledError. The first abort is the root cause."""
    with self._cond:
      self._abort_locked(pid, error)

  def _abort_locked(self, pid, error) -> None:
    if not self._aborted:
      self._aborted = True
      self.root_pid = pid
      self._root_error = error
    self._cond.notify_all()

  # --- waiting ----------------------------------------------------------------

  def _detect_deadlock(self) -> None:
    """Called under the lock: if every running process waits and none of the
    waits can be satisfied, aborts the grid with a deadlock report."""
    if self._aborted or not self._running:
      return
    if any(pid not in self._waiting for pid in self._running):
      return
    if any(pred() for pred, _ in self._waiting.values()):
      return
    lines = [f"process {pid} waits in {describe()}"
             for pid, (_, describe) in sorted(self._waiting.items())]
    self._deadlock_msg = ("deadlock: every running process waits for one "
                          "that will never come:\n  " + "\n  ".join(lines))
    root = min(self._waiting)
    self._abort_locked(root, DeadlockError(self._deadlock_msg))

  def _wait(self, pid: ProcessId, predicate: Callable[[], bool],
            describe: Callable[[], str], deadline: Optional[float]) -> None:
    """Blocks (the lock held) until `predicate()`; raises on abort,
    deadlock or timeout."""
    if predicate():
      return
    start = time.monotonic()
    limit = deadline
    if limit is None and self.barrier_timeout_s is not None:
      limit = start + self.barrier_timeout_s
    self._waiting[pid] = (predicate, describe)
    try:
      self._detect_deadlock()
      while True:
        if self._aborted:
          raise self._released_error(pid)
        if predicate():
          return
        now = time.monotonic()
        if limit is not None and now >= limit:
          err = BarrierTimeoutError(
              f"timed out after {now - start:.1f} s waiting in "
              f"{describe()}" + ("" if deadline is not None else
                                 " (the barrier timeout)"))
          self._abort_locked(pid, err)
          raise err
        timeout = _POLL_S if limit is None else min(_POLL_S, limit - now)
        self._cond.wait(timeout)
    finally:
      self._waiting.pop(pid, None)

  def _released_error(self, pid: ProcessId) -> BaseException:
    if pid == self.root_pid and self._deadlock_msg is not None:
      return DeadlockError(self._deadlock_msg)
    cause = self._root_error
    what = f"{type(cause).__name__}: {cause}" if cause is not None else "?"
    who = ("the run was aborted" if self.root_pid is None else
           f"process {self.root_pid} failed")
    return support.CancelledError(
        f"process {pid} stopped because {who} ({what.splitlines()[0]})")

  # --- rendezvous -------------------------------------------------------------

  def rendezvous(self, pid: ProcessId, kind: str, channel_id: int,
                 group, value: Any, deadline: Optional[float] = None,
                 where: str = "") -> dict:
    """Barrier of `group` (a list of ProcessIds that contains `pid`): each
    member contributes `value`; returns {ProcessId: value} of all members.
    """
    group = tuple(ProcessId(*g) for g in group)
    if pid not in group:
      raise support.InternalError(f"process {pid} is not in {group}")
    key = (kind, int(channel_id), group)
    with self._cond:
      if self._aborted:
        raise self._released_error(pid)
      gen = self._generation.get((pid, key), 0)
      self._generation[(pid, key)] = gen + 1
      slot_key = key + (gen,)
      slot = self._slots.get(slot_key)
      if slot is None:
        slot = self._slots[slot_key] = _Slot(len(group))
      slot.values[pid] = value
      if len(slot.values) == len(group):
        self._cond.notify_all()

      def ready():
        return len(slot.values) == len(group)

      def describe():
        missing = [p for p in group if p not in slot.values]
        return (f"{kind}{where} (channel_id {channel_id}, process group "
                f"{_fmt_group(group)}), waiting for "
                f"{_fmt_group(missing)}")

      self._wait(pid, ready, describe, deadline)
      out = dict(slot.values)
      slot.readers -= 1
      if slot.readers == 0:
        del self._slots[slot_key]
      return out

  # --- mailboxes (send / recv, collective_permute) ----------------------------

  def post(self, key: Hashable, value: Any) -> None:
    with self._cond:
      self._mail[key].append(value)
      self._cond.notify_all()

  def take(self, pid: ProcessId, key: Hashable, what: str,
           deadline: Optional[float] = None) -> Any:
    """Removes and returns the oldest value posted under `key`, waiting for
    one; `what` describes the wait in errors."""
    with self._cond:
      if self._aborted:
        raise self._released_error(pid)
      box = self._mail[key]
      self._wait(pid, lambda: bool(box), lambda: what, deadline)
      value = box.popleft()
      if not box:
        del self._mail[key]
      return value

  # --- infeed / outfeed -------------------------------------------------------

  def push_infeed(self, *entries) -> None:
    with self._cond:
      self._infeed.extend(entries)

  def pop_infeed(self) -> Any:
    with self._cond:
      if not self._infeed:
        raise support.OutOfRangeError(
            "the infeed is empty (give interpreter.run_parallel an `infeed` "
            "attribute with one function per value)")
      return self._infeed.popleft()

  def push_outfeed(self, pid: ProcessId, values) -> None:
    with self._cond:
      self.outfeed.append((pid, tuple(values)))


def _or_all(groups, n: int) -> list[list[int]]:
  """Empty groups mean one group of all ids (XLA's convention)."""
  groups = [list(g) for g in groups]
  if not groups or all(not g for g in groups):
    return [list(range(n))]
  return groups


class Process:
  """One StableHLO process: its id and its grid. Kernels find it in
  `ctx.process`."""

  __slots__ = ("id", "grid")

  def __init__(self, pid: ProcessId, grid: ProcessGrid):
    self.id = pid
    self.grid = grid

  @property
  def replica_id(self) -> int:
    return self.id.replica_id

  @property
  def partition_id(self) -> int:
    return self.id.partition_id

  def __repr__(self):
    return (f"Process{self.id} of {self.grid.num_replicas}x"
            f"{self.grid.num_partitions}")

  def find_group(self, groups) -> Optional[list[ProcessId]]:
    """The first group that contains this process, or None."""
    for g in groups:
      if self.id in g:
        return g
    return None

  def rendezvous(self, kind, channel_id, group, value, deadline=None,
                 where=""):
    return self.grid.rendezvous(self.id, kind, channel_id, group, value,
                                deadline, where)

  def post(self, key, value):
    self.grid.post(key, value)

  def take(self, key, what, deadline=None):
    return self.grid.take(self.id, key, what, deadline)
