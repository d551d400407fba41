"""One native call that runs a whole compiled program: the execute plan in C.

`CpuExecutable.execute` costs microseconds of Python per call (reading the
arguments' addresses, filling the pointer table, allocating outputs, the
runner call). A runtime in front of it that keeps its buffers in native
memory (the PJRT plugin's native execute path) can instead call

    int32 xla_cpu_execute(int64* plan, int64* arguments, int64* outputs)

with the data addresses of the parameters and of freshly allocated output
buffers (`NativePlan.output_bytes` each, 64-byte aligned). It copies the
pointer table's template onto its stack, points the per-call slots at the
arguments, the outputs and the arena, runs the thunk program through the
native runner (native_runner.py), copies the results that are parameters,
constants or repeats into their output buffers, and returns 0. It returns
1 without running anything when it cannot get an arena (out of memory).

A program gets a plan only when all of its thunks run natively (no custom
call), every parameter is one array leaf, and every result is an array:
`plan_for` returns None otherwise, and the caller keeps to `execute`.

Plan words (int64, see the constants below); the per-call slots are
records of (slot, source kind, source index, byte offset) with kinds
PARAM, OUTPUT and ARENA; copies are records of (output, slot, bytes).

The arena is taken from a one-entry cache word by an atomic exchange (a
concurrent execution allocates its own and frees it afterwards).

BLAS: a program whose kernels call OpenBLAS holds it at one thread while
it runs, through blas.py's native pin (the one its Python pin uses).
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref
from typing import Any, Optional

import numpy as np

from xla.service.cpu import blas
from xla.service.cpu import native_ir
from xla.service.cpu import native_runner

# Plan words.
(SLOTS, TEMPLATE, NUM_DYNAMIC, DYNAMIC, PROGRAM, PROGRAM_COUNT, POOL,
 ARENA_BYTES, ARENA_CACHE, NUM_COPIES, COPIES, BLAS_PIN, RUNNER, ALLOC,
 FREE, PIN_FN, UNPIN_FN) = range(17)
PLAN_WORDS = 18
# Kinds of a per-call slot's source.
PARAM, OUTPUT, ARENA = 0, 1, 2
# Words per record: per-call slots (slot, kind, index, offset), copies
# (output, slot, bytes).
DYNAMIC_WORDS, COPY_WORDS = 4, 3
ALIGNMENT = 64
# The pointer table lives on the caller's stack: 8 bytes a slot.
MAX_SLOTS = 4096


_IR = (native_ir.WORDS + "\ndeclare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)\n" +
       f"""
define i32 @xla_cpu_execute(ptr %x, ptr %args, ptr %outs) {{
entry:
  %nslots = call i64 @word(ptr %x, i64 {SLOTS})
  %template = call ptr @pword(ptr %x, i64 {TEMPLATE})
  %table = alloca i64, i64 %nslots, align 16
  %tbytes = shl i64 %nslots, 3
  call void @llvm.memcpy.p0.p0.i64(ptr %table, ptr %template, i64 %tbytes, i1 false)
  %abytes = call i64 @word(ptr %x, i64 {ARENA_BYTES})
  %needs = icmp ne i64 %abytes, 0
  br i1 %needs, label %take, label %fill
take:
  %cache = getelementptr i64, ptr %x, i64 {ARENA_CACHE}
  %cached = atomicrmw xchg ptr %cache, i64 0 acq_rel
  %hit = icmp ne i64 %cached, 0
  br i1 %hit, label %fill, label %allocate
allocate:
  %allocf = call ptr @pword(ptr %x, i64 {ALLOC})
  %round = add i64 %abytes, 63
  %rounded = and i64 %round, -64
  %fresh = call i64 %allocf(i64 64, i64 %rounded)
  %got = icmp ne i64 %fresh, 0
  br i1 %got, label %fill, label %fail
fail:
  ret i32 1
fill:
  %arena = phi i64 [ 0, %entry ], [ %cached, %take ], [ %fresh, %allocate ]
  %ndyn = call i64 @word(ptr %x, i64 {NUM_DYNAMIC})
  %dyn = call ptr @pword(ptr %x, i64 {DYNAMIC})
  br label %dloop
dloop:
  %j = phi i64 [ 0, %fill ], [ %j1, %dset ]
  %dmore = icmp ult i64 %j, %ndyn
  br i1 %dmore, label %dbody, label %run
dbody:
  %r0 = mul i64 %j, {DYNAMIC_WORDS}
  %slot = call i64 @word(ptr %dyn, i64 %r0)
  %r1 = add i64 %r0, 1
  %kind = call i64 @word(ptr %dyn, i64 %r1)
  %r2 = add i64 %r0, 2
  %index = call i64 @word(ptr %dyn, i64 %r2)
  %r3 = add i64 %r0, 3
  %offset = call i64 @word(ptr %dyn, i64 %r3)
  switch i64 %kind, label %darena [ i64 {PARAM}, label %dparam
                                     i64 {OUTPUT}, label %dout ]
dparam:
  %pbase = call i64 @word(ptr %args, i64 %index)
  br label %dset
dout:
  %obase = call i64 @word(ptr %outs, i64 %index)
  br label %dset
darena:
  br label %dset
dset:
  %base = phi i64 [ %pbase, %dparam ], [ %obase, %dout ], [ %arena, %darena ]
  %address = add i64 %base, %offset
  %tp = getelementptr i64, ptr %table, i64 %slot
  store i64 %address, ptr %tp
  %j1 = add i64 %j, 1
  br label %dloop
run:
  %pin = call ptr @pword(ptr %x, i64 {BLAS_PIN})
  %pins = icmp ne ptr %pin, null
  br i1 %pins, label %dopin, label %call
dopin:
  %pinf = call ptr @pword(ptr %x, i64 {PIN_FN})
  call void %pinf(ptr %pin)
  br label %call
call:
  %runner = call ptr @pword(ptr %x, i64 {RUNNER})
  %program = call ptr @pword(ptr %x, i64 {PROGRAM})
  %count = call i64 @word(ptr %x, i64 {PROGRAM_COUNT})
  %pool = call ptr @pword(ptr %x, i64 {POOL})
  call void %runner(ptr %table, ptr %program, i64 %count, ptr %pool)
  br i1 %pins, label %dounpin, label %copies
dounpin:
  %unpinf = call ptr @pword(ptr %x, i64 {UNPIN_FN})
  call void %unpinf(ptr %pin)
  br label %copies
copies:
  %ncopies = call i64 @word(ptr %x, i64 {NUM_COPIES})
  %cp = call ptr @pword(ptr %x, i64 {COPIES})
  br label %cloop
cloop:
  %c = phi i64 [ 0, %copies ], [ %c1, %cbody ]
  %cmore = icmp ult i64 %c, %ncopies
  br i1 %cmore, label %cbody, label %release
cbody:
  %q0 = mul i64 %c, {COPY_WORDS}
  %out = call i64 @word(ptr %cp, i64 %q0)
  %q1 = add i64 %q0, 1
  %cslot = call i64 @word(ptr %cp, i64 %q1)
  %q2 = add i64 %q0, 2
  %cbytes = call i64 @word(ptr %cp, i64 %q2)
  %dst = call ptr @pword(ptr %outs, i64 %out)
  %src = call ptr @pword(ptr %table, i64 %cslot)
  call void @llvm.memcpy.p0.p0.i64(ptr %dst, ptr %src, i64 %cbytes, i1 false)
  %c1 = add i64 %c, 1
  br label %cloop
release:
  %hasarena = icmp ne i64 %arena, 0
  br i1 %hasarena, label %give, label %done
give:
  %cache2 = getelementptr i64, ptr %x, i64 {ARENA_CACHE}
  %swap = cmpxchg ptr %cache2, i64 0, i64 %arena acq_rel monotonic
  %kept = extractvalue {{ i64, i1 }} %swap, 1
  br i1 %kept, label %done, label %drop
drop:
  %freef = call ptr @pword(ptr %x, i64 {FREE})
  call void %freef(i64 %arena)
  br label %done
done:
  ret i32 0
}}
""")


_LOCK = threading.Lock()
_BUILT: dict[str, Any] = {}
_LIBC = ctypes.CDLL(None)
_LIBC.free.argtypes = [ctypes.c_void_p]
_LIBC.free.restype = None
_LIBC.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_LIBC.aligned_alloc.restype = ctypes.c_void_p
ALIGNED_ALLOC_ADDRESS = ctypes.cast(_LIBC.aligned_alloc, ctypes.c_void_p).value
FREE_ADDRESS = ctypes.cast(_LIBC.free, ctypes.c_void_p).value


def _built() -> dict[str, Any]:
  """The process's compiled functions (built on first use)."""
  with _LOCK:
    if not _BUILT:
      from xla.service.cpu import jit as jit_lib  # pylint: disable=g-import-not-at-top
      # O1: a dispatch loop around calls, nothing to vectorise.
      jit = jit_lib.CpuJit(1)
      jit.load_cached(_IR, "native_execute")
      _BUILT["jit"] = jit
      _BUILT["xla_cpu_execute"] = jit.address("xla_cpu_execute")
    return _BUILT


def execute_address() -> int:
  """The address of `xla_cpu_execute`."""
  return _built()["xla_cpu_execute"]


class NativePlan:
  """A program's plan for `xla_cpu_execute` (see the module docstring).

  Attributes:
    address: the plan's words.
    entry: the address of `xla_cpu_execute`.
    output_bytes: bytes to allocate per result (64-byte aligned, > 0).
    num_params: arguments the call takes.
    donate_to: per parameter, the result whose buffer is the parameter's
      own memory (-1: none; see `plan_for`).
  """

  def __init__(self, words: np.ndarray, keep: list, output_bytes: list[int],
               donate_to: list[int]):
    self.words = words
    self.address = int(words.__array_interface__["data"][0])
    self.entry = execute_address()
    self._keep = keep
    self.output_bytes = output_bytes
    self.num_params = len(donate_to)
    self.donate_to = donate_to
    weakref.finalize(self, _free_cached_arena, words)


def _free_cached_arena(words: np.ndarray) -> None:
  arena = int(words[ARENA_CACHE])
  words[ARENA_CACHE] = 0
  if arena:
    _LIBC.free(arena)


def _array(values: list[int]) -> np.ndarray:
  return np.array(values or [0], np.int64)


def plan_for(*, slots: list, params: list, allocations: list,
             outputs: list, static_bases: np.ndarray, program: list[int],
             pool_address: int, blas_pin: int,
             donation: Optional[dict[int, list[int]]] = None,
             donated: frozenset[int] = frozenset()) -> Optional[NativePlan]:
  """The native plan of a program, or None where it needs Python.

  Args:
    slots: the plan's [(allocation, offset)] per table slot.
    params: per parameter, its allocation (None: not read through one).
    allocations: the buffer assignment's allocation dicts.
    outputs: per result (allocation, slot, numpy dtype, dims), or None for
      a result that is not an array.
    static_bases: per allocation, its address where fixed (constants).
    program: the native runner's words for the whole thunk list.
    pool_address: the native worker pool's state (0: none).
    blas_pin: the BLAS pin state's address (0: the program calls no BLAS).
    donation: per parameter, the output allocations its memory may stand
      in for when it is donated (the compiler's donation candidates).
    donated: the parameters the caller donates. `NativePlan.donate_to`
      says, per parameter, which result's buffer the caller passes that
      parameter's memory as (or -1: none); the program then writes that
      result in place.
  """
  if len(slots) > MAX_SLOTS or any(o is None for o in outputs):
    return None
  param_of = {a: i for i, a in enumerate(params) if a is not None}
  # Each output allocation backs the first result that names it; others
  # (and results in parameters or constants) are copied out after the run.
  first_result: dict[int, int] = {}
  copies: list[int] = []
  output_bytes = []
  for k, (alloc, slot, dtype, dims) in enumerate(outputs):
    nbytes = math.prod(dims) * np.dtype(dtype).itemsize
    if (allocations[alloc]["kind"] == "output" and
        alloc not in first_result):
      first_result[alloc] = k
      nbytes = max(nbytes, int(allocations[alloc]["size"]))
    else:
      copies += [k, slot, nbytes]
    output_bytes.append(max(ALIGNMENT, -(-nbytes // ALIGNMENT) * ALIGNMENT))
  donate_to = [-1] * len(params)
  taken: set[int] = set()
  for j in sorted(donated):
    for alloc in (donation or {}).get(j, ()):
      if alloc in first_result and alloc not in taken:
        taken.add(alloc)
        donate_to[j] = first_result[alloc]
        break
  template, dynamic = [], []
  for slot, (alloc, offset) in enumerate(slots):
    alloc, offset = int(alloc), int(offset)
    kind = allocations[alloc]["kind"]
    template.append(0)
    if alloc in param_of:
      dynamic += [slot, PARAM, param_of[alloc], offset]
    elif kind == "output":
      if alloc not in first_result:
        return None
      dynamic += [slot, OUTPUT, first_result[alloc], offset]
    elif kind == "temp":
      dynamic += [slot, ARENA, 0, offset]
    elif kind == "parameter":
      return None  # A parameter not read as one array.
    else:
      template[-1] = int(static_bases[alloc]) + offset
  arena_bytes = sum(int(a["size"]) for a in allocations
                    if a["kind"] == "temp")
  keep = [_array(template), _array(dynamic), _array(program),
          _array(copies)]
  words = np.zeros(PLAN_WORDS, np.int64)
  words[SLOTS] = len(template)
  words[TEMPLATE] = keep[0].__array_interface__["data"][0]
  words[NUM_DYNAMIC] = len(dynamic) // DYNAMIC_WORDS
  words[DYNAMIC] = keep[1].__array_interface__["data"][0]
  words[PROGRAM] = keep[2].__array_interface__["data"][0]
  words[PROGRAM_COUNT] = len(program)
  words[POOL] = pool_address
  words[ARENA_BYTES] = arena_bytes
  words[NUM_COPIES] = len(copies) // COPY_WORDS
  words[COPIES] = keep[3].__array_interface__["data"][0]
  if blas_pin:
    words[BLAS_PIN] = blas_pin
    words[PIN_FN], words[UNPIN_FN] = blas.pin_functions()
  words[RUNNER] = ctypes.cast(native_runner.runner(), ctypes.c_void_p).value
  words[ALLOC] = ALIGNED_ALLOC_ADDRESS
  words[FREE] = FREE_ADDRESS
  return NativePlan(words, keep, output_bytes, donate_to)


def pool_address(pool: Any) -> int:
  """The native pool's state address for the runner (0: none)."""
  if pool is not None and getattr(pool, "native", False):
    return int(pool.address)
  return 0
