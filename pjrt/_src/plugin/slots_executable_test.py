"""Tests of slots_executable.py and executables.py: compile, load, execute
(asynchronously, on several devices, with donation), metadata, and
serialized executables."""

import ctypes
import threading
import time

import numpy as np
import pytest

import pjrt
import support
from pjrt._src import abi
from pjrt._src import loader
from pjrt._src.plugin import executables
from pjrt._src.plugin import handles
from pjrt._src.plugin import runtime
from pjrt._src.plugin import testing
from stablehlo import text as mlir_text
from stablehlo import vhlo


@pytest.fixture(name="client")
def _client():
  c = testing.client(num_devices=4)
  yield c
  c.close()


def _executable_call(client, loaded, slot, **fields):
  exe = testing.call(client, "LoadedExecutable_GetExecutable",
                     loaded_executable=loaded.handle).executable
  try:
    return testing.call(client, slot, executable=exe, **fields)
  finally:
    testing.call(client, "Executable_Destroy", executable=exe)


def _deleted_bytes(args, pointer_field, size_field, handle_field,
                   deleter_field) -> bytes:
  data = ctypes.string_at(getattr(args, pointer_field),
                          getattr(args, size_field))
  ctypes.CFUNCTYPE(None, ctypes.c_void_p)(getattr(args, deleter_field))(
      getattr(args, handle_field))
  return data


def _start(client, exe, x, launch_id=0):
  """Starts `exe` on one argument without waiting: (output, completion)."""
  args = abi.make_args(
      abi.PJRT_LoadedExecutable_Execute_Args, executable=exe.handle,
      options=abi.make_args(abi.PJRT_ExecuteOptions, launch_id=launch_id),
      num_devices=1, num_args=1)
  inner = (ctypes.c_void_p * 1)(x.handle)
  outer = (ctypes.c_void_p * 1)(ctypes.addressof(inner))
  out_inner = (ctypes.c_void_p * 1)()
  out_outer = (ctypes.c_void_p * 1)(ctypes.addressof(out_inner))
  done = (ctypes.c_void_p * 1)()
  abi.set_fields(args, argument_lists=outer, output_lists=out_outer,
                 device_complete_events=done)
  client.plugin.call("LoadedExecutable_Execute", args)
  return (pjrt.Buffer(client, out_inner[0]),
          pjrt.Event(client.plugin, done[0]))


def test_execute_is_asynchronous(client):
  exe = client.compile(testing.while_loop(20000))
  x = client.buffer_from_numpy(np.int64(0))
  start = time.monotonic()
  result, complete = _start(client, exe, x)
  returned = time.monotonic() - start
  assert not result.ready().is_ready() and not complete.is_ready()
  fired = threading.Event()
  threads = []
  complete.on_ready(lambda error: (threads.append(threading.current_thread()),
                                   fired.set()))
  assert result.to_numpy() == 20000  # Waits for the execution.
  assert fired.wait(30) and threads[0] is not threading.current_thread()
  assert time.monotonic() - start > returned


def test_outputs_feed_later_executions(client):
  exe = client.compile(testing.ADD_F32)
  x = client.buffer_from_numpy(np.ones(4, np.float32))
  for _ in range(5):  # Each execute consumes a pending output.
    (x,) = exe.execute([x, x])
  np.testing.assert_array_equal(x.to_numpy(), np.full(4, 32, np.float32))


def test_errors_flow_through_pending_buffers(client):
  args = testing.call(client, "Client_CreateErrorBuffer",
                      client=client.handle,
                      error_code=support.StatusCode.DATA_LOSS,
                      error_message=b"bad input", error_message_size=9,
                      shape_dims=[4], shape_num_dims=1,
                      shape_element_type=abi.BufferType.F32,
                      memory=client.devices()[0].default_memory().handle)
  bad = pjrt.Buffer(client, args.buffer)
  exe = client.compile(testing.ADD_F32)
  good = testing.ones(client)
  with pytest.raises(support.DataLossError, match="bad input"):
    exe.execute([good, bad])
  (out,) = exe.execute([good, good])  # The executable still works.
  np.testing.assert_array_equal(out.to_numpy(), np.full(4, 2))


def test_donation(client):
  exe = client.compile(testing.ADD_DONATING)
  a = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
  b = client.buffer_from_numpy(np.ones(4, np.float32))
  (out,) = exe.execute([a, b])
  np.testing.assert_array_equal(out.to_numpy(), [1, 2, 3, 4])
  assert a.is_deleted and not b.is_deleted
  with pytest.raises(support.InvalidArgumentError, match="deleted"):
    exe.execute([a, b])


def test_a_donated_buffer_passed_twice_is_refused(client):
  # As XLA's clients do: it would be read after its memory went to the
  # result. Nothing is donated then.
  exe = client.compile(testing.ADD_DONATING)
  a = client.buffer_from_numpy(np.ones(4, np.float32))
  with pytest.raises(support.InvalidArgumentError,
                     match="passed only once"):
    exe.execute([a, a])
  assert not a.is_deleted
  b = client.buffer_from_numpy(np.ones(4, np.float32))
  (out,) = exe.execute([b, a])
  assert b.is_deleted and not a.is_deleted
  np.testing.assert_array_equal(out.to_numpy(), np.full(4, 2))


def test_replicas_with_collectives(client):
  devices = client.devices()[2:]
  options = pjrt.compile_options(num_replicas=2,
                                 device_assignment=[[d.id] for d in devices])
  exe = client.compile(testing.ALL_REDUCE_2, compile_options=options)
  assert exe.addressable_devices() == devices
  assert exe.device_assignment() == [[2], [3]]
  ids = testing.call(client, "LoadedExecutable_AddressableDeviceLogicalIds",
                     executable=exe.handle)
  assert [(ids.addressable_device_logical_ids[i].replica,
           ids.addressable_device_logical_ids[i].partition)
          for i in range(2)] == [(0, 0), (1, 0)]
  inputs = [client.buffer_from_numpy(np.full(3, v, np.float32), d)
            for v, d in zip((1, 10), devices)]
  outputs = exe.execute_sharded([[x] for x in inputs])
  for (out,), device in zip(outputs, devices):
    assert out.device == device
    np.testing.assert_array_equal(out.to_numpy(), np.full(3, 11))


def test_partitions_of_a_per_device_program(client):
  options = pjrt.compile_options(num_partitions=2, use_spmd_partitioning=True)
  exe = client.compile(testing.ADD_F32, compile_options=options)
  assert exe.num_partitions == 2 and len(exe.addressable_devices()) == 2
  outputs = exe.execute_sharded([
      [client.buffer_from_numpy(np.full(4, v, np.float32), d)] * 2
      for v, d in zip((1, 5), exe.addressable_devices())])
  assert [out.to_numpy()[0] for (out,) in outputs] == [2, 10]


def test_global_programs_need_the_partitioner(client):
  sharded = testing.ADD_F32.replace(
      "%a: tensor<4xf32>",
      '%a: tensor<4xf32> {mhlo.sharding = "{devices=[2]<=[2]}"}')
  options = pjrt.compile_options(num_partitions=2, use_spmd_partitioning=True)
  # The interpreter would run it unpartitioned (the cpu backend partitions
  # it: multi_device_test).
  with pytest.raises(support.UnimplementedError,
                     match="only the cpu backend partitions"):
    client.compile(sharded, compile_options=options)
  # For one partition the annotation only restates where values live.
  client.compile(sharded)


def test_metadata(client):
  exe = client.compile(testing.ADD_F32)
  assert exe.name == "add" and exe.num_outputs == 1
  assert exe.output_element_types() == [pjrt.BufferType.F32]
  assert exe.output_shapes() == [(4,)]
  assert len(exe.fingerprint) == 64
  kinds = _executable_call(client, exe, "Executable_OutputMemoryKinds")
  assert testing.string(kinds.memory_kinds[0],
                        kinds.memory_kind_sizes[0]) == "device"
  stats = _executable_call(client, exe, "Executable_GetCompiledMemoryStats")
  assert (stats.argument_size_in_bytes, stats.output_size_in_bytes) == (32, 16)
  cost = _executable_call(client, exe, "Executable_GetCostAnalysis")
  assert cost.num_properties == 0


def test_optimized_program_is_mlir_text(client):
  exe = client.compile(testing.ADD_F32)
  program = abi.make_args(abi.PJRT_Program)
  _executable_call(client, exe, "Executable_OptimizedProgram",
                   program=program)  # Asks for the size.
  code = ctypes.create_string_buffer(program.code_size)
  program.code = ctypes.addressof(code)
  _executable_call(client, exe, "Executable_OptimizedProgram",
                   program=program)
  assert testing.string(program.format, program.format_size) == "mlir"
  text = code.raw[:program.code_size].decode()
  assert "stablehlo.add" in text and "@main" in text
  mlir_text.parse_module(text)  # It is valid MLIR.


def test_optimized_program_of_bytecode_is_the_program_unparsed(client,
                                                               monkeypatch):
  # JAX asks for it at every compile (for the output layouts); parsing and
  # printing a large program again cost a noticeable part of a compile.
  module = mlir_text.parse_module(testing.ADD_F32)
  artifact = vhlo.serialize_portable_artifact(module, "1.0.0")
  exe = client.compile(artifact)
  from pjrt._src.plugin import programs  # pylint: disable=g-import-not-at-top

  def no_parse(*args, **kwargs):
    raise AssertionError("the program was parsed again")
  monkeypatch.setattr(programs, "parse", no_parse)
  program = abi.make_args(abi.PJRT_Program)
  _executable_call(client, exe, "Executable_OptimizedProgram",
                   program=program)
  code = ctypes.create_string_buffer(program.code_size)
  program.code = ctypes.addressof(code)
  _executable_call(client, exe, "Executable_OptimizedProgram",
                   program=program)
  assert testing.string(program.format, program.format_size) == "mlir"
  assert code.raw[:program.code_size] == bytes(artifact)


def test_compile_options_come_back(client):
  options = pjrt.compile_options(device_assignment=[[3]])
  exe = client.compile(testing.ADD_F32, compile_options=options)
  args = _executable_call(client, exe, "Executable_GetCompileOptions")
  assert _deleted_bytes(args, "serialized_bytes", "serialized_bytes_size",
                        "serialized_compile_options",
                        "serialized_compile_options_deleter") == options
  assert exe.addressable_devices() == [client.devices()[3]]


def test_serialize_and_load(client):
  module = mlir_text.parse_module(testing.ADD_F32)
  artifact = vhlo.serialize_portable_artifact(module, "1.0.0")
  options = pjrt.compile_options(device_assignment=[[1]])
  exe = client.compile(artifact, compile_options=options)
  args = _executable_call(client, exe, "Executable_Serialize")
  data = _deleted_bytes(args, "serialized_bytes", "serialized_bytes_size",
                        "serialized_executable",
                        "serialized_executable_deleter")
  loaded = testing.call(client, "Executable_DeserializeAndLoad",
                        client=client.handle, serialized_executable=data,
                        serialized_executable_size=len(data))
  copy = pjrt.LoadedExecutable(client, loaded.loaded_executable)
  assert copy.addressable_devices() == [client.devices()[1]]
  assert copy.fingerprint == exe.fingerprint
  x = client.buffer_from_numpy(np.arange(4, dtype=np.float32),
                               client.devices()[1])
  (out,) = copy.execute([x, x])
  np.testing.assert_array_equal(out.to_numpy(), [0, 2, 4, 6])
  corrupt = data[:40] + bytes([data[40] ^ 1]) + data[41:]
  with pytest.raises(support.DataLossError, match="checksum"):
    testing.call(client, "Executable_DeserializeAndLoad",
                 client=client.handle, serialized_executable=corrupt,
                 serialized_executable_size=len(corrupt))


def test_compile_for_a_topology_then_load(client):
  named = loader.encode_named_values({"num_devices": 4})
  topology = testing.call(client, "TopologyDescription_Create",
                          create_options=named, num_options=1).topology
  code = testing.ADD_F32.encode()
  program = abi.make_args(abi.PJRT_Program, code=code, code_size=len(code),
                          format=b"mlir", format_size=4)
  options = pjrt.compile_options()
  exe = testing.call(client, "Compile", topology=topology, program=program,
                     compile_options=options,
                     compile_options_size=len(options)).executable
  loaded = testing.call(client, "Client_Load", client=client.handle,
                        executable=exe).loaded_executable
  testing.call(client, "Executable_Destroy", executable=exe)
  testing.call(client, "TopologyDescription_Destroy", topology=topology)
  exe = pjrt.LoadedExecutable(client, loaded)
  x = testing.ones(client)
  np.testing.assert_array_equal(exe.execute([x, x])[0].to_numpy(),
                                np.full(4, 2))


def test_delete_and_execute_device(client):
  exe = client.compile(testing.ADD_F32)
  device = client.devices()[2]
  x = testing.ones(client, device=device)
  (out,) = exe.execute([x, x], device=device)
  assert out.device == device
  exe.delete()
  assert exe.is_deleted
  with pytest.raises(support.FailedPreconditionError, match="deleted"):
    exe.execute([x, x])


def test_poison_execution(client):
  exe = client.compile(testing.while_loop(20000))
  device = client.devices()[0]
  x = client.buffer_from_numpy(np.int64(0))
  result, complete = _start(client, exe, x, launch_id=77)
  poisoned = testing.call(client, "Device_PoisonExecution",
                          device=device.handle, launch_id=77,
                          error_code=support.StatusCode.CANCELLED,
                          error_message=b"stop", error_message_size=4)
  assert poisoned.poisoned
  with pytest.raises(support.CancelledError, match="stop"):
    result.to_numpy()
  assert isinstance(complete.error(), support.CancelledError)
  again = testing.call(client, "Device_PoisonExecution",
                       device=device.handle, launch_id=77,
                       error_code=support.StatusCode.CANCELLED,
                       error_message=b"stop", error_message_size=4)
  assert not again.poisoned


def test_output_deleted_before_it_is_ready_keeps_no_data(client):
  exe = client.compile(testing.while_loop(5000))
  device = client.devices()[0]
  before = testing.call(client, "Device_MemoryStats",
                        device=device.handle).bytes_in_use
  x = client.buffer_from_numpy(np.int64(0))
  result, complete = _start(client, exe, x)
  result.delete()
  complete.wait()
  after = testing.call(client, "Device_MemoryStats",
                       device=device.handle).bytes_in_use
  assert after == before + 8  # Only the argument is left.
  assert handles.TABLE.get(result.handle, runtime.BUFFER)._array is None  # pylint: disable=protected-access


@pytest.fixture(name="always_inline")
def _always_inline(monkeypatch):
  # Any measured run counts as cheap, so the tests do not depend on timing.
  monkeypatch.setattr(executables, "INLINE_MAX_SECONDS", 60.0)


def test_a_cheap_program_runs_inline_once_measured(client, always_inline):
  del always_inline
  exe = client.compile(testing.while_loop(3))
  x = client.buffer_from_numpy(np.int64(0))
  first, done = _start(client, exe, x)  # Not measured yet: the worker.
  done.wait()
  assert first.to_numpy() == 3
  thread = threading.current_thread()
  result, complete = _start(client, exe, x)
  # Ran synchronously: both are ready when Execute returns.
  assert complete.is_ready() and result.ready().is_ready()
  seen = []
  complete.on_ready(lambda error: seen.append(
      (error, threading.current_thread())))
  assert seen == [(None, thread)]
  assert result.to_numpy() == 3


def test_inline_never_overtakes_queued_work(client, always_inline):
  del always_inline
  slow = client.compile(testing.while_loop(20000))
  cheap = client.compile(testing.while_loop(3))
  zero = client.buffer_from_numpy(np.int64(0))
  _, done = _start(client, cheap, zero)
  done.wait()  # `cheap` is measured now.
  long_result, long_done = _start(client, slow, zero)
  # The device is busy: the cheap program queues behind the slow one.
  result, complete = _start(client, cheap, zero)
  assert not long_done.is_ready()
  assert not complete.is_ready()
  assert result.to_numpy() == 3 and long_result.to_numpy() == 20000
  # An input that is still pending also keeps it off the calling thread
  # (a new executable: never measured, so it runs on the worker).
  pending, _ = _start(client, client.compile(testing.while_loop(20000)),
                      zero)
  chained, chained_done = _start(client, cheap, pending)
  assert not chained_done.is_ready()
  assert chained.to_numpy() == 20000  # Counts up to 3: already past.


def test_the_threshold_decides(client, monkeypatch):
  exe = client.compile(testing.while_loop(2000))
  x = client.buffer_from_numpy(np.int64(0))
  _, done = _start(client, exe, x)
  done.wait()  # Measured now.
  monkeypatch.setattr(executables, "INLINE_MAX_SECONDS", 0.0)
  result, complete = _start(client, exe, x)
  assert not complete.is_ready()  # Handed to the worker.
  assert result.to_numpy() == 2000
  monkeypatch.setattr(executables, "INLINE_MAX_SECONDS", 60.0)
  result, complete = _start(client, exe, x)
  assert complete.is_ready()  # Ran in Execute.
  assert result.to_numpy() == 2000


def test_donated_buffer_deleted_before_its_execution_runs(client):
  # JAX deletes (destroys) a donated array right after Execute returns; the
  # execution may not have run yet. Its data must survive until it does.
  exe = client.compile(testing.ADD_DONATING)
  a = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
  b = client.buffer_from_numpy(np.ones(4, np.float32))
  device = handles.TABLE.get(a.handle, runtime.BUFFER).device
  gate = threading.Event()
  device.worker.submit(gate.wait)  # holds the device's queue
  # Opens the queue in any case, should Execute itself wait for it.
  timer = threading.Timer(5.0, gate.set)
  timer.start()
  try:
    (out,) = exe.execute([a, b])
    a.delete()
  finally:
    gate.set()
    timer.cancel()
  np.testing.assert_array_equal(out.to_numpy(), [1, 2, 3, 4])
  # With nothing left to run, the donated data is let go.
  assert handles.TABLE.get(a.handle, runtime.BUFFER)._array is None  # pylint: disable=protected-access


_DONORS = """
func.func @main(%a: tensor<4xf32> {jax.buffer_donor = true},
                %b: tensor<2x1xf32> {jax.buffer_donor = true})
    -> tensor<2xf32> {
  %0 = stablehlo.slice %a [0:2] : (tensor<4xf32>) -> tensor<2xf32>
  %1 = stablehlo.reshape %b : (tensor<2x1xf32>) -> tensor<2xf32>
  %2 = stablehlo.add %0, %1 : tensor<2xf32>
  return %2 : tensor<2xf32>
}
"""


def test_a_donor_without_a_result_of_its_size_is_kept(client):
  # XLA pairs a buffer donor with a result of its size in bytes (any
  # shape); the others are not taken (JAX checks that the array survives).
  exe = client.compile(_DONORS)
  a = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
  b = client.buffer_from_numpy(np.ones((2, 1), np.float32))
  (out,) = exe.execute([a, b])
  np.testing.assert_array_equal(out.to_numpy(), [1, 2])
  assert not a.is_deleted and b.is_deleted


def test_a_buffer_viewed_from_outside_is_read_not_donated(client):
  # XLA's CPU client copies such a buffer rather than fail the execution.
  exe = client.compile(testing.ADD_DONATING)
  a = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
  b = client.buffer_from_numpy(np.ones(4, np.float32))
  testing.call(client, "Buffer_IncreaseExternalReferenceCount",
               buffer=a.handle)
  (out,) = exe.execute([a, b])
  np.testing.assert_array_equal(out.to_numpy(), [1, 2, 3, 4])
  assert not a.is_deleted
  np.testing.assert_array_equal(a.to_numpy(), [0, 1, 2, 3])
  testing.call(client, "Buffer_DecreaseExternalReferenceCount",
               buffer=a.handle)


def test_intra_op_parallelism_threads_reach_the_cpu_backend(monkeypatch):
  # A recording stand-in for the cpu backend (these tests do not import
  # the compiler): every compile through the client gets the client's
  # thread count, a compile without a client the environment's.
  from pjrt._src.plugin import backends  # pylint: disable=g-import-not-at-top
  seen = []

  def cpu(program, threads=0):
    seen.append(threads)
    return backends.InterpreterCompiled(program)

  monkeypatch.setitem(backends._REGISTRY, "cpu", cpu)
  monkeypatch.setenv("OPENXLA_CPU_INTRA_OP_PARALLELISM_THREADS", "2")
  c = testing.client("cpu", num_devices=1, intra_op_parallelism_threads=1)
  try:
    exe = c.compile(testing.ADD_F32)
    x = testing.ones(c)
    np.testing.assert_array_equal(exe.execute([x, x])[0].to_numpy(),
                                  np.full(4, 2))
    args = _executable_call(c, exe, "Executable_Serialize")
    data = _deleted_bytes(args, "serialized_bytes", "serialized_bytes_size",
                          "serialized_executable",
                          "serialized_executable_deleter")
    testing.call(c, "Executable_DeserializeAndLoad", client=c.handle,
                 serialized_executable=data,
                 serialized_executable_size=len(data))
    assert seen == [1, 1]
    named = loader.encode_named_values({"num_devices": 1})
    topology = testing.call(c, "TopologyDescription_Create",
                            create_options=named, num_options=1).topology
    code = testing.ADD_F32.encode()
    program = abi.make_args(abi.PJRT_Program, code=code, code_size=len(code),
                            format=b"mlir", format_size=4)
    options = pjrt.compile_options()
    for client_handle in (c.handle, None):
      exe = testing.call(c, "Compile", topology=topology, program=program,
                         compile_options=options, client=client_handle,
                         compile_options_size=len(options)).executable
      testing.call(c, "Executable_Destroy", executable=exe)
    testing.call(c, "TopologyDescription_Destroy", topology=topology)
    # With the client, its option; without, OPENXLA_CPU_..._THREADS. (The
    # compile without a client resolves "auto", which is "cpu" only where
    # the compiler imports.)
    assert seen[2] == 1
    assert seen[3:] in ([2], [])
  finally:
    c.close()
