"""Slots: compiling, loading and executing; PJRT_Executable_*,
PJRT_LoadedExecutable_*, serialized executables."""

from __future__ import annotations

import ctypes
from typing import Any

import support
from pjrt._src import abi
from pjrt._src import abi_types
from pjrt._src import compile_options as co
from pjrt._src.plugin import backends
from pjrt._src.plugin import cabi
from pjrt._src.plugin import events
from pjrt._src.plugin import executables
from pjrt._src.plugin import handles
from pjrt._src.plugin import options as options_lib
from pjrt._src.plugin import runtime
from pjrt._src.plugin import serialization
from pjrt._src.plugin.slot_registry import implements
from pjrt._src.plugin.slot_registry import implements_extension
from pjrt._src.plugin.slots_buffer import buffer_of
from pjrt._src.plugin.slots_client import client_of
from pjrt._src.plugin.slots_client import device_of
from pjrt._src.plugin.slots_client import topology_of

_FORMAT_MLIR = ctypes.create_string_buffer(b"mlir")
_FORMAT_HLO = ctypes.create_string_buffer(b"hlo_with_config")


def executable_of(address) -> executables.Executable:
  return handles.TABLE.get(address, executables.EXECUTABLE)


def loaded_of(address) -> executables.LoadedExecutable:
  return handles.TABLE.get(address, executables.LOADED_EXECUTABLE)


def _program(pointer: Any) -> tuple[bytes, str]:
  if not pointer:
    raise support.InvalidArgumentError("PJRT_Program is NULL")
  program = pointer.contents
  if program.struct_size < abi.PJRT_Program.STRUCT_SIZE:
    raise support.InvalidArgumentError(
        f"PJRT_Program.struct_size is {program.struct_size}, expected at "
        f"least {abi.PJRT_Program.STRUCT_SIZE}")
  code = cabi.raw_bytes(program.code, program.code_size)
  fmt = cabi.string(program.format, program.format_size)
  return code, fmt


def _options_bytes(pointer, size) -> bytes:
  return cabi.raw_bytes(pointer, size)


def _register_loaded(loaded: executables.LoadedExecutable) -> int:
  loaded.handle = handles.TABLE.add(executables.LOADED_EXECUTABLE, loaded)
  return loaded.handle


# -- Compiling and loading. ----------------------------------------------------


@implements("Client_Compile")
def _client_compile(args):
  client = client_of(args.client)
  code, fmt = _program(args.program)
  options = _options_bytes(args.compile_options, args.compile_options_size)
  executable = executables.compile_executable(
      code, fmt, options, num_devices=client.device_ids,
      backend=client.backend, fallback=client.backend_fallback,
      threads=client.options.intra_op_parallelism_threads)
  args.executable = _register_loaded(
      executables.LoadedExecutable(client, executable))


@implements("Compile")
def _compile(args):
  topology = topology_of(args.topology)
  threads = 0
  if args.client:
    client = client_of(args.client)
    backend, fallback = client.backend, client.backend_fallback
    threads = client.options.intra_op_parallelism_threads
  else:
    choice = options_lib.client_options({})
    backend, fallback = (backends.resolve(choice.backend),
                         choice.backend == "auto")
    threads = choice.intra_op_parallelism_threads
  code, fmt = _program(args.program)
  options = _options_bytes(args.compile_options, args.compile_options_size)
  executable = executables.compile_executable(
      code, fmt, options, num_devices=topology.num_devices, backend=backend,
      fallback=fallback, threads=threads)
  args.executable = handles.TABLE.add(executables.EXECUTABLE, executable)


@implements("Client_Load")
def _client_load(args):
  client = client_of(args.client)
  executable = executable_of(args.executable)
  override = None
  if args.compile_options_size:
    override = options_lib.decode_compile_options(_options_bytes(
        args.compile_options, args.compile_options_size))
  args.loaded_executable = _register_loaded(
      executables.LoadedExecutable(client, executable, override))


@implements("Executable_DeserializeAndLoad", last_field="loaded_executable")
def _deserialize_and_load(args):
  client = client_of(args.client)
  stored = serialization.deserialize(cabi.raw_bytes(
      args.serialized_executable, args.serialized_executable_size))
  options = stored.options
  # The override fields were appended to the struct later: read them only
  # when the caller's struct has them.
  field = type(args).overridden_serialized_compile_options_size
  if (args.struct_size >= field.offset + field.size and
      args.overridden_serialized_compile_options_size):
    options = cabi.raw_bytes(args.overridden_serialized_compile_options,
                             args.overridden_serialized_compile_options_size)
  executable = executables.compile_executable(
      stored.code, stored.format, options, num_devices=client.device_ids,
      backend=client.backend, fallback=client.backend_fallback,
      threads=client.options.intra_op_parallelism_threads)
  args.loaded_executable = _register_loaded(
      executables.LoadedExecutable(client, executable))


# -- PJRT_Executable. ----------------------------------------------------------


@implements("Executable_Destroy")
def _executable_destroy(args):
  if args.executable:
    handles.TABLE.remove(args.executable, executables.EXECUTABLE)


@implements("Executable_Name")
def _executable_name(args):
  executable = executable_of(args.executable)
  address, size = executable.c.string("name", executable.name)
  args.executable_name, args.executable_name_size = address, size


@implements("Executable_NumReplicas")
def _executable_num_replicas(args):
  args.num_replicas = executable_of(args.executable).num_replicas


@implements("Executable_NumPartitions")
def _executable_num_partitions(args):
  args.num_partitions = executable_of(args.executable).num_partitions


@implements("Executable_NumOutputs")
def _executable_num_outputs(args):
  args.num_outputs = executable_of(args.executable).num_outputs


@implements("Executable_SizeOfGeneratedCodeInBytes")
def _executable_code_size(args):
  args.size_in_bytes = executable_of(args.executable).code_size


@implements("Executable_GetCostAnalysis")
def _executable_cost_analysis(args):
  executable_of(args.executable)
  args.num_properties = 0  # No cost model: an empty analysis.
  args.properties = None


def _memory_kinds(executable: executables.Executable, key: str,
                  count: int) -> tuple[Any, Any]:
  def make():
    kind = runtime.DEFAULT_MEMORY_KIND.encode()
    strings = [ctypes.create_string_buffer(kind, len(kind) + 1)
               for _ in range(count)]
    pointers = (ctypes.c_void_p * max(1, count))(
        *[ctypes.addressof(s) for s in strings])
    sizes = (ctypes.c_size_t * max(1, count))(*([len(kind)] * count))
    return strings, pointers, sizes
  _, pointers, sizes = executable.c.get(key, make)
  return pointers, sizes


@implements("Executable_OutputMemoryKinds")
def _executable_output_memory_kinds(args):
  executable = executable_of(args.executable)
  count = executable.num_outputs
  pointers, sizes = _memory_kinds(executable, "output_kinds", count)
  args.num_outputs = count
  args.memory_kinds = ctypes.cast(pointers, abi_types.PTR_P)
  args.memory_kind_sizes = ctypes.cast(sizes, abi_types.SIZE_P)


@implements("Executable_ParameterMemoryKinds")
def _executable_parameter_memory_kinds(args):
  executable = executable_of(args.executable)
  count = len(executable.program.parameters)
  pointers, sizes = _memory_kinds(executable, "parameter_kinds", count)
  args.num_parameters = count
  args.memory_kinds = ctypes.cast(pointers, abi_types.PTR_P)
  args.memory_kind_sizes = ctypes.cast(sizes, abi_types.SIZE_P)


@implements("Executable_OptimizedProgram")
def _executable_optimized_program(args):
  executable = executable_of(args.executable)
  if not args.program:
    raise support.InvalidArgumentError("program is NULL")
  program = args.program.contents
  if program.struct_size < abi.PJRT_Program.STRUCT_SIZE:
    raise support.InvalidArgumentError(
        f"PJRT_Program.struct_size is {program.struct_size}")
  fmt, text = executable.c.get("optimized_program",
                                executable.optimized_program)
  name = _FORMAT_HLO if fmt == "hlo_with_config" else _FORMAT_MLIR
  program.format = ctypes.addressof(name)
  program.format_size = len(fmt)
  if not program.code:
    program.code_size = len(text)
    return
  if program.code_size < len(text):
    raise support.InvalidArgumentError(
        f"code_size {program.code_size} is smaller than the program's "
        f"{len(text)} bytes")
  ctypes.memmove(program.code, text, len(text))
  program.code_size = len(text)


@implements("Executable_Serialize")
def _executable_serialize(args):
  executable = executable_of(args.executable)
  data = serialization.serialize(serialization.SerializedExecutable(
      code=executable.program.code, format=executable.program.format,
      options=executable.options_bytes, name=executable.name,
      backend=executable.backend))
  address, size, handle = cabi.give(data)
  args.serialized_bytes, args.serialized_bytes_size = address, size
  args.serialized_executable = handle
  args.serialized_executable_deleter = cabi.deleter_address()


@implements("Executable_GetCompileOptions")
def _executable_get_compile_options(args):
  executable = executable_of(args.executable)
  address, size, handle = cabi.give(executable.options_bytes)
  args.serialized_bytes, args.serialized_bytes_size = address, size
  args.serialized_compile_options = handle
  args.serialized_compile_options_deleter = cabi.deleter_address()


@implements("Executable_OutputElementTypes")
def _executable_output_element_types(args):
  executable = executable_of(args.executable)
  types = [int(r.element_type) for r in executable.program.results]
  array = executable.c.get("output_types", lambda: (ctypes.c_int * max(
      1, len(types)))(*types))
  args.output_types = ctypes.cast(array, abi_types.INT_P)
  args.num_output_types = len(types)


@implements("Executable_OutputDimensions")
def _executable_output_dimensions(args):
  executable = executable_of(args.executable)
  results = executable.program.results

  def make():
    flat = [d for r in results for d in r.shape]
    dims = (ctypes.c_int64 * max(1, len(flat)))(*flat)
    sizes = (ctypes.c_size_t * max(1, len(results)))(
        *[len(r.shape) for r in results])
    return dims, sizes

  dims, sizes = executable.c.get("output_dims", make)
  args.num_outputs = len(results)
  args.dims = ctypes.cast(dims, abi.INT64_P)
  args.dim_sizes = ctypes.cast(sizes, abi_types.SIZE_P)


@implements("Executable_Fingerprint")
def _executable_fingerprint(args):
  executable = executable_of(args.executable)
  address, size = executable.c.string("fingerprint", executable.fingerprint)
  args.executable_fingerprint = address
  args.executable_fingerprint_size = size


@implements("Executable_GetCompiledMemoryStats")
def _executable_compiled_memory_stats(args):
  executable = executable_of(args.executable)
  for name in ("generated_code_size_in_bytes", "argument_size_in_bytes",
               "output_size_in_bytes", "alias_size_in_bytes",
               "temp_size_in_bytes", "host_generated_code_size_in_bytes",
               "host_argument_size_in_bytes", "host_output_size_in_bytes",
               "host_alias_size_in_bytes", "host_temp_size_in_bytes",
               "peak_memory_in_bytes", "total_size_in_bytes",
               "total_allocation_bytes", "indefinite_allocations",
               "peak_unpadded_heap_bytes"):
    setattr(args, name, 0)
  for name, value in executable.memory_stats().items():
    setattr(args, name, value)


# -- The Shardings extension. ------------------------------------------------


def _shardings(executable: executables.Executable, which: int,
               key: str) -> tuple[Any, Any, int]:
  """(pointers, sizes, count) of the serialized OpShardings of the
  executable's parameters (which=0) or outputs (1); NULLs where it has no
  SPMD shardings. Owned by the executable."""

  def make():
    found = executable.shardings()
    if found is None:
      return None
    protos = backends.op_sharding_protos(found[which])
    buffers = [ctypes.create_string_buffer(p, max(1, len(p)))
               for p in protos]
    count = len(protos)
    pointers = (ctypes.c_void_p * max(1, count))(
        *[ctypes.addressof(b) for b in buffers])
    sizes = (ctypes.c_size_t * max(1, count))(*[len(p) for p in protos])
    return buffers, pointers, sizes, count

  made = executable.c.get(key, make)
  if made is None:
    return None, None, 0
  _, pointers, sizes, count = made
  return ctypes.addressof(pointers), ctypes.addressof(sizes), count


@implements_extension(
    "PJRT_Shardings_PJRT_Executable_ParameterShardings",
    abi.SHARDINGS_FUNCTIONS[
        "PJRT_Shardings_PJRT_Executable_ParameterShardings"])
def _parameter_shardings(args):
  executable = executable_of(args.executable)
  pointers, sizes, count = _shardings(executable, 0, "parameter_shardings")
  args.num_parameters = count
  args.shardings, args.sharding_sizes = pointers, sizes


@implements_extension(
    "PJRT_Shardings_PJRT_Executable_OutputShardings",
    abi.SHARDINGS_FUNCTIONS[
        "PJRT_Shardings_PJRT_Executable_OutputShardings"])
def _output_shardings(args):
  executable = executable_of(args.executable)
  pointers, sizes, count = _shardings(executable, 1, "output_shardings")
  args.num_outputs = count
  args.shardings, args.sharding_sizes = pointers, sizes


# -- PJRT_LoadedExecutable. ----------------------------------------------------


@implements("LoadedExecutable_Destroy")
def _loaded_destroy(args):
  if args.executable:
    handles.TABLE.remove(args.executable, executables.LOADED_EXECUTABLE)


@implements("LoadedExecutable_GetExecutable")
def _loaded_get_executable(args):
  loaded = loaded_of(args.loaded_executable)
  args.executable = handles.TABLE.add(executables.EXECUTABLE,
                                      loaded.executable)


@implements("LoadedExecutable_AddressableDevices")
def _loaded_addressable_devices(args):
  loaded = loaded_of(args.executable)
  array, count = loaded.c.handles("devices",
                                  [d.handle for d in loaded.devices])
  args.addressable_devices = ctypes.cast(array, abi_types.PTR_P)
  args.num_addressable_devices = count


@implements("LoadedExecutable_AddressableDeviceLogicalIds")
def _loaded_logical_ids(args):
  loaded = loaded_of(args.executable)
  ids = [loaded.logical_ids[d.id] for d in loaded.devices]

  def make():
    array = (abi.PJRT_LogicalDeviceIds * max(1, len(ids)))()
    for entry, (replica, partition) in zip(array, ids):
      entry.replica, entry.partition = replica, partition
    return array

  array = loaded.c.get("logical_ids", make)
  args.addressable_device_logical_ids = ctypes.cast(
      array, ctypes.POINTER(abi.PJRT_LogicalDeviceIds))
  args.num_addressable_device_logical_ids = len(ids)


@implements("LoadedExecutable_GetDeviceAssignment")
def _loaded_device_assignment(args):
  loaded = loaded_of(args.executable)
  data = b""
  if loaded.assignment is not None:
    data = co.encode_device_assignment(loaded.assignment)
  address, size, handle = cabi.give(data)
  args.serialized_bytes, args.serialized_bytes_size = address, size
  args.serialized_device_assignment = handle
  args.serialized_device_assignment_deleter = cabi.deleter_address()


@implements("LoadedExecutable_Delete")
def _loaded_delete(args):
  loaded_of(args.executable).delete()


@implements("LoadedExecutable_IsDeleted")
def _loaded_is_deleted(args):
  args.is_deleted = loaded_of(args.executable).deleted


@implements("LoadedExecutable_Fingerprint")
def _loaded_fingerprint(args):
  executable = loaded_of(args.executable).executable
  address, size = executable.c.string("fingerprint", executable.fingerprint)
  args.executable_fingerprint = address
  args.executable_fingerprint_size = size


_OPTIONS_MIN_SIZE = (abi.PJRT_ExecuteOptions.num_non_donatable_input_indices
                     .offset + ctypes.sizeof(ctypes.c_size_t))


class _OptionsView(ctypes.Structure):
  """The prefix of PJRT_ExecuteOptions that Execute reads, pointers as
  plain addresses (the hot path)."""

  _fields_ = [("struct_size", ctypes.c_size_t),
              ("extension_start", ctypes.c_void_p),
              ("send_callbacks", ctypes.c_void_p),
              ("recv_callbacks", ctypes.c_void_p),
              ("num_send_ops", ctypes.c_size_t),
              ("num_recv_ops", ctypes.c_size_t),
              ("launch_id", ctypes.c_int),
              ("non_donatable_input_indices", ctypes.c_void_p),
              ("num_non_donatable_input_indices", ctypes.c_size_t)]


assert (ctypes.sizeof(_OptionsView) == _OPTIONS_MIN_SIZE and
        _OptionsView.launch_id.offset ==
        abi.PJRT_ExecuteOptions.launch_id.offset)
_NO_INDICES: frozenset[int] = frozenset()


def _execute_options_at(address: int) -> tuple[frozenset[int], int]:
  """`_execute_options` of the options at `address` (not NULL)."""
  options = _OptionsView.from_address(address)
  if (options.struct_size >= _OPTIONS_MIN_SIZE and
      not options.num_non_donatable_input_indices):
    return _NO_INDICES, options.launch_id
  return _execute_options(
      ctypes.cast(address, ctypes.POINTER(abi.PJRT_ExecuteOptions)))


def _execute_options(pointer) -> tuple[frozenset[int], int]:
  """(non-donatable argument indices, launch id) of PJRT_ExecuteOptions."""
  if not pointer:
    return frozenset(), 0
  options = pointer.contents
  if options.struct_size < _OPTIONS_MIN_SIZE:
    raise support.InvalidArgumentError(
        f"PJRT_ExecuteOptions.struct_size is {options.struct_size}, "
        f"expected at least {_OPTIONS_MIN_SIZE}")
  non_donatable = cabi.int64s(options.non_donatable_input_indices,
                              options.num_non_donatable_input_indices,
                              "non_donatable_input_indices")
  return frozenset(non_donatable), int(options.launch_id)


class _ExecuteArgsView(ctypes.Structure):
  """PJRT_LoadedExecutable_Execute_Args with every pointer as a plain
  address: reading it makes no ctypes pointer objects (the hot path)."""

  _fields_ = [("struct_size", ctypes.c_size_t),
              ("extension_start", ctypes.c_void_p),
              ("executable", ctypes.c_void_p),
              ("options", ctypes.c_void_p),
              ("argument_lists", ctypes.c_void_p),
              ("num_devices", ctypes.c_size_t),
              ("num_args", ctypes.c_size_t),
              ("output_lists", ctypes.c_void_p),
              ("device_complete_events", ctypes.c_void_p),
              ("execute_device", ctypes.c_void_p)]


assert (ctypes.sizeof(_ExecuteArgsView) ==
        ctypes.sizeof(abi.PJRT_LoadedExecutable_Execute_Args))

_ADDRESS_ARRAYS: dict[int, Any] = {}
_address_view = ctypes.c_void_p.from_address


def _address_at(address: int) -> int | None:
  """The pointer stored at `address` (None for NULL)."""
  return _address_view(address).value


def _addresses(address: int, count: int) -> Any:
  """A ctypes view of `count` pointers at `address` (read and written as
  ints; NULL reads as None)."""
  array_type = _ADDRESS_ARRAYS.get(count)
  if array_type is None:
    array_type = _ADDRESS_ARRAYS.setdefault(count, ctypes.c_void_p * count)
  return array_type.from_address(address)


@implements("LoadedExecutable_Execute")
def _loaded_execute(args):
  view = _ExecuteArgsView.from_address(ctypes.addressof(args))
  loaded = loaded_of(view.executable)
  if view.options:
    non_donatable, launch_id = _execute_options_at(view.options)
  else:
    non_donatable, launch_id = _NO_INDICES, 0
  num_devices, num_args = view.num_devices, view.num_args
  if num_devices < 1:
    raise support.InvalidArgumentError("num_devices must be at least 1")
  if not view.argument_lists and num_args:
    raise support.InvalidArgumentError("argument_lists is NULL")
  if not view.output_lists:
    raise support.InvalidArgumentError("output_lists is NULL")
  argument_lists = []
  if num_args and num_devices == 1:
    inner = _address_at(view.argument_lists)
    if not inner:
      raise support.InvalidArgumentError("argument_lists[0] is NULL")
    get = handles.TABLE.get
    argument_lists.append([get(a, runtime.BUFFER)
                           for a in _addresses(inner, num_args)])
  elif num_args:
    for d, inner in enumerate(_addresses(view.argument_lists, num_devices)):
      if not inner:
        raise support.InvalidArgumentError(f"argument_lists[{d}] is NULL")
      argument_lists.append([buffer_of(a)
                             for a in _addresses(inner, num_args)])
  else:
    argument_lists = [[] for _ in range(num_devices)]
  execute_device = (device_of(view.execute_device) if view.execute_device
                    else None)
  outputs, completions = loaded.execute(
      argument_lists, execute_device=execute_device,
      non_donatable=non_donatable, launch_id=launch_id)
  output_lists = _addresses(view.output_lists, len(outputs))
  for d, device_outputs in enumerate(outputs):
    if not device_outputs:
      continue
    inner = output_lists[d]
    if not inner:
      raise support.InvalidArgumentError(f"output_lists[{d}] is NULL")
    _addresses(inner, len(device_outputs))[:] = [
        runtime.register_buffer(b) for b in device_outputs]
  if view.device_complete_events:
    _addresses(view.device_complete_events, len(completions))[:] = [
        events.new_event(f) for f in completions]
