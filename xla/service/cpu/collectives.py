"""Collectives between the participants of one execution, in one process.

A program compiled for R replicas x P partitions (more than one
participant) runs one *instance* per participant, concurrently (one thread
each: `run_participants`, or the caller's own threads, as the PJRT plugin's
device workers). The instances of one execution share a
`CollectiveExecution`, the rendezvous (XLA's `Rendezvous`, keyed by the
execution): each instance runs with a `Participant` of it in its execution
state, and every collective thunk meets the other members of its group
there.

A collective call is two barriers around the data movement:

  1. *arrive*: each member publishes numpy views of its operand and result
     buffers (no copy) and waits for the others;
  2. each member computes from the others' operand views: its own results
     (all-gather, reduce-scatter, all-to-all, collective-permute,
     collective-broadcast), or, for all-reduce, one slice of the reduction
     that it writes into every member's result (the work is split among the
     members; every slice is reduced in group order, so all members get
     bit-identical results);
  3. *depart*: each member waits until every member is done, so no buffer
     is reused or freed while another member still reads or writes it.

A result buffer that shares memory with an operand of its member (buffer
assignment may update in place) is written only after the depart barrier,
from a temporary; for all-reduce, slices are written directly when every
member's results are disjoint from its operands or exactly its in-place
operands.

Nothing waits forever: a wait ends with DEADLINE_EXCEEDED after
`timeout_s` (naming the collective and the participants that did not
come), at once with CANCELLED when another participant failed (naming it
and its error), and at once with INTERNAL when a participant it waits for
has already finished its program (the instances took different paths).
The timeout counts from when the last of the awaited participants began
its instance (`process`): a runtime that queues instances behind other
work (the PJRT plugin's device workers) starts them late, and that is no
failure; a participant that has not begun at all is given
`start_timeout_s`.

Reductions run on numpy ufuncs for the common computations (add,
multiply, minimum, maximum, and, or, xor over numpy's own dtypes), and
otherwise through a native *combiner* kernel compiled from the reduction
computation (collective_emitter.py), two arrays at a time.

An execution whose participants run in several processes (each process
runs its own devices' instances) is told so by `span_processes`; its
collectives whose groups cross processes then run hierarchically, through
this process's rendezvous and one exchange per process (cross_process.py,
over MPI: mpi_transport.py).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

import support
from xla.service.cpu import cross_process
from xla.service.cpu import thunk as thunk_lib

# Seconds a participant waits in one barrier for participants that are
# running before the execution fails with DEADLINE_EXCEEDED.
DEFAULT_TIMEOUT_S = 60.0
# Seconds it waits for a participant whose instance has not begun.
DEFAULT_START_TIMEOUT_S = 600.0
# Longest single sleep in a wait (a lost wake-up costs at most this).
_POLL_S = 1.0
# All-reduce slices start at multiples of this many bytes (no two members
# write one cache line).
_SLICE_ALIGN = 64
# A reduction is folded and copied out in blocks of this many bytes, which
# stay in the core's L2 cache between the reads that fold them and the
# writes that copy them out.
_BLOCK_BYTES = 1 << 18

_RUN_IDS = itertools.count(1)


def participant_name(flat: int, num_partitions: int) -> str:
  return (f"participant {flat} (replica {flat // num_partitions}, "
          f"partition {flat % num_partitions})")


class _Slot:
  """One rendezvous of one group: the members' published values."""

  __slots__ = ("values", "present", "arrived", "left", "departed", "size")

  def __init__(self, size: int):
    self.values: list = [None] * size
    self.present = [False] * size
    self.arrived = 0
    self.left = [False] * size
    self.departed = 0
    self.size = size


class CollectiveExecution:
  """The rendezvous shared by the participants of one execution.

  The lifecycle calls take a process id (replica, partition), as the
  StableHLO interpreter's process grid does: `start` every participant
  before any runs, `process` gives its `Participant`, `finish` when its
  instance returned, `abort` when it failed (every wait then ends).
  """

  def __init__(self, num_replicas: int, num_partitions: int, *,
               timeout_s: Optional[float] = None,
               start_timeout_s: Optional[float] = None):
    if num_replicas < 1 or num_partitions < 1:
      raise support.InvalidArgumentError(
          f"an execution needs at least one replica and one partition, got "
          f"{num_replicas} x {num_partitions}")
    self.num_replicas = int(num_replicas)
    self.num_partitions = int(num_partitions)
    self.timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    self.start_timeout_s = (DEFAULT_START_TIMEOUT_S if start_timeout_s is None
                            else start_timeout_s)
    self.run_id = next(_RUN_IDS)
    self._cond = threading.Condition(threading.Lock())
    self._slots: dict = {}
    self._started: set[int] = set()
    self._finished: set[int] = set()
    self._began: dict[int, float] = {}  # flattened id -> when it began
    self._error: Optional[BaseException] = None
    self._failed: Optional[int] = None
    # Set by span_processes: the other processes' participants.
    self.cross: Optional[cross_process.CrossProcess] = None

  @property
  def num_participants(self) -> int:
    return self.num_replicas * self.num_partitions

  def flat_id(self, pid) -> int:
    replica, partition = (int(x) for x in pid)
    if not (0 <= replica < self.num_replicas and
            0 <= partition < self.num_partitions):
      raise support.InvalidArgumentError(
          f"(replica {replica}, partition {partition}) is not a participant "
          f"of an execution of {self.num_replicas} replica(s) x "
          f"{self.num_partitions} partition(s)")
    return replica * self.num_partitions + partition

  def name(self, flat: int) -> str:
    return participant_name(flat, self.num_partitions)

  def span_processes(self, processes: Sequence[int], process_index: int,
                     mpi_ranks: Optional[Sequence[Optional[int]]] = None,
                     timeout_s: float = DEFAULT_START_TIMEOUT_S,
                     transport: Optional[cross_process.Transport] = None
                     ) -> None:
    """Says that participant f (flattened id) runs in process
    `processes[f]`, and this is process `process_index`: only its
    participants are started here. The other processes are reached through
    `transport`, by default MPI (`mpi_ranks[p]`: process p's rank in the
    MPI job, None where no MPI launcher started it); a cross-process wait
    ends after `timeout_s`. Call before any `start`.

    Raises:
      support.FailedPreconditionError: MPI cannot reach the processes
        (mpi4py missing, processes not started by an MPI launcher), or an
        earlier execution over these processes failed.
    """
    if transport is None:
      from xla.service.cpu import mpi_transport  # pylint: disable=g-import-not-at-top
      transport = mpi_transport.transport(process_index, mpi_ranks)
    transport.check_usable(tuple(sorted(set(processes))))
    self.cross = cross_process.CrossProcess(self, processes, process_index,
                                            transport, timeout_s)

  # -- lifecycle -------------------------------------------------------------

  def start(self, pid) -> None:
    flat = self.flat_id(pid)
    with self._cond:
      self._started.add(flat)
    if self.cross is not None:
      self.cross.started()

  def process(self, pid) -> "Participant":
    """The participant `pid`, whose instance begins now."""
    flat = self.flat_id(pid)
    with self._cond:
      self._began.setdefault(flat, time.monotonic())
      self._cond.notify_all()
    return Participant(self, flat)

  def finish(self, pid) -> None:
    flat = self.flat_id(pid)
    with self._cond:
      self._finished.add(flat)
      self._cond.notify_all()
    if self.cross is not None:
      self.cross.ended(flat, None)

  def abort(self, pid, error: BaseException) -> None:
    """Participant `pid` (None: the caller) failed with `error`; the first
    failure is the one every released wait reports."""
    flat = None if pid is None else self.flat_id(pid)
    with self._cond:
      self._abort_locked(flat, error)
    if self.cross is not None:
      self.cross.ended(flat, error)

  def _abort_locked(self, flat: Optional[int], error: BaseException) -> None:
    if self._error is None:
      self._error = error
      self._failed = flat
    if flat is not None:
      self._finished.add(flat)
    self._cond.notify_all()

  @property
  def error(self) -> Optional[BaseException]:
    return self._error

  def _released(self, me: int, what: str) -> support.XlaError:
    cause = self._error
    text = f"{type(cause).__name__}: {cause}".splitlines()[0]
    who = ("the execution was aborted" if self._failed is None else
           f"{self.name(self._failed)} failed")
    return support.CancelledError(
        f"{self.name(me)} stopped in {what} because {who} ({text})")

  # -- rendezvous ------------------------------------------------------------

  def _wait(self, me: int, ready: Callable[[], bool],
            missing: Callable[[], list[int]], what: str,
            timeout_s: Optional[float] = None) -> None:
    """Waits (the lock held) until `ready()`; raises on abort, on a
    missing member that already finished, or at the timeout (`timeout_s`,
    else the execution's)."""
    timeout_s = self.timeout_s if timeout_s is None else timeout_s
    if ready():
      return
    start = time.monotonic()
    while True:
      if self._error is not None:
        raise self._released(me, what)
      if ready():
        return
      gone = [m for m in missing() if m in self._finished]
      if gone:
        err = support.InternalError(
            f"{what}: {', '.join(self.name(m) for m in gone)} finished its "
            f"program without joining (the participants of execution "
            f"{self.run_id} took different paths)")
        self._abort_locked(me, err)
        raise err
      now = time.monotonic()
      absent = missing()
      idle = [m for m in absent if m not in self._began]
      if idle:
        deadline = start + self.start_timeout_s
      else:
        deadline = max([start] + [self._began[m] for m in absent]
                       ) + timeout_s
      if now >= deadline:
        names = ", ".join(self.name(m) for m in absent)
        err = support.DeadlineExceededError(
            f"{what}: {self.name(me)} waited "
            f"{now - start:.3g} s for {names}" +
            (" (never began its instance)" if idle else "") +
            f" (execution {self.run_id})")
        self._abort_locked(me, err)
        raise err
      self._cond.wait(min(_POLL_S, deadline - now))

  def arrive(self, me: int, key, group: Sequence[int], rank: int, value,
             what: str) -> tuple[_Slot, list]:
    """Publishes `value` as member `rank` of `group` (flattened ids) and
    waits for every member; returns the slot (for `depart`) and the
    members' values in group order."""
    size = len(group)
    with self._cond:
      if self._error is not None:
        raise self._released(me, what)
      slot = self._slots.get(key)
      if slot is None:
        slot = self._slots[key] = _Slot(size)
      slot.values[rank] = value
      slot.present[rank] = True
      slot.arrived += 1
      if slot.arrived == size:
        self._cond.notify_all()
        return slot, slot.values
      self._wait(me, lambda: slot.arrived == size,
                 lambda: [m for k, m in enumerate(group)
                          if not slot.present[k]], what)
      return slot, slot.values

  def depart(self, me: int, key, slot: _Slot, group: Sequence[int],
             rank: int, what: str, timeout_s: Optional[float] = None
             ) -> None:
    """Waits until every member of the rendezvous `slot` departed (for
    `timeout_s`, else the execution's timeout)."""
    size = slot.size
    with self._cond:
      slot.left[rank] = True
      slot.departed += 1
      if slot.departed == size:
        self._slots.pop(key, None)
        self._cond.notify_all()
        return
      self._wait(me, lambda: slot.departed == size,
                 lambda: [m for k, m in enumerate(group) if not slot.left[k]],
                 what + " (waiting for the other members to finish it)",
                 timeout_s)


class Participant:
  """One instance's identity in its execution, and its collective calls'
  generation counters (touched by its own thread only)."""

  __slots__ = ("execution", "flat", "replica", "partition", "_generation")

  def __init__(self, execution: CollectiveExecution, flat: int):
    self.execution = execution
    self.flat = flat
    self.replica = flat // execution.num_partitions
    self.partition = flat % execution.num_partitions
    self._generation: dict = {}

  def __repr__(self):
    return (f"Participant({self.execution.name(self.flat)} of "
            f"{self.execution.num_replicas}x"
            f"{self.execution.num_partitions})")

  def next_key(self, call_key) -> tuple:
    """A key for this participant's next call of `call_key`: the n-th call
    of each member meets the n-th call of the others (loops)."""
    n = self._generation.get(call_key, 0)
    self._generation[call_key] = n + 1
    return call_key + (n,)


class ParticipantState(thunk_lib.ExecutionState):
  """The execution state of one participant's instance."""

  __slots__ = ("participant",)

  def __init__(self, table, custom_calls, pool, participant: Participant,
               table_addr: Optional[int] = None):
    super().__init__(table, custom_calls, pool, table_addr)
    self.participant = participant


# -- the collective thunk --------------------------------------------------------

_UFUNCS = {"add": np.add, "multiply": np.multiply, "minimum": np.minimum,
           "maximum": np.maximum, "and": np.bitwise_and,
           "or": np.bitwise_or, "xor": np.bitwise_xor}


def _span(arr: np.ndarray) -> tuple[int, int]:
  start = arr.__array_interface__["data"][0] if arr.size else 0
  return start, start + arr.nbytes


def _overlaps(a: np.ndarray, b: np.ndarray) -> bool:
  if not a.size or not b.size:
    return False
  a0, a1 = _span(a)
  b0, b1 = _span(b)
  return a0 < b1 and b0 < a1


def _disjoint(outs: Sequence[np.ndarray], ins: Sequence[np.ndarray],
              in_place_ok: bool = False) -> bool:
  """Whether every result is disjoint from every operand (or, with
  `in_place_ok`, exactly the operand of its own index)."""
  for i, out in enumerate(outs):
    for j, x in enumerate(ins):
      if not _overlaps(out, x):
        continue
      if (in_place_ok and i == j and _span(out) == _span(x) and
          out.dtype == x.dtype):
        continue
      return False
  return True


def _slice_bounds(count: int, itemsize: int, parts: int, k: int
                  ) -> tuple[int, int]:
  """Elements [begin, end) of part k of `count` split `parts` ways at
  cache-line multiples."""
  step = max(1, _SLICE_ALIGN // max(1, itemsize))
  blocks = -(-count // step)
  return (min(count, blocks * k // parts * step),
          min(count, blocks * (k + 1) // parts * step))


class CollectiveThunk(thunk_lib.Thunk):
  """A collective, replica-id or partition-id of a multi-participant
  program. `config` is the plan's JSON entry (collective_emitter.py);
  `operands` / `results` are LeafSpecs of the array leaves."""

  def __init__(self, name: str, op: str, config: dict, operands, results,
               combiner_address: int = 0):
    self.name = name
    self.op = op
    self.config = config
    self.operands = list(operands)
    self.results = list(results)
    self.what = f"{op} '{name}'"
    self.call_key = (id(self),)
    self.groups = [list(g) for g in config.get("groups", ())]
    # Flattened id -> (group index, rank).
    self.member_of: dict[int, tuple[int, int]] = {}
    for gi, g in enumerate(self.groups):
      for rank, x in enumerate(g):
        self.member_of[x] = (gi, rank)
    self.source_of = {int(t): int(s) for s, t in config.get("pairs", ())}
    self.dim = config.get("dim")
    reducer = config.get("reduce")
    self.ufunc = _UFUNCS.get(reducer) if reducer else None
    self.combiner = (thunk_lib.KERNEL_CFUNC(combiner_address)
                     if combiner_address else None)
    self._run = getattr(self, "_" + op.replace("-", "_"))

  # -- helpers (the cross-process path uses them too) --------------------------

  def buffer_views(self, specs, state) -> list[np.ndarray]:
    """Arrays over the buffers of `specs` (operands or results) in `state`."""
    return [thunk_lib.array_view(state.address(s.slot), s.dtype, s.dims)
            for s in specs]

  def _participant(self, state) -> Participant:
    p = getattr(state, "participant", None)
    if p is None:
      raise support.InvalidArgumentError(
          f"{self.what} needs the participants of a multi-device "
          f"execution: run the program with CpuExecutable.execute_spmd "
          "(or pass each instance its participant)")
    return p

  def _group(self, p: Participant) -> tuple[int, list[int], int]:
    member = self.member_of.get(p.flat)
    if member is None:
      raise support.InvalidArgumentError(
          f"{self.what}: {p.execution.name(p.flat)} is in none of its "
          f"groups {self.groups}")
    gi, rank = member
    return gi, self.groups[gi], rank

  def reduce(self, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The reduction of same-shaped 1-D arrays, in their order."""
    acc = np.array(arrays[0], copy=True)
    if len(arrays) == 1 or not acc.size:
      return acc
    if self.ufunc is not None:
      for x in arrays[1:]:
        self.ufunc(acc, x, out=acc)
      return acc
    table = (ctypes.c_uint64 * 3)()
    address = acc.__array_interface__["data"][0]
    table[0] = table[2] = address
    for x in arrays[1:]:
      table[1] = x.__array_interface__["data"][0]
      self.combiner(ctypes.addressof(table), 0, acc.size)
    return acc

  def reduce_into(self, arrays: Sequence[np.ndarray],
                  dests: Sequence[np.ndarray]) -> None:
    """Writes the reduction of same-shaped 1-D `arrays` (in their order)
    into every array of `dests`. A dest may be the array of its own index
    (an in-place member), no other.

    With a ufunc this goes block by block: each block of the reduction is
    folded in `dests[0]` while it stays in cache and then copied into the
    other dests, so memory sees each operand read once and each result
    written once, and nothing is allocated (a 64 MiB all-reduce of four
    devices ran at 2.2x the time of that traffic when it reduced whole
    slices into a temporary first)."""
    if not arrays[0].size:
      return
    if self.ufunc is None:
      acc = self.reduce(arrays)
      for d in dests:
        d[...] = acc
      return
    ufunc, first = self.ufunc, dests[0]
    step = max(1, _BLOCK_BYTES // first.dtype.itemsize)
    for b in range(0, first.size, step):
      e = b + step
      acc = first[b:e]
      if len(arrays) == 1:
        np.copyto(acc, arrays[0][b:e])
      else:
        ufunc(arrays[0][b:e], arrays[1][b:e], out=acc)
        for x in arrays[2:]:
          ufunc(acc, x[b:e], out=acc)
      for d in dests[1:]:
        d[b:e] = acc

  def _exchange(self, state, compute, p=None, gi=0, group=None,
                rank=0) -> None:
    """The collective protocol for ops where each member writes only its
    own results: `compute(values, rank, group)` returns the results (None:
    zeros), which may be views of the members' operands."""
    if p is None:
      p = self._participant(state)
      gi, group, rank = self._group(p)
    ex = p.execution
    ins = self.buffer_views(self.operands, state)
    outs = self.buffer_views(self.results, state)
    key = p.next_key(self.call_key + (gi,))
    where = self._where(group)
    slot, values = ex.arrive(p.flat, key, group, rank, ins, where)
    try:
      results = compute(values, rank, group)
      direct = _disjoint(outs, ins)
      if direct:
        for out, res in zip(outs, results):
          _store(out, res)
      else:  # written after the barrier: nothing may point into a member
        results = [None if r is None else np.array(r, copy=True)
                   for r in results]
    finally:
      ex.depart(p.flat, key, slot, group, rank, where)
    if not direct:
      for out, res in zip(outs, results):
        _store(out, res)

  def _where(self, group) -> str:
    return f"{self.what} among participants {list(group)}"

  # -- ops -----------------------------------------------------------------------

  def run(self, state) -> None:
    p = getattr(state, "participant", None)
    if p is not None:
      cross = p.execution.cross
      if (cross is not None and self.op in cross_process.OPS and
          cross.crosses(self)):
        cross.run(self, state, p)
        return
    self._run(state)

  def _replica_id(self, state) -> None:
    p = self._participant(state)
    self.buffer_views(self.results, state)[0][...] = p.replica

  def _partition_id(self, state) -> None:
    p = self._participant(state)
    self.buffer_views(self.results, state)[0][...] = p.partition

  def _all_reduce(self, state) -> None:
    p = self._participant(state)
    ex = p.execution
    gi, group, rank = self._group(p)
    ins = self.buffer_views(self.operands, state)
    outs = self.buffer_views(self.results, state)
    key = p.next_key(self.call_key + (gi,))
    where = self._where(group)
    slot, values = ex.arrive(p.flat, key, group, rank,
                             (ins, outs, _disjoint(outs, ins, True)), where)
    n = len(group)
    staged = None
    try:
      if all(v[2] for v in values):
        # Member `rank` reduces slice `rank` of every operand and writes
        # it into every member's result.
        for i, x in enumerate(ins):
          b, e = _slice_bounds(x.size, x.dtype.itemsize, n, rank)
          if b < e:
            self.reduce_into([v[0][i].reshape(-1)[b:e] for v in values],
                             [v[1][i].reshape(-1)[b:e] for v in values])
      else:
        staged = [self.reduce([v[0][i].reshape(-1) for v in values])
                  for i in range(len(ins))]
    finally:
      ex.depart(p.flat, key, slot, group, rank, where)
    if staged is not None:
      for out, acc in zip(outs, staged):
        _store(out, acc.reshape(out.shape))

  def _all_gather(self, state) -> None:
    dim = self.dim

    def compute(values, rank, group):
      return [np.concatenate([v[i] for v in values], axis=dim)
              for i in range(len(self.operands))]

    self._exchange(state, compute)

  def _reduce_scatter(self, state) -> None:
    dim = self.dim

    def compute(values, rank, group):
      out = []
      for i, spec in enumerate(self.results):
        size = spec.dims[dim]
        index = [slice(None)] * len(spec.dims)
        index[dim] = slice(rank * size, (rank + 1) * size)
        index = tuple(index)
        parts = [np.ascontiguousarray(v[i][index]).reshape(-1)
                 for v in values]
        out.append(self.reduce(parts).reshape(spec.dims))
      return out

    self._exchange(state, compute)

  def _all_to_all(self, state) -> None:
    dim = self.dim

    def compute(values, rank, group):
      n = len(group)
      if dim is None:  # tuple form: operand k of each member goes to k
        return [v[rank] for v in values]
      out = []
      for i in range(len(self.operands)):
        size = values[0][i].shape[dim] // n
        index = [slice(None)] * values[0][i].ndim
        index[dim] = slice(rank * size, (rank + 1) * size)
        index = tuple(index)
        out.append(np.concatenate([v[i][index] for v in values], axis=dim))
      return out

    self._exchange(state, compute)

  def _collective_broadcast(self, state) -> None:
    p = self._participant(state)
    if p.flat not in self.member_of:  # in no group: zeros (spec)
      for out in self.buffer_views(self.results, state):
        out[...] = 0
      return

    def compute(values, rank, group):
      return values[0]

    self._exchange(state, compute)

  def _collective_permute(self, state) -> None:
    p = self._participant(state)
    # Every participant of the execution takes part (a permute is one
    # step of the whole program); each reads its source's operands.
    group = list(range(p.execution.num_participants))
    source = self.source_of.get(p.flat)

    def compute(values, rank, group):
      if source is None:
        return [None] * len(self.results)
      return values[source]

    self._exchange(state, compute, p, -1, group, p.flat)


def _store(out: np.ndarray, value: Optional[np.ndarray]) -> None:
  if not out.size:
    return
  if value is None:
    out[...] = 0
  else:
    np.copyto(out, value.reshape(out.shape), casting="no")


# -- running the participants ------------------------------------------------------


def run_participants(run_one: Callable[[Participant], Any],
                     num_replicas: int, num_partitions: int, *,
                     timeout_s: Optional[float] = None,
                     start_timeout_s: Optional[float] = None) -> list:
  """Runs `run_one(participant)` for every participant of a new
  execution, each on its own thread (a fixed-size pool would deadlock once
  participants outnumber its workers); returns their results in flattened
  id order, or raises the first failure (the participant that failed
  first; the others were released with CANCELLED)."""
  execution = CollectiveExecution(num_replicas, num_partitions,
                                  timeout_s=timeout_s,
                                  start_timeout_s=start_timeout_s)
  n = execution.num_participants
  pids = [(f // num_partitions, f % num_partitions) for f in range(n)]
  for pid in pids:
    execution.start(pid)
  results: list = [None] * n
  errors: list = [None] * n

  def body(flat: int) -> None:
    pid = pids[flat]
    try:
      results[flat] = run_one(execution.process(pid))
    except BaseException as e:  # pylint: disable=broad-except
      errors[flat] = e
      execution.abort(pid, e)
    else:
      execution.finish(pid)

  threads = [threading.Thread(target=body, args=(f,), daemon=True,
                              name=f"xla-cpu-participant-{f}")
             for f in range(1, n)]
  for t in threads:
    t.start()
  body(0)
  for t in threads:
    t.join()
  first = execution.error
  if first is not None:
    raise first
  for e in errors:
    if e is not None:
      raise e
  return results

