"""Execution backends: what turns a verified Program into something that runs.

Backends register under a name (`register`), so another one is a new entry,
not an edit of the plugin:

  interpreter  the StableHLO reference interpreter (stablehlo/_src/
               interpreter); runs every op it has a kernel for, collectives
               across replicas and partitions included;
  evaluator    StableHLO -> HLO (xla/translate) then XLA's HLO evaluator;
               programs of one participant only, when they use collectives
               or the replica / partition ids;
  cpu          StableHLO -> HLO then our XLA CPU compiler
               (xla.service.cpu.cpu_compiler), native code; a program of
               several participants runs one instance per device, and they
               meet in the compiler's collective runtime.

Programs in the HLO formats ("hlo", "hlo_with_config") are read by
`read_hlo_program` (xla/hlo/proto), which this module registers with
programs.py (that module may not import //xla), and run on cpu / evaluator
only: there is no HLO -> StableHLO converter for the interpreter, so it
refuses them (UNIMPLEMENTED), and "auto" does not fall back to it for them.

"auto" (the default) is "cpu" when the CPU compiler can be imported, else
"interpreter"; under "auto" a program the CPU compiler does not support
(UnimplementedError) runs on the interpreter instead, and the executable
says so in its name. An explicitly chosen backend never falls back.

A backend's `compile(program)` returns a `Compiled`, whose `run(arrays)`
returns the entry's results as numpy arrays; it may be called from several
device threads at once. For a program of several participants (replicas x
partitions > 1) it is called `compile(program, num_replicas=R,
num_partitions=P)`, and an execution asks the Compiled for a `new_grid`:
the object the devices' instances share (`start`, `process`, `finish`,
`abort`, keyed by (replica, partition)); each instance's `run` gets its
`process`.

A global program (shardings, for more than one partition) must be
partitioned before it runs per device: the cpu backend does that (the
HLO import carries a StableHLO program's shardings, then the compiler's
SPMD hook partitions, or says UNIMPLEMENTED where no partitioner is
available), each device's instance then takes and returns its shards
(`per_device_signature`) and `shardings` says how the program's
parameters and outputs are split. The other backends refuse a global
program (UNIMPLEMENTED) rather than run it unpartitioned, and "auto" does
not fall back to the interpreter for one.

`compile(program, ..., propagation=(parameters, outputs))` passes the
compile options' allow_spmd_sharding_propagation_to_parameters / _output
flags (where an unannotated parameter or output may take the sharding
propagation finds, rather than being replicated) to backends that take it,
and `compile(program, ..., threads=N)` the client's
intra_op_parallelism_threads (how many threads one execution splits its
kernels across; options.py) to those that take it: the cpu backend.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import threading
from typing import Any, Callable, Optional, Sequence

import numpy as np

import support
from pjrt._src.plugin import programs

_CPU_COMPILER_MODULE = "xla.service.cpu.cpu_compiler"


class Compiled:
  """A program compiled by one backend."""

  backend = ""

  def run(self, args: Sequence[np.ndarray], *,
          donated: frozenset[int] = frozenset(),
          process: Any = None) -> list[np.ndarray]:
    raise NotImplementedError

  @property
  def code_size(self) -> int:
    return 0

  def native_plan(self, donated: frozenset[int] = frozenset()) -> Any:
    """A plan for one native call of the whole program when parameters
    `donated` are donated (the CPU compiler's native_execute.NativePlan:
    `address`, `entry`, `output_bytes`, `donate_to`), or None where a run
    needs Python."""
    del donated
    return None

  def new_grid(self, num_replicas: int, num_partitions: int) -> Any:
    """What the instances of one execution on several devices share (see
    the module docstring), or None where they run independently."""
    del num_replicas, num_partitions
    return None

  def per_device_signature(self) -> Any:
    """([(dtype, shape)] of the parameters, of the results) that each
    device's instance takes and returns, where compiling changed them from
    the program's (a partitioned global program); else None."""
    return None

  def optimized_hlo(self) -> Optional[bytes]:
    """The optimized program as a serialized HloModuleProtoWithConfig
    (None: the backend has none; the program's own text stands for it)."""
    return None

  def shardings(self) -> Any:
    """([HLO sharding text] of the parameters, of the outputs) of a
    partitioned global program: how each device's shards make up the
    program's values; else None."""
    return None


_REGISTRY: dict[str, Callable[[programs.Program], Compiled]] = {}


def register(name: str, compile_fn: Callable[[programs.Program],
                                             Compiled]) -> None:
  """Registers backend `name` (replacing an earlier one of that name)."""
  _REGISTRY[name] = compile_fn


def names() -> list[str]:
  return sorted(_REGISTRY)


# --------------------------------------------------------------------------
# The reference interpreter.


class InterpreterCompiled(Compiled):
  """Runs the program with the StableHLO interpreter (one per thread)."""

  backend = "interpreter"

  def __init__(self, program: programs.Program, num_replicas: int = 1,
               num_partitions: int = 1):
    del num_replicas, num_partitions  # The grid is made per execution.
    _require_stablehlo(program)
    from stablehlo import interpreter  # pylint: disable=g-import-not-at-top
    self._interpreter_cls = interpreter.Interpreter
    self._program = program
    self._module = _without_shardy(program)
    self._local = threading.local()
    self._check_kernels()

  def _interpreter(self):
    interp = getattr(self._local, "interp", None)
    if interp is None:
      interp = self._local.interp = self._interpreter_cls(self._module)
    return interp

  def _check_kernels(self) -> None:
    """Fails at compile time for an op the interpreter cannot run."""
    interp = self._interpreter()
    for fn in self._module.functions:
      for region in fn.regions:
        for block in region.blocks:
          for op in block.operations:
            for nested in op.walk():
              if nested.name not in ("func.return", "stablehlo.return",
                                     "chlo.return"):
                interp.kernel(nested.name)

  def new_grid(self, num_replicas, num_partitions):
    if not self._program.uses_collectives:
      return None
    return _InterpreterGrid(num_replicas, num_partitions)

  def run(self, args, *, donated=frozenset(), process=None):
    del donated  # The interpreter never writes into its inputs.
    interp = self._interpreter()
    with np.errstate(all="ignore"):
      return interp.call(self._program.entry, list(args), process=process)


class _InterpreterGrid:
  """The interpreter's process grid, keyed by (replica, partition)."""

  def __init__(self, num_replicas: int, num_partitions: int):
    from stablehlo.interpreter import process_grid  # pylint: disable=g-import-not-at-top
    self._pid = process_grid.ProcessId
    self.grid = process_grid.ProcessGrid(num_replicas, num_partitions)

  def start(self, pid) -> None:
    self.grid.start(self._pid(*pid))

  def process(self, pid):
    return self.grid.process(self._pid(*pid))

  def finish(self, pid) -> None:
    self.grid.finish(self._pid(*pid))

  def abort(self, pid, error: BaseException) -> None:
    self.grid.abort(self._pid(*pid), error)


def _without_shardy(program: programs.Program):
  """The program's StableHLO module without Shardy ops and attributes, for
  a backend that runs it unpartitioned (check_partitionable lets only a
  program without shardings that split a value get there)."""
  if not program.keep_shardy:
    return program.stablehlo()
  from pjrt._src.plugin import shardy  # pylint: disable=g-import-not-at-top
  module = program.fresh_module()
  shardy.strip(module)
  return module


# --------------------------------------------------------------------------
# StableHLO -> HLO, for the XLA backends.


def import_hlo(program: programs.Program, verify: bool = True,
               shardings: bool = True):
  """A fresh HloModule of the program's entry function, verified unless
  `verify` is False (the CPU compiler verifies what it is given); without
  Shardy's annotations unless `shardings`."""
  if program.is_hlo:
    return program.fresh_hlo()
  module = (program.take_module() if shardings or not program.keep_shardy
            else _without_shardy(program))
  if any(op.name == "ml_program.global" for op in module.walk()):
    raise support.UnimplementedError(
        "programs with ml_program globals are supported by the interpreter "
        "backend only")
  from stablehlo.transforms import chlo_legalize  # pylint: disable=g-import-not-at-top
  from xla.service import hlo_verifier  # pylint: disable=g-import-not-at-top
  from xla.translate import stablehlo_to_hlo  # pylint: disable=g-import-not-at-top
  chlo_legalize.run(module)
  hlo = stablehlo_to_hlo.stablehlo_to_hlo(module, entry=program.entry)
  if verify:
    hlo_verifier.verify(hlo)
  return hlo


def register_host_callback(fn, partitioned: bool = False
                           ) -> tuple[str, int]:
  """Registers Python function `fn` with the cpu backend's host-callback
  handler; returns the custom-call target and the index a program names
  it by (meaningful in this process only: such a program is never stored
  in or loaded from the persistent cache, see `calls_host`). `partitioned`:
  the target that every device of a partitioned program calls with its own
  shards."""
  from xla.service.cpu import host_callbacks  # pylint: disable=g-import-not-at-top
  target = (host_callbacks.PARTITIONED_TARGET if partitioned else
            host_callbacks.TARGET)
  return target, host_callbacks.register(fn)


def calls_host(code: bytes | str) -> bool:
  """Whether a serialized or printed program calls a host callback."""
  from xla.service.cpu import host_callbacks  # pylint: disable=g-import-not-at-top
  return host_callbacks.calls_host(code)


class EvaluatorCompiled(Compiled):
  """Runs the program's HLO with XLA's HLO evaluator."""

  backend = "evaluator"

  def __init__(self, program: programs.Program, num_replicas: int = 1,
               num_partitions: int = 1):
    if num_replicas * num_partitions > 1 and program.uses_collectives:
      raise support.UnimplementedError(
          f"the evaluator backend runs collectives and replica / partition "
          f"ids of single-device programs only; {program.name!r} runs on "
          f"{num_replicas} replica(s) x {num_partitions} partition(s)")
    from xla.hlo.evaluator import hlo_evaluator  # pylint: disable=g-import-not-at-top
    from xla.service.cpu import lapack_handlers  # pylint: disable=g-import-not-at-top
    self._hlo = import_hlo(program, shardings=False)
    # JAX's LAPACK custom calls run on the CPU backend's LAPACK handlers.
    from xla.service.cpu import host_callbacks  # pylint: disable=g-import-not-at-top
    self._evaluator_cls = functools.partial(
        hlo_evaluator.HloEvaluator,
        custom_calls={**lapack_handlers.HANDLERS, **host_callbacks.HANDLERS})

  def run(self, args, *, donated=frozenset(), process=None):
    del donated, process
    return self._evaluator_cls().evaluate(self._hlo, list(args))


def cpu_compiler_module():
  """xla.service.cpu.cpu_compiler, or None when it cannot be imported."""
  try:
    module = importlib.import_module(_CPU_COMPILER_MODULE)
  except ImportError:
    return None
  return module if hasattr(module, "compile") else None


def _configure(hlo, num_replicas: int, num_partitions: int,
               propagation: Any) -> None:
  """The compile options say how many participants run the program (an
  HLO module's own config is not read, as XLA's PJRT client overrides it
  too), and where sharding propagation may reach."""
  hlo.config.replica_count = int(num_replicas)
  hlo.config.num_partitions = int(num_partitions)
  if propagation is not None:
    to_parameters, to_output = propagation
    config = hlo.config
    config.allow_spmd_sharding_propagation_to_parameters = tuple(
        bool(x) for x in to_parameters) or (False,)
    config.allow_spmd_sharding_propagation_to_output = tuple(
        bool(x) for x in to_output) or (False,)


def _cpu_compiler():
  compiler = cpu_compiler_module()
  if compiler is None:
    raise support.UnimplementedError(
        f"the cpu backend needs {_CPU_COMPILER_MODULE}, which cannot be "
        "imported")
  return compiler


def _cpu_options(compiler, threads: int, program: programs.Program = None,
                 config: Any = (1, 1, None)):
  """The compile options: `threads` per execution, the caller's included
  (0: one per core, the compiler's default; the executable's worker pool
  is shared by every executable of that size, and the compiled code does
  not depend on it), the persistent cache's directory for a program of
  one device, and the key of `program` compiled with `config`
  (num_replicas, num_partitions, propagation) for the compiler's cache."""
  from pjrt._src.plugin import program_cache  # pylint: disable=g-import-not-at-top
  cache_dir = (program_cache.directory() if config[0] * config[1] == 1
               else None)
  if cache_dir and program is not None and calls_host(program.code):
    cache_dir = None  # Its host callbacks live in this process only.
  input_key = None
  if program is not None:
    input_key = program_cache.compile_key(program.code, program.format,
                                          config, bool(cache_dir))
  return compiler.CpuCompileOptions(
      threads=int(threads) if threads and threads > 0 else None,
      cache_dir=cache_dir, input_key=input_key)


def load_cached_cpu(program: programs.Program, compiler_key: str,
                    threads: int = 0) -> Optional["CpuCompiled"]:
  """The cpu backend's compiled `program` of one device from the
  compiler's cache entry `compiler_key` (see program_cache), or None."""
  compiler = _cpu_compiler()
  options = _cpu_options(compiler, threads)
  if options.cache_dir is None:
    return None
  executable = compiler.load_cached(compiler_key, options)
  if executable is None:
    return None
  return CpuCompiled(program, threads=threads, executable=executable)


class CpuCompiled(Compiled):
  """Native code from our XLA CPU compiler."""

  backend = "cpu"

  def __init__(self, program: programs.Program, num_replicas: int = 1,
               num_partitions: int = 1, propagation: Any = None,
               threads: int = 0, executable: Any = None):
    if executable is None:
      compiler = _cpu_compiler()
      options = _cpu_options(compiler, threads, program,
                             (num_replicas, num_partitions, propagation))
      with support.heap.gc_paused():
        hlo = import_hlo(program, verify=False)
        _configure(hlo, num_replicas, num_partitions, propagation)
        executable = compiler.compile(hlo, options)
    self._executable = executable
    if num_partitions == 1 and hasattr(self._executable, "module"):
      # Only a partitioned program's optimized HLO is ever asked for
      # (Executable.optimized_program); kept alive, the module is tens of
      # thousands of objects that every full collection of the cyclic
      # garbage collector walks again.
      self._executable.module = None
    self._program = program
    self._config = (num_replicas, num_partitions, propagation)
    # The compiler's cache key (load_cached finds the executable by it).
    self.compiler_key = getattr(executable, "compile_stats", {}).get(
        "cache_key")
    try:
      parameters = inspect.signature(self._executable.execute).parameters
    except (TypeError, ValueError):
      parameters = {}
    self._takes_donate = "donate" in parameters

  @property
  def code_size(self) -> int:
    size = getattr(self._executable, "code_size", None)
    return int(size) if isinstance(size, int) else 0

  def native_plan(self, donated: frozenset[int] = frozenset()) -> Any:
    plan_fn = getattr(self._executable, "native_plan", None)
    return plan_fn(donated) if plan_fn is not None else None

  def optimized_hlo(self) -> Optional[bytes]:
    """The partitioned, optimized module, as XLA's executables give it
    (the compiler's, or made again for an executable from the cache)."""
    from xla.hlo.proto import hlo_proto  # pylint: disable=g-import-not-at-top
    module = getattr(self._executable, "module", None)
    if module is None:
      compiler = cpu_compiler_module()
      hlo = import_hlo(self._program, verify=False)
      num_replicas, num_partitions, propagation = self._config
      _configure(hlo, num_replicas, num_partitions, propagation)
      module = compiler.optimized_module(hlo)
    return hlo_with_config(hlo_proto.hlo_module_to_proto(module),
                           module.config.num_partitions)

  def per_device_signature(self):
    plan = getattr(self._executable, "plan", None)
    if plan is None:
      return None
    from xla.service.cpu import thunk_emitter  # pylint: disable=g-import-not-at-top

    def leaf(spec):
      return thunk_emitter.numpy_dtype(spec["dtype"]), tuple(spec["dims"])

    # A token parameter or result has no buffer in the plan (its only
    # leaf, or the output, is None): None, for the caller to keep.
    params = []
    for p in plan["params"]:
      if p["leaves"] == [None]:
        params.append(None)
        continue
      leaves = [l for l in p["leaves"] if l is not None]
      if len(leaves) != 1:
        return None
      params.append(leaf(leaves[0]))
    return params, [None if o is None else leaf(o) for o in plan["outputs"]]

  def shardings(self):
    plan = getattr(self._executable, "plan", None)
    found = plan.get("spmd_shardings") if isinstance(plan, dict) else None
    if not found:
      return None
    return list(found["parameters"]), list(found["outputs"])

  def new_grid(self, num_replicas, num_partitions):
    if not getattr(self._executable, "has_collectives", False):
      return None
    from xla.service.cpu import collectives  # pylint: disable=g-import-not-at-top
    return collectives.CollectiveExecution(num_replicas, num_partitions)

  def run(self, args, *, donated=frozenset(), process=None):
    if process is not None:
      return list(self._executable.execute(list(args), donate=donated,
                                           participant=process))
    if self._takes_donate:
      return list(self._executable.execute(list(args), donate=donated))
    return list(self._executable.execute(list(args)))


# --------------------------------------------------------------------------
# HLO-format programs (HloModuleProto).

# Opcodes (HLO text names) that make replicas or partitions interact.
_HLO_COLLECTIVE_EXTRA = frozenset({"replica-id", "partition-id", "send",
                                   "recv", "send-done", "recv-done"})


def _require_stablehlo(program: programs.Program) -> None:
  if program.is_hlo:
    raise support.UnimplementedError(
        f"the interpreter backend runs StableHLO only, and program "
        f"{program.name!r} is HLO (format {program.format!r}; there is no "
        "HLO -> StableHLO converter); use the cpu or evaluator backend")


def _hlo_array(shape, what: str):
  """(numpy dtype, dims) of an array shape of the entry's signature."""
  from xla import primitive_util  # pylint: disable=g-import-not-at-top
  from xla import shape_util  # pylint: disable=g-import-not-at-top
  if not shape.is_array():
    raise support.UnimplementedError(
        f"{what} has shape {shape_util.human_string(shape)}; the "
        "openxla_cpu plugin takes arrays (a tuple only as the result)")
  if shape.is_dynamic():
    raise support.UnimplementedError(
        f"{what} has dynamic shape {shape_util.human_string(shape)}; only "
        "static shapes are supported")
  if shape.layout is not None and not shape_util.has_default_layout(shape):
    raise support.UnimplementedError(
        f"{what} has layout {shape_util.human_string(shape)} with "
        f"minor_to_major {list(shape.layout.minor_to_major)}; the plugin's "
        "buffers are row-major (the default layout)")
  return primitive_util.numpy_dtype(shape.element_type), tuple(
      shape.dimensions)


def _describe_hlo(module, name: str) -> programs.HloInfo:
  from xla.hlo.ir import hlo_opcode  # pylint: disable=g-import-not-at-top
  from xla.service import hlo_verifier  # pylint: disable=g-import-not-at-top
  entry = module.entry_computation
  if entry is None:
    raise support.InvalidArgumentError(
        f"HLO module {name!r} has no entry computation")
  hlo_verifier.verify(module)
  layout = module.entry_computation_layout()
  own = entry.program_shape()
  if len(layout.parameters) != len(own.parameters):
    raise support.InvalidArgumentError(
        f"HLO module {name!r}: the entry layout has "
        f"{len(layout.parameters)} parameters, the entry computation "
        f"{len(own.parameters)}")
  parameters = []
  for i, (given, actual) in enumerate(zip(layout.parameters,
                                          own.parameters)):
    what = f"parameter {i} of {entry.name}"
    spec = _hlo_array(given, what)
    if spec != _hlo_array(actual, what):
      raise support.InvalidArgumentError(
          f"HLO module {name!r}: {what} is {actual} in the computation "
          f"but {given} in the entry layout")
    parameters.append(spec)
  result = layout.result
  tupled = result.is_tuple()
  leaves = result.tuple_shapes if tupled else (result,)
  results = [_hlo_array(s, f"result {i} of {entry.name}")
             for i, s in enumerate(leaves)]
  aliases: dict[int, int] = {}
  for alias in module.input_output_aliases:
    output = tuple(alias.output_index)
    if tuple(alias.parameter_index) or len(output) != int(tupled):
      raise support.UnimplementedError(
          f"HLO module {name!r}: input/output alias {alias} uses a tuple "
          "index the plugin's flat signature does not have")
    index = output[0] if tupled else 0
    if not 0 <= alias.parameter_number < len(parameters) or not (
        0 <= index < len(results)):
      raise support.InvalidArgumentError(
          f"HLO module {name!r}: input/output alias {alias} is out of range")
    aliases[alias.parameter_number] = index
  donors = frozenset(d.parameter_number for d in module.buffer_donors
                     if 0 <= d.parameter_number < len(parameters))
  collectives = any(
      hlo_opcode.has_property(i.opcode, hlo_opcode.COLLECTIVE) or
      hlo_opcode.opcode_string(i.opcode) in _HLO_COLLECTIVE_EXTRA
      for i in module.instructions())
  from xla.service.cpu import spmd_pipeline  # pylint: disable=g-import-not-at-top
  shardings = tuple(
      f"{i.name}: {i.sharding}" if i.sharding is not None else
      f"{i.name}: custom-call {i.custom_call_target}"
      if i.opcode.value == "custom-call" else f"{i.name}: Shardy attributes"
      for i in spmd_pipeline.sharded_instructions(module))
  return programs.HloInfo(
      module=module, name=name, entry=entry.name, parameters=parameters,
      results=results, aliases=aliases, donors=donors,
      uses_collectives=collectives, shardings=shardings)


def read_hlo_program(proto: bytes) -> programs.HloInfo:
  """Reads and verifies a serialized HloModuleProto (programs.py's HLO
  reader).

  Raises:
    support.InvalidArgumentError: bytes that are no valid HLO module (any
      failure to read or verify them, so that no input crashes the plugin).
    support.UnimplementedError: a module the plugin cannot run (tuple
      parameters, dynamic shapes, non-default entry layouts, proto fields
      our HLO IR lacks).
  """
  from xla.hlo.proto import hlo_proto  # pylint: disable=g-import-not-at-top
  try:
    module = hlo_proto.hlo_module_from_proto(bytes(proto))
    return _describe_hlo(module, module.name)
  except support.XlaError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    # Malformed input reaching code that assumes a well-formed module.
    raise support.InvalidArgumentError(
        f"invalid HloModuleProto: {type(e).__name__}: {e}") from None


programs.register_hlo_reader(read_hlo_program)


def op_sharding_protos(shardings: Sequence[str]) -> list[bytes]:
  """HLO sharding texts as serialized xla.OpSharding protos (what the PJRT
  Shardings extension returns)."""
  from xla.hlo.ir import hlo_sharding  # pylint: disable=g-import-not-at-top
  return [hlo_sharding.HloSharding.parse(text).to_proto().SerializeToString()
          for text in shardings]


def op_sharding_text(proto: bytes) -> str:
  """A serialized xla.OpSharding as HLO sharding text (for tools and
  tests, which may not import //xla themselves)."""
  from xla.hlo.ir import hlo_sharding  # pylint: disable=g-import-not-at-top
  from xla.hlo.proto import hlo_proto_schema  # pylint: disable=g-import-not-at-top
  message = hlo_proto_schema.OpSharding()
  message.ParseFromString(bytes(proto))
  return str(hlo_sharding.HloSharding.from_proto(message))


def _varint(value: int) -> bytes:
  out = bytearray()
  while True:
    byte, value = value & 0x7F, value >> 7
    out.append(byte | (0x80 if value else 0))
    if not value:
      return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
  return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def hlo_with_config(module_proto: bytes, num_partitions: int) -> bytes:
  """A serialized HloModuleProtoWithConfig (xla/service/hlo.proto:
  hlo_module = 1, config = 2) around a serialized HloModuleProto. XLA's
  reader requires the config's entry_computation_layout (field 1 of
  HloModuleConfigProto): the module's host program shape; num_partitions
  is field 5."""
  from xla.hlo.proto import hlo_proto_schema  # pylint: disable=g-import-not-at-top
  message = hlo_proto_schema.HloModuleProto()
  message.ParseFromString(module_proto)
  config = _field(1, message.host_program_shape.SerializeToString())
  config += _varint(5 << 3) + _varint(int(num_partitions))
  return _field(1, module_proto) + _field(2, config)


def hlo_text_to_proto(text: str) -> bytes:
  """HLO text as the serialized HloModuleProto that format "hlo" takes (for
  tools and tests, which may not import //xla themselves)."""
  from xla.hlo.parser import hlo_parser  # pylint: disable=g-import-not-at-top
  from xla.hlo.proto import hlo_proto  # pylint: disable=g-import-not-at-top
  return hlo_proto.hlo_module_to_proto(
      hlo_parser.parse_and_return_unverified_module(text))


register("interpreter", InterpreterCompiled)
register("evaluator", EvaluatorCompiled)
register("cpu", CpuCompiled)


# --------------------------------------------------------------------------
# Choosing a backend.


def resolve(choice: str) -> str:
  """The backend a client uses for `choice` ("auto" or a backend name)."""
  if choice == "auto":
    return "cpu" if cpu_compiler_module() is not None else "interpreter"
  if choice not in _REGISTRY:
    raise support.InvalidArgumentError(
        f"unknown backend {choice!r} (known: auto, {', '.join(names())})")
  return choice


def _parameters(compile_fn) -> Any:
  try:
    return inspect.signature(compile_fn).parameters
  except (TypeError, ValueError):
    return {}


def _compile_with(compile_fn, program: programs.Program, backend: str,
                  num_replicas: int, num_partitions: int,
                  propagation: Any = None, threads: int = 0) -> Compiled:
  kwargs = {}
  if threads:
    parameters = _parameters(compile_fn)
    if "threads" in parameters:
      kwargs["threads"] = threads
  if num_replicas * num_partitions == 1:
    return compile_fn(program, **kwargs)
  parameters = _parameters(compile_fn)
  if "num_partitions" not in parameters:
    raise support.UnimplementedError(
        f"backend {backend!r} does not compile programs of several "
        f"participants ({num_replicas} replica(s) x {num_partitions} "
        "partition(s))")
  if propagation is not None and "propagation" in parameters:
    kwargs["propagation"] = propagation
  return compile_fn(program, num_replicas=num_replicas,
                    num_partitions=num_partitions, **kwargs)


def check_partitionable(program: programs.Program, backend: str,
                        num_partitions: int) -> None:
  """Refuses a global program (shardings, more than one partition) that
  `backend` would run unpartitioned.

  Raises:
    support.UnimplementedError: see the module docstring.
  """
  if num_partitions <= 1 or not program.shardings:
    return
  shown = ", ".join(program.shardings[:3]) + (
      ", ..." if len(program.shardings) > 3 else "")
  if backend != "cpu":
    raise support.UnimplementedError(
        f"{program.name!r} is a global program with shardings ({shown}) "
        f"for {num_partitions} partitions: only the cpu backend partitions "
        f"programs, not {backend!r}")


def check_option_overrides(overrides: Sequence[tuple[str, Any]]
                           ) -> dict[str, Any]:
  """The typed values of compile option overrides (CompileOptions'
  env_option_overrides, JAX's `compiler_options`).

  XLA reads each key as the name of a DebugOptions field; here the fields
  are our flags (`support.flags`, `--name` in OPENXLA_FLAGS), and the
  errors are XLA's.

  Raises:
    support.InvalidArgumentError: a key that names no flag, or a value
      the flag cannot take.
  """
  if not overrides:
    return {}
  cpu_compiler_module()  # defines the compiler's flags (and its passes')
  values = {}
  for key, raw in overrides:
    try:
      flag = support.flags.get_flag(key)
    except support.NotFoundError:
      if key.startswith("xla_"):
        # XLA takes every DebugOptions field (its GPU and dump options
        # too); one that is not ours changes nothing here, as XLA's CPU
        # client ignores GPU options. Other names are errors, as in XLA.
        _warn_ignored_option(key)
        continue
      raise support.InvalidArgumentError(
          f"No such compile option: '{key}'") from None
    try:
      values[key] = flag.convert(raw, "compile options")
    except support.InvalidArgumentError:
      shown = str(raw).lower() if isinstance(raw, bool) else raw
      raise support.InvalidArgumentError(
          f"While setting option {key}, '{shown}' is not a valid "
          f"{flag.kind} value.") from None
  return values


_IGNORED_OPTIONS: set[str] = set()


def _warn_ignored_option(key: str) -> None:
  if key not in _IGNORED_OPTIONS:
    _IGNORED_OPTIONS.add(key)
    from support import log  # pylint: disable=g-import-not-at-top
    log.warning("compile option %s has no effect on this plugin", key)


# Flags are process-wide: a compile that overrides some holds this lock, and
# so does every other compile, so that none sees another's overrides.
_COMPILE_LOCK = threading.RLock()


def compile_program(program: programs.Program, backend: str, *,
                    fallback: bool, num_replicas: int = 1,
                    num_partitions: int = 1,
                    propagation: Any = None,
                    overrides: Sequence[tuple[str, Any]] = (),
                    threads: int = 0) -> Compiled:
  """Compiles `program` with `backend` for num_replicas x num_partitions
  participants (`propagation`, `threads`: see the module docstring), with
  the flags `overrides` names set (check_option_overrides).

  With `fallback`, a program `backend` does not support runs on the
  interpreter instead (never a global program: the interpreter would run
  it unpartitioned).
  """
  compile_fn = _REGISTRY.get(backend)
  if compile_fn is None:
    raise support.InvalidArgumentError(f"unknown backend {backend!r}")
  values = check_option_overrides(overrides)
  with _COMPILE_LOCK, support.flags.override(**values):
    return _compile_program(program, backend, compile_fn, fallback,
                            num_replicas, num_partitions, propagation,
                            threads)


def _compile_program(program, backend, compile_fn, fallback, num_replicas,
                     num_partitions, propagation, threads=0) -> Compiled:
  check_partitionable(program, backend, num_partitions)
  try:
    return _compile_with(compile_fn, program, backend, num_replicas,
                         num_partitions, propagation, threads)
  except support.UnimplementedError as e:
    if (not fallback or backend == "interpreter" or program.is_hlo or
        (num_partitions > 1 and program.shardings)):
      raise
    support.log.vlog(1, "openxla_cpu: backend %s cannot compile %s (%s); "
                     "using the interpreter", backend, program.name, e)
    return _compile_with(_REGISTRY["interpreter"], program, "interpreter",
                         num_replicas, num_partitions)
