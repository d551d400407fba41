"""Interpreter kernels for distributed execution: `interpreter.run_parallel`
and the spec ops that see the process grid (replica_id, partition_id,
all_gather, all_reduce, all_to_all, reduce_scatter, collective_permute,
collective_broadcast, collective_reduce, send, recv, infeed, outfeed), the
tokens that order them (after_all, create_token), and async_start /
async_done.

`interpreter.run_parallel` runs `programs` - a num_replicas x
num_partitions grid of function symbols - with ONE THREAD PER PROCESS (a
fixed-size pool deadlocks as soon as processes outnumber its workers, since
a collective needs every member of its group running at once). Each process
runs `Interpreter.call(symbol, args, process=...)`, so kernels find their
`process_grid.Process` in `ctx.process`. A failure in one process releases
the others (see `process_grid`), and the first failure is raised.

Outside `run_parallel` a program runs as the only process of a 1x1 grid
(replica_id = partition_id = 0), kept per Interpreter, so collectives over
that one process work and a `recv` without a `send` reports a deadlock;
`default_process(interp).grid.push_infeed(...)` feeds its `infeed`, and
`last_grid(interp).outfeed` holds what `outfeed` wrote.

Values are exchanged as the processes' numpy arrays; reductions (all_reduce,
reduce_scatter, collective_reduce) run the `computation` region on whole
arrays when its body is elementwise, else element by element.
"""

from __future__ import annotations

import threading
import weakref
from typing import Optional

import numpy as np

from stablehlo._src.interpreter import evaluator
from stablehlo._src.interpreter import process_grid as pg
from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.ops import registry
from stablehlo._src.ops import typeutil as tu
import support

_STATE_LOCK = threading.Lock()
# Interpreter -> the Process of plain (non run_parallel) runs.
_DEFAULT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
# Interpreter -> the grid of its latest run_parallel (for its outfeed).
_LAST_GRID: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

# --- the process of a kernel --------------------------------------------------


def default_process(interp) -> pg.Process:
  """The single process of `interp`'s plain runs (a 1x1 grid); a fresh one
  after a failure aborted the previous grid."""
  with _STATE_LOCK:
    proc = _DEFAULT.get(interp)
    if proc is None or proc.grid.aborted:
      grid = pg.ProcessGrid(1, 1)
      proc = grid.process((0, 0))
      grid.start(proc.id)
      _DEFAULT[interp] = proc
    return proc


def last_grid(interp) -> Optional[pg.ProcessGrid]:
  """The grid of `interp`'s latest `interpreter.run_parallel` (its
  `outfeed` holds (ProcessId, values) records), else the grid of its plain
  runs, else None."""
  with _STATE_LOCK:
    grid = _LAST_GRID.get(interp)
    if grid is None and interp in _DEFAULT:
      grid = _DEFAULT[interp].grid
    return grid


def _process(ctx) -> pg.Process:
  p = ctx.process
  if p is None:
    return default_process(ctx.interp)
  if not isinstance(p, pg.Process):
    raise support.InternalError(f"ctx.process is {p!r}, not a Process")
  return p


def _where(op) -> str:
  loc = evaluator.location_of(op)
  return "" if loc == "<unknown>" else f" at {loc}"


# --- attributes ---------------------------------------------------------------


def _channel_id(op) -> int:
  h = op.attr("channel_handle")
  if h is None:
    return 0
  return tu.Params(h).int("handle", 0)


def _groups(op, name: str = "replica_groups") -> list[list[int]]:
  """A 2-D id attribute as lists; -1 pads ragged groups and is dropped."""
  v = op.attr(name)
  if v is None:
    return []
  if not isinstance(v, (a.DenseElementsAttr, a.ArrayAttr)):
    raise support.UnimplementedError(
        f"{op.name}: {name} given as {type(v).__name__} (e.g. mesh axes) is "
        "not supported by the interpreter")
  arr = tu.int_matrix(v)
  if arr.ndim == 1:
    arr = arr.reshape(1, -1) if arr.size else arr.reshape(0, 0)
  return [[int(x) for x in row if x >= 0] for row in arr]


def _all_reduce_groups(op, proc: pg.Process, groups) -> list:
  """spec: all_gather / all_reduce / reduce_scatter - cross_replica if
  channel_id <= 0, cross_replica_and_partition if channel_id > 0, and
  flattened_ids with use_global_device_ids."""
  ch = _channel_id(op)
  use_global = tu.bool_value(op.attr("use_global_device_ids"))
  grid = proc.grid
  if use_global:
    if ch <= 0:
      raise support.InvalidArgumentError(
          f"use_global_device_ids needs a positive channel id, got {ch}")
    return grid.flattened_ids(groups)
  if ch > 0:
    return grid.cross_replica_and_partition(groups)
  return grid.cross_replica(groups)


def _replica_or_partition_groups(op, proc: pg.Process, groups) -> list:
  """spec: all_to_all / collective_broadcast / collective_permute /
  collective_reduce - cross_replica if channel_id <= 0, else
  cross_partition."""
  if _channel_id(op) > 0:
    return proc.grid.cross_partition(groups)
  return proc.grid.cross_replica(groups)


def _my_group(op, proc: pg.Process, groups) -> list:
  g = proc.find_group(groups)
  if g is None:
    raise support.InvalidArgumentError(
        f"process {proc.id} is in none of the process groups "
        f"{[[tuple(p) for p in grp] for grp in groups]}")
  return g


# --- values -------------------------------------------------------------------


def _zeros(ty: t.Type) -> np.ndarray:
  """broadcast_in_dim(constant(0 or quantize(0))) of `ty`."""
  shape = runtime.static_shape(ty)
  et = t.element_type_of(ty)
  if isinstance(et, t.QuantizedType):
    if et.is_per_axis:
      zp = np.asarray(et.zero_points, dtype=np.int64)
      view = [1] * len(shape)
      view[et.quantized_dimension] = -1
      return np.broadcast_to(zp.reshape(view), shape).astype(
          runtime.numpy_dtype(ty))
    return np.full(shape, et.zero_points[0], dtype=runtime.numpy_dtype(ty))
  return np.zeros(shape, dtype=runtime.numpy_dtype(ty))


def _region_is_elementwise(region) -> bool:
  """True if the reduction body can run on whole arrays: only elementwise
  ops and constants, no nested regions."""
  if len(region.blocks) != 1:
    return False
  for op in region.blocks[0].operations:
    if op.regions:
      return False
    if op.name in ("stablehlo.return", "func.return",
                   "stablehlo.constant"):
      continue
    d = registry.lookup(op.name)
    if d is None or registry.ELEMENTWISE not in d.traits:
      return False
  return True


def _to_region_type(x, region, operand_type) -> np.ndarray:
  """to_destination_type(operand, type(func_inputs(computation)[0])):
  converts a promotable operand (e.g. f32 into an f64 body) to the body's
  element type. Quantized values stay as they are (the body's ops see the
  quantized types)."""
  x = np.asarray(x)
  args = region.blocks[0].arguments
  if not args:
    return x
  ety = t.element_type_of(args[0].type)
  if isinstance(ety, t.QuantizedType) or isinstance(
      t.element_type_of(operand_type), t.QuantizedType):
    return x
  dt = runtime.numpy_dtype(ety)
  return x if x.dtype == dt else x.astype(dt)


def _fold(ctx, region, values: list, operand_type) -> np.ndarray:
  """computation(...computation(v0, v1)..., vN) elementwise over arrays of
  one shape, in the order given (the spec's schedule is
  implementation-defined; this is the left fold in group order)."""
  values = [_to_region_type(v, region, operand_type) for v in values]
  shape = values[0].shape
  if len(values) == 1:
    return values[0].copy()
  if _region_is_elementwise(region):
    acc = values[0]
    for v in values[1:]:
      acc = np.asarray(ctx.run_region(region, [acc, v])[0])
      if acc.shape != shape:
        acc = np.broadcast_to(acc, shape)
    return np.array(acc, copy=True)
  out = None
  for idx in np.ndindex(*shape):
    acc = np.asarray(values[0][idx])
    for v in values[1:]:
      acc = np.asarray(ctx.run_region(region, [acc, np.asarray(v[idx])])[0])
    if out is None:
      out = np.empty(shape, dtype=acc.dtype)
    out[idx] = acc
  if out is None:  # no elements
    out = np.empty(shape, dtype=values[0].dtype)
  return out


def _split(x: np.ndarray, n: int, axis: int, what: str) -> list:
  if x.shape[axis] % n:
    raise support.InvalidArgumentError(
        f"{what}: dimension {axis} of size {x.shape[axis]} does not split "
        f"into {n} parts")
  return np.split(x, n, axis=axis)


# --- process ids --------------------------------------------------------------


@registry.interpreter_kernel("stablehlo.replica_id")
def _replica_id(ctx, op, args):
  """spec: replica_id - the replica_id of the current process."""
  return np.asarray(_process(ctx).replica_id, dtype=np.uint32)


@registry.interpreter_kernel("stablehlo.partition_id")
def _partition_id(ctx, op, args):
  """spec: partition_id - the partition_id of the current process."""
  return np.asarray(_process(ctx).partition_id, dtype=np.uint32)


# --- collectives --------------------------------------------------------------


@registry.interpreter_kernel("stablehlo.all_gather")
def _all_gather(ctx, op, args):
  """spec: all_gather - results...@process = concatenate(operands...@group,
  all_gather_dim) over the process group, in group order."""
  proc = _process(ctx)
  dim = tu.int_value(op.attr("all_gather_dim"))
  groups = _all_reduce_groups(op, proc, _groups(op))
  group = _my_group(op, proc, groups)
  got = proc.rendezvous(op.name, _channel_id(op), group, list(args),
                        ctx.deadline, _where(op))
  return [np.concatenate([got[p][i] for p in group], axis=dim)
          for i in range(len(args))]


@registry.interpreter_kernel("stablehlo.all_reduce")
def _all_reduce(ctx, op, args):
  """spec: all_reduce - results...@process = computation folded over
  operands...@process_group."""
  proc = _process(ctx)
  groups = _all_reduce_groups(op, proc, _groups(op))
  group = _my_group(op, proc, groups)
  got = proc.rendezvous(op.name, _channel_id(op), group, list(args),
                        ctx.deadline, _where(op))
  region = op.regions[0]
  return [_fold(ctx, region, [got[p][i] for p in group],
                op.operands[i].type) for i in range(len(args))]


@registry.interpreter_kernel("stablehlo.reduce_scatter")
def _reduce_scatter(ctx, op, args):
  """spec: reduce_scatter - all_reduce within the group, split the result
  along scatter_dimension into len(group) parts; process i of the group
  gets part i."""
  proc = _process(ctx)
  dim = tu.int_value(op.attr("scatter_dimension"))
  groups = _all_reduce_groups(op, proc, _groups(op))
  group = _my_group(op, proc, groups)
  got = proc.rendezvous(op.name, _channel_id(op), group, args[0],
                        ctx.deadline, _where(op))
  reduced = _fold(ctx, op.regions[0], [got[p] for p in group],
                  op.operands[0].type)
  parts = _split(reduced, len(group), dim, op.name)
  return np.array(parts[group.index(proc.id)], copy=True)


@registry.interpreter_kernel("stablehlo.all_to_all")
def _all_to_all(ctx, op, args):
  """spec: all_to_all - split each operand along split_dimension into
  split_count parts; receiver i concatenates part i of every sender (in
  group order) along concat_dimension."""
  proc = _process(ctx)
  sd = tu.int_value(op.attr("split_dimension"))
  cd = tu.int_value(op.attr("concat_dimension"))
  n = tu.int_value(op.attr("split_count"))
  groups = _replica_or_partition_groups(op, proc, _groups(op))
  group = _my_group(op, proc, groups)
  if len(group) != n:
    raise support.InvalidArgumentError(
        f"process group {[tuple(p) for p in group]} has {len(group)} "
        f"members but split_count is {n}")
  got = proc.rendezvous(op.name, _channel_id(op), group, list(args),
                        ctx.deadline, _where(op))
  me = group.index(proc.id)
  results = []
  for i in range(len(args)):
    parts = [_split(np.asarray(got[p][i]), n, sd, op.name)[me]
             for p in group]
    results.append(np.concatenate(parts, axis=cd))
  return results


def _root_index(op, root, j: int, size: int) -> int:
  r = int(np.asarray(root).reshape(-1)[j])
  if not 0 <= r < size:
    raise support.InvalidArgumentError(
        f"dynamic root index {r} for operand #{j} is out of range for a "
        f"process group of {size}")
  return r


@registry.interpreter_kernel("stablehlo.collective_broadcast")
def _collective_broadcast(ctx, op, args):
  """spec: collective_broadcast - results[j]@process = operands[j]@source
  where source = group[0] (or group[root[j]] with has_dynamic_root);
  processes in no group get zeros."""
  proc = _process(ctx)
  dyn = tu.bool_value(op.attr("has_dynamic_root"))
  data = list(args[:-1]) if dyn else list(args)
  groups = _replica_or_partition_groups(op, proc, _groups(op))
  group = proc.find_group(groups)
  if group is None:
    return [_zeros(r.type) for r in op.results]
  got = proc.rendezvous(op.name, _channel_id(op), group, data, ctx.deadline,
                        _where(op))
  out = []
  for j in range(len(data)):
    src = group[_root_index(op, args[-1], j, len(group)) if dyn else 0]
    out.append(np.array(got[src][j], copy=True))
  return out


@registry.interpreter_kernel("stablehlo.collective_reduce")
def _collective_reduce(ctx, op, args):
  """spec: collective_reduce - the computation folded over the group's
  operands, kept only on the root (group[0], or group[root[j]] with
  has_dynamic_root); every other process gets zeros.

  Process groups follow the spec's collective_reduce section (cross_replica
  if channel_id <= 0, else cross_partition)."""
  proc = _process(ctx)
  dyn = tu.bool_value(op.attr("has_dynamic_root"))
  data = list(args[:-1]) if dyn else list(args)
  groups = _replica_or_partition_groups(op, proc, _groups(op))
  group = proc.find_group(groups)
  if group is None:
    return [_zeros(r.type) for r in op.results]
  got = proc.rendezvous(op.name, _channel_id(op), group, data, ctx.deadline,
                        _where(op))
  out = []
  for j, res in enumerate(op.results):
    root = group[_root_index(op, args[-1], j, len(group)) if dyn else 0]
    if root != proc.id:
      out.append(_zeros(res.type))
    else:
      out.append(_fold(ctx, op.regions[0], [got[p][j] for p in group],
                       op.operands[j].type))
  return out


def _pairs(op) -> list[tuple[int, int]]:
  v = op.attr("source_target_pairs")
  if v is None:
    return []
  m = tu.int_matrix(v)
  if m.size == 0:
    return []
  return [(int(s), int(d)) for s, d in m.reshape(-1, 2)]


def _pair_ids(op, proc: pg.Process, pairs) -> list:
  """source_target_pairs as (source, target) ProcessIds: cross_replica if
  channel_id <= 0, else cross_partition."""
  if _channel_id(op) > 0:
    return proc.grid.cross_partition([[s, d] for s, d in pairs])
  return proc.grid.cross_replica([[s, d] for s, d in pairs])


@registry.interpreter_kernel("stablehlo.collective_permute")
def _collective_permute(ctx, op, args):
  """spec: collective_permute - result@target = operand@source for each
  (source, target) pair of the process groups; a process that is no
  target gets zeros. Sources post without waiting; targets wait."""
  proc = _process(ctx)
  ch = _channel_id(op)
  pairs = _pair_ids(op, proc, _pairs(op))
  result = None
  for src, dst in pairs:  # sends first: a process may be both
    if src == proc.id and dst != proc.id:
      proc.post((op.name, ch, src, dst), args[0])
  for src, dst in pairs:
    if dst != proc.id:
      continue
    if src == dst:
      result = args[0]
    else:
      result = proc.take((op.name, ch, src, dst),
                         f"{op.name}{_where(op)} (channel_id {ch}), waiting "
                         f"for source process {src}", ctx.deadline)
  if result is None:
    return _zeros(op.results[0].type)
  return np.array(result, copy=True)


@registry.interpreter_kernel("stablehlo.cross-replica-sum")
def _cross_replica_sum(ctx, op, args):
  """The deprecated `cross-replica-sum`: all_reduce with `add` over
  cross_replica(replica_groups)."""
  proc = _process(ctx)
  groups = proc.grid.cross_replica(_groups(op))
  group = _my_group(op, proc, groups)
  got = proc.rendezvous(op.name, 0, group, args[0], ctx.deadline,
                        _where(op))
  vals = [np.asarray(got[p]) for p in group]
  ty = op.results[0].type
  if runtime.is_narrow_int(t.element_type_of(ty)):
    acc = sum(v.astype(runtime.compute_dtype(ty)) for v in vals)
    return runtime.wrap_to(acc, ty)
  acc = vals[0].copy()
  for v in vals[1:]:
    acc = acc + v
  return acc.astype(vals[0].dtype)


# --- send / recv --------------------------------------------------------------


@registry.interpreter_kernel("stablehlo.send")
def _send(ctx, op, args):
  """spec: send - puts `inputs` into channel `channel_id` (a FIFO; a
  `recv` on that channel takes them). With `source_target_pairs` (device
  to device), the values go to each target of a pair whose source is this
  process. Sending does not wait for the receiver."""
  proc = _process(ctx)
  ch = _channel_id(op)
  values = tuple(np.array(x, copy=True) for x in args[:-1])
  pairs = _pairs(op)
  if pairs:
    for src, dst in _pair_ids(op, proc, pairs):
      if src == proc.id:
        proc.post(("send", ch, src, dst), values)
  else:
    proc.post(("send", ch), values)
  return args[-1]


@registry.interpreter_kernel("stablehlo.recv")
def _recv(ctx, op, args):
  """spec: recv - takes the oldest values sent on channel `channel_id`,
  waiting for a `send`. With `source_target_pairs`, receives from the
  source of the pair whose target is this process (zeros if none)."""
  proc = _process(ctx)
  ch = _channel_id(op)
  pairs = _pairs(op)
  payload = op.results[:-1]
  what = f"{op.name}{_where(op)} (channel_id {ch})"
  if pairs:
    values = None
    for src, dst in _pair_ids(op, proc, pairs):
      if dst == proc.id:
        values = proc.take(("send", ch, src, dst),
                           f"{what}, waiting for a send from process {src}",
                           ctx.deadline)
    if values is None:
      return [_zeros(r.type) for r in payload] + [args[0]]
  else:
    values = proc.take(("send", ch), f"{what}, waiting for a send on that "
                       "channel", ctx.deadline)
  if len(values) != len(payload):
    raise support.InvalidArgumentError(
        f"recv on channel {ch} expects {len(payload)} values but the send "
        f"delivered {len(values)}")
  return list(values) + [args[0]]


# --- infeed / outfeed / tokens ------------------------------------------------


@registry.interpreter_kernel("stablehlo.infeed")
def _infeed(ctx, op, args):
  """spec: infeed - reads one value per payload result from the infeed.
  Under run_parallel the infeed is the `infeed` attribute: functions of no
  arguments returning one tensor, called in order (one queue shared by all
  processes, as upstream)."""
  proc = _process(ctx)
  out = []
  for res in op.results[:-1]:
    entry = proc.grid.pop_infeed()
    if isinstance(entry, str):
      vals = ctx.interp.call(entry, [], process=ctx.process,
                             deadline=ctx.deadline)
      if len(vals) != 1:
        raise support.InvalidArgumentError(
            f"infeed function @{entry} returns {len(vals)} values, not 1")
      entry = vals[0]
    value = np.asarray(entry)
    ty = res.type
    if isinstance(ty, t.RankedTensorType) and ty.has_static_shape and (
        tuple(value.shape) != tuple(ty.shape)):
      raise support.InvalidArgumentError(
          f"infeed value of shape {list(value.shape)} does not match result "
          f"type {tu.fmt_type(ty)}")
    out.append(np.array(value, dtype=runtime.numpy_dtype(ty), copy=True))
  return out + [args[0]]


@registry.interpreter_kernel("stablehlo.outfeed")
def _outfeed(ctx, op, args):
  """spec: outfeed - writes `inputs` to the outfeed (recorded in the grid's
  `outfeed` as (ProcessId, values)); returns the token."""
  proc = _process(ctx)
  proc.grid.push_outfeed(proc.id, [np.array(x, copy=True)
                                   for x in args[:-1]])
  return args[-1]


@registry.interpreter_kernel("stablehlo.after_all", "stablehlo.create_token")
def _token(ctx, op, args):
  """spec: after_all / create_token - a token; ordering has no effect in
  this sequential interpreter."""
  return runtime.TOKEN


# --- async_start / async_done -------------------------------------------------


class Future:
  """The value of a `!stablehlo.future<T>`: the body's results, computed
  when `async_start` ran (the interpreter runs the body synchronously, which
  the spec allows)."""

  __slots__ = ("values",)

  def __init__(self, values):
    self.values = list(values)

  def __repr__(self):
    return f"Future({len(self.values)} values)"


@registry.interpreter_kernel("stablehlo.async_start")
def _async_start(ctx, op, args):
  """spec: async_start - runs `body` (one collective or slice) on the
  operands; here at once."""
  return Future(ctx.run_region(op.regions[0], list(args)))


@registry.interpreter_kernel("stablehlo.async_done")
def _async_done(ctx, op, args):
  """spec: async_done - the value of the future."""
  fut = args[0]
  if not isinstance(fut, Future):
    raise support.InvalidArgumentError(
        f"async_done expects a future, got {type(fut).__name__}")
  if len(fut.values) != len(op.results):
    raise support.InvalidArgumentError(
        f"the future holds {len(fut.values)} values, async_done has "
        f"{len(op.results)} results")
  return list(fut.values)


# --- interpreter.run_parallel -------------------------------------------------


def _symbol(attr) -> str:
  if isinstance(attr, a.SymbolRefAttr):
    return attr.root
  if isinstance(attr, a.StringAttr):
    return attr.value
  raise support.InvalidArgumentError(
      f"expected a function symbol, got {attr!r}")


def _programs(op) -> list[list[str]]:
  v = op.attr("programs")
  if not isinstance(v, a.ArrayAttr) or not v.elements:
    raise support.InvalidArgumentError("`programs` attribute cannot be empty")
  rows = []
  for row in v.elements:
    if not isinstance(row, a.ArrayAttr):
      raise support.InvalidArgumentError(
          "`programs` must be an array of arrays of function symbols")
    rows.append([_symbol(x) for x in row.elements])
  n = len(rows[0])
  if n == 0:
    raise support.InvalidArgumentError("`programs` attribute cannot be empty")
  for row in rows:
    if len(row) != n:
      raise support.InvalidArgumentError(
          f"every row of `programs` needs {n} programs (one per partition), "
          f"got {len(row)}")
  return rows


def _signature(ctx, symbol: str) -> tuple[int, int]:
  fn = ctx.module.lookup(symbol)
  if fn is None or fn.name != "func.func":
    raise support.NotFoundError(f"function @{symbol} not found")
  ftype = fn.attr("function_type")
  ftype = getattr(ftype, "value", ftype)
  return len(ftype.inputs), len(ftype.results)


def run_programs(ctx, programs: list[list[str]], args, infeed=(),
                 barrier_timeout_s=pg.DEFAULT_BARRIER_TIMEOUT_S) -> list:
  """Runs the grid `programs` (rows = replicas, columns = partitions) on
  `args` split in process order; returns all results in process order."""
  grid = pg.ProcessGrid(len(programs), len(programs[0]), infeed,
                        barrier_timeout_s)
  pids = grid.process_ids()
  calls = []
  pos = 0
  for pid in pids:
    sym = programs[pid.replica_id][pid.partition_id]
    n_in, n_out = _signature(ctx, sym)
    calls.append((pid, sym, list(args[pos:pos + n_in]), n_out))
    pos += n_in
  if pos != len(args):
    raise support.InvalidArgumentError(
        f"interpreter.run_parallel got {len(args)} inputs; the programs "
        f"take {pos}")
  with _STATE_LOCK:
    _LAST_GRID[ctx.interp] = grid
  results: dict = {}
  errors: dict = {}
  interp = ctx.interp
  deadline = ctx.deadline

  def body(pid, sym, fargs):
    try:
      with np.errstate(all="ignore"):
        results[pid] = interp.call(sym, fargs, process=grid.process(pid),
                                   deadline=deadline)
    except BaseException as e:  # pylint: disable=broad-except
      errors[pid] = e
      grid.abort(pid, e)
    finally:
      grid.finish(pid)

  for pid, *_ in calls:
    grid.start(pid)
  threads = []
  for pid, sym, fargs, _ in calls:
    th = threading.Thread(
        target=body, args=(pid, sym, fargs), daemon=True,
        name=f"stablehlo-process-{pid.replica_id}-{pid.partition_id}")
    threads.append(th)
  try:
    for th in threads:
      th.start()
  except BaseException as e:  # e.g. the OS refused a thread
    grid.abort(None, e)
    for th in threads:
      if th.ident is None:  # never started: account for it
        grid.finish(calls[threads.index(th)][0])
    raise support.ResourceExhaustedError(
        f"could not start {len(threads)} process threads: {e}") from e
  try:
    for th in threads:
      while th.is_alive():
        th.join(0.25)  # short joins keep the main thread signal-responsive
  except BaseException as e:  # interrupted: stop the processes too
    grid.abort(None, e)
    raise
  if errors:
    root = grid.root_pid if grid.root_pid in errors else min(errors)
    raise _in_process(errors[root], root)
  out = []
  for pid, sym, _, n_out in calls:
    res = results[pid]
    if len(res) != n_out:
      raise support.InternalError(
          f"@{sym} returned {len(res)} values, expected {n_out}")
    out.extend(res)
  return out


def _in_process(e: BaseException, pid) -> BaseException:
  """`e` with the failing process named, same class."""
  if isinstance(e, support.XlaError):
    try:
      new = type(e)(f"{e} (in process {pid} of interpreter.run_parallel)")
      new.__cause__ = e.__cause__ or e
      return new
    except Exception:  # pylint: disable=broad-except
      return e
  return e


@registry.interpreter_kernel("interpreter.run_parallel")
def _run_parallel(ctx, op, args):
  """interpreter.run_parallel: runs `programs` as a num_replicas x
  num_partitions process grid, one thread per process; `inputs` and
  `results` are flattened in process order ((0, 0), (0, 1), ...); the
  optional `infeed` lists functions whose results feed `stablehlo.infeed`.
  """
  programs = _programs(op)
  infeed = []
  v = op.attr("infeed")
  if v is not None:
    if not isinstance(v, a.ArrayAttr) or not v.elements:
      raise support.InvalidArgumentError(
          "infeed attribute is optional or should not be empty")
    infeed = [_symbol(x) for x in v.elements]
  n_out = sum(_signature(ctx, s)[1] for row in programs for s in row)
  if n_out != len(op.results):
    raise support.InvalidArgumentError(
        f"interpreter.run_parallel has {len(op.results)} results; the "
        f"programs return {n_out}")
  timeout = pg.DEFAULT_BARRIER_TIMEOUT_S
  return run_programs(ctx, programs, args, infeed, timeout)

