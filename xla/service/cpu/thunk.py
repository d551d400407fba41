"""The CPU runtime's thunks: prebuilt steps that an executable runs in order.

Every thunk refers to memory through *slots* of the execution's pointer
table (one u64 address per slot, filled once per execution from the base
addresses of the buffers; see cpu_executable.py), so running a thunk is
only a few Python operations plus, for kernels, one ctypes call (which
releases the GIL).

  KernelThunk       calls a kernel-ABI function; splits its parallel extent
                    across the worker pool when its cost warrants it (the
                    native pool of native_pool.py; a Python one elsewhere)
  CopyThunk         memmove between two slots
  WhileThunk        condition sequence, predicate read, body sequence;
                    the loop carry lives in place (its buffers are shared by
                    the condition / body parameters and the body root), the
                    init operand is copied in first where it is elsewhere
  ConditionalThunk  reads the branch index (pred or s32) and runs a branch
  SequenceThunk     a nested list (kCall bodies)
  CustomCallThunk   calls a Python function with numpy views of the
                    operands and copies its results into the result buffers
"""

from __future__ import annotations

import atexit
import ctypes
import math
import os
import queue
import threading
from typing import Optional, Sequence

import numpy as np

import support
from xla.service.cpu import native_pool

KERNEL_CFUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64,
                                ctypes.c_int64)

# Below this many element-operations per part a kernel is not split: a
# thread hand-off costs tens of microseconds.
MIN_COST_PER_PART = 200_000


class ThreadPool:
  """Persistent daemon workers that run kernel parts (the fallback where
  native_pool is not available)."""

  native = False

  def __init__(self, workers: int):
    self.workers = max(0, workers)
    self._queue: "queue.SimpleQueue" = queue.SimpleQueue()
    self._threads = []
    for i in range(self.workers):
      t = threading.Thread(target=self._work, name=f"xla-cpu-{i}",
                           daemon=True)
      t.start()
      self._threads.append(t)

  def _work(self) -> None:
    while True:
      fn, args, begin, end, done = self._queue.get()
      try:
        fn(args, begin, end)
      finally:
        done.release()

  def run(self, fn, args: int, bounds: Sequence[tuple[int, int]]) -> None:
    """Runs fn(args, b, e) for every (b, e); the caller takes the first."""
    done = threading.Semaphore(0)
    for b, e in bounds[1:]:
      self._queue.put((fn, args, b, e, done))
    b0, e0 = bounds[0]
    fn(args, b0, e0)
    for _ in range(len(bounds) - 1):
      done.acquire()


  def run_kernel(self, fn: int, args: int, extent: int, parts: int) -> None:
    """Runs kernel address `fn` over [0, extent) in `parts` parts."""
    cfn = _cfunc(fn)
    self.run(cfn, args, [(extent * k // parts, extent * (k + 1) // parts)
                         for k in range(parts)])


_CFUNCS: dict[int, object] = {}


def _cfunc(address: int):
  f = _CFUNCS.get(address)
  if f is None:
    f = _CFUNCS[address] = KERNEL_CFUNC(address)
  return f


_POOLS: dict[tuple[int, int], object] = {}
_POOL_LOCK = threading.Lock()


def thread_pool(threads: int):
  """The shared pool for `threads`-way parallelism (None for 1): a
  native_pool.NativePool where the host supports it, else a ThreadPool.
  Pools are per process (a forked child makes its own)."""
  if threads <= 1:
    return None
  key = (os.getpid(), threads)
  with _POOL_LOCK:
    pool = _POOLS.get(key)
    if pool is None:
      if native_pool.available():
        pool = native_pool.NativePool(threads - 1)
        # Workers leave their native loop before interpreter teardown can
        # free the code they run.
        atexit.register(pool.close, 1.0)
      else:
        pool = ThreadPool(threads - 1)
      _POOLS[key] = pool
    return pool


def default_threads() -> int:
  return os.cpu_count() or 1


class ExecutionState:
  """Per-execution data the thunks read: the pointer table and the custom
  call handlers."""

  __slots__ = ("table", "table_addr", "custom_calls", "pool", "pool_addr")

  def __init__(self, table, custom_calls, pool,
               table_addr: Optional[int] = None):
    # `table`: a numpy u64 array, or a ctypes c_uint64 array with its
    # address in `table_addr` (the executable's prebuilt per-call tables).
    self.table = table
    self.table_addr = (table.__array_interface__["data"][0]
                       if table_addr is None else table_addr)
    self.custom_calls = custom_calls
    self.pool = pool
    # The native pool's state, for the native runner's parallel kernels
    # (0: run them whole).
    self.pool_addr = pool.address if getattr(pool, "native", False) else 0

  def address(self, slot: int) -> int:
    return int(self.table[slot])


class Thunk:
  name = ""

  def run(self, state: ExecutionState) -> None:
    raise NotImplementedError


class KernelThunk(Thunk):

  def __init__(self, name: str, address: int, slot: int, extent: int,
               cost: int, threads: int):
    self.name = name
    self.address = address
    self.fn = KERNEL_CFUNC(address)
    self.slot_offset = 8 * slot
    self.extent = extent
    parts = 1
    if threads > 1 and extent > 1:
      parts = min(threads, extent, max(1, cost // MIN_COST_PER_PART))
    self.bounds = [(extent * k // parts, extent * (k + 1) // parts)
                   for k in range(parts)]

  def run(self, state: ExecutionState) -> None:
    if self.extent == 0:
      return
    args = state.table_addr + self.slot_offset
    if len(self.bounds) == 1 or state.pool is None:
      self.fn(args, 0, self.extent)
    elif state.pool.native:
      state.pool.run_kernel(self.address, args, self.extent,
                            len(self.bounds))
    else:
      state.pool.run(self.fn, args, self.bounds)


class CopyThunk(Thunk):

  def __init__(self, name: str, src: int, dst: int, nbytes: int):
    self.name, self.src, self.dst, self.nbytes = name, src, dst, nbytes

  def run(self, state: ExecutionState) -> None:
    src, dst = state.address(self.src), state.address(self.dst)
    if src != dst and self.nbytes:
      ctypes.memmove(dst, src, self.nbytes)


class SequenceThunk(Thunk):

  def __init__(self, name: str, thunks: list[Thunk]):
    self.name, self.thunks = name, thunks

  def run(self, state: ExecutionState) -> None:
    for t in self.thunks:
      t.run(state)


class WhileThunk(Thunk):

  def __init__(self, name: str, init: list[CopyThunk], cond: list[Thunk],
               pred_slot: int, body: list[Thunk]):
    self.name = name
    self.init, self.cond, self.body = init, cond, body
    self.pred_slot = pred_slot

  def run(self, state: ExecutionState) -> None:
    for c in self.init:
      c.run(state)
    pred = ctypes.c_uint8.from_address(state.address(self.pred_slot))
    cond, body = self.cond, self.body
    while True:
      for t in cond:
        t.run(state)
      if not pred.value:
        break
      for t in body:
        t.run(state)


class ConditionalThunk(Thunk):

  def __init__(self, name: str, index_slot: int, is_pred: bool,
               branches: list[list[Thunk]]):
    self.name = name
    self.index_slot = index_slot
    self.is_pred = is_pred
    self.branches = branches

  def run(self, state: ExecutionState) -> None:
    addr = state.address(self.index_slot)
    if self.is_pred:
      k = 0 if ctypes.c_uint8.from_address(addr).value else 1
    else:
      k = ctypes.c_int32.from_address(addr).value
      if not 0 <= k < len(self.branches):
        k = len(self.branches) - 1  # XLA: out of range runs the last branch
    for t in self.branches[k]:
      t.run(state)


def array_view(address: int, dtype: np.dtype, dims: Sequence[int],
               writable: bool = True) -> np.ndarray:
  """A numpy array over `address` (no copy)."""
  dims = tuple(dims)
  nbytes = math.prod(dims) * dtype.itemsize
  if nbytes == 0:
    return np.empty(dims, dtype)
  buf = (ctypes.c_char * nbytes).from_address(address)
  arr = np.frombuffer(buf, dtype=dtype).reshape(dims)
  if not writable:
    arr.flags.writeable = False
  return arr


class LeafSpec:
  """A custom-call operand / result array: slot, dtype and dimensions."""

  __slots__ = ("slot", "dtype", "dims")

  def __init__(self, slot: Optional[int], dtype, dims):
    self.slot, self.dtype, self.dims = slot, dtype, tuple(dims)


class CustomCallThunk(Thunk):
  """`fn(instr, operands)` where operands are numpy views (tuples for tuple
  operands, None for tokens); the result (array, nested tuple or None for
  "nothing to write") is copied into the result buffers."""

  def __init__(self, name: str, target: str, instr, operands, results,
               result_shape):
    self.name, self.target, self.instr = name, target, instr
    self.operands = operands  # nested lists of LeafSpec / None
    self.results = results  # flat list of LeafSpec (leaves of the shape)
    self.result_shape = result_shape

  def _views(self, spec, state, writable):
    if spec is None:
      return None
    if isinstance(spec, list):
      return tuple(self._views(s, state, writable) for s in spec)
    return array_view(state.address(spec.slot), spec.dtype, spec.dims,
                      writable)

  def run(self, state: ExecutionState) -> None:
    handlers = state.custom_calls
    fn = handlers.get(self.target) if handlers else None
    if fn is None:
      raise support.UnimplementedError(
          f"CPU backend: custom-call target '{self.target}' has no handler "
          f"({self.name}); pass one in custom_calls")
    operands = [self._views(s, state, False) for s in self.operands]
    result = fn(self.instr, operands)
    if result is None:
      for leaf in self.results:
        if leaf is not None and math.prod(leaf.dims):
          array_view(state.address(leaf.slot), leaf.dtype, leaf.dims)[...] = 0
      return
    flat: list = []
    _flatten(result, flat)
    leaves = [l for l in self.results if l is not None]
    values = [v for v in flat if v is not None]
    if len(values) != len(leaves):
      raise support.InvalidArgumentError(
          f"custom-call {self.name} ({self.target}) returned {len(values)} "
          f"arrays, its shape {self.result_shape} has {len(leaves)}")
    for v, leaf in zip(values, leaves):
      arr = np.asarray(v)
      if arr.shape != leaf.dims:
        if arr.size == math.prod(leaf.dims) and arr.ndim == 0:
          arr = np.broadcast_to(arr, leaf.dims)
        else:
          raise support.InvalidArgumentError(
              f"custom-call {self.name} ({self.target}) returned an array of "
              f"shape {arr.shape}, expected {leaf.dims}")
      if math.prod(leaf.dims):
        out = array_view(state.address(leaf.slot), leaf.dtype, leaf.dims)
        np.copyto(out, arr.astype(leaf.dtype, copy=False), casting="unsafe")


def _flatten(value, out: list) -> None:
  if isinstance(value, (tuple, list)):
    for v in value:
      _flatten(v, out)
  else:
    out.append(value)
