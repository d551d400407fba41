"""Runs sequences of thunks in native code instead of Python.

A Python thunk costs a few microseconds (one ctypes call per kernel, and
the interpreter loop around it), which dominates programs of many small
kernels and, above all, while loops with small bodies. This module
encodes a run of thunks that need no Python (kernels, copies, and while
loops / conditionals / sequences made only of those) into a small int64
*program* executed by one native interpreter, built once per process:

    KERNEL  [0, function address, slot byte offset, extent]
    PKERNEL [4, function address, slot byte offset, extent, parts]
    COPY    [1, src slot byte offset, dst slot byte offset, bytes]
    WHILE   [2, len(cond), pred slot byte offset, len(body)] cond body
    COND    [3, index slot byte offset, is_pred, n] len_0 .. len_n-1
            branch_0 .. branch_n-1

(slot byte offsets index the execution's pointer table; COPY skips equal
addresses; COND treats an out-of-range index as the last branch, as XLA
does.) PKERNEL is a kernel split across threads: the interpreter hands it
to the native worker pool (native_pool.py) whose state the execution
passes in, or runs it whole when there is none. A custom call, or a loop
containing one, stays a Python thunk; so does a split kernel where the
native pool is not available.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Optional

import numpy as np
from llvmlite import ir

from xla.service.cpu import native_pool
from xla.service.cpu import thunk as thunk_lib

KERNEL, COPY, WHILE, COND, PKERNEL = 0, 1, 2, 3, 4

_LOCK = threading.Lock()
_RUNNER: list = []


def _build_runner(module: ir.Module) -> ir.Function:
  i8 = ir.IntType(8)
  i8p = i8.as_pointer()
  i32 = ir.IntType(32)
  i64 = ir.IntType(64)
  i1 = ir.IntType(1)

  def c(v):
    return ir.Constant(i64, v)

  kty = ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64])
  fn = ir.Function(module, ir.FunctionType(
      ir.VoidType(), [i8p, i64.as_pointer(), i64, i64.as_pointer()]),
                   "xla_cpu_run_program")
  table, prog, n, pool = fn.args
  pool_run_ty = ir.FunctionType(ir.VoidType(), [i64.as_pointer(), i64, i64,
                                                i64, i64])
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  pc = b.alloca(i64, name="pc")
  off_slot = b.alloca(i64, name="cond.offset")
  tot_slot = b.alloca(i64, name="cond.total")
  j_slot = b.alloca(i64, name="cond.j")
  b.store(c(0), pc)
  header = fn.append_basic_block("header")
  dispatch = fn.append_basic_block("dispatch")
  done = fn.append_basic_block("done")
  b.branch(header)

  b.position_at_end(header)
  cur = b.load(pc)
  b.cbranch(b.icmp_signed("<", cur, n), dispatch, done)

  b.position_at_end(dispatch)
  cur = b.load(pc)

  def word(k):
    return b.load(b.gep(prog, [b.add(cur, c(k))]))

  op, a1, a2, a3 = word(0), word(1), word(2), word(3)

  def slot_address(off):
    """The address stored in the pointer table at byte offset `off`."""
    p = b.bitcast(b.gep(table, [off]), i64.as_pointer())
    return b.inttoptr(b.load(p), i8p)

  blocks = {k: fn.append_basic_block(name) for k, name in
            ((KERNEL, "kernel"), (COPY, "copy"), (WHILE, "while"),
             (COND, "cond"), (PKERNEL, "pkernel"))}
  sw = b.switch(op, done)
  for k, blk in blocks.items():
    sw.add_case(ir.Constant(i64, k), blk)

  # KERNEL
  b.position_at_end(blocks[KERNEL])
  kfn = b.inttoptr(a1, kty.as_pointer())
  b.call(kfn, [b.bitcast(b.gep(table, [a2]), i8p.as_pointer()), c(0), a3])
  b.store(b.add(cur, c(4)), pc)
  b.branch(header)

  # PKERNEL: through the pool's run function (its address is in the pool
  # state), or whole when there is no pool.
  b.position_at_end(blocks[PKERNEL])
  kargs = b.gep(table, [a2])
  has_pool = b.icmp_unsigned("!=", b.ptrtoint(pool, i64), c(0))
  with b.if_else(has_pool) as (then, other):
    with then:
      run_addr = b.load(b.gep(pool, [c(native_pool.RUN_FN)]))
      b.call(b.inttoptr(run_addr, pool_run_ty.as_pointer()),
             [pool, a1, b.ptrtoint(kargs, i64), a3, word(4)])
    with other:
      b.call(b.inttoptr(a1, kty.as_pointer()),
             [b.bitcast(kargs, i8p.as_pointer()), c(0), a3])
  b.store(b.add(cur, c(5)), pc)
  b.branch(header)

  # COPY
  b.position_at_end(blocks[COPY])
  src, dst = slot_address(a1), slot_address(a2)
  with b.if_then(b.icmp_unsigned("!=", src, dst)):
    mm = module.declare_intrinsic("llvm.memmove", [i8p, i8p, i64])
    b.call(mm, [dst, src, a3, ir.Constant(i1, 0)])
  b.store(b.add(cur, c(4)), pc)
  b.branch(header)

  # WHILE
  b.position_at_end(blocks[WHILE])
  cstart = b.add(cur, c(4))
  cprog = b.gep(prog, [cstart])
  bprog = b.gep(prog, [b.add(cstart, a1)])
  wloop = fn.append_basic_block("while.loop")
  wbody = fn.append_basic_block("while.body")
  wdone = fn.append_basic_block("while.done")
  b.branch(wloop)
  b.position_at_end(wloop)
  b.call(fn, [table, cprog, a1, pool])
  pred = b.load(slot_address(a2))
  b.cbranch(b.icmp_unsigned("!=", pred, ir.Constant(i8, 0)), wbody, wdone)
  b.position_at_end(wbody)
  b.call(fn, [table, bprog, a3, pool])
  b.branch(wloop)
  b.position_at_end(wdone)
  b.store(b.add(b.add(cstart, a1), a3), pc)
  b.branch(header)

  # COND
  b.position_at_end(blocks[COND])
  addr = slot_address(a1)
  is_pred = b.icmp_unsigned("!=", a2, c(0))
  pblk = fn.append_basic_block("cond.pred")
  iblk = fn.append_basic_block("cond.index")
  sel = fn.append_basic_block("cond.select")
  b.cbranch(is_pred, pblk, iblk)
  b.position_at_end(pblk)
  pv = b.load(addr)
  kp = b.select(b.icmp_unsigned("!=", pv, ir.Constant(i8, 0)), c(0), c(1))
  b.branch(sel)
  b.position_at_end(iblk)
  iv = b.sext(b.load(b.bitcast(addr, i32.as_pointer())), i64)
  bad = b.or_(b.icmp_signed("<", iv, c(0)), b.icmp_signed(">=", iv, a3))
  ki = b.select(bad, b.sub(a3, c(1)), iv)
  b.branch(sel)
  b.position_at_end(sel)
  k = b.phi(i64)
  k.add_incoming(kp, pblk)
  k.add_incoming(ki, iblk)
  lens = b.add(cur, c(4))
  start = b.add(lens, a3)
  # offset = sum(len[j] for j < k); total = sum(len[j] for all j)
  b.store(c(0), off_slot)
  b.store(c(0), tot_slot)
  b.store(c(0), j_slot)
  sum_h = fn.append_basic_block("cond.sum")
  sum_b = fn.append_basic_block("cond.sum.body")
  sum_d = fn.append_basic_block("cond.sum.done")
  b.branch(sum_h)
  b.position_at_end(sum_h)
  j = b.load(j_slot)
  b.cbranch(b.icmp_signed("<", j, a3), sum_b, sum_d)
  b.position_at_end(sum_b)
  j = b.load(j_slot)
  ln = b.load(b.gep(prog, [b.add(lens, j)]))
  b.store(b.add(b.load(tot_slot), ln), tot_slot)
  with b.if_then(b.icmp_signed("<", j, k)):
    b.store(b.add(b.load(off_slot), ln), off_slot)
  b.store(b.add(j, c(1)), j_slot)
  b.branch(sum_h)
  b.position_at_end(sum_d)
  klen = b.load(b.gep(prog, [b.add(lens, k)]))
  b.call(fn, [table, b.gep(prog, [b.add(start, b.load(off_slot))]), klen,
              pool])
  b.store(b.add(start, b.load(tot_slot)), pc)
  b.branch(header)

  b.position_at_end(done)
  b.ret_void()
  return fn


def runner():
  """The process-wide native interpreter (ctypes function)."""
  with _LOCK:
    if not _RUNNER:
      from xla.service.cpu import jit as jit_lib  # pylint: disable=g-import-not-at-top

      def build():
        module = ir.Module(name="xla_cpu_runner")
        _build_runner(module)
        return module

      # O0: the interpreter is a dispatch loop around calls; optimising it
      # costs ~100 ms of every process's first compile for nothing
      # measurable.
      jit = jit_lib.CpuJit(0)
      jit.load_cached(build, "native_runner")
      cfn = ctypes.CFUNCTYPE(
          None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
          ctypes.c_void_p)(jit.address("xla_cpu_run_program"))
      _RUNNER.extend([jit, cfn])
    return _RUNNER[1]


def encode(t: thunk_lib.Thunk) -> Optional[list[int]]:
  """The program words of thunk `t`, or None if it needs Python."""
  if isinstance(t, thunk_lib.KernelThunk):
    if t.extent == 0:
      return []
    if len(t.bounds) != 1:
      if not native_pool.available():
        return None
      return [PKERNEL, t.address, t.slot_offset, t.extent, len(t.bounds)]
    return [KERNEL, t.address, t.slot_offset, t.extent]
  if isinstance(t, thunk_lib.CopyThunk):
    return [COPY, 8 * t.src, 8 * t.dst, t.nbytes] if t.nbytes else []
  if isinstance(t, thunk_lib.SequenceThunk):
    return encode_all(t.thunks)
  if isinstance(t, NativeProgramThunk):
    return list(t.program)
  if isinstance(t, thunk_lib.WhileThunk):
    init, cond, body = (encode_all(t.init), encode_all(t.cond),
                        encode_all(t.body))
    if init is None or cond is None or body is None:
      return None
    return init + [WHILE, len(cond), 8 * t.pred_slot, len(body)] + cond + body
  if isinstance(t, thunk_lib.ConditionalThunk):
    progs = [encode_all(br) for br in t.branches]
    if any(p is None for p in progs):
      return None
    out = [COND, 8 * t.index_slot, int(t.is_pred), len(progs)]
    out += [len(p) for p in progs]
    for p in progs:
      out += p
    return out
  return None


def encode_all(thunks) -> Optional[list[int]]:
  out: list[int] = []
  for t in thunks:
    words = encode(t)
    if words is None:
      return None
    out += words
  return out


class NativeProgramThunk(thunk_lib.Thunk):
  """Thunks run by the native interpreter in one ctypes call."""

  def __init__(self, thunks: list[thunk_lib.Thunk], program: list[int]):
    self.name = ",".join(t.name for t in thunks)
    self.thunks = thunks
    self.program = np.array(program, np.int64)
    self.count = len(program)
    self.program_addr = self.program.__array_interface__["data"][0]
    self.run_program = runner()

  def run(self, state: thunk_lib.ExecutionState) -> None:
    self.run_program(state.table_addr, self.program_addr, self.count,
                     state.pool_addr)


def _worth_it(run: list) -> bool:
  """A single kernel is as cheap as a Python thunk; anything more (several
  thunks, a loop, a branch) is not."""
  return len(run) > 1 or not isinstance(run[0], thunk_lib.KernelThunk)


def compile_thunks(thunks: list[thunk_lib.Thunk]) -> list[thunk_lib.Thunk]:
  """Replaces maximal runs of encodable thunks by NativeProgramThunks;
  Python-only containers get their children compiled the same way."""
  out: list[thunk_lib.Thunk] = []
  run: list[thunk_lib.Thunk] = []
  words: list[int] = []

  def flush():
    if run and _worth_it(run):
      out.append(NativeProgramThunk(list(run), list(words)))
    else:
      out.extend(run)
    run.clear()
    words.clear()

  for t in thunks:
    w = encode(t)
    if w is not None:
      run.append(t)
      words.extend(w)
      continue
    flush()
    if isinstance(t, thunk_lib.WhileThunk):
      t.init = compile_thunks(t.init)
      t.cond = compile_thunks(t.cond)
      t.body = compile_thunks(t.body)
    elif isinstance(t, thunk_lib.ConditionalThunk):
      t.branches = [compile_thunks(br) for br in t.branches]
    elif isinstance(t, thunk_lib.SequenceThunk):
      t.thunks = compile_thunks(t.thunks)
    out.append(t)
  flush()
  return out
