"""The thunk runtime pieces: the worker pool, kernel batching, views."""

import os
import threading
import time

import numpy as np
import pytest
from llvmlite import ir

from xla.service.cpu import jit as jit_lib
from xla.service.cpu import kernel_api
from xla.service.cpu import native_pool
from xla.service.cpu import native_runner
from xla.service.cpu import thunk


def _add_one_kernel():
  """A kernel adding 1.0 to float elements [begin, end) of args[0]."""
  module = ir.Module()
  ctx = kernel_api.KernelContext(module)
  fn, b = ctx.new_kernel("add_one")
  p = ctx.arg_pointer(b, fn, 0, kernel_api.PrimitiveType.F32)
  begin, end = fn.args[1], fn.args[2]
  pre = b.block
  loop = fn.append_basic_block("loop")
  done = fn.append_basic_block("done")
  b.cbranch(b.icmp_signed("<", begin, end), loop, done)
  b.position_at_end(loop)
  i = b.phi(kernel_api.I64)
  i.add_incoming(begin, pre)
  ptr = b.gep(p, [i])
  b.store(b.fadd(b.load(ptr), ir.Constant(ir.FloatType(), 1.0)), ptr)
  nxt = b.add(i, ir.Constant(kernel_api.I64, 1))
  i.add_incoming(nxt, loop)
  b.cbranch(b.icmp_signed("<", nxt, end), loop, done)
  b.position_at_end(done)
  b.ret_void()
  jit = jit_lib.CpuJit()
  jit.compile(module)
  return jit, jit.address("add_one")


def _state(table):
  return thunk.ExecutionState(table, {}, thunk.thread_pool(2))


def test_parallel_kernel_covers_extent_once():
  jit, addr = _add_one_kernel()
  data = np.zeros(1000, np.float32)
  table = np.array([data.ctypes.data], np.uint64)
  k = thunk.KernelThunk("k", addr, 0, 1000, 10 ** 9, threads=2)
  assert len(k.bounds) == 2 and k.bounds[0][1] == k.bounds[1][0]
  k.run(_state(table))
  np.testing.assert_array_equal(data, 1)
  del jit


def test_native_program_runs_kernels_copies_and_loops_in_order():
  jit, addr = _add_one_kernel()
  a = np.zeros(10, np.float32)
  b = np.zeros(4, np.float32)
  flag = np.zeros(1, np.uint8)
  table = np.array([a.ctypes.data, b.ctypes.data, flag.ctypes.data],
                   np.uint64)
  small = [thunk.KernelThunk(f"k{i}", addr, i % 2, 10 if i % 2 == 0 else 4,
                             1, threads=2) for i in range(5)]
  empty = thunk.KernelThunk("e", addr, 0, 0, 1, threads=2)
  big = thunk.KernelThunk("big", addr, 0, 10, 10 ** 9, threads=2)
  # A loop whose condition is false at once, and a pred conditional
  # taking its false branch (flag == 0): copy a -> b's first 4 floats.
  loop = thunk.WhileThunk("w", [], [], 2, [small[0]])
  cond = thunk.ConditionalThunk("c", 2, True, [[small[1]], [
      thunk.CopyThunk("cp", 0, 1, 16)]])
  seq = native_runner.compile_thunks(
      small[:3] + [empty, big] + small[3:] + [loop, cond])
  kinds = [type(t).__name__ for t in seq]
  if native_pool.available():
    # The split kernel goes to the native pool from inside the program.
    assert kinds == ["NativeProgramThunk"]
  else:
    assert kinds == ["NativeProgramThunk", "KernelThunk",
                     "NativeProgramThunk"]
  state = _state(table)
  for t in seq:
    t.run(state)
  np.testing.assert_array_equal(a, 4)  # k0, k2, big, k4
  np.testing.assert_array_equal(b, 4)  # copied from a after k1, k3
  del jit


def test_native_pool_runs_every_part_once():
  if not native_pool.available():
    pytest.skip("no native pool on this host")
  jit, addr = _add_one_kernel()
  pool = native_pool.NativePool(2)
  try:
    data = np.zeros(1003, np.float32)
    table = np.array([data.ctypes.data], np.uint64)
    for parts in (1, 2, 3, 5, 1003, 2000):
      pool.run_kernel(addr, table.ctypes.data, 1003, parts)
    np.testing.assert_array_equal(data, 6)
    for _ in range(500):  # back-to-back jobs: no part lost or repeated
      pool.run_kernel(addr, table.ctypes.data, 7, 3)
    np.testing.assert_array_equal(data[:7], 506)
    np.testing.assert_array_equal(data[7:], 6)
  finally:
    pool.close()
  assert not pool._threads  # pylint: disable=protected-access
  del jit


def test_native_pool_worker_moves_off_its_callers_cpu():
  if not native_pool.available():
    pytest.skip("no native pool on this host")
  allowed = sorted(os.sched_getaffinity(0))
  if len(allowed) < 2:
    pytest.skip("needs two CPUs")
  jit, addr = _add_one_kernel()
  pool = native_pool.NativePool(1)
  data = np.zeros(4096, np.float32)
  table = np.array([data.ctypes.data], np.uint64)
  try:
    # Put the caller and the worker on the same CPU, as the scheduler
    # sometimes does; the worker must leave it and keep the full set.
    os.sched_setaffinity(0, {allowed[0]})
    worker, = pool.worker_ids()
    os.sched_setaffinity(worker, {allowed[0]})
    deadline = time.monotonic() + 10
    jobs = 0
    while pool.nudges() == 0 and time.monotonic() < deadline:
      pool.run_kernel(addr, table.ctypes.data, 4096, 4)
      jobs += 1
      time.sleep(0.01)  # lets the worker run on the shared CPU
    assert pool.nudges() >= 1
    assert os.sched_getaffinity(worker) == set(allowed)
  finally:
    os.sched_setaffinity(0, set(allowed))
    pool.close()
  np.testing.assert_array_equal(data, jobs)
  del jit


def test_native_pool_is_shared_by_concurrent_callers():
  if not native_pool.available():
    pytest.skip("no native pool on this host")
  jit, addr = _add_one_kernel()
  pool = native_pool.NativePool(1)
  arrays = [np.zeros(4096, np.float32) for _ in range(4)]
  tables = [np.array([a.ctypes.data], np.uint64) for a in arrays]

  def hammer(table):
    for _ in range(200):
      pool.run_kernel(addr, table.ctypes.data, 4096, 4)

  try:
    threads = [threading.Thread(target=hammer, args=(t,)) for t in tables]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
  finally:
    pool.close()
  for a in arrays:
    np.testing.assert_array_equal(a, 200)
  del jit


def _less_than_kernel(limit: float):
  """A kernel writing pred args[1][0] = (f32 args[0][0] < limit)."""
  module = ir.Module()
  ctx = kernel_api.KernelContext(module)
  fn, b = ctx.new_kernel("less_than")
  x = ctx.arg_pointer(b, fn, 0, kernel_api.PrimitiveType.F32)
  out = ctx.arg_pointer(b, fn, 1, kernel_api.PrimitiveType.U8)
  lt = b.fcmp_ordered("<", b.load(x), ir.Constant(ir.FloatType(), limit))
  b.store(b.zext(lt, ir.IntType(8)), out)
  b.ret_void()
  jit = jit_lib.CpuJit()
  jit.compile(module)
  return jit, jit.address("less_than")


def test_native_while_loop_with_split_kernel():
  """A loop whose body has a kernel split across threads runs as one
  native program (no Python per iteration); every iteration covers the
  split kernel's whole extent once."""
  jit, add_one = _add_one_kernel()
  jit2, less_than = _less_than_kernel(5.0)
  data = np.zeros(1000, np.float32)
  counter = np.zeros(1, np.float32)
  pred = np.zeros(1, np.uint8)
  table = np.array([data.ctypes.data, counter.ctypes.data, pred.ctypes.data],
                   np.uint64)
  split = thunk.KernelThunk("split", add_one, 0, 1000, 10 ** 9, threads=2)
  assert len(split.bounds) == 2
  step = thunk.KernelThunk("step", add_one, 1, 1, 1, threads=2)
  cond = thunk.KernelThunk("cond", less_than, 1, 1, 1, threads=2)
  loop = thunk.WhileThunk("w", [], [cond], 2, [split, step])
  seq = native_runner.compile_thunks([loop])
  if native_pool.available():
    assert [type(t).__name__ for t in seq] == ["NativeProgramThunk"]
  for t in seq:
    t.run(_state(table))
  np.testing.assert_array_equal(data, 5)
  np.testing.assert_array_equal(counter, 5)
  # With no pool in the state the program runs the split kernel whole.
  counter[0] = 0
  for t in seq:
    t.run(thunk.ExecutionState(table, {}, None))
  np.testing.assert_array_equal(data, 10)
  del jit, jit2


def test_copy_and_conditional_thunks():
  src = np.arange(4, dtype=np.int32)
  dst = np.zeros(4, np.int32)
  sel = np.array([5], np.int32)
  table = np.array([src.ctypes.data, dst.ctypes.data, sel.ctypes.data],
                   np.uint64)
  state = _state(table)
  c = thunk.ConditionalThunk("c", 2, False, [[], [thunk.CopyThunk(
      "cp", 0, 1, 16)]])
  c.run(state)  # index 5 is out of range: the last branch runs
  np.testing.assert_array_equal(dst, src)


def test_array_view_is_zero_copy():
  a = np.arange(6, dtype=np.float64)
  v = thunk.array_view(a.ctypes.data, np.dtype(np.float64), (2, 3))
  v[1, 2] = -1
  assert a[5] == -1
  assert thunk.array_view(0, np.dtype(np.float32), (0, 3)).shape == (0, 3)
