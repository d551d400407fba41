"""Tests of slots_client.py through the pjrt client: devices, memories,
descriptions, assignments, topologies, client options."""

import ctypes

import pytest

import pjrt
import support
from pjrt._src import abi
from pjrt._src import loader
from pjrt._src.plugin import handles
from pjrt._src.plugin import runtime
from pjrt._src.plugin import testing


@pytest.fixture(name="client")
def _client():
  c = testing.client(num_devices=3)
  yield c
  c.close()


def test_platform(client):
  assert client.platform_name == "openxla_cpu"
  assert "interpreter" in client.platform_version
  assert client.process_index == 0


def test_devices(client):
  devices = client.devices()
  assert [d.id for d in devices] == [0, 1, 2]
  assert client.addressable_devices() == devices
  for i, device in enumerate(devices):
    assert device.local_hardware_id == i and device.is_addressable
    assert device.kind == runtime.DEVICE_KIND
    assert device.to_string() == f"OPENXLA_CPU_{i}"
    assert str(i) in device.debug_string
    assert device.attributes == {"device_index": i}
    assert client.lookup_device(i) == device
    assert client.lookup_addressable_device(i) == device


@pytest.mark.parametrize("bad", [-1, 3, 2**31 - 1])
def test_lookup_bad_ids(client, bad):
  with pytest.raises(support.InvalidArgumentError):
    client.lookup_device(bad)
  with pytest.raises(support.InvalidArgumentError):
    client.lookup_addressable_device(bad)


def test_memories(client):
  memories = client.memories()
  assert len(memories) == 9
  assert [m.id for m in memories] == list(range(9))
  for device in client.devices():
    kinds = [m.kind for m in device.memories()]
    assert kinds == ["device", "pinned_host", "unpinned_host"]
    default = device.default_memory()
    assert default.kind == "device"
    assert default.addressable_by_devices() == [device]
    assert [m.kind_id for m in device.memories()] == [0, 1, 2]
    assert default.to_string().startswith("DEVICE_")


def test_num_devices_option_and_environment(monkeypatch):
  monkeypatch.setenv("OPENXLA_CPU_NUM_DEVICES", "2")
  with pjrt.Client(testing.plugin(), {"backend": "interpreter"}) as c:
    assert len(c.devices()) == 2
  with pjrt.Client(testing.plugin(), {"backend": "interpreter",
                                      "num_devices": "5"}) as c:
    assert len(c.devices()) == 5


def test_bad_create_option_is_an_error():
  with pytest.raises(support.InvalidArgumentError, match="no_such"):
    pjrt.Client(testing.plugin(), {"no_such": 1})


def test_default_device_assignment(client):
  assert client.default_device_assignment(3, 1) == [[0], [1], [2]]
  assert client.default_device_assignment(1, 2) == [[0, 1]]
  with pytest.raises(support.InvalidArgumentError):
    client.default_device_assignment(2, 2)
  with pytest.raises(support.InvalidArgumentError):
    testing.call(client, "Client_DefaultDeviceAssignment",
                 client=client.handle, num_replicas=0, num_partitions=1,
                 default_assignment_size=1,
                 default_assignment=(ctypes.c_int * 1)())


def test_destroy_releases_every_handle():
  before = len(handles.TABLE)
  c = testing.client(num_devices=2)
  device = c.devices()[0].handle
  assert len(handles.TABLE) == before + 1 + 2 * (2 + 3)
  c.close()
  assert len(handles.TABLE) == before
  with pytest.raises(support.InvalidArgumentError, match="not a live"):
    testing.call(c, "Device_LocalHardwareId", device=device)


def test_memory_stats(client):
  device = client.devices()[1]
  args = testing.call(client, "Device_MemoryStats", device=device.handle)
  before = args.bytes_in_use
  buffer = testing.ones(client, (10,), device=device)
  args = testing.call(client, "Device_MemoryStats", device=device.handle)
  assert args.bytes_in_use == before + 40 and args.num_allocs_is_set
  buffer.delete()
  args = testing.call(client, "Device_MemoryStats", device=device.handle)
  assert args.bytes_in_use == before
  assert args.peak_bytes_in_use >= before + 40
  assert not args.bytes_limit_is_set


def test_device_attributes_with_deleter(client):
  args = testing.call(client, "Device_GetAttributes",
                      device=client.devices()[0].handle)
  assert args.num_attributes == 1 and args.attributes_deleter
  ctypes.CFUNCTYPE(None, ctypes.c_void_p)(args.attributes_deleter)(
      args.device_attributes)


def test_client_topology(client):
  topology = testing.call(client, "Client_TopologyDescription",
                          client=client.handle).topology
  args = testing.call(client, "TopologyDescription_GetDeviceDescriptions",
                      topology=topology)
  descriptions = [args.descriptions[i] for i in range(args.num_descriptions)]
  assert descriptions == [d.description for d in client.devices()]
  name = testing.call(client, "TopologyDescription_PlatformName",
                      topology=topology)
  assert testing.string(name.platform_name,
                        name.platform_name_size) == "openxla_cpu"
  with pytest.raises(support.InvalidArgumentError, match="owned by"):
    testing.call(client, "TopologyDescription_Destroy", topology=topology)


def test_standalone_topology_round_trip(client):
  named = loader.encode_named_values({"num_devices": 6})
  topology = testing.call(client, "TopologyDescription_Create",
                          create_options=named, num_options=1).topology
  serialized = testing.call(client, "TopologyDescription_Serialize",
                            topology=topology)
  data = ctypes.string_at(serialized.serialized_bytes,
                          serialized.serialized_bytes_size)
  ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
      serialized.serialized_topology_deleter)(serialized.serialized_topology)
  copy = testing.call(client, "TopologyDescription_Deserialize",
                      serialized_topology=data,
                      serialized_topology_size=len(data)).topology
  for t in (topology, copy):
    args = testing.call(client, "TopologyDescription_GetDeviceDescriptions",
                        topology=t)
    assert args.num_descriptions == 6
  prints = [testing.call(client, "TopologyDescription_Fingerprint",
                         topology=t).fingerprint for t in (topology, copy)]
  assert prints[0] == prints[1] != 0
  kinds = testing.call(client, "TopologyDescription_GetMemorySpaceKindIds",
                       topology=topology)
  assert [kinds.memory_space_kind_ids[i]
          for i in range(kinds.num_memory_space_kind_ids)] == [0, 1, 2]
  with pytest.raises(support.DataLossError):
    bad = data[:-3] + b"xx}"
    testing.call(client, "TopologyDescription_Deserialize",
                 serialized_topology=bad, serialized_topology_size=len(bad))
  for t in (topology, copy):
    testing.call(client, "TopologyDescription_Destroy", topology=t)


def test_canonical_shape_is_a_shape_proto(client):
  topology = testing.call(client, "Client_TopologyDescription",
                          client=client.handle).topology
  args = testing.call(
      client, "TopologyDescription_MakeCanonicalShapeForMemorySpace",
      topology=topology, memory_space_kind_id=0, dims=[2, 5], num_dims=2,
      element_type=abi.BufferType.F32)
  data = ctypes.string_at(args.serialized_shape, args.serialized_shape_size)
  # ShapeProto: element_type F32 = 11, dims [2, 5], layout {1, 0}.
  assert data == bytes([0x10, 11, 0x1a, 2, 2, 5, 0x2a, 4, 0x0a, 2, 1, 0])
  ctypes.CFUNCTYPE(None, ctypes.c_void_p)(args.serialized_shape_deleter)(
      args.serialized_shape)
