"""A worker pool in native code for kernels split across threads.

A Python pool (a queue and a semaphore per kernel) costs tens of
microseconds per hand-off and needs the GIL on both sides, which is too
slow for the kernels of a while loop body and keeps such loops out of the
native runner. This pool's dispatch is a few atomic operations:

  * the *workers* are Python daemon threads, each inside one ctypes call of
    `xla_cpu_pool_worker` (the GIL is released for the thread's lifetime);
    they spin briefly on the job word, then sleep on a futex;
  * `xla_cpu_pool_run(state, fn, args, extent, parts)` publishes a job,
    wakes sleepers, claims parts itself like any worker, and waits until
    every part has finished. Part k covers [extent*k/parts,
    extent*(k+1)/parts) of the kernel's parallel extent.

A worker that wakes on the core its caller is running on cannot help:
the two share one core, and the worker's parts and spinning delay the
caller, which is the critical path. The scheduler can leave it there for
many kernels when the other cores look busier (a step then runs at
one-thread speed or slower). So the caller records its CPU with each job,
and a worker that finds itself on that CPU moves: it sets its affinity to
the process's CPUs less that one (which migrates it at once) and restores
the full set. `nudges()` counts these moves.

Parts are claimed with a compare-and-swap on one 64-bit *claim word*,
(generation << 32) | (parts << 16) | next part, so a worker late from an
earlier job can never take a part of a newer one, and the job's fields are
only read under a generation that the swap confirms. A caller that finds
the pool busy (another thread's execution dispatching) runs its kernel
whole, in its own thread. Because the caller claims parts too, a job
never waits on a worker that has not woken up: the caller runs the parts
nobody took.

The state is an aligned int64 array; its fields sit on separate cache
lines (word indices below). Linux (futex) on x86-64 and AArch64 only;
`available()` says whether this host has it (thunk.py falls back to a
Python pool otherwise).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
from typing import Optional

import numpy as np
from llvmlite import ir

# Word indices into the state array (8 words = one 64-byte line apart).
CLAIM = 0  # (gen << 32) | (parts << 16) | next
DONE = 8  # parts finished in the current job
FN, ARGS, EXTENT = 16, 17, 18  # the job
CALLER_CPU = 19  # the CPU the job's caller is running on (-1: unknown)
FUTEX = 24  # i32: the low 32 bits of the generation workers sleep on
SLEEPERS = 32  # workers about to sleep or sleeping
BUSY = 40  # 1 while a caller dispatches
STOP = 48  # 1: workers return
RUN_FN = 56  # address of xla_cpu_pool_run (the native runner calls it)
# The affinity masks workers move with (0 where there is nowhere to move):
# MASK_BYTES bytes per mask, the mask for "every allowed CPU but c" at
# index c <= MAX_CPU, the full allowed set at index MAX_CPU + 1.
MASKS, MASK_BYTES, MAX_CPU = 57, 58, 59
NUDGES = 60  # times a worker moved off its caller's CPU
STATE_WORDS = 64

MAX_PARTS = 0xFFFF
# Pause iterations a worker spins on the job word before it sleeps (on the
# order of 100 us: a loop body's next kernel usually comes sooner).
WORKER_SPINS = 2000
# The caller waiting for parts in progress yields its core every this many
# pauses (the worker that holds a part may be waiting for a core).
YIELD_EVERY = 256

_SYS_FUTEX = {"x86_64": 202, "AMD64": 202, "aarch64": 98, "arm64": 98}
_SYS_SETAFFINITY = {"x86_64": 203, "AMD64": 203, "aarch64": 122,
                    "arm64": 122}
_FUTEX_WAIT_PRIVATE = 128
_FUTEX_WAKE_PRIVATE = 129

KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [
    ir.IntType(8).as_pointer().as_pointer(), ir.IntType(64), ir.IntType(64)])


def available() -> bool:
  return sys.platform.startswith("linux") and platform.machine() in _SYS_FUTEX


# -- IR -----------------------------------------------------------------------

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)


def _c(v, ty=I64):
  return ir.Constant(ty, v)


class _Emitter:
  """Emits the pool's functions into one module."""

  def __init__(self, module: ir.Module):
    self.module = module
    self.syscall = ir.Function(module, ir.FunctionType(I64, [I64],
                                                       var_arg=True),
                               "syscall")
    self.sched_yield = ir.Function(module, ir.FunctionType(I32, []),
                                   "sched_yield")
    self.sched_getcpu = ir.Function(module, ir.FunctionType(I32, []),
                                    "sched_getcpu")
    self.sys_futex = _SYS_FUTEX.get(platform.machine(), 202)
    self.sys_setaffinity = _SYS_SETAFFINITY.get(platform.machine(), 203)
    self.is_x86 = platform.machine() in ("x86_64", "AMD64")

  def word(self, b, st, k):
    return b.gep(st, [_c(k)])

  def futex_ptr(self, b, st):
    return b.bitcast(self.word(b, st, FUTEX), I32.as_pointer())

  def pause(self, b):
    if self.is_x86:
      fn = self.module.globals.get("llvm.x86.sse2.pause")
      if fn is None:
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), []),
                         "llvm.x86.sse2.pause")
      b.call(fn, [])
    else:
      fn = self.module.globals.get("llvm.aarch64.hint")
      if fn is None:
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [I32]),
                         "llvm.aarch64.hint")
      b.call(fn, [_c(1, I32)])  # YIELD

  def futex(self, b, st, op, val):
    addr = b.ptrtoint(self.futex_ptr(b, st), I64)
    b.call(self.syscall, [_c(self.sys_futex), addr, _c(op), val, _c(0),
                          _c(0), _c(0)])

  def load(self, b, st, k, order="acquire"):
    return b.load_atomic(self.word(b, st, k), order, 8)

  def store(self, b, st, k, v, order="release"):
    b.store_atomic(v, self.word(b, st, k), order, 8)

  def move_off_caller(self, b, fn, st):
    """If this thread runs on the job's caller's CPU, moves it elsewhere."""
    masks = self.load(b, st, MASKS, "monotonic")
    check = fn.append_basic_block("colocated_check")
    move = fn.append_basic_block("move")
    after = fn.append_basic_block("moved")
    b.cbranch(b.icmp_unsigned("!=", masks, _c(0)), check, after)
    b.position_at_end(check)
    cpu = b.sext(b.call(self.sched_getcpu, []), I64)
    caller = self.load(b, st, CALLER_CPU, "monotonic")
    same = b.and_(b.icmp_unsigned("==", cpu, caller),
                  b.icmp_unsigned("<=", cpu, self.load(b, st, MAX_CPU,
                                                       "monotonic")))
    b.cbranch(same, move, after)
    b.position_at_end(move)
    nbytes = self.load(b, st, MASK_BYTES, "monotonic")
    full = b.add(self.load(b, st, MAX_CPU, "monotonic"), _c(1))
    for index in (cpu, full):
      mask = b.add(masks, b.mul(index, nbytes))
      b.call(self.syscall, [_c(self.sys_setaffinity), _c(0), nbytes, mask])
    b.atomic_rmw("add", self.word(b, st, NUDGES), _c(1), "monotonic")
    b.branch(after)
    b.position_at_end(after)

  # void work(i64* st, i64 gen): claims and runs parts of job `gen`.
  def emit_work(self) -> ir.Function:
    fn = ir.Function(self.module, ir.FunctionType(
        ir.VoidType(), [I64.as_pointer(), I64]), "xla_cpu_pool_work")
    fn.linkage = "internal"
    st, gen = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    loop = fn.append_basic_block("loop")
    check = fn.append_basic_block("check")
    claim = fn.append_basic_block("claim")
    run = fn.append_basic_block("run")
    done = fn.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    w = self.load(b, st, CLAIM)
    b.cbranch(b.icmp_unsigned("!=", b.lshr(w, _c(32)), gen), done, check)
    b.position_at_end(check)
    n = b.and_(b.lshr(w, _c(16)), _c(MAX_PARTS))
    i = b.and_(w, _c(MAX_PARTS))
    b.cbranch(b.icmp_unsigned(">=", i, n), done, claim)
    b.position_at_end(claim)
    kfn = self.load(b, st, FN, "monotonic")
    args = self.load(b, st, ARGS, "monotonic")
    extent = self.load(b, st, EXTENT, "monotonic")
    pair = b.cmpxchg(self.word(b, st, CLAIM), w, b.add(w, _c(1)), "acq_rel",
                     "acquire")
    b.cbranch(b.extract_value(pair, 1), run, loop)
    b.position_at_end(run)
    begin = b.udiv(b.mul(extent, i), n)
    end = b.udiv(b.mul(extent, b.add(i, _c(1))), n)
    b.call(b.inttoptr(kfn, KERNEL_TYPE.as_pointer()),
           [b.inttoptr(args, KERNEL_TYPE.args[0]), begin, end])
    b.atomic_rmw("add", self.word(b, st, DONE), _c(1), "release")
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()
    return fn

  # void xla_cpu_pool_worker(i64* st): a worker's life.
  def emit_worker(self, work: ir.Function) -> ir.Function:
    fn = ir.Function(self.module, ir.FunctionType(
        ir.VoidType(), [I64.as_pointer()]), "xla_cpu_pool_worker")
    st, = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    my_gen = b.alloca(I64, name="my_gen")
    spins = b.alloca(I64, name="spins")
    b.store(b.lshr(self.load(b, st, CLAIM), _c(32)), my_gen)
    b.store(_c(0), spins)
    wait = fn.append_basic_block("wait")
    check_stop = fn.append_basic_block("check_stop")
    spin = fn.append_basic_block("spin")
    sleep = fn.append_basic_block("sleep")
    do_sleep = fn.append_basic_block("do_sleep")
    woke = fn.append_basic_block("woke")
    run = fn.append_basic_block("run")
    done = fn.append_basic_block("done")
    b.branch(wait)

    b.position_at_end(wait)
    g = b.lshr(self.load(b, st, CLAIM), _c(32))
    b.cbranch(b.icmp_unsigned("!=", g, b.load(my_gen)), run, check_stop)

    b.position_at_end(check_stop)
    stop = self.load(b, st, STOP, "monotonic")
    more = b.icmp_unsigned("<", b.load(spins), _c(WORKER_SPINS))
    go_on = fn.append_basic_block("go_on")
    b.cbranch(b.icmp_unsigned("!=", stop, _c(0)), done, go_on)
    b.position_at_end(go_on)
    b.cbranch(more, spin, sleep)

    b.position_at_end(spin)
    self.pause(b)
    b.store(b.add(b.load(spins), _c(1)), spins)
    b.branch(wait)

    b.position_at_end(sleep)
    b.atomic_rmw("add", self.word(b, st, SLEEPERS), _c(1), "seq_cst")
    expect = b.trunc(b.load(my_gen), I32)
    cur = b.load_atomic(self.futex_ptr(b, st), "seq_cst", 4)
    b.cbranch(b.icmp_unsigned("==", cur, expect), do_sleep, woke)
    b.position_at_end(do_sleep)
    self.futex(b, st, _FUTEX_WAIT_PRIVATE, b.zext(expect, I64))
    b.branch(woke)
    b.position_at_end(woke)
    b.atomic_rmw("sub", self.word(b, st, SLEEPERS), _c(1), "seq_cst")
    b.store(_c(0), spins)
    b.branch(wait)

    b.position_at_end(run)
    b.store(g, my_gen)
    self.move_off_caller(b, fn, st)
    b.call(work, [st, g])
    b.store(_c(0), spins)
    b.branch(wait)

    b.position_at_end(done)
    b.ret_void()
    return fn

  # void xla_cpu_pool_run(i64* st, i64 fn, i64 args, i64 extent, i64 parts)
  def emit_run(self, work: ir.Function) -> ir.Function:
    fn = ir.Function(self.module, ir.FunctionType(
        ir.VoidType(), [I64.as_pointer(), I64, I64, I64, I64]),
                     "xla_cpu_pool_run")
    st, kfn, args, extent, parts = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    spins = b.alloca(I64, name="spins")
    try_lock = fn.append_basic_block("try_lock")
    inline = fn.append_basic_block("inline")
    dispatch = fn.append_basic_block("dispatch")
    wake = fn.append_basic_block("wake")
    participate = fn.append_basic_block("participate")
    wait = fn.append_basic_block("wait")
    spin = fn.append_basic_block("spin")
    finish = fn.append_basic_block("finish")
    b.cbranch(b.icmp_unsigned("<=", parts, _c(1)), inline, try_lock)

    b.position_at_end(try_lock)
    pair = b.cmpxchg(self.word(b, st, BUSY), _c(0), _c(1), "acquire",
                     "monotonic")
    b.cbranch(b.extract_value(pair, 1), dispatch, inline)

    b.position_at_end(inline)
    b.call(b.inttoptr(kfn, KERNEL_TYPE.as_pointer()),
           [b.inttoptr(args, KERNEL_TYPE.args[0]), _c(0), extent])
    b.ret_void()

    b.position_at_end(dispatch)
    n = b.select(b.icmp_unsigned(">", parts, _c(MAX_PARTS)), _c(MAX_PARTS),
                 parts)
    self.store(b, st, DONE, _c(0), "monotonic")
    self.store(b, st, FN, kfn, "monotonic")
    self.store(b, st, ARGS, args, "monotonic")
    self.store(b, st, EXTENT, extent, "monotonic")
    self.store(b, st, CALLER_CPU, b.sext(b.call(self.sched_getcpu, []), I64),
               "monotonic")
    old = self.load(b, st, CLAIM, "monotonic")
    gen = b.and_(b.add(b.lshr(old, _c(32)), _c(1)), _c(0xFFFFFFFF))
    self.store(b, st, CLAIM, b.or_(b.shl(gen, _c(32)), b.shl(n, _c(16))),
               "release")
    b.store_atomic(b.trunc(gen, I32), self.futex_ptr(b, st), "seq_cst", 4)
    sleepers = self.load(b, st, SLEEPERS, "seq_cst")
    b.cbranch(b.icmp_unsigned("!=", sleepers, _c(0)), wake, participate)

    b.position_at_end(wake)
    self.futex(b, st, _FUTEX_WAKE_PRIVATE, b.sub(n, _c(1)))
    b.branch(participate)

    b.position_at_end(participate)
    b.call(work, [st, gen])
    b.store(_c(0), spins)
    b.branch(wait)

    b.position_at_end(wait)
    finished = self.load(b, st, DONE)
    b.cbranch(b.icmp_unsigned(">=", finished, n), finish, spin)

    b.position_at_end(spin)
    k = b.add(b.load(spins), _c(1))
    b.store(k, spins)
    with b.if_else(b.icmp_unsigned(
        "==", b.urem(k, _c(YIELD_EVERY)), _c(0))) as (then, other):
      with then:
        b.call(self.sched_yield, [])
      with other:
        self.pause(b)
    b.branch(wait)

    b.position_at_end(finish)
    self.store(b, st, BUSY, _c(0))
    b.ret_void()
    return fn


def emit(module: ir.Module) -> tuple[ir.Function, ir.Function]:
  """Adds the pool's functions to `module`; returns (run, worker)."""
  e = _Emitter(module)
  work = e.emit_work()
  return e.emit_run(work), e.emit_worker(work)


# -- Python side --------------------------------------------------------------

RUN_CFUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64,
                             ctypes.c_uint64, ctypes.c_int64, ctypes.c_int64)
WORKER_CFUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_LOCK = threading.Lock()
_COMPILED: list = []


def _functions():
  """(jit, run address, run cfunc, worker cfunc), compiled once."""
  with _LOCK:
    if not _COMPILED:
      from xla.service.cpu import jit as jit_lib  # pylint: disable=g-import-not-at-top

      def build():
        module = ir.Module(name="xla_cpu_pool")
        emit(module)
        return module

      jit = jit_lib.CpuJit(0)  # spin loops and atomics: O0 is as good
      jit.load_cached(build, "native_pool")
      run_addr = jit.address("xla_cpu_pool_run")
      _COMPILED.extend([jit, run_addr, RUN_CFUNC(run_addr),
                        WORKER_CFUNC(jit.address("xla_cpu_pool_worker"))])
    return tuple(_COMPILED)


def _affinity_masks() -> Optional[np.ndarray]:
  """uint8[max_cpu + 2, nbytes]: row c is this process's allowed CPUs
  less c, the last row all of them; None with fewer than two CPUs."""
  try:
    allowed = sorted(os.sched_getaffinity(0))
  except (AttributeError, OSError):
    return None
  if len(allowed) < 2:
    return None
  max_cpu = allowed[-1]
  nbytes = (max_cpu // 64 + 1) * 8
  bits = np.zeros((max_cpu + 2, nbytes * 8), np.uint8)
  bits[:, allowed] = 1
  bits[allowed, allowed] = 0
  return np.packbits(bits, axis=1, bitorder="little")


class NativePool:
  """`workers` native worker threads plus the calling thread."""

  native = True

  def __init__(self, workers: int):
    self.workers = max(0, int(workers))
    raw = np.zeros(STATE_WORDS + 8, np.int64)
    off = (-raw.ctypes.data % 64) // 8
    self.state = raw[off:off + STATE_WORDS]
    self.address = self.state.ctypes.data
    _, run_addr, self._run, worker = _functions()
    self.state[RUN_FN] = run_addr
    self.state[CALLER_CPU] = -1
    self._masks = _affinity_masks()
    if self._masks is not None:
      self.state[MASKS] = self._masks.ctypes.data
      self.state[MASK_BYTES] = self._masks.shape[1]
      self.state[MAX_CPU] = self._masks.shape[0] - 2
    self._threads = []
    for i in range(self.workers):
      t = threading.Thread(target=worker, args=(self.address,),
                           name=f"xla-cpu-native-{i}", daemon=True)
      t.start()
      self._threads.append(t)

  def nudges(self) -> int:
    """How many times a worker has moved off its caller's CPU."""
    return int(self.state[NUDGES])

  def worker_ids(self) -> list[int]:
    """The workers' native thread ids."""
    return [t.native_id for t in self._threads]

  def run_kernel(self, fn: int, args: int, extent: int, parts: int) -> None:
    """Runs kernel `fn` over [0, extent) in `parts` parts."""
    self._run(self.address, fn, args, extent, parts)

  def close(self, timeout: Optional[float] = 5.0) -> None:
    """Stops the workers (they finish the job in hand first)."""
    self.state[STOP] = 1
    futex = self.state[FUTEX:FUTEX + 1].view(np.int32)
    futex[0] += 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.syscall(ctypes.c_long(_SYS_FUTEX[platform.machine()]),
                 ctypes.c_void_p(futex.ctypes.data),
                 ctypes.c_long(_FUTEX_WAKE_PRIVATE),
                 ctypes.c_long(1 << 30), None, None, ctypes.c_long(0))
    for t in self._threads:
      t.join(timeout)
    self._threads = [t for t in self._threads if t.is_alive()]
