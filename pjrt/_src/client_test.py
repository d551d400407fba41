"""Client tests against the real xla_cpu_pjrt plugin (skipped without it).

They follow the cases of XLA's own C API tests (pjrt_c_api_test.cc): API
version, platform, devices, lookup by id including bad ids, default device
assignment, buffer transfers and their lifetime, compile and execute of
StableHLO, bad programs and options.
"""

import threading

import ml_dtypes
import numpy as np
import pytest

import support
from pjrt._src import abi
from pjrt._src import client as client_lib
from pjrt._src import compile_options
from pjrt._src import loader
from pjrt._src import test_util

pytestmark = test_util.requires_xla_cpu_pjrt

_ADD = """
module @add {
  func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

_TWO_OUTPUTS = """
module @two {
  func.func @main(%a: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<f64>) {
    %0 = stablehlo.multiply %a, %a : tensor<2x3xi32>
    %1 = stablehlo.constant dense<2.5> : tensor<f64>
    return %0, %1 : tensor<2x3xi32>, tensor<f64>
  }
}
"""

_SHAPE_MISMATCH = """
module @bad {
  func.func @main(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""


@pytest.fixture(scope="module")
def client():
  c = client_lib.Client(test_util.xla_cpu_pjrt_path())
  yield c
  c.close()


def test_platform(client):
  assert client.platform_name == "cpu"
  assert isinstance(client.platform_version, str)
  assert client.process_index == 0
  assert client.plugin.version[0] == abi.API_MAJOR
  assert "Client" in repr(client)


def test_devices(client):
  devices = client.devices()
  assert devices
  assert client.addressable_devices() == devices
  assert sorted(d.id for d in devices) == list(range(len(devices)))
  for device in devices:
    assert device.kind == "cpu"
    assert device.process_index == 0
    assert device.is_addressable
    assert device.local_hardware_id == device.id
    assert isinstance(device.attributes, dict)
    assert device.debug_string
    assert str(device.id) in repr(device)
    assert client.lookup_device(device.id) is device
    assert client.lookup_addressable_device(device.local_hardware_id) is device


@pytest.mark.parametrize("bad_id", [-1, 10_000, 1 << 32, -(1 << 40)])
def test_lookup_bad_device_id(client, bad_id):
  with pytest.raises(support.InvalidArgumentError, match=str(bad_id)):
    client.lookup_device(bad_id)


def test_memories(client):
  memories = client.memories()
  kinds = {m.kind for m in memories}
  assert "device" in kinds
  device = client.devices()[0]
  default = device.default_memory()
  assert default.kind == "device"
  assert default in device.memories()
  assert device in default.addressable_by_devices()
  assert isinstance(default.id, int) and default.debug_string


def test_default_device_assignment(client):
  n = len(client.devices())
  assert client.default_device_assignment(1, 1) == [[0]]
  assignment = client.default_device_assignment(n, 1)
  assert sorted(row[0] for row in assignment) == list(range(n))


@pytest.mark.parametrize("replicas,partitions", [
    (0, 1), (1, 0), (-1, 2), (1 << 20, 1 << 20)])
def test_default_device_assignment_rejects_bad_counts(client, replicas,
                                                      partitions):
  with pytest.raises(support.InvalidArgumentError):
    client.default_device_assignment(replicas, partitions)


_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
    np.uint32, np.uint64, np.float16, np.float32, np.float64, np.complex64,
    np.complex128, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2,
    ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3b11fnuz,
    ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3fnuz, ml_dtypes.int4,
    ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2, ml_dtypes.float8_e4m3,
    ml_dtypes.float8_e3m4, ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn,
]


@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
def test_buffer_round_trip(client, dtype):
  dtype = np.dtype(dtype)
  values = np.array([[1, 0, 1], [0, 1, 1]])  # Representable in every type.
  if dtype.kind == "c":
    values = values + 2j * values[::-1]
  elif dtype == ml_dtypes.float8_e8m0fnu:
    values = np.array([[1, 2, 4], [0.5, 8, 1]])  # No zero in this type.
  array = values.astype(dtype)
  buffer = client.buffer_from_numpy(array)
  assert buffer.dtype == dtype
  assert buffer.element_type == abi.BufferType[buffer.element_type.name]
  assert buffer.shape == (2, 3)
  result = buffer.to_numpy()
  assert result.dtype == dtype
  np.testing.assert_array_equal(result, array)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1, 1, 1, 5)])
def test_buffer_shapes(client, shape):
  array = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
  buffer = client.buffer_from_numpy(array)
  assert buffer.shape == shape
  np.testing.assert_array_equal(buffer.to_numpy(), array)


def test_buffer_from_strided_array(client):
  array = np.arange(24, dtype=np.int32).reshape(4, 6)[::2, ::-3]
  np.testing.assert_array_equal(client.buffer_from_numpy(array).to_numpy(),
                                array)


def test_buffer_placement(client):
  device = client.devices()[-1]
  buffer = client.buffer_from_numpy(np.ones(3, np.float32), device)
  assert buffer.device is device
  assert buffer.memory == device.default_memory()
  assert buffer.is_on_cpu
  assert buffer.on_device_size_in_bytes == 12
  pinned = [m for m in device.memories() if m.kind == "pinned_host"]
  if pinned:
    host = client.buffer_from_numpy(np.ones(3, np.float32), memory=pinned[0])
    assert host.memory == pinned[0]


def test_unsupported_dtype(client):
  with pytest.raises(support.InvalidArgumentError, match="no PJRT_Buffer_Type"):
    client.buffer_from_numpy(np.array(["a"]))


def test_delete_and_use_after_delete(client):
  buffer = client.buffer_from_numpy(np.ones(4, np.float32))
  assert not buffer.is_deleted
  buffer.delete()
  assert buffer.is_deleted
  with pytest.raises(support.InvalidArgumentError, match="deleted"):
    buffer.to_numpy()
  buffer.close()
  with pytest.raises(support.FailedPreconditionError, match="destroyed"):
    buffer.to_numpy()
  assert "destroyed" in repr(buffer)


def test_ready_event(client):
  buffer = client.buffer_from_numpy(np.ones(4, np.float32))
  event = buffer.ready()
  event.wait()
  assert event.is_ready()
  assert event.error() is None
  assert buffer.block_until_ready() is buffer
  fired = threading.Event()
  results = []
  event.on_ready(lambda error: (results.append(error), fired.set()))
  assert fired.wait(10)
  assert results == [None]
  event.close()
  event.close()  # Idempotent.


def test_compile_and_execute(client):
  executable = client.compile(_ADD)
  assert executable.name == "add"
  assert executable.num_outputs == 1
  assert executable.num_replicas == 1 and executable.num_partitions == 1
  assert executable.output_element_types() == [abi.BufferType.F32]
  assert executable.output_shapes() == [(4,)]
  assert executable.addressable_devices() == [client.devices()[0]]
  assert executable.device_assignment() == [[0]]
  assert isinstance(executable.fingerprint, bytes)
  a = client.buffer_from_numpy(np.array([1, 2, 3, 4], np.float32))
  b = client.buffer_from_numpy(np.array([10, 20, 30, 40], np.float32))
  (out,) = executable.execute([a, b])
  np.testing.assert_array_equal(out.to_numpy(), [11, 22, 33, 44])
  assert not executable.is_deleted
  executable.delete()
  # The CPU plugin's LoadedExecutable_Delete keeps the executable (its
  # IsDeleted stays false); only check that both calls go through.
  assert isinstance(executable.is_deleted, bool)


def test_compile_bytes_and_several_outputs(client):
  executable = client.compile(_TWO_OUTPUTS.encode())
  assert executable.num_outputs == 2
  assert executable.output_element_types() == [abi.BufferType.S32,
                                               abi.BufferType.F64]
  x = np.arange(6, dtype=np.int32).reshape(2, 3)
  squares, constant = executable.execute([client.buffer_from_numpy(x)])
  np.testing.assert_array_equal(squares.to_numpy(), x * x)
  assert constant.to_numpy() == 2.5 and constant.shape == ()


def test_compile_with_device_assignment(client):
  device = client.devices()[-1]
  options = compile_options.compile_options(device_assignment=[[device.id]])
  executable = client.compile(_ADD, compile_options=options)
  assert executable.addressable_devices() == [device]
  x = client.buffer_from_numpy(np.ones(4, np.float32), device)
  (out,) = executable.execute([x, x])
  assert out.device is device
  np.testing.assert_array_equal(out.to_numpy(), [2, 2, 2, 2])


def test_execute_replicated(client):
  devices = client.devices()[:2]
  if len(devices) < 2:
    pytest.skip("needs two devices")
  options = compile_options.compile_options(
      num_replicas=2, device_assignment=[[d.id] for d in devices])
  executable = client.compile(_ADD, compile_options=options)
  assert executable.num_replicas == 2
  inputs = [client.buffer_from_numpy(np.full(4, i + 1, np.float32), d)
            for i, d in enumerate(devices)]
  outputs = executable.execute_sharded([[x, x] for x in inputs])
  assert [o[0].device for o in outputs] == devices
  np.testing.assert_array_equal(outputs[1][0].to_numpy(), [4, 4, 4, 4])


def test_invalid_program(client):
  with pytest.raises(support.XlaError) as info:
    client.compile("this is not mlir")
  assert info.value.code in (support.StatusCode.INVALID_ARGUMENT,
                             support.StatusCode.UNKNOWN)
  with pytest.raises(support.XlaError, match="same shape"):
    client.compile(_SHAPE_MISMATCH)


def test_invalid_format_and_options(client):
  with pytest.raises(support.InvalidArgumentError, match="format"):
    client.compile(_ADD, format="bogus")
  with pytest.raises(support.InvalidArgumentError, match="CompileOptions"):
    client.compile(_ADD, compile_options=b"\xff\xff\xff")


def test_execute_with_wrong_arguments(client):
  executable = client.compile(_ADD)
  x = client.buffer_from_numpy(np.ones(4, np.float32))
  with pytest.raises(support.InvalidArgumentError, match="buffers"):
    executable.execute([x])
  y = client.buffer_from_numpy(np.ones(3, np.float32))
  with pytest.raises(support.InvalidArgumentError, match="size"):
    executable.execute([x, y])


def test_two_clients_at_once(client):
  with client_lib.Client(client.plugin) as other:
    assert other.handle != client.handle
    assert len(other.devices()) == len(client.devices())
    x = other.buffer_from_numpy(np.arange(4, dtype=np.float32))
    y = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
    (a,) = other.compile(_ADD).execute([x, x])
    (b,) = client.compile(_ADD).execute([y, y])
    np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
  assert other.closed
  assert "destroyed" in repr(x)  # Closing the client destroyed its buffers.
  with pytest.raises(support.FailedPreconditionError, match="closed"):
    other.devices()


def test_client_by_registered_name_with_options(client):
  loader.register_plugin("xla_cpu_test", client.plugin, replace=True)
  try:
    with client_lib.Client("xla_cpu_test", options={"cpu_device_count": 2}
                          ) as small:
      assert len(small.devices()) == 2
  finally:
    loader.unregister_plugin("xla_cpu_test")


def _count_calls(plugin, counts):
  """Makes `plugin` count the C calls made through it from now on."""
  original = loader.Plugin.function

  def function(slot):
    fn = original(plugin, slot)
    if fn is None:
      return None

    def counted(*args):
      counts[slot] = counts.get(slot, 0) + 1
      return fn(*args)
    return counted
  plugin.function = function


def test_execute_makes_three_c_calls():
  c = client_lib.Client(test_util.xla_cpu_pjrt_path())
  try:
    exe = c.compile(_ADD)
    x = c.buffer_from_numpy(np.ones(4, np.float32))
    counts = {}
    _count_calls(c.plugin, counts)
    exe.execute([x, x])[0].close()  # Learns num_outputs, builds a plan.
    for _ in range(3):
      counts.clear()
      (y,) = exe.execute([x, x])
      assert counts == {"LoadedExecutable_Execute": 1, "Event_Await": 1,
                        "Event_Destroy": 1}
      np.testing.assert_array_equal(y.to_numpy(), np.full(4, 2, np.float32))
      y.close()
    del c.plugin.function
  finally:
    c.close()


def test_execute_from_several_threads(client):
  exe = client.compile(_ADD)
  inputs = [client.buffer_from_numpy(np.full(4, i, np.float32))
            for i in range(4)]
  failures = []

  def work(i):
    try:
      for _ in range(25):
        (y,) = exe.execute([inputs[i], inputs[i]])
        np.testing.assert_array_equal(y.to_numpy(),
                                      np.full(4, 2 * i, np.float32))
    except Exception as e:  # pylint: disable=broad-except
      failures.append(e)

  threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert not failures


def test_execute_errors_leave_the_executable_usable(client):
  exe = client.compile(_ADD)
  x = client.buffer_from_numpy(np.ones(4, np.float32))
  with pytest.raises(support.InvalidArgumentError):
    exe.execute([x])
  (y,) = exe.execute([x, x])
  np.testing.assert_array_equal(y.to_numpy(), np.full(4, 2, np.float32))


class _FakeMessage:
  """Quacks like a protobuf message of type `name`."""

  def __init__(self, name: str, data: bytes):
    self.DESCRIPTOR = type("D", (), {"full_name": name})()  # pylint: disable=invalid-name
    self._data = data

  def SerializeToString(self) -> bytes:  # pylint: disable=invalid-name
    return self._data


def test_program_bytes_kinds():
  from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
  assert client_lib.program_bytes(_ADD) == (_ADD.encode(), "mlir")
  assert client_lib.program_bytes(b"\x01", "hlo") == (b"\x01", "hlo")
  assert client_lib.program_bytes("x", "") == (b"x", "")  # Passed on.
  code, fmt = client_lib.program_bytes(mlir_text.parse_module(_ADD))
  assert fmt == "mlir" and b"stablehlo.add" in code
  assert client_lib.program_bytes(
      _FakeMessage("xla.HloModuleProto", b"\x0a\x01m")) == (b"\x0a\x01m",
                                                             "hlo")
  assert client_lib.program_bytes(
      _FakeMessage("xla.HloModuleProtoWithConfig", b"")) == (
          b"", "hlo_with_config")
  with pytest.raises(support.InvalidArgumentError, match="xla.Shape"):
    client_lib.program_bytes(_FakeMessage("xla.ShapeProto", b""))
  assert client_lib.program_bytes(
      _FakeMessage("xla.ShapeProto", b"\x01"), "hlo") == (b"\x01", "hlo")
  with pytest.raises(support.InvalidArgumentError, match="cannot compile"):
    client_lib.program_bytes(3.5)


def test_compile_hlo_from_jax(client):
  jax = pytest.importorskip("jax")
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  computation = jax.jit(lambda a: (a * a, a.sum())).lower(x).compiler_ir(
      "hlo")
  executable = client.compile(computation)  # An XlaComputation: "hlo".
  squares, total = executable.execute([client.buffer_from_numpy(x)])
  np.testing.assert_array_equal(squares.to_numpy(), x * x)
  assert total.to_numpy() == 15.0
