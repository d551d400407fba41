"""A compiled CPU program: JIT'ed kernels, a thunk list and its buffers.

Memory, per the buffer assignment (see thunk_emitter.py for the plan):

* temporaries live in one *arena* (a 64-byte aligned numpy uint8 array)
  reused by every execution (an execution running concurrently with
  another gets an arena of its own from a small pool);
* each output allocation is a fresh aligned buffer per execution, and the
  returned arrays are views of it (no copy); an output that is a
  parameter, a constant or a repeat of another output is copied out;
* parameters are read in place from the caller's arrays (converted to the
  expected dtype / C order only when they are not already);
* constants are numpy arrays built once at load time;
* a *donated* parameter's memory may stand in for an output allocation
  when the compiler proved it safe (`donation` in the plan); the caller's
  array then holds the result.

`execute` fills a table of base addresses, computes every slot's address
with one numpy operation, and runs the prebuilt thunks.

The common call (every parameter a plain C-ordered array of the exact
dtype and shape, nothing donated, no extra custom-call handlers) takes a
precomputed *execute plan* instead (`_FastPlan`): pointer tables whose
constant slots are filled once and reused from a pool, the list of slots
that change per call with the base each comes from, and the output views'
dtypes, shapes and offsets, so a call only reads the arguments' addresses,
allocates the output block, writes a few table entries and runs.

A program of several participants (replicas x partitions > 1; the plan's
`participants`) runs one instance per participant: `execute_spmd` runs
them all on their own threads, or a runtime with its own threads calls
`execute(args, participant=...)` for each with a `collectives.Participant`
of one shared `collectives.CollectiveExecution`. Its collectives,
replica-id and partition-id are collective thunks (collectives.py) and it
always takes the general path; a program without them runs each instance
as a single-device call.

Threads: the runtime splits kernels across its own pool (thunk.py), so
while a program that calls BLAS runs, OpenBLAS (numpy's, process-wide) is
held at one thread and restored afterwards. Letting both split the same
work oversubscribes the cores: measured on the bench's 2-core machine,
mlp_train took 39 ms with OpenBLAS at its default 2 threads and 17 ms at 1,
and a transformer's many small per-head gemms 636 ms against 57 ms.
"""

from __future__ import annotations

import base64
import ctypes
import math
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

import support
from xla.service.cpu import blas
from xla.service.cpu import buffer_pool
from xla.service.cpu import collectives
from xla.service.cpu import native_execute
from xla.service.cpu import native_runner
from xla.service.cpu import thunk as thunk_lib
from xla.service.cpu.thunk_emitter import numpy_dtype

ALIGNMENT = buffer_pool.ALIGNMENT


def aligned_empty(nbytes: int) -> np.ndarray:
  """An uninitialised uint8 array of `nbytes` starting 64-byte aligned."""
  return buffer_pool.aligned_empty(nbytes)[0]


def _address(arr: np.ndarray) -> int:
  return arr.__array_interface__["data"][0]


_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _data_address(arr: np.ndarray) -> int:
  """The data address of a C-contiguous array (cheaper than `_address` for
  a writable one)."""
  try:
    return _addressof(_from_buffer(arr))
  except (TypeError, ValueError):  # Read-only, or empty.
    return arr.__array_interface__["data"][0]


class _FastPlan:
  """What the common call needs, derived once (see the module docstring).

  Per-call bases: 0..n-1 the parameters, n the output block, n+1 the arena.
  """

  __slots__ = ("leaf_types", "dynamic", "template", "table_type",
               "out_bytes", "outputs", "tables", "has_temp")

  def __init__(self, leaf_types, dynamic, template, out_bytes, outputs,
               has_temp):
    self.leaf_types = leaf_types  # [(dtype, dims)] per parameter
    self.dynamic = dynamic        # [(slot, base index, offset)]
    self.table_type = ctypes.c_uint64 * max(1, len(template))
    self.template = template      # slot -> static address (0: dynamic)
    self.out_bytes = out_bytes
    # Per result: (dtype, dims, offset in the block), or None to take the
    # general path's copy for it (slot, dtype, dims).
    self.outputs = outputs
    self.tables: list[tuple[Any, int]] = []  # pool of (table, address)
    self.has_temp = has_temp


class _Leaf:
  __slots__ = ("param", "path", "dtype", "dims", "alloc", "nbytes")

  def __init__(self, param, path, dtype, dims, alloc):
    self.param, self.path = param, tuple(path)
    self.dtype, self.dims, self.alloc = dtype, tuple(dims), alloc
    self.nbytes = math.prod(self.dims) * dtype.itemsize


class CpuExecutable:
  """See the module docstring. Built by `cpu_compiler.compile`."""

  def __init__(self, plan: dict, jit, *, custom_call_instrs: Sequence = (),
               threads: int = 1, compile_stats: Optional[dict] = None,
               module=None, builtin_custom_calls: Optional[dict] = None):
    self.plan = plan
    self._jit = jit  # keeps the machine code alive
    self.module = module
    self.threads = max(1, int(threads))
    self.compile_stats = dict(compile_stats or {})
    self._custom_call_instrs = list(custom_call_instrs)
    self._builtin_custom_calls = dict(builtin_custom_calls or {})
    # A kernel identical to an earlier one was compiled once (jit.py's
    # partition_module): its name stands for the earlier one's code.
    aliases = plan.get("kernel_aliases", {})
    self._addresses = {name: jit.address(aliases.get(name, name))
                       for name in plan["kernels"]}
    self._pool = thunk_lib.thread_pool(self.threads)
    # OpenBLAS runs single-threaded while our kernels call it: the runtime
    # splits gemms across its own workers (see blas.pin_single_thread).
    self._uses_blas = blas.uses_blas(plan.get("externals", ()))
    # (replicas, partitions) of a program of several participants.
    self.participants = tuple(plan.get("participants", (1, 1)))
    self.has_collectives = False  # set by _build
    self.thunks = native_runner.compile_thunks(self._build(plan["thunks"]))
    self._setup_memory()

  # -- construction ------------------------------------------------------------

  def _build(self, thunks: list[dict]) -> list[thunk_lib.Thunk]:
    out = []
    for t in thunks:
      k = t["kind"]
      if k == "kernel":
        out.append(thunk_lib.KernelThunk(
            t["name"], self._addresses[t["fn"]], t["slot"], t["extent"],
            t["cost"], self.threads))
      elif k == "copy":
        out.append(thunk_lib.CopyThunk(t["name"], t["src"], t["dst"],
                                       t["bytes"]))
      elif k == "while":
        out.append(thunk_lib.WhileThunk(
            t["name"], self._build(t["init"]), self._build(t["cond"]),
            t["pred"], self._build(t["body"])))
      elif k == "conditional":
        out.append(thunk_lib.ConditionalThunk(
            t["name"], t["index"], t["pred"],
            [self._build(b) for b in t["branches"]]))
      elif k == "sequence":
        out.append(thunk_lib.SequenceThunk(t["name"],
                                           self._build(t["thunks"])))
      elif k == "collective":
        self.has_collectives = True
        combiner = t["config"].get("combiner")
        out.append(collectives.CollectiveThunk(
            t["name"], t["op"], t["config"], _leaf_specs(t["operands"]),
            _leaf_specs(t["results"]),
            self._addresses[combiner] if combiner else 0))
      elif k == "custom_call":
        instr = self._custom_call_instrs[t["call"]]
        out.append(thunk_lib.CustomCallThunk(
            t["name"], t["target"], instr, _leaf_specs(t["operands"]),
            [_leaf_specs(r) for r in t["results"]], instr.shape))
      else:
        raise support.InternalError(f"unknown thunk kind {k!r}")
    return out

  def _setup_memory(self) -> None:
    allocs = self.plan["allocations"]
    n = len(allocs)
    self._static_bases = np.zeros(n, np.uint64)
    self._constants = []
    self._null = aligned_empty(ALIGNMENT)
    self._temp = None
    self._outputs: list[tuple[int, int, int]] = []  # (alloc, size, offset)
    self._out_block_bytes = 0
    self.arena_bytes = 0
    const_bytes = 0
    for i, a in enumerate(allocs):
      kind = a["kind"]
      if kind == "constant":
        data = base64.b64decode(a["data"])
        buf = aligned_empty(max(len(data), 1))
        buf[:len(data)] = np.frombuffer(data, np.uint8)
        self._constants.append(buf)
        self._static_bases[i] = _address(buf)
        const_bytes += len(data)
      elif kind == "temp":
        self._temp = i
        self.arena_bytes = a["size"]
      elif kind == "output":
        self._outputs.append((i, a["size"], self._out_block_bytes))
        self._out_block_bytes += -(-a["size"] // ALIGNMENT) * ALIGNMENT
      elif kind == "null":
        self._static_bases[i] = _address(self._null)
    slots = self.plan["slots"]
    self._slot_alloc = np.array([s[0] for s in slots], np.intp)
    self._slot_off = np.array([s[1] for s in slots], np.uint64)
    self._leaves: list[list[_Leaf]] = []
    for p in self.plan["params"]:
      leaves = []
      for leaf in p["leaves"]:
        if leaf is None:
          continue
        alloc = leaf["alloc"]
        if allocs[alloc]["kind"] != "parameter":
          alloc = None
        leaves.append(_Leaf(p["number"], leaf["index"],
                            numpy_dtype(leaf["dtype"]), leaf["dims"], alloc))
      self._leaves.append(leaves)
    self._flat_leaves = [l for ls in self._leaves for l in ls]
    self._param_shapes = [p["shape"] for p in self.plan["params"]]
    self._donation = {(d["param"], tuple(d["index"])): d["outputs"]
                      for d in self.plan["donation"]}
    self._out_specs = []
    offsets = {a: off for a, _, off in self._outputs}
    for o in self.plan["outputs"]:
      if o is None:
        self._out_specs.append(None)
        continue
      is_out = allocs[o["alloc"]]["kind"] == "output"
      off = offsets.get(o["alloc"], 0)
      self._out_specs.append((o["slot"], o["alloc"], numpy_dtype(o["dtype"]),
                              tuple(o["dims"]), is_out, off))
    self._arenas: list[np.ndarray] = []
    self._arena_lock = threading.Lock()
    self.peak_memory_bytes = (self.arena_bytes + self._out_block_bytes +
                              const_bytes)
    self._fast = self._fast_plan()
    self._native: dict = {}  # donated parameters -> native_plan()

  def _fast_plan(self) -> Optional[_FastPlan]:
    """The execute plan of the common call; None where the program needs
    the general path (tuple parameters, collectives)."""
    if self.has_collectives:
      return None
    if any(leaf.path for leaf in self._flat_leaves):
      return None
    if len(self._flat_leaves) != len(self._leaves):
      return None  # A parameter without exactly one leaf.
    n = len(self._leaves)
    base_of = {}  # alloc -> per-call base index
    for leaf in self._flat_leaves:
      if leaf.alloc is not None:
        base_of[leaf.alloc] = leaf.param
    out_offsets = {a: off for a, _, off in self._outputs}
    template, dynamic = [], []
    for slot, (alloc, off) in enumerate(self.plan["slots"]):
      alloc, off = int(alloc), int(off)
      if alloc in base_of:
        dynamic.append((slot, base_of[alloc], off))
        template.append(0)
      elif alloc in out_offsets:
        dynamic.append((slot, n, out_offsets[alloc] + off))
        template.append(0)
      elif alloc == self._temp:
        dynamic.append((slot, n + 1, off))
        template.append(0)
      else:
        template.append(int(self._static_bases[alloc]) + off)
    outputs = []
    used = set()
    for spec in self._out_specs:
      if spec is None:
        outputs.append(None)
        continue
      slot, alloc, dtype, dims, is_out, off = spec
      if is_out and alloc not in used:
        used.add(alloc)
        outputs.append((dtype, dims, off, None))
      else:
        outputs.append((dtype, dims, None, slot))
    return _FastPlan([(leaf.dtype, leaf.dims) for leaf in self._flat_leaves],
                     dynamic, template, self._out_block_bytes, outputs,
                     self._temp is not None)

  def native_plan(self, donated: frozenset[int] = frozenset()
                  ) -> Optional[native_execute.NativePlan]:
    """The plan for one native call of the whole program
    (native_execute.py) when the caller donates parameters `donated`, or
    None where a call needs Python (custom calls, tuple parameters,
    non-array results). Built on first use."""
    donated = frozenset(donated)
    if donated not in self._native:
      plan = None
      program = native_runner.encode_all(self.thunks)
      if self._fast is not None and program is not None:
        allocs = self.plan["allocations"]
        outputs = [None if o is None else
                   (o["alloc"], o["slot"], numpy_dtype(o["dtype"]),
                    tuple(o["dims"])) for o in self.plan["outputs"]]
        plan = native_execute.plan_for(
            slots=self.plan["slots"],
            params=[leaf.alloc for leaf in self._flat_leaves],
            allocations=allocs, outputs=outputs,
            static_bases=self._static_bases, program=program,
            pool_address=native_execute.pool_address(self._pool),
            blas_pin=blas.pin_state() if self._uses_blas else 0,
            donation={p: a for (p, _), a in self._donation.items()},
            donated=donated)
        if plan is not None:
          plan.owner = self  # The plan's addresses point into this object.
      self._native[donated] = plan
    return self._native[donated]

  def _fast_table(self, fast: _FastPlan) -> tuple[Any, int]:
    try:
      return fast.tables.pop()
    except IndexError:
      table = fast.table_type(*fast.template)
      return table, ctypes.addressof(table)

  def _run_thunks(self, state, arena: Optional[np.ndarray]) -> None:
    """Runs the thunks on `state`, then returns `arena` to the pool."""
    if self._uses_blas:
      blas.pin_single_thread()
    try:
      for t in self.thunks:
        t.run(state)
    finally:
      if self._uses_blas:
        blas.unpin()
      if arena is not None:
        with self._arena_lock:
          self._arenas.append(arena)

  def _execute_fast(self, fast: _FastPlan, args: Sequence[Any]
                    ) -> Optional[list[np.ndarray]]:
    """`execute` of the common call; None when `args` need the general
    path."""
    bases = []
    for arr, (dtype, dims) in zip(args, fast.leaf_types):
      if (type(arr) is not np.ndarray or arr.dtype != dtype or  # pylint: disable=unidiomatic-typecheck
          arr.shape != dims or not arr.flags.c_contiguous):
        return None
      bases.append(_data_address(arr))
    block = None
    if fast.out_bytes:
      block, block_address = buffer_pool.block(fast.out_bytes)
      bases.append(block_address)
    else:
      bases.append(0)
    arena = None
    if fast.has_temp:
      arena = self._arena()
      bases.append(_data_address(arena))
    table, table_address = self._fast_table(fast)
    for slot, base, offset in fast.dynamic:
      table[slot] = bases[base] + offset
    state = thunk_lib.ExecutionState(table, self._builtin_custom_calls,
                                     self._pool, table_address)
    self._run_thunks(state, arena)
    results = []
    for out in fast.outputs:
      if out is None:
        results.append(None)
        continue
      dtype, dims, offset, slot = out
      if slot is None:
        results.append(np.ndarray(dims, dtype, block, offset))
      else:
        view = thunk_lib.array_view(table[slot], dtype, dims)
        results.append(np.array(view, copy=True))
    fast.tables.append((table, table_address))
    return results

  # -- execution ----------------------------------------------------------------

  def _arena(self) -> np.ndarray:
    with self._arena_lock:
      if self._arenas:
        return self._arenas.pop()
    return aligned_empty(self.arena_bytes)

  def _coerce(self, value, leaf: _Leaf) -> np.ndarray:
    for i in leaf.path:
      if not isinstance(value, (tuple, list)):
        raise support.InvalidArgumentError(
            f"parameter {leaf.param} expects a tuple "
            f"({self._param_shapes[leaf.param]})")
      value = value[i]
    arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if arr.dtype != leaf.dtype:
      arr = arr.astype(leaf.dtype)
    if arr.shape != leaf.dims:
      raise support.InvalidArgumentError(
          f"parameter {leaf.param} has shape {self._param_shapes[leaf.param]}"
          f", got an array of shape {arr.shape}")
    if not arr.flags.c_contiguous:
      arr = np.ascontiguousarray(arr)
    return arr

  def execute(self, args: Sequence[Any], *,
              custom_calls: Optional[dict[str, Callable]] = None,
              donate: Sequence[int] = (),
              participant: Optional[collectives.Participant] = None
              ) -> list[np.ndarray]:
    """Runs the program on `args` (one array, or nested tuple of arrays, per
    parameter); returns the result's array leaves, depth first.

    `participant`: for a program of several participants, the instance
    this call runs (see the module docstring)."""
    if len(args) != len(self._leaves):
      raise support.InvalidArgumentError(
          f"the program takes {len(self._leaves)} arguments, got {len(args)}")
    fast = self._fast
    if fast is not None and not custom_calls and not donate:
      results = self._execute_fast(fast, args)
      if results is not None:
        return results
    bases = self._static_bases.copy()
    keep = []
    donated: dict[int, np.ndarray] = {}
    for leaf in self._flat_leaves:
      arr = args[leaf.param]
      if (leaf.path or type(arr) is not np.ndarray or  # pylint: disable=unidiomatic-typecheck
          arr.dtype != leaf.dtype or arr.shape != leaf.dims or
          not arr.flags.c_contiguous):
        arr = self._coerce(arr, leaf)
      keep.append(arr)
      if leaf.alloc is not None:
        bases[leaf.alloc] = _address(arr)
      if donate and leaf.param in donate and arr.flags.writeable:
        for a in self._donation.get((leaf.param, leaf.path), ()):
          if a not in donated:
            donated[a] = arr
            break
    # All outputs share one fresh block (one allocation per execution),
    # except those standing in for donated parameters.
    block = None
    if self._out_block_bytes:
      block, base = buffer_pool.block(self._out_block_bytes)
      for a, _, off in self._outputs:
        bases[a] = base + off
    for a, src in donated.items():
      bases[a] = _address(src)
    arena = None
    if self._temp is not None:
      arena = self._arena()
      bases[self._temp] = _address(arena)
    table = bases[self._slot_alloc]
    table += self._slot_off
    handlers = self._builtin_custom_calls
    if custom_calls:
      handlers = dict(handlers)
      handlers.update(custom_calls)
    if participant is not None:
      state = collectives.ParticipantState(table, handlers, self._pool,
                                           participant)
    else:
      state = thunk_lib.ExecutionState(table, handlers, self._pool)
    self._run_thunks(state, arena)
    results = []
    used = set()
    for spec in self._out_specs:
      if spec is None:
        results.append(None)
        continue
      slot, alloc, dtype, dims, is_out, off = spec
      if is_out and alloc not in used:
        used.add(alloc)
        src = donated.get(alloc)
        if src is not None:
          results.append(src.reshape(-1).view(np.uint8)[
              :math.prod(dims) * dtype.itemsize].view(dtype).reshape(dims))
        else:
          results.append(np.ndarray(dims, dtype, block, off))
      else:
        view = thunk_lib.array_view(int(table[slot]), dtype, dims)
        results.append(np.array(view, copy=True))
    del keep
    return results

  __call__ = execute

  def execute_spmd(self, argument_lists: Sequence[Sequence[Any]], *,
                   custom_calls: Optional[dict[str, Callable]] = None,
                   timeout_s: Optional[float] = None
                   ) -> list[list[np.ndarray]]:
    """Runs every participant's instance, each on its own thread, on
    `argument_lists[i]` for flattened participant id i (replica * num
    partitions + partition); returns their results in that order.

    Raises:
      support.InvalidArgumentError: not one argument list per participant.
      The first participant's failure; the others stop with CANCELLED. A
      collective that waits longer than `timeout_s` (default
      collectives.DEFAULT_TIMEOUT_S) fails with DEADLINE_EXCEEDED.
    """
    replicas, partitions = self.participants
    n = replicas * partitions
    if len(argument_lists) != n:
      raise support.InvalidArgumentError(
          f"the program runs on {replicas} replica(s) x {partitions} "
          f"partition(s): pass {n} argument lists, not "
          f"{len(argument_lists)}")
    for i, args in enumerate(argument_lists):
      if len(args) != len(self._leaves):
        raise support.InvalidArgumentError(
            f"argument list {i}: the program takes {len(self._leaves)} "
            f"arguments, got {len(args)}")

    def run_one(participant):
      return self.execute(argument_lists[participant.flat],
                          custom_calls=custom_calls, participant=participant)

    return collectives.run_participants(run_one, replicas, partitions,
                                        timeout_s=timeout_s)


def _leaf_specs(spec):
  if spec is None:
    return None
  if isinstance(spec, list):
    return [_leaf_specs(s) for s in spec]
  return thunk_lib.LeafSpec(spec["slot"], numpy_dtype(spec["dtype"]),
                            spec["dims"])
