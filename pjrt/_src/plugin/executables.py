"""Executables: compiling for a device assignment, and asynchronous execution.

`Executable` (PJRT_Executable) is a compiled program with its compile
options; `LoadedExecutable` (PJRT_LoadedExecutable) binds one to a client's
devices. `LoadedExecutable.execute` checks every argument at once (count,
client, device-independent type and shape, deletion), donates what may be
donated, creates the output buffers pending, and enqueues one job per
device on the device's worker thread, then returns: the caller waits on the
outputs' ready events or the per-device completion events. A cheap program
(its latest run took at most INLINE_MAX_SECONDS) on one idle device with
ready inputs runs on the calling thread instead, and returns complete.

A job waits for its inputs (which may be outputs of earlier, still running
executions), runs the backend, and fulfils the outputs, or fails them all
with the error.

An executable compiled for several replicas / partitions runs one instance
per device of its assignment, concurrently on the devices' workers, each
with that device's argument list. Where the program's instances interact
(collectives, replica / partition ids), they share the backend's *grid*
for the execution (`Compiled.new_grid`: the CPU compiler's collective
rendezvous, or the interpreter's process grid), each job running as the
process (replica, partition) of its device. A job that fails aborts the
grid, so the others stop waiting at once (CANCELLED, naming the failed
one), and a collective whose members do not all come fails with
DEADLINE_EXCEEDED instead of hanging. Jobs of one launch are queued on all
their devices under the launch lock, so every device runs concurrent
executions in the same order.

An assignment with devices of other processes (a multi-process client)
runs this process's instances only, and its grid is told which process
runs each participant (`placement`): the cpu backend's collectives then
reach the other processes' instances (over MPI), and the other backends
refuse such collectives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Collection, Optional, Sequence

import numpy as np

import support
from pjrt._src import abi_types
from pjrt._src import dtypes
from pjrt._src.plugin import backends
from pjrt._src.plugin import errors
from pjrt._src.plugin import events
from pjrt._src.plugin import handles
from pjrt._src.plugin import native_execute
from pjrt._src.plugin import options as options_lib
from pjrt._src.plugin import program_cache
from pjrt._src.plugin import programs
from pjrt._src.plugin import runtime

EXECUTABLE = "PJRT_Executable"
# An execution whose program ran this fast last time runs synchronously in
# PJRT_LoadedExecutable_Execute (on one device that has nothing else queued,
# with every input ready) instead of on the device's worker thread, and may
# take the native Execute (native_execute.py). Its outputs and completion
# event are then ready when Execute returns. Handing a job to the worker
# costs far more than a small program: besides the hand-off, every output
# is a pending buffer that the framework then waits on through Python
# (JAX asks each leaf of a model's state for its ready event). Measured
# on a 2-core machine, median step, worker -> inline: flax ViT forward 7.2
# -> 4.0 ms, linen ResNet train step 10.7 -> 7.2 ms, U-Net 5.3 -> 3.7 ms,
# equinox CNN 4.0 -> 3.5 ms, a Monte Carlo step 8.0 -> 7.7 ms. So
# programs up to 50 ms run inline: above that, a framework overlapping its
# own work with the run gains more. 0 disables it.
INLINE_MAX_SECONDS = 50e-3
LOADED_EXECUTABLE = "PJRT_LoadedExecutable"


class Executable:
  """A compiled program (PJRT_Executable), not bound to devices."""

  def __init__(self, program: programs.Program,
               compile_options: options_lib.CompileOptions,
               options_bytes: bytes, compiled: backends.Compiled):
    self.program = program
    self.options = compile_options
    self.options_bytes = bytes(options_bytes)
    self.compiled = compiled
    self.backend = compiled.backend
    self.name = program.name
    digest = hashlib.sha256()
    for part in (program.fingerprint.encode(), self.options_bytes,
                 self.backend.encode()):
      digest.update(len(part).to_bytes(8, "little"))
      digest.update(part)
    self.fingerprint = digest.hexdigest()
    self.c = runtime.CStrings()
    # Seconds the backend took for the latest run (None: never ran); a
    # cheap program runs on the calling thread (see LoadedExecutable).
    self.last_run_s: float | None = None
    # Derived once for every execution.
    self.parameter_types = [(p.element_type, p.shape)
                            for p in program.parameters]
    self.result_specs = [runtime.BufferSpec(r.element_type, r.shape)
                         for r in program.results]
    self.donatable = _donatable(program)

  @property
  def num_replicas(self) -> int:
    return self.options.num_replicas

  @property
  def num_partitions(self) -> int:
    return self.options.num_partitions

  @property
  def num_outputs(self) -> int:
    return len(self.result_specs)

  def runs_inline(self) -> bool:
    """Whether an execution may run on the calling thread: its latest run
    took at most INLINE_MAX_SECONDS."""
    last = self.last_run_s
    return last is not None and last <= INLINE_MAX_SECONDS

  @property
  def code_size(self) -> int:
    return self.compiled.code_size or len(self.program.code)

  def shardings(self) -> Optional[tuple[list[str], list[str]]]:
    """(HLO sharding text of each parameter, of each output) of a program
    of several partitions: the partitioned program's (`Compiled.shardings`),
    or replicated for one that was not partitioned (each device holds whole
    values). None for one device, or replicas (no SPMD shardings). A
    program without outputs has one output sharding, the empty tuple's
    `{}`."""
    if self.num_partitions <= 1 or self.num_replicas > 1:
      return None
    found = self.compiled.shardings()
    if found is None:
      replicated = "{replicated}"
      found = ([replicated] * len(self.program.parameters),
               [replicated] * len(self.program.results))
    params, outputs = found
    if not self.program.results:
      # No outputs: the empty tuple's sharding, as XLA gives (and JAX
      # requires exactly one then).
      outputs = ["{}"]
    return params, outputs

  def optimized_program(self) -> tuple[str, bytes]:
    """(format, code) of PJRT_Executable_OptimizedProgram: a partitioned
    global program as its optimized HLO module ("hlo_with_config", what
    XLA gives and the only HLO form JAX's client reads, and
    what JAX's `compiled.as_text()` prints); any other program, or a
    backend without HLO, as the program's MLIR text."""
    if self.num_partitions > 1 and self.program.shardings:
      hlo = self.compiled.optimized_hlo()
      if hlo is not None:
        return "hlo_with_config", hlo
    program = self.program
    if (program.format == "mlir" and not program.is_hlo and
        b"sdy" not in program.code):
      # The program as it came (JAX's bytecode, or text): JAX asks for it
      # at every compile, for the output layouts, and parsing and printing
      # it again cost 0.2-0.5 s on programs of a few thousand ops. One that
      # may hold Shardy ops, which JAX's converter refuses, is printed
      # without them.
      return "mlir", bytes(program.code)
    return "mlir", program.text().encode("utf-8")

  def memory_stats(self) -> dict[str, int]:
    """Sizes for PJRT_Executable_GetCompiledMemoryStats (bytes)."""
    def size(types):
      return sum(int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
                 for t in types)
    arguments = size(self.program.parameters)
    outputs = size(self.program.results)
    return {"generated_code_size_in_bytes": self.code_size,
            "argument_size_in_bytes": arguments,
            "output_size_in_bytes": outputs,
            "peak_memory_in_bytes": arguments + outputs,
            "total_size_in_bytes": arguments + outputs}


def _donatable(program: programs.Program) -> frozenset[int]:
  """The parameters an execution takes over: those aliased with a result,
  and each buffer donor (jax.buffer_donor) for which a result of its size
  in bytes is left, in parameter order, as XLA's input-output alias
  optimization pairs donors with results. A donor with no such result
  keeps its buffer (XLA's CPU client leaves it undeleted)."""
  def size(t) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize

  out = set(program.aliases)
  aliased = set(program.aliases.values())
  free = [size(r) for k, r in enumerate(program.results) if k not in aliased]
  for i in sorted(program.donors - out):
    nbytes = size(program.parameters[i])
    if nbytes in free:
      free.remove(nbytes)
      out.add(i)
  return frozenset(out)


def _executable_mirror(executable: Executable) -> tuple[int, ...]:
  """Words of an executable's handle record
  (native_slots.EXECUTABLE_WORDS)."""
  return (executable.num_replicas, executable.num_partitions,
          executable.num_outputs)


handles.register_mirror(EXECUTABLE, _executable_mirror)


def _loaded_mirror(loaded: "LoadedExecutable") -> tuple[int, ...]:
  """Words of a loaded executable's handle record: its native Execute
  descriptor's address (0: every call goes to Python)."""
  loaded.native = native_execute.descriptor_for(loaded)
  return (loaded.native.address if loaded.native is not None else 0,)


handles.register_mirror(LOADED_EXECUTABLE, _loaded_mirror)


def check_options(opts: options_lib.CompileOptions,
                  num_devices: int | Collection[int]) -> None:
  """Rejects compile options the plugin cannot honour: `num_devices` is
  how many devices there are (ids 0..n-1), or their ids (a client's, of
  every process).

  Raises:
    support.InvalidArgumentError: impossible counts or assignments.
    support.UnimplementedError: tupled arguments.

  Programs for several partitions are compiled whatever
  `use_spmd_partitioning` says (JAX always sets it): a global program is
  partitioned or refused at compile time (backends.check_partitionable),
  a per-device one runs as it is.
  """
  if opts.num_replicas < 1 or opts.num_partitions < 1:
    raise support.InvalidArgumentError(
        f"num_replicas and num_partitions must be at least 1, got "
        f"{opts.num_replicas} and {opts.num_partitions}")
  if opts.parameter_is_tupled_arguments:
    raise support.UnimplementedError(
        "parameter_is_tupled_arguments is not supported")
  if opts.num_partitions > 1 and opts.use_auto_spmd_partitioning:
    raise support.UnimplementedError(
        "automatic SPMD partitioning (use_auto_spmd_partitioning) is not "
        "supported by the openxla_cpu plugin")
  valid = range(num_devices) if isinstance(num_devices, int) else num_devices
  needed = opts.num_replicas * opts.num_partitions
  if needed > len(valid):
    raise support.InvalidArgumentError(
        f"{opts.num_replicas} replicas x {opts.num_partitions} partitions "
        f"need {needed} devices; there are {len(valid)}")
  if opts.compile_portable_executable and needed > 1:
    raise support.InvalidArgumentError(
        "a portable executable must have one replica and one partition")
  assignment = opts.device_assignment
  if assignment is not None:
    if (len(assignment) != opts.num_replicas or
        any(len(row) != opts.num_partitions for row in assignment)):
      shape = (f"{len(assignment)}x"
               f"{len(assignment[0]) if assignment else 0}")
      raise support.InvalidArgumentError(
          f"the device assignment is {shape}, but the options ask for "
          f"{opts.num_replicas} replicas x {opts.num_partitions} partitions")
    ids = [i for row in assignment for i in row]
    bad = [i for i in ids if i not in valid]
    if bad:
      raise support.InvalidArgumentError(
          f"the device assignment names devices {bad} that do not exist "
          f"(ids are {runtime.describe_ids(valid)})")
    if len(set(ids)) != len(ids):
      raise support.InvalidArgumentError(
          f"the device assignment uses a device twice: {list(assignment)}")


def compile_executable(code: bytes, fmt: str, options_bytes: bytes, *,
                       num_devices: int | Collection[int], backend: str,
                       fallback: bool, threads: int = 0) -> Executable:
  """Parses, checks and compiles a program for a topology of `num_devices`
  (`threads`: a client's intra_op_parallelism_threads, 0 for the
  default)."""
  opts = options_lib.decode_compile_options(options_bytes)
  check_options(opts, num_devices)
  # The persistent cache (program_cache) holds programs of one device for
  # the cpu backend; a hit does not parse the program.
  cache_dir = cache_key = None
  if (backend == "cpu" and opts.num_replicas == 1 and
      opts.num_partitions == 1 and fmt not in programs.HLO_FORMATS):
    cache_dir = program_cache.directory()
  if cache_dir and backends.calls_host(code):
    cache_dir = None  # Its host callbacks live in this process only.
  if cache_dir:
    cache_key = program_cache.key(code, fmt, opts, backend, fallback)
    found = program_cache.lookup(cache_dir, cache_key, code, fmt)
    if found is not None:
      compiled = backends.load_cached_cpu(found[0], found[1], threads)
      if compiled is not None:
        return Executable(found[0], opts, options_bytes, compiled)
  # Parsing allocates many small objects that all stay alive: the cyclic
  # collector's passes over them find nothing (as in the compiler).
  with support.heap.gc_paused():
    # A program for several partitions keeps its Shardy annotations: the
    # HLO import reads them into the shardings the partitioner follows.
    program = programs.load(code, fmt, keep_shardy=opts.num_partitions > 1)
    compiled = backends.compile_program(
        program, backend, fallback=fallback,
        num_replicas=opts.num_replicas, num_partitions=opts.num_partitions,
        propagation=(opts.propagation_to_parameters,
                     opts.propagation_to_output),
        overrides=opts.option_overrides, threads=threads)
    if program.shardings and opts.num_partitions > 1:
      _take_per_device_signature(program, compiled)
  compiler_key = getattr(compiled, "compiler_key", None)
  if cache_key and compiled.backend == "cpu" and compiler_key:
    program_cache.store(cache_dir, cache_key, program, compiler_key)
  return Executable(program, opts, options_bytes, compiled)


def _take_per_device_signature(program: programs.Program,
                               compiled: backends.Compiled) -> None:
  """A partitioned global program takes and returns each device's shards:
  its signature becomes the compiled program's."""
  signature = compiled.per_device_signature()
  if signature is None:
    return
  params, results = signature

  def retyped(old, new):
    if len(old) != len(new):
      raise support.InternalError(
          f"{program.name}: the partitioned program has {len(new)} "
          f"parameters or results where the program has {len(old)}")
    # None: a token, which has no per-device shape.
    return [t if leaf is None else
            dataclasses.replace(t, dtype=np.dtype(leaf[0]),
                                shape=tuple(leaf[1]))
            if (t.dtype, t.shape) != (np.dtype(leaf[0]), tuple(leaf[1]))
            else t
            for t, leaf in zip(old, new)]

  for old, new in ((program.parameters, params), (program.results, results)):
    if any(leaf is None and t.element_type != abi_types.BufferType.TOKEN
           for t, leaf in zip(old, new)):
      raise support.InternalError(
          f"{program.name}: the partitioned program has no per-device "
          "buffer for a parameter or result that is not a token")
  program.parameters = retyped(program.parameters, params)
  program.results = retyped(program.results, results)


def _passes_for_token(buffer: runtime.Buffer, element_type) -> bool:
  """Whether `buffer` may be the argument of a parameter of `element_type`
  that is a token: any buffer of zero bytes, as XLA's CPU client checks
  only the size (JAX passes a token as a bool[0] array)."""
  return element_type == abi_types.BufferType.TOKEN and buffer.nbytes == 0


class LoadedExecutable:
  """An executable bound to devices of one client."""

  def __init__(self, client: runtime.Client, executable: Executable,
               options_override: Optional[options_lib.CompileOptions] = None):
    self.client = client
    self.executable = executable
    opts = options_override or executable.options
    check_options(opts, client.device_ids)
    if opts.compile_portable_executable:
      self.assignment = None
    elif opts.device_assignment is not None:
      self.assignment = [list(row) for row in opts.device_assignment]
    elif (opts.num_replicas == opts.num_partitions == 1 and
          opts.device_ordinal >= 0):
      self.assignment = [[client.lookup_addressable_device(
          opts.device_ordinal).id]]
    else:
      self.assignment = client.default_device_assignment(
          opts.num_replicas, opts.num_partitions)
    # This process's devices of the assignment (the others' run their own
    # instances).
    self.devices: list[runtime.Device] = []
    # Device id -> (replica, partition).
    self.logical_ids: dict[int, tuple[int, int]] = {}
    processes = []
    for r, row in enumerate(self.assignment or []):
      for p, device_id in enumerate(row):
        device = client.lookup_device(device_id)
        if device.addressable:
          self.devices.append(device)
        processes.append(device.process_index)
        self.logical_ids[device_id] = (r, p)
    # Where the assignment spans processes: what the execution's grid needs
    # to reach the other processes' instances (the process of each
    # participant, by flattened id; see _span_processes).
    self.placement: Optional[dict] = None
    if len(set(processes)) > 1:
      self.placement = {
          "processes": tuple(processes),
          "process_index": client.process_index,
          "mpi_ranks": tuple(i.mpi_rank for i in client.processes),
          "timeout_s": client.options.cross_process_timeout_s}
    self.deleted = False
    self.c = runtime.CStrings()
    self.handle = 0
    # The native Execute's descriptor (native_execute.py), made with the
    # handle; armed while a call may run natively.
    self.native: Optional[native_execute.Descriptor] = None

  @property
  def program(self) -> programs.Program:
    return self.executable.program

  def delete(self) -> None:
    self.deleted = True
    if self.native is not None:
      self.native.arm(False)

  def arm_native(self) -> None:
    """Lets the native Execute run the next calls if they may run inline
    (the latest run was short), on a live client."""
    self.native.arm(self.executable.runs_inline() and not self.deleted and
                    not self.client.destroyed)

  # -- Execution. -----------------------------------------------------------

  def _launch_devices(self, num_lists: int,
                      execute_device: Optional[runtime.Device]
                      ) -> list[runtime.Device]:
    if execute_device is not None:
      if num_lists != 1:
        raise support.InvalidArgumentError(
            f"with execute_device set, pass one argument list, not "
            f"{num_lists}")
      if (len(self.devices) > 1 and
          execute_device.id not in self.logical_ids):
        raise support.InvalidArgumentError(
            f"device {execute_device.id} is not one of this executable's "
            f"devices {[d.id for d in self.devices]}")
      return [execute_device]
    if self.assignment is None:
      raise support.InvalidArgumentError(
          "a portable executable runs only with execute_device set")
    if num_lists != len(self.devices):
      raise support.InvalidArgumentError(
          f"the executable runs on {len(self.devices)} device(s) but got "
          f"{num_lists} argument list(s)")
    return self.devices

  def _check_arguments(self, device: runtime.Device,
                       arguments: Sequence[runtime.Buffer]) -> None:
    types = self.executable.parameter_types
    if len(arguments) == len(types):
      client = self.client
      for buffer, want in zip(arguments, types):
        if (buffer.client is not client or buffer.is_deleted or
            (buffer.element_type != want[0] or buffer.shape != want[1]) and
            not _passes_for_token(buffer, want[0])):
          break
      else:
        client.check_alive()
        return
    self._argument_error(device, arguments)

  def _argument_error(self, device: runtime.Device,
                      arguments: Sequence[runtime.Buffer]) -> None:
    """Raises the error for arguments that failed _check_arguments."""
    params = self.program.parameters
    if len(arguments) != len(params):
      raise support.InvalidArgumentError(
          f"{self.program.name} takes {len(params)} argument(s), got "
          f"{len(arguments)} (device {device.id})")
    for i, (buffer, param) in enumerate(zip(arguments, params)):
      if buffer.client is not self.client:
        raise support.InvalidArgumentError(
            f"argument {i} belongs to another PJRT_Client")
      buffer.check_usable()
      if (buffer.element_type != param.element_type or
          buffer.shape != param.shape) and not _passes_for_token(
              buffer, param.element_type):
        raise support.InvalidArgumentError(
            f"argument {i} of {self.program.name} must be "
            f"{param.describe()}, got {buffer.element_type.name}"
            f"{list(buffer.shape)}")

  def execute(self, argument_lists: Sequence[Sequence[runtime.Buffer]], *,
              execute_device: Optional[runtime.Device] = None,
              non_donatable: frozenset[int] = frozenset(),
              launch_id: int = 0
              ) -> tuple[list[list[runtime.Buffer]], list[events.Future]]:
    """Starts the execution; returns (outputs [device][i], completions)."""
    if self.deleted:
      raise support.FailedPreconditionError(
          "the executable was deleted (PJRT_LoadedExecutable_Delete)")
    self.client.check_alive()
    devices = self._launch_devices(len(argument_lists), execute_device)
    for device, arguments in zip(devices, argument_lists):
      self._check_arguments(device, arguments)
    executable = self.executable
    # A call from a job running on the device's own worker (a host callback
    # that computes with JAX) runs at once on that thread: queued behind
    # the job that waits for it, it would never run.
    nested = len(devices) == 1 and getattr(
        devices[0], "worker", None) is not None and (
            devices[0].worker.is_current_thread())
    if (len(devices) == 1 and not executable.donatable and
        (executable.runs_inline() or nested) and self.placement is None):
      done = self._run_inline(devices[0], argument_lists[0], launch_id,
                              nested=nested)
      if done is not None:
        if self.native is not None:
          self.arm_native()
        return done
    donatable = executable.donatable
    if non_donatable:
      donatable = donatable - non_donatable
    donations: list[frozenset[int]] = []
    for replica, arguments in enumerate(argument_lists):
      for i in sorted(donatable):
        others = [k for k, b in enumerate(arguments)
                  if b is arguments[i] and k != i]
        if others:
          # As XLA's clients: the buffer would be read after its memory
          # was given to a result.
          raise support.InvalidArgumentError(
              f"argument {i} of execution {replica} is donated, and the same "
              f"buffer is also argument {others[0]} of this call; a donated "
              "buffer can be passed only once")
    for arguments in argument_lists:
      # A buffer viewed from outside (numpy, dlpack) is read, not taken
      # over, as XLA's CPU client does (by a copy) rather than fail.
      donated = frozenset(
          i for i in donatable
          if sum(b is arguments[i] for b in arguments) == 1 and
          not arguments[i].has_external_references
      ) if donatable else frozenset()
      donations.append(donated)
    specs = executable.result_specs
    client = self.client
    outputs = [[runtime.Buffer.pending_of(client, device.default_memory, s)
                for s in specs] for device in devices]
    completions = [events.Future() for _ in devices]
    grid = None
    if len(devices) > 1 or (self.placement is not None and
                            execute_device is None):
      grid = executable.compiled.new_grid(executable.num_replicas,
                                          executable.num_partitions)
      if grid is not None and self.placement is not None:
        self._span_processes(grid)
    inline = None
    with client.launch_lock:
      # Donation and holds happen only once every argument has passed.
      for arguments, donated in zip(argument_lists, donations):
        for i in donated:
          arguments[i].donate()
        for i, buffer in enumerate(arguments):
          if i not in donated:
            buffer.acquire_hold()
      jobs = []
      for device, arguments, donated, outs, done in zip(
          devices, argument_lists, donations, outputs, completions):
        process = None
        if grid is not None:
          pid = self.logical_ids[device.id]
          grid.start(pid)
          process = (grid, pid)
        jobs.append((device, _Job(self, device, list(arguments), donated,
                                  outs, done, process)))
      if len(jobs) == 1 and grid is None and (nested or (
          executable.runs_inline() and devices[0].is_idle() and
          all(b.future.is_ready() for b in argument_lists[0]))):
        device, inline = jobs[0]
        device.add_pending(launch_id, inline)
      else:
        for device, job in jobs:
          device.add_pending(launch_id, job)
          try:
            device.worker.submit(job)
          except support.XlaError as e:
            job.abandon(e)
    if inline is not None:
      # Outside the launch lock: other launches need not wait for it.
      inline()
    if self.native is not None:
      self.arm_native()
    return outputs, completions


  def _span_processes(self, grid) -> None:
    """Tells `grid` which participants run in other processes (its
    collectives then reach them; the cpu backend's go over MPI)."""
    span = getattr(grid, "span_processes", None)
    if span is None:
      raise support.UnimplementedError(
          f"{self.program.name!r} has collectives between devices of "
          f"several processes, which the {self.executable.backend!r} "
          "backend does not run (the cpu backend does)")
    span(**self.placement)

  def _run_inline(self, device: runtime.Device,
                  arguments: Sequence[runtime.Buffer], launch_id: int,
                  nested: bool = False
                  ) -> Optional[tuple[list[list[runtime.Buffer]],
                                      list[events.Future]]]:
    """Runs a cheap execution with nothing to donate on the calling thread
    and returns its outputs (made ready, or failed); None when the device
    is busy or an input is not ready (then it is queued as usual).
    `nested`: called from the device's worker, which is busy with the job
    making the call; it runs regardless."""
    executable = self.executable
    client = self.client
    job = _InlineJob()
    with client.launch_lock:
      if not nested and not device.is_idle():
        return None
      for buffer in arguments:
        if not buffer.future.is_ready():
          return None
      held = []
      try:
        for buffer in arguments:
          buffer.acquire_hold()
          held.append(buffer)
      except BaseException:
        for buffer in held:
          buffer.release_hold()
        raise
      device.add_pending(launch_id, job)
    status = None
    try:
      arrays = [buffer.held_array() for buffer in arguments]
      start = time.perf_counter()
      results = executable.compiled.run(arrays)
      executable.last_run_s = time.perf_counter() - start
      results = _check_results(executable, results)
    except BaseException as e:  # pylint: disable=broad-except
      status = errors.status_of(e)
    finally:
      job.finished = True
      device.remove_pending(job)
      for buffer in arguments:
        buffer.release_hold()
    status = status if status is not None else job.poisoned
    memory = device.default_memory
    specs = executable.result_specs
    if status is None:
      outputs = [runtime.Buffer.ready_of(client, memory, spec, array)
                 for spec, array in zip(specs, results)]
      return [outputs], [events.DONE]
    outputs = [runtime.Buffer.pending_of(client, memory, spec)
               for spec in specs]
    for buffer in outputs:
      buffer.fail(status)
    return [outputs], [events.Future.ready(status)]


class _InlineJob:
  """An inline execution's entry in its device's pending list."""

  __slots__ = ("finished", "poisoned")

  def __init__(self):
    self.finished = False
    self.poisoned: events.Status = None

  def poison(self, status: events.Status) -> bool:
    if self.finished:
      return False
    self.poisoned = status
    return True


class _Job:
  """The work of one device in one execution."""

  def __init__(self, loaded: LoadedExecutable, device: runtime.Device,
               arguments: list[runtime.Buffer], donated: frozenset[int],
               outputs: list[runtime.Buffer], done: events.Future,
               process):
    self._loaded = loaded
    self._device = device
    self._poisoned: events.Status = None
    self._finished = False
    self._arguments = arguments
    self._donated = donated
    self._outputs = outputs
    self._done = done
    self._process = process

  def poison(self, status: events.Status) -> bool:
    """Makes the outputs fail with `status`; False if already finished."""
    if self._finished:
      return False
    self._poisoned = status
    return True

  def _release(self) -> None:
    self._finished = True
    self._device.remove_pending(self)
    for i, buffer in enumerate(self._arguments):
      if i not in self._donated:
        buffer.release_hold()
      else:
        buffer.release_donation()  # a no-op once its data was taken
    self._arguments = []

  def abandon(self, exc: BaseException) -> None:
    status = errors.status_of(exc)
    if self._process is not None:
      grid, pid = self._process
      grid.abort(pid, exc)
      grid.finish(pid)
    self._release()
    for buffer in self._outputs:
      buffer.fail(status)
    self._done.set(status)

  def __call__(self) -> None:
    try:
      arrays = []
      for i, buffer in enumerate(self._arguments):
        if i in self._donated:
          arrays.append(buffer.data_after_donation())
        else:
          arrays.append(buffer.held_array())
      process = None
      if self._process is not None:
        grid, pid = self._process
        process = grid.process(pid)
      executable = self._loaded.executable
      start = time.perf_counter()
      results = executable.compiled.run(arrays, donated=self._donated,
                                        process=process)
      executable.last_run_s = time.perf_counter() - start
      if self._loaded.native is not None:
        self._loaded.arm_native()
      results = _check_results(executable, results)
    except BaseException as e:  # pylint: disable=broad-except
      self.abandon(e)
      return
    if self._process is not None:
      self._process[0].finish(self._process[1])
    self._release()
    if self._poisoned is not None:
      for buffer in self._outputs:
        buffer.fail(self._poisoned)
      self._done.set(self._poisoned)
      return
    for buffer, array in zip(self._outputs, results):
      buffer.fulfill(array)
    self._done.set()


def _check_results(executable: Executable,
                   results: Sequence[np.ndarray]) -> list[np.ndarray]:
  """The backend's results as arrays of exactly the declared types."""
  program = executable.program
  specs = executable.result_specs
  if not isinstance(results, (list, tuple)):
    results = list(results)
  if len(results) != len(specs):
    raise support.InternalError(
        f"{program.name} returned {len(results)} values; its signature has "
        f"{len(specs)}")
  checked = []
  for i, (value, spec) in enumerate(zip(results, specs)):
    if spec.element_type == abi_types.BufferType.TOKEN:
      # A token carries no data; backends return their own marker for it
      # (the CPU executable None, the interpreter its Token).
      checked.append(dtypes.token_array())
      continue
    array = value if type(value) is np.ndarray else np.asarray(value)  # pylint: disable=unidiomatic-typecheck
    if array.dtype != spec.dtype:
      array = array.astype(spec.dtype)
    if array.shape != spec.shape:
      raise support.InternalError(
          f"result {i} of {program.name} has shape {list(array.shape)}, "
          f"its signature says {program.results[i].describe()}")
    checked.append(array if array.flags.c_contiguous
                   else runtime.contiguous(array))
  return checked
