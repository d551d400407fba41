"""The cross-process transport over MPI (mpi4py), for cross_process.py.

The processes of a multi-process client are the ranks of the MPI job that
an MPI launcher started (`mpirun -n 2 python train.py`): each process's
rank comes with the client's topology (read from the launcher's
environment, so no MPI call is needed to learn it). mpi4py is an optional
import: nothing here runs until a program with collectives between
processes does, and single-process use never imports it.

MPI is initialized lazily, by the first such program: MPI_Init_thread
asking for MPI_THREAD_MULTIPLE (device threads call MPI; every call is
also serialized by a lock here, so MPI_THREAD_SERIALIZED suffices when
the program initialized MPI itself), then MPI_Comm_dup of the world, so
that our messages never meet the program's own. Open MPI's MPI_Init
waits for every rank of the job, so each process must get there: a
process that never runs such a program leaves the others failing with
DEADLINE_EXCEEDED. mpi4py finalizes MPI at exit.

Data moves by point-to-point messages: for each exchange, one
MPI_Isend / MPI_Irecv per peer process, with a tag per stream (the set of
processes of the execution), whose messages the streams' ordering keeps
in step. A reduction across every rank of the job whose reduction and
element type MPI has (sums and products, and integer minimum, maximum and
bitwise ops; floating-point minimum / maximum are left to numpy, which
propagates NaNs as XLA does) is one MPI_Iallreduce. Every wait polls its
requests, so it ends at the deadline (DEADLINE_EXCEEDED, naming the
processes still awaited) or when the execution is aborted (CANCELLED);
the buffers of requests left in flight are kept alive for good.

Without a launcher (processes started by hand, each calling
jax.distributed.initialize(address, n, i)), MPI cannot connect them: the
topology works, and a program with collectives between processes is
FAILED_PRECONDITION, saying to start the processes with mpirun.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from typing import Any, Optional, Sequence

import numpy as np

import support
from xla.service.cpu import cross_process

# Largest message or reduction one MPI call carries (bytes / elements):
# counts are C ints in MPI 3.
_CHUNK = 1 << 30
# Requests (and their buffers) left in flight by a failed wait.
_LEAKED: list[Any] = []
# Every MPI call of ours holds this lock.
_MPI_LOCK = threading.Lock()

_INT_TYPES = {np.dtype(t): n for t, n in (
    (np.int8, "INT8_T"), (np.int16, "INT16_T"), (np.int32, "INT32_T"),
    (np.int64, "INT64_T"), (np.uint8, "UINT8_T"), (np.uint16, "UINT16_T"),
    (np.uint32, "UINT32_T"), (np.uint64, "UINT64_T"))}
_FLOAT_TYPES = {np.dtype(t): n for t, n in (
    (np.float32, "FLOAT"), (np.float64, "DOUBLE"),
    (np.complex64, "C_FLOAT_COMPLEX"), (np.complex128, "C_DOUBLE_COMPLEX"))}
_INT_OPS = {"add": "SUM", "multiply": "PROD", "minimum": "MIN",
            "maximum": "MAX", "and": "BAND", "or": "BOR", "xor": "BXOR"}
_FLOAT_OPS = {"add": "SUM", "multiply": "PROD"}
_BOOL_OPS = {"add": "LOR", "or": "LOR", "maximum": "LOR",
             "multiply": "LAND", "and": "LAND", "minimum": "LAND",
             "xor": "LXOR"}


def available() -> bool:
  """Whether mpi4py can be imported (without importing it)."""
  return importlib.util.find_spec("mpi4py") is not None


# -- initialization ------------------------------------------------------------


class _World:
  """MPI, initialized: the module and our duplicate of the world."""

  def __init__(self, mpi, comm):
    self.MPI = mpi  # pylint: disable=invalid-name
    self.comm = comm
    self.rank = comm.Get_rank()
    self.size = comm.Get_size()
    self.tag_ub = comm.Get_attr(mpi.TAG_UB) or 32767


_init_lock = threading.Lock()
_init_thread: Optional[threading.Thread] = None
_init_result: dict[str, Any] = {}
_world: Optional[_World] = None


def _initialize() -> None:
  """Initializes MPI (if the program did not) and duplicates the world;
  runs on a thread of its own, since MPI_Init waits for every rank."""
  try:
    import mpi4py  # pylint: disable=g-import-not-at-top
    if "mpi4py.MPI" not in sys.modules:
      # Not at import: here, with the thread level we need. Finalized at
      # exit by mpi4py.
      mpi4py.rc.initialize = False
      mpi4py.rc.finalize = True
    from mpi4py import MPI  # pylint: disable=g-import-not-at-top
    if MPI.Is_finalized():
      raise support.FailedPreconditionError("MPI was finalized already")
    if MPI.Is_initialized():
      provided = MPI.Query_thread()
    else:
      provided = MPI.Init_thread(MPI.THREAD_MULTIPLE)
    if provided < MPI.THREAD_SERIALIZED:
      names = {MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
               MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED"}
      raise support.FailedPreconditionError(
          f"MPI runs at thread level {names.get(provided, provided)}, but "
          "collectives between processes call MPI from the devices' "
          "threads: initialize MPI with MPI_THREAD_MULTIPLE (mpi4py's "
          "default) or let the plugin initialize it")
    with _MPI_LOCK:
      comm = MPI.COMM_WORLD.Dup()
    _init_result["world"] = _World(MPI, comm)
  except BaseException as e:  # pylint: disable=broad-except
    _init_result["error"] = e


def _initialized(deadline: float, cancelled, what: str) -> _World:
  """The initialized world, initializing MPI on first use."""
  global _init_thread, _world
  with _init_lock:
    if _world is not None:
      return _world
    if _init_thread is None:
      _init_thread = threading.Thread(target=_initialize, daemon=True,
                                      name="openxla-mpi-init")
      _init_thread.start()
    thread = _init_thread
  while thread.is_alive():
    error = cancelled()
    if error is not None:
      raise support.CancelledError(f"{what}: {error}")
    left = deadline - time.monotonic()
    if left <= 0:
      raise support.DeadlineExceededError(
          f"{what}: MPI_Init_thread / MPI_Comm_dup did not complete: MPI "
          "waits for every process of the MPI job, and each initializes it "
          "at its first program with collectives between processes; is "
          "every process running one?")
    thread.join(min(0.1, left))
  with _init_lock:
    error = _init_result.get("error")
    if error is not None:
      if isinstance(error, support.XlaError):
        raise error
      raise support.FailedPreconditionError(
          f"{what}: MPI could not be initialized: "
          f"{type(error).__name__}: {error}")
    _world = _init_result["world"]
    return _world


# -- the transport -------------------------------------------------------------


_transports: dict[tuple, "MpiTransport"] = {}
_transports_lock = threading.Lock()


def transport(process_index: int,
              mpi_ranks: Optional[Sequence[Optional[int]]]) -> "MpiTransport":
  """The transport of this process in a client whose process p is MPI rank
  `mpi_ranks[p]` (one per such client layout: its streams are shared)."""
  ranks = tuple(mpi_ranks or ())
  key = (int(process_index), ranks)
  with _transports_lock:
    found = _transports.get(key)
    if found is None:
      found = _transports[key] = MpiTransport(process_index, ranks)
    return found


class MpiTransport(cross_process.Transport):
  """Messages between the processes of a client, over MPI."""

  def __init__(self, process_index: int, mpi_ranks: tuple):
    super().__init__(process_index)
    self.mpi_ranks = mpi_ranks
    self._checked = False

  def check_usable(self, processes: tuple[int, ...]) -> None:
    if not available():
      raise support.FailedPreconditionError(
          "collectives between processes go over MPI, which needs mpi4py "
          "(pip install mpi4py) and an MPI library")
    if len(self.mpi_ranks) <= max(processes):
      raise support.FailedPreconditionError(
          f"the MPI ranks of processes {list(processes)} are not known")
    missing = [p for p in processes if self.mpi_ranks[p] is None]
    if missing:
      raise support.FailedPreconditionError(
          f"collectives between processes go over MPI, and process(es) "
          f"{missing} were not started by an MPI launcher: start every "
          "process with one (mpirun -n N python program.py, whose "
          "jax.distributed.initialize() then finds its settings itself)")
    ranks = [self.mpi_ranks[p] for p in processes]
    if len(set(ranks)) != len(ranks):
      raise support.FailedPreconditionError(
          f"processes {list(processes)} have MPI ranks {ranks}: several "
          "processes of one client are one MPI process (each process must "
          "be its own rank of the MPI job)")
    self._tag(processes, None)

  def _tag(self, processes: tuple[int, ...], world: Optional[_World]) -> int:
    """The tag of the messages of a stream: 1 for every process of the
    client, else a bit per process."""
    if len(processes) == len(self.mpi_ranks):
      return 1
    if max(processes) >= 30:
      raise support.UnimplementedError(
          f"collectives between some of the processes ({list(processes)}) "
          f"of a client of {len(self.mpi_ranks)} are supported up to "
          "process 29; use all processes")
    tag = sum(1 << p for p in processes)
    if world is not None and tag > world.tag_ub:
      raise support.UnimplementedError(
          f"MPI's largest tag {world.tag_ub} is too small for the stream "
          f"of processes {list(processes)}")
    return tag

  def _world(self, deadline, cancelled, what) -> _World:
    world = _initialized(deadline, cancelled, what)
    if not self._checked:
      me = self.mpi_ranks[self.process_index]
      if world.rank != me:
        raise support.FailedPreconditionError(
            f"{what}: this is process {self.process_index}, whose launcher "
            f"gave it MPI rank {me}, but MPI says its rank is {world.rank}")
      too_big = [r for r in self.mpi_ranks if r is not None and
                 r >= world.size]
      if too_big:
        raise support.FailedPreconditionError(
            f"{what}: MPI ranks {too_big} are not in the MPI job of "
            f"{world.size} processes")
      self._checked = True
    return world

  def _wait(self, world: _World, requests: list, peers: list, buffers,
            deadline: float, cancelled, what: str,
            statuses: Optional[list] = None) -> None:
    """Waits for every request (filling `statuses`); on failure keeps them
    and `buffers` alive and cancels what can be cancelled."""
    mpi = world.MPI
    pause = 0.0
    start = time.monotonic()
    try:
      while True:
        try:
          with _MPI_LOCK:
            done = (mpi.Request.Testall(requests, statuses)
                    if statuses is not None else
                    mpi.Request.Testall(requests))
        except mpi.Exception as e:
          raise support.InternalError(f"{what}: MPI failed: {e}") from None
        if done:
          return
        error = cancelled()
        if error is not None:
          raise support.CancelledError(f"{what}: {error}")
        now = time.monotonic()
        if now >= deadline:
          with _MPI_LOCK:
            flags = [r.Test() for r in requests]
          waiting = sorted({x for p, f in zip(peers, flags) if not f
                            for x in (p if isinstance(p, tuple) else (p,))})
          raise support.DeadlineExceededError(
              f"{what}: process {self.process_index} waited "
              f"{now - start:.3g} s for process(es) {waiting} (MPI ranks "
              f"{[self.mpi_ranks[p] for p in waiting]})")
        # Spin a little, then back off to at most a millisecond.
        pause = min(1e-3, pause * 2 if pause else 1e-6)
        time.sleep(pause)
    except BaseException:
      with _MPI_LOCK:
        for r in requests:
          try:
            if not r.Test():
              r.Cancel()
          except Exception:  # pylint: disable=broad-except
            pass
      _LEAKED.append((requests, buffers))
      raise

  def exchange(self, stream, sends, recvs, deadline, cancelled, what):
    world = self._world(deadline, cancelled, what)
    mpi = world.MPI
    tag = self._tag(stream.processes, world)
    outgoing = {q: cross_process.pack(arrays) for q, arrays in sends.items()}
    incoming = {q: np.empty(n, np.uint8) for q, n in recvs.items()}
    requests, peers = [], []
    with _MPI_LOCK:
      for q, data in sorted(incoming.items()):
        for at in range(0, data.size, _CHUNK):
          chunk = data[at:at + _CHUNK]
          requests.append(world.comm.Irecv([chunk, mpi.BYTE],
                                           source=self.mpi_ranks[q], tag=tag))
          peers.append(q)
      for q, data in sorted(outgoing.items()):
        for at in range(0, data.size, _CHUNK):
          chunk = data[at:at + _CHUNK]
          requests.append(world.comm.Isend([chunk, mpi.BYTE],
                                           dest=self.mpi_ranks[q], tag=tag))
          peers.append(q)
    statuses = [mpi.Status() for _ in requests]
    self._wait(world, requests, peers, (outgoing, incoming), deadline,
               cancelled, what, statuses)
    expected = [min(_CHUNK, data.size - at)
                for _, data in sorted(incoming.items())
                for at in range(0, data.size, _CHUNK)]
    for k, want in enumerate(expected):  # the receives come first
      got = statuses[k].Get_count(mpi.BYTE)
      if got != want:
        raise support.InternalError(
            f"{what}: process {peers[k]} sent {got} bytes where {want} were "
            "expected: do the processes run the same program?")
    return incoming

  def allreduce(self, stream, array, reducer, processes, deadline, cancelled,
                what, out=None):
    if len(processes) != len(self.mpi_ranks):
      return None  # MPI's reduction needs a communicator of just these.
    dtype = array.dtype
    if dtype == np.bool_:
      type_name, op_name = "C_BOOL", _BOOL_OPS.get(reducer)
    elif dtype in _INT_TYPES:
      type_name, op_name = _INT_TYPES[dtype], _INT_OPS.get(reducer)
    elif dtype in _FLOAT_TYPES:
      type_name, op_name = _FLOAT_TYPES[dtype], _FLOAT_OPS.get(reducer)
    else:
      return None
    if op_name is None:
      return None
    world = self._world(deadline, cancelled, what)
    if world.size != len(self.mpi_ranks):
      return None  # Other ranks in the job: not a reduction over the world.
    mpi = world.MPI
    mpi_type, op = getattr(mpi, type_name), getattr(mpi, op_name)
    send = np.ascontiguousarray(array).reshape(-1)
    # Not MPI_IN_PLACE: Open MPI's nonblocking reduction then stages the
    # buffer through a fresh allocation (measured 3x slower at 64 MiB).
    if out is None:
      out = cross_process.temporary(send)
    requests = []
    with _MPI_LOCK:
      for at in range(0, send.size, _CHUNK):
        requests.append(world.comm.Iallreduce(
            [send[at:at + _CHUNK], mpi_type], [out[at:at + _CHUNK], mpi_type],
            op))
    others = tuple(p for p in processes if p != self.process_index)
    self._wait(world, requests, [others] * len(requests), (send, out),
               deadline, cancelled, what)
    return out
