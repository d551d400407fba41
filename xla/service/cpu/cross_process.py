"""Collectives between participants in several processes.

A program whose device assignment spans processes runs, in each process,
the instances of that process's devices; the `CollectiveExecution` of an
execution then knows each participant's process (`span_processes`). A
collective whose groups all lie in one process runs as in one process
(collectives.py). One whose groups cross processes is *hierarchical*:

  1. every participant of this process arrives at a rendezvous of this
     process's participants (publishing numpy views of its operand and
     result buffers, as in-process collectives do);
  2. the first of them, the *leader*, combines what this process holds
     (for a reduction: its participants' operands reduced, in group
     order), exchanges that with the other processes, one message per
     peer process or one MPI reduction, and writes every local
     participant's results;
  3. everyone departs (waiting until the leader is done).

The other processes are reached through a `Transport` (mpi_transport.py:
MPI; `LocalHub` here simulates processes in one, for tests). A transport
moves bytes between processes: `exchange` sends each peer one buffer and
receives one from each (sizes known to both sides, computed from the
program), `allreduce` reduces one array across processes where it can
(MPI's own reduction), else None and the exchange does it: every process
receives every other's partial result and reduces them in process order,
so that all get bit-identical values.

Ordering. The processes of an execution form its *stream*; the executions
of one stream run their exchanges in launch order (a ticket taken when the
execution starts: every process launches them in the same order), and an
execution's exchanges are made by one thread in program order, so the
n-th message between two processes of a stream is the n-th on both sides.
A failed execution (any error, or a timeout of the other processes) leaves
messages in flight, so its stream is *broken*: later executions over it
fail at once with FAILED_PRECONDITION instead of pairing with stale
messages.

Nothing waits forever: every cross-process wait ends with
DEADLINE_EXCEEDED after the timeout (naming the processes it waited for),
or with CANCELLED when a participant of this process failed.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from typing import Callable, Optional, Sequence

import numpy as np

import support
from xla.service.cpu import buffer_pool

# Ops that run across processes (replica-id and partition-id never do).
OPS = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                 "collective-broadcast", "collective-permute"})


# -- streams -------------------------------------------------------------------


class Stream:
  """The executions over one set of processes, in this process: their
  tickets (launch order) and whether the stream still works."""

  def __init__(self, processes: tuple[int, ...]):
    self.processes = processes
    self._cond = threading.Condition()
    self._tickets = itertools.count()
    self._done: set[int] = set()
    self._first_open = 0  # every ticket below it is done
    self.broken: Optional[str] = None

  def take_ticket(self) -> int:
    with self._cond:
      return next(self._tickets)

  def done(self, ticket: int) -> None:
    with self._cond:
      self._done.add(ticket)
      while self._first_open in self._done:
        self._done.discard(self._first_open)
        self._first_open += 1
      self._cond.notify_all()

  def break_(self, why: str) -> None:
    with self._cond:
      if self.broken is None:
        self.broken = why
      self._cond.notify_all()

  def check(self) -> None:
    if self.broken is not None:
      raise support.FailedPreconditionError(
          f"collectives between processes {list(self.processes)} cannot "
          f"run: an earlier execution over these processes failed "
          f"({self.broken}), leaving its messages in flight; restart the "
          "processes")

  def wait_turn(self, ticket: int, deadline: float,
                cancelled: Callable[[], Optional[BaseException]],
                what: str) -> None:
    """Waits until every execution launched before `ticket` is done."""
    with self._cond:
      while True:
        self.check()
        if self._first_open >= ticket:
          return
        error = cancelled()
        if error is not None:
          raise support.CancelledError(f"{what}: {error}")
        now = time.monotonic()
        if now >= deadline:
          raise support.DeadlineExceededError(
              f"{what}: waited for the executions launched before it over "
              f"processes {list(self.processes)} (execution {ticket} of the "
              f"stream; {self._first_open} done)")
        self._cond.wait(min(0.5, deadline - now))


class Transport:
  """Moves bytes between the processes of a client (one per process).

  `exchange` and `allreduce` are called by one thread at a time per
  stream; `deadline` is a time.monotonic() value and `cancelled()` an
  error that ends the wait at once (a failed participant of this
  process)."""

  def __init__(self, process_index: int):
    self.process_index = process_index
    self._streams: dict[tuple[int, ...], Stream] = {}
    self._lock = threading.Lock()

  def stream(self, processes: tuple[int, ...]) -> Stream:
    with self._lock:
      stream = self._streams.get(processes)
      if stream is None:
        stream = self._streams[processes] = Stream(processes)
      return stream

  def check_usable(self, processes: tuple[int, ...]) -> None:
    """Raises when executions over `processes` cannot run (before any is
    launched: no message has been sent)."""

  def exchange(self, stream: Stream, sends: dict[int, list[np.ndarray]],
               recvs: dict[int, int], deadline: float,
               cancelled: Callable[[], Optional[BaseException]],
               what: str) -> dict[int, np.ndarray]:
    """Sends each process q the bytes of `sends[q]` (concatenated) and
    receives `recvs[q]` bytes from each; returns them as uint8 arrays."""
    raise NotImplementedError

  def allreduce(self, stream: Stream, array: np.ndarray, reducer: str,
                processes: tuple[int, ...], deadline: float,
                cancelled: Callable[[], Optional[BaseException]],
                what: str, out: Optional[np.ndarray] = None
                ) -> Optional[np.ndarray]:
    """`array` (1-D) reduced with `reducer` (a ufunc name of
    collectives._UFUNCS) across `processes`, or None where this transport
    does not reduce it itself. `out` (contiguous, like `array`, not
    overlapping it), when given, may receive the result (and is then
    returned)."""
    del stream, array, reducer, processes, deadline, cancelled, what, out
    return None


# -- one execution ---------------------------------------------------------------


class CrossProcess:
  """What an execution spanning processes knows of them."""

  def __init__(self, execution, processes: Sequence[int], process_index: int,
               transport: Transport, timeout_s: float):
    n = execution.num_participants
    if len(processes) != n:
      raise support.InvalidArgumentError(
          f"the placement names {len(processes)} processes for {n} "
          "participants")
    self.execution = execution
    self.placement = tuple(int(p) for p in processes)
    self.me = int(process_index)
    self.local = [f for f in range(n) if self.placement[f] == self.me]
    if not self.local:
      raise support.InvalidArgumentError(
          f"process {self.me} runs none of the execution's participants")
    self.local_rank = {f: i for i, f in enumerate(self.local)}
    self.processes = tuple(sorted(set(self.placement)))
    self.transport = transport
    self.timeout_s = float(timeout_s)
    self.stream = transport.stream(self.processes)
    self.stream.check()
    self.ticket: Optional[int] = None
    self._turn = False
    self._left = set(self.local)
    self._released = False
    self._lock = threading.Lock()
    self._plans: dict[int, bool] = {}

  # -- lifecycle (collectives.CollectiveExecution calls these) ----------------

  def started(self) -> None:
    """A local participant was started (under the launcher's lock)."""
    with self._lock:
      if self.ticket is None:
        self.ticket = self.stream.take_ticket()

  def ended(self, flat: Optional[int],
            error: Optional[BaseException]) -> None:
    """A local participant finished (`error` None) or failed (`flat` None:
    the execution failed as a whole)."""
    with self._lock:
      if error is not None and self.ticket is not None:
        text = f"{type(error).__name__}: {error}".splitlines()[0]
        self.stream.break_(text)
      self._left.discard(flat)
      last = not self._left and not self._released
      if last:
        self._released = True
    if last and self.ticket is not None:
      self.stream.done(self.ticket)

  # -- running a collective -----------------------------------------------------

  def crosses(self, thunk) -> bool:
    """Whether `thunk`'s data moves between processes in this execution."""
    key = id(thunk)
    found = self._plans.get(key)
    if found is None:
      placement = self.placement
      # A permute is one step of every participant (its in-process form
      # waits for all of them): always hierarchical.
      found = thunk.op == "collective-permute" or any(
          len({placement[m] for m in g}) > 1 for g in thunk.groups)
      self._plans[key] = found
    return found

  def cancelled(self) -> Optional[BaseException]:
    return self.execution.error

  def run(self, thunk, state, participant) -> None:
    """Runs `thunk` for `participant` (a local one) hierarchically."""
    ex = self.execution
    ins = thunk.buffer_views(thunk.operands, state)
    outs = thunk.buffer_views(thunk.results, state)
    key = participant.next_key(thunk.call_key + ("processes",))
    rank = self.local_rank[participant.flat]
    where = (f"{thunk.what} across processes {list(self.processes)} "
             f"(process {self.me})")
    slot, values = ex.arrive(participant.flat, key, self.local, rank,
                             (ins, outs), where)
    if rank == 0:
      try:
        deadline = time.monotonic() + self.timeout_s
        self._take_turn(deadline, where)
        views = dict(zip(self.local, values))
        _RUNNERS[thunk.op](thunk, self, views, deadline, where)
      except BaseException as e:
        ex.abort((participant.replica, participant.partition), e)
        raise
    # The leader may wait for other processes up to its timeouts.
    ex.depart(participant.flat, key, slot, self.local, rank, where,
              timeout_s=3 * self.timeout_s)

  def _take_turn(self, deadline: float, what: str) -> None:
    if self._turn:
      self.stream.check()
      return
    if self.ticket is None:
      raise support.InternalError(f"{what}: the execution has no ticket")
    self.stream.wait_turn(self.ticket, deadline, self.cancelled, what)
    self._turn = True

  # -- the leader's helpers -----------------------------------------------------

  def exchange(self, sends, recvs, deadline, what):
    # Nothing for an empty message: the other side posts no receive.
    sends = {q: a for q, a in sends.items() if sum(x.nbytes for x in a)}
    recvs = {q: n for q, n in recvs.items() if n}
    if not sends and not recvs:
      return {}
    return self.transport.exchange(self.stream, sends, recvs, deadline,
                                   self.cancelled, what)

  def group_processes(self, group) -> tuple[int, ...]:
    return tuple(sorted({self.placement[m] for m in group}))

  def on(self, group, process: int) -> list[int]:
    """Members of `group` (in rank order) that run in `process`."""
    return [m for m in group if self.placement[m] == process]


class _Reader:
  """Arrays read one after the other from received bytes."""

  def __init__(self, data: np.ndarray):
    self._data = data
    self._at = 0

  def take(self, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    nbytes = math.prod(shape) * dtype.itemsize
    chunk = self._data[self._at:self._at + nbytes]
    if chunk.size != nbytes:
      raise support.InternalError(
          f"received {self._data.size} bytes, fewer than the program's "
          "collective needs")
    self._at += nbytes
    return chunk.view(dtype).reshape(shape)


def _readers(received: dict[int, np.ndarray]) -> dict[int, _Reader]:
  return {q: _Reader(data) for q, data in received.items()}


def _nbytes(spec) -> int:
  return math.prod(spec.dims) * spec.dtype.itemsize


def _store_all(views, results: dict[int, list]) -> None:
  """Writes each local participant's results (None: zeros); a value that
  already is the result's memory is left as it is."""
  for flat, values in results.items():
    for out, value in zip(views[flat][1], values):
      if not out.size:
        continue
      if value is None:
        out[...] = 0
      elif not (value.size and value.__array_interface__["data"][0] ==
                out.__array_interface__["data"][0] and
                value.nbytes == out.nbytes and value.dtype == out.dtype):
        np.copyto(out, value.reshape(out.shape), casting="no")


def _zeros_for_the_rest(thunk, cx: CrossProcess, results: dict) -> None:
  for flat in cx.local:
    if flat not in results:
      results[flat] = [None] * len(thunk.results)


# -- the ops (run by the leader) ------------------------------------------------


def _all_reduce(thunk, cx: CrossProcess, views, deadline, what) -> None:
  n_ops = len(thunk.operands)
  reduced: dict[int, list[np.ndarray]] = {}
  across: dict[tuple[int, ...], list[tuple[int, list[np.ndarray]]]] = {}
  inputs = [x.reshape(-1) for f in cx.local for x in views[f][0]]
  receivers: dict[int, Optional[np.ndarray]] = {}
  for gi, group in enumerate(thunk.groups):
    local = cx.on(group, cx.me)
    if not local:
      continue
    partial = []
    for i in range(n_ops):
      parts = [views[m][0][i].reshape(-1) for m in local]
      # The partial is folded straight into the first local member's
      # result where that reads no operand but its own in-place one (a
      # temporary otherwise), and the reduction across processes receives
      # into the second member's result where that reads none at all:
      # every byte is then moved once, and nothing is allocated.
      dest = views[local[0]][1][i].reshape(-1)
      if not _writable_early(dest, parts[0], inputs):
        dest = temporary(parts[0])
      thunk.reduce_into(parts, [dest])
      spare = (views[local[1]][1][i].reshape(-1) if len(local) > 1 else
               None)
      if spare is not None and not _writable_early(spare, None, inputs):
        spare = None
      partial.append(dest)
      receivers[id(dest)] = spare
    procs = cx.group_processes(group)
    if len(procs) == 1:
      reduced[gi] = partial
    else:
      across.setdefault(procs, []).append((gi, partial))
  for procs in sorted(across):
    entries = across[procs]
    flat = [a for _, parts in entries for a in parts]
    done = _reduce_across(thunk, cx, procs, flat, deadline, what,
                          [receivers.get(id(a)) for a in flat])
    k = 0
    for gi, parts in entries:
      reduced[gi] = done[k:k + len(parts)]
      k += len(parts)
  results = {}
  for gi, values in reduced.items():
    for m in cx.on(thunk.groups[gi], cx.me):
      results[m] = values
  _zeros_for_the_rest(thunk, cx, results)
  _store_all(views, results)


def _writable_early(dest: np.ndarray, own: Optional[np.ndarray],
                    inputs: Sequence[np.ndarray]) -> bool:
  """Whether `dest` (a result) may be written before every operand in
  `inputs` was read: it overlaps none of them, or only `own`, exactly (an
  in-place operand, read block by block just before it is written)."""
  if not dest.flags.c_contiguous or not dest.flags.writeable:
    return False
  for x in inputs:
    if not np.may_share_memory(dest, x):
      continue
    if (own is not None and _span(x) == _span(dest) == _span(own) and
        x.dtype == dest.dtype == own.dtype):
      continue
    return False
  return True


def temporary(like: np.ndarray) -> np.ndarray:
  """An uninitialised array like `like`, from the output block pool when
  large (fresh pages would fault in while a reduction writes them)."""
  raw, _ = buffer_pool.block(like.nbytes)
  return raw.view(like.dtype)


def _span(arr: np.ndarray) -> tuple[int, int]:
  start = arr.__array_interface__["data"][0]
  return start, start + arr.nbytes


def _reduce_across(thunk, cx: CrossProcess, procs, arrays, deadline,
                   what, receivers=None) -> list[np.ndarray]:
  """1-D `arrays` (this process's partials) reduced across `procs`: one
  transport reduction per dtype where the transport does it, else every
  process's partials exchanged and reduced in process order.
  `receivers[k]` (None, or a buffer like arrays[k] overlapping nothing it
  reads) may receive the reduction of an array alone of its dtype."""
  reducer = thunk.config.get("reduce") if thunk.ufunc is not None else None
  by_dtype: dict[np.dtype, list[int]] = {}
  for k, a in enumerate(arrays):
    by_dtype.setdefault(a.dtype, []).append(k)
  out: list[Optional[np.ndarray]] = [None] * len(arrays)
  fallback: list[int] = []
  for dtype, ks in by_dtype.items():
    buf = (arrays[ks[0]] if len(ks) == 1 else
           np.concatenate([arrays[k] for k in ks]))
    done = None
    if reducer is not None:
      receiver = receivers[ks[0]] if receivers and len(ks) == 1 else None
      done = cx.transport.allreduce(cx.stream, buf, reducer, procs, deadline,
                                    cx.cancelled, what, out=receiver)
    if done is None:
      fallback.extend(ks)
      continue
    at = 0
    for k in ks:
      out[k] = done[at:at + arrays[k].size]
      at += arrays[k].size
  if fallback:
    peers = [q for q in procs if q != cx.me]
    sends = {q: [arrays[k] for k in fallback] for q in peers}
    size = sum(arrays[k].nbytes for k in fallback)
    received = _readers(cx.exchange(sends, {q: size for q in peers},
                                    deadline, what))
    theirs = {q: [received[q].take(arrays[k].dtype, arrays[k].shape)
                  for k in fallback] for q in peers}
    for j, k in enumerate(fallback):
      parts = [arrays[k] if q == cx.me else theirs[q][j] for q in procs]
      out[k] = thunk.reduce(parts)
  return out


def _all_gather(thunk, cx: CrossProcess, views, deadline, what) -> None:
  dim = thunk.dim
  specs = thunk.operands
  sends: dict[int, list] = {}
  recvs: dict[int, int] = {}
  for group in thunk.groups:
    local = cx.on(group, cx.me)
    if not local:
      continue
    for q in cx.group_processes(group):
      if q == cx.me:
        continue
      sends.setdefault(q, []).extend(
          views[m][0][i] for m in local for i in range(len(specs)))
      recvs[q] = recvs.get(q, 0) + len(cx.on(group, q)) * sum(
          _nbytes(s) for s in specs)
  received = _readers(cx.exchange(sends, recvs, deadline, what))
  results = {}
  for group in thunk.groups:
    local = cx.on(group, cx.me)
    if not local:
      continue
    parts = {}
    for m in group:
      q = cx.placement[m]
      parts[m] = (views[m][0] if q == cx.me else
                  [received[q].take(s.dtype, s.dims) for s in specs])
    gathered = [np.concatenate([parts[m][i] for m in group], axis=dim)
                for i in range(len(specs))]
    for m in local:
      results[m] = gathered
  _zeros_for_the_rest(thunk, cx, results)
  _store_all(views, results)


def _reduce_scatter(thunk, cx: CrossProcess, views, deadline, what) -> None:
  dim = thunk.dim
  n_res = len(thunk.results)

  def block(array, spec, rank):
    size = spec.dims[dim]
    index = [slice(None)] * len(spec.dims)
    index[dim] = slice(rank * size, (rank + 1) * size)
    return np.ascontiguousarray(array[tuple(index)])

  sends: dict[int, list] = {}
  recvs: dict[int, int] = {}
  blocks: dict[int, dict[int, list[np.ndarray]]] = {}  # gi -> rank -> [i]
  for gi, group in enumerate(thunk.groups):
    local = cx.on(group, cx.me)
    if not local:
      continue
    partial = []
    for i, spec in enumerate(thunk.results):
      full = thunk.reduce([views[m][0][i].reshape(-1) for m in local])
      partial.append(full.reshape(views[local[0]][0][i].shape))
    blocks[gi] = {r: [block(partial[i], thunk.results[i], r)
                      for i in range(n_res)] for r in range(len(group))}
    for q in cx.group_processes(group):
      if q == cx.me:
        continue
      sends.setdefault(q, []).extend(
          b for r, m in enumerate(group) if cx.placement[m] == q
          for b in blocks[gi][r])
      recvs[q] = recvs.get(q, 0) + len(local) * sum(
          _nbytes(s) for s in thunk.results)
  received = _readers(cx.exchange(sends, recvs, deadline, what))
  theirs: dict[tuple[int, int], list] = {}  # (gi, q) -> [rank][i]
  for gi, group in enumerate(thunk.groups):
    if gi not in blocks:
      continue
    local = cx.on(group, cx.me)
    for q in cx.group_processes(group):
      if q != cx.me:
        theirs[gi, q] = [[received[q].take(s.dtype, s.dims)
                          for s in thunk.results] for _ in local]
  results = {}
  for gi, group in enumerate(thunk.groups):
    if gi not in blocks:
      continue
    procs = cx.group_processes(group)
    local = cx.on(group, cx.me)
    for k, m in enumerate(local):
      r = group.index(m)
      values = []
      for i, spec in enumerate(thunk.results):
        parts = [blocks[gi][r][i].reshape(-1) if q == cx.me else
                 theirs[gi, q][k][i].reshape(-1) for q in procs]
        values.append(thunk.reduce(parts).reshape(spec.dims))
      results[m] = values
  _zeros_for_the_rest(thunk, cx, results)
  _store_all(views, results)


def _all_to_all(thunk, cx: CrossProcess, views, deadline, what) -> None:
  dim = thunk.dim
  n_ops = len(thunk.operands)

  def piece(flat, rank_to, n, i):
    """What member `flat` sends member of rank `rank_to`: operand i."""
    if dim is None:  # tuple form: operand k goes to member k
      return views[flat][0][rank_to]
    x = views[flat][0][i]
    size = x.shape[dim] // n
    index = [slice(None)] * x.ndim
    index[dim] = slice(rank_to * size, (rank_to + 1) * size)
    return x[tuple(index)]

  def piece_spec(rank_to, n, i):
    if dim is None:
      spec = thunk.operands[rank_to]
      return spec.dtype, tuple(spec.dims)
    spec = thunk.operands[i]
    dims = list(spec.dims)
    dims[dim] //= n
    return spec.dtype, tuple(dims)

  items = 1 if dim is None else n_ops
  sends: dict[int, list] = {}
  recvs: dict[int, int] = {}
  for group in thunk.groups:
    local = cx.on(group, cx.me)
    if not local:
      continue
    n = len(group)
    for q in cx.group_processes(group):
      if q == cx.me:
        continue
      targets = [group.index(t) for t in cx.on(group, q)]
      sends.setdefault(q, []).extend(
          np.ascontiguousarray(piece(s, t, n, i))
          for s in local for t in targets for i in range(items))
      for _ in cx.on(group, q):
        for t in local:
          for i in range(items):
            dtype, dims = piece_spec(group.index(t), n, i)
            recvs[q] = recvs.get(q, 0) + math.prod(dims) * dtype.itemsize
  received = _readers(cx.exchange(sends, recvs, deadline, what))
  results = {}
  for group in thunk.groups:
    local = cx.on(group, cx.me)
    if not local:
      continue
    n = len(group)
    got: dict[tuple[int, int], list] = {}  # (source, target) -> [i]
    for q in cx.group_processes(group):
      if q == cx.me:
        continue
      for s in cx.on(group, q):
        for t in local:
          got[s, t] = [received[q].take(*piece_spec(group.index(t), n, i))
                       for i in range(items)]
    for t in local:
      rt = group.index(t)
      pieces = [[piece(s, rt, n, i) for i in range(items)]
                if cx.placement[s] == cx.me else got[s, t] for s in group]
      if dim is None:
        results[t] = [np.array(p[0], copy=True) for p in pieces]
      else:
        results[t] = [np.concatenate([p[i] for p in pieces], axis=dim)
                      for i in range(n_ops)]
  _zeros_for_the_rest(thunk, cx, results)
  _store_all(views, results)


def _collective_broadcast(thunk, cx: CrossProcess, views, deadline,
                          what) -> None:
  specs = thunk.operands
  sends: dict[int, list] = {}
  recvs: dict[int, int] = {}
  for group in thunk.groups:
    if not cx.on(group, cx.me):
      continue
    root = group[0]
    source = cx.placement[root]
    if source == cx.me:
      for q in cx.group_processes(group):
        if q != cx.me:
          sends.setdefault(q, []).extend(views[root][0])
    else:
      recvs[source] = recvs.get(source, 0) + sum(_nbytes(s) for s in specs)
  received = _readers(cx.exchange(sends, recvs, deadline, what))
  results = {}
  for group in thunk.groups:
    local = cx.on(group, cx.me)
    if not local:
      continue
    root = group[0]
    source = cx.placement[root]
    values = ([np.array(x, copy=True) for x in views[root][0]]
              if source == cx.me else
              [received[source].take(s.dtype, s.dims) for s in specs])
    for m in local:
      results[m] = values
  _zeros_for_the_rest(thunk, cx, results)
  _store_all(views, results)


def _collective_permute(thunk, cx: CrossProcess, views, deadline,
                        what) -> None:
  specs = thunk.operands
  sends: dict[int, list] = {}
  recvs: dict[int, int] = {}
  for t in sorted(thunk.source_of):
    s = thunk.source_of[t]
    ps, pt = cx.placement[s], cx.placement[t]
    if ps == cx.me and pt != cx.me:
      sends.setdefault(pt, []).extend(views[s][0])
    elif pt == cx.me and ps != cx.me:
      recvs[ps] = recvs.get(ps, 0) + sum(_nbytes(x) for x in specs)
  received = _readers(cx.exchange(sends, recvs, deadline, what))
  results = {}
  for t in sorted(thunk.source_of):
    if cx.placement[t] != cx.me:
      continue
    s = thunk.source_of[t]
    ps = cx.placement[s]
    results[t] = ([np.array(x, copy=True) for x in views[s][0]]
                  if ps == cx.me else
                  [received[ps].take(x.dtype, x.dims) for x in specs])
  _zeros_for_the_rest(thunk, cx, results)
  _store_all(views, results)


_RUNNERS = {
    "all-reduce": _all_reduce,
    "all-gather": _all_gather,
    "reduce-scatter": _reduce_scatter,
    "all-to-all": _all_to_all,
    "collective-broadcast": _collective_broadcast,
    "collective-permute": _collective_permute,
}


# -- processes simulated in one process (tests) ----------------------------------


class LocalHub:
  """The message boxes of processes simulated in one process: each
  simulated process's `LocalTransport(hub, p)` exchanges through it.
  `allreduce` reduces where `reduce_natively` is set (as MPI does), else
  leaves it to the exchange."""

  def __init__(self, reduce_natively: bool = True):
    self.reduce_natively = reduce_natively
    self._cond = threading.Condition()
    self._boxes: dict[tuple, list[np.ndarray]] = {}
    self._reductions: dict[tuple, dict[int, np.ndarray]] = {}
    self._counts: dict[tuple, int] = {}

  def put(self, key, data: np.ndarray) -> None:
    with self._cond:
      self._boxes.setdefault(key, []).append(data)
      self._cond.notify_all()

  def take(self, key, deadline: float, cancelled, what: str) -> np.ndarray:
    with self._cond:
      while not self._boxes.get(key):
        _check_wait(deadline, cancelled, what, f"process {key[1]}")
        self._cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))
      return self._boxes[key].pop(0)

  def reduce(self, stream_key, me, array, ufunc, processes, deadline,
             cancelled, what) -> np.ndarray:
    with self._cond:
      count_key = (stream_key, me)
      n = self._counts.get(count_key, 0)
      self._counts[count_key] = n + 1
      key = (stream_key, n)
      box = self._reductions.setdefault(key, {})
      box[me] = np.array(array, copy=True)
      self._cond.notify_all()
      while len(box) < len(processes):
        missing = [q for q in processes if q not in box]
        _check_wait(deadline, cancelled, what,
                    ", ".join(f"process {q}" for q in missing))
        self._cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))
      acc = np.array(box[processes[0]], copy=True)
      for q in processes[1:]:
        ufunc(acc, box[q], out=acc)
      return acc


def _check_wait(deadline, cancelled, what, whom) -> None:
  error = cancelled()
  if error is not None:
    raise support.CancelledError(f"{what}: {error}")
  if time.monotonic() >= deadline:
    raise support.DeadlineExceededError(f"{what}: waited for {whom}")


_BITWISE = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}


class LocalTransport(Transport):
  """A simulated process's end of a LocalHub."""

  def __init__(self, hub: LocalHub, process_index: int):
    super().__init__(process_index)
    self.hub = hub

  def exchange(self, stream, sends, recvs, deadline, cancelled, what):
    me = self.process_index
    for q, arrays in sends.items():
      # A copy: the sender's buffers may change once it moves on (MPI's
      # sends complete only when their buffers may).
      self.hub.put((stream.processes, me, q),
                   np.array(pack(arrays), copy=True))
    out = {}
    for q, nbytes in recvs.items():
      data = self.hub.take((stream.processes, q, me), deadline, cancelled,
                           what)
      if data.size != nbytes:
        raise support.InternalError(
            f"{what}: process {q} sent {data.size} bytes, {nbytes} expected")
      out[q] = data
    return out

  def allreduce(self, stream, array, reducer, processes, deadline, cancelled,
                what, out=None):
    if not self.hub.reduce_natively:
      return None
    ufunc = getattr(np, _BITWISE.get(reducer, reducer))
    done = self.hub.reduce((stream.processes, processes), self.process_index,
                           array, ufunc, processes, deadline, cancelled, what)
    if out is None:
      return done
    np.copyto(out, done)  # where MPI would receive it
    return out


def pack(arrays: Sequence[np.ndarray]) -> np.ndarray:
  """The bytes of `arrays`, one after the other (a view of a single
  contiguous array, else a copy)."""
  if len(arrays) == 1 and arrays[0].flags.c_contiguous:
    return arrays[0].reshape(-1).view(np.uint8)
  out = np.empty(sum(a.nbytes for a in arrays), np.uint8)
  at = 0
  for a in arrays:
    out[at:at + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    at += a.nbytes
  return out

