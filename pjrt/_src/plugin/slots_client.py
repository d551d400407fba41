"""Slots: PJRT_Client_* (platform, devices, memories), PJRT_Device*,
PJRT_Memory_*, PJRT_TopologyDescription_*.

Buffers and compilation slots of the client are in slots_buffer.py and
slots_executable.py.
"""

from __future__ import annotations

import ctypes

import support
from pjrt._src import abi
from pjrt._src import abi_types
from pjrt._src.plugin import cabi
from pjrt._src.plugin import handles
from pjrt._src.plugin import multiprocess
from pjrt._src.plugin import options as options_lib
from pjrt._src.plugin import runtime
from pjrt._src.plugin import topology as topology_lib
from pjrt._src.plugin.slot_registry import implements


def client_of(address) -> runtime.Client:
  client = handles.TABLE.get(address, runtime.CLIENT)
  client.check_alive()
  return client


def device_of(address) -> runtime.Device:
  return handles.TABLE.get(address, runtime.DEVICE)


def memory_of(address) -> runtime.Memory:
  return handles.TABLE.get(address, runtime.MEMORY)


def description_of(address) -> runtime.DeviceDescription:
  return handles.TABLE.get(address, runtime.DESCRIPTION)


def topology_of(address) -> topology_lib.Topology:
  return handles.TABLE.get(address, topology_lib.TOPOLOGY)


def _set_handles(args, array_field: str, count_field: str, owner, key,
                 addresses: list[int]) -> None:
  array, count = owner.c.handles(key, addresses)
  setattr(args, array_field, ctypes.cast(array, abi_types.PTR_P))
  setattr(args, count_field, count)


def _set_string(args, field: str, size_field: str, owner, key,
                text: str) -> None:
  address, size = owner.c.string(key, text)
  setattr(args, field, address)
  setattr(args, size_field, size)


# -- Client. -------------------------------------------------------------------


@implements("Client_Create", last_field="client")
def _client_create(args):
  named = cabi.named_values(args.create_options, args.num_options)
  opts = options_lib.client_options(named)
  store = multiprocess.store_from_args(args) if opts.num_nodes > 1 else None
  client = runtime.Client(opts, store)
  client.register_handles()
  args.client = client.handle


@implements("Client_Destroy")
def _client_destroy(args):
  if not args.client:
    return
  client = handles.TABLE.get(args.client, runtime.CLIENT)
  topology = getattr(client, "topology", None)
  if topology is not None:
    topology.destroy()
  client.destroy()


@implements("Client_PlatformName")
def _client_platform_name(args):
  client = client_of(args.client)
  _set_string(args, "platform_name", "platform_name_size", client,
              "platform_name", runtime.PLATFORM_NAME)


@implements("Client_ProcessIndex")
def _client_process_index(args):
  args.process_index = client_of(args.client).process_index


@implements("Client_PlatformVersion")
def _client_platform_version(args):
  client = client_of(args.client)
  _set_string(args, "platform_version", "platform_version_size", client,
              "platform_version", client.platform_version)


@implements("Client_TopologyDescription")
def _client_topology_description(args):
  client = client_of(args.client)
  if getattr(client, "topology", None) is None:
    client.topology = topology_lib.Topology(len(client.devices), client)
  args.topology = client.topology.handle


@implements("Client_Devices")
def _client_devices(args):
  client = client_of(args.client)
  _set_handles(args, "devices", "num_devices", client, "devices",
               [d.handle for d in client.devices])


@implements("Client_AddressableDevices")
def _client_addressable_devices(args):
  client = client_of(args.client)
  _set_handles(args, "addressable_devices", "num_addressable_devices", client,
               "addressable_devices",
               [d.handle for d in client.addressable_devices])


@implements("Client_LookupDevice")
def _client_lookup_device(args):
  args.device = client_of(args.client).lookup_device(args.id).handle


@implements("Client_LookupAddressableDevice")
def _client_lookup_addressable_device(args):
  client = client_of(args.client)
  args.addressable_device = client.lookup_addressable_device(
      args.local_hardware_id).handle


@implements("Client_AddressableMemories")
def _client_addressable_memories(args):
  client = client_of(args.client)
  _set_handles(args, "addressable_memories", "num_addressable_memories",
               client, "memories", [m.handle for m in client.memories])


@implements("Client_DefaultDeviceAssignment")
def _client_default_device_assignment(args):
  client = client_of(args.client)
  assignment = client.default_device_assignment(args.num_replicas,
                                                args.num_partitions)
  flat = [i for row in assignment for i in row]
  if args.default_assignment_size < len(flat):
    raise support.InvalidArgumentError(
        f"default_assignment_size {args.default_assignment_size} is smaller "
        f"than num_replicas x num_partitions = {len(flat)}")
  if not args.default_assignment:
    raise support.InvalidArgumentError("default_assignment is NULL")
  for i, device_id in enumerate(flat):
    args.default_assignment[i] = device_id


@implements("Client_UpdateGlobalProcessInfo")
def _client_update_global_process_info(args):
  client_of(args.client)
  if args.num_process_infos and not args.process_infos:
    raise support.InvalidArgumentError("process_infos is NULL")
  # The processes of a client are fixed when it is created (the topology
  # exchange): there is nothing to update.


@implements("Client_DmaMap")
def _client_dma_map(args):
  client_of(args.client)
  if args.size and not args.data:
    raise support.InvalidArgumentError("PJRT_Client_DmaMap: data is NULL")
  # Devices are host memory: every host buffer is already "mapped".


@implements("Client_DmaUnmap")
def _client_dma_unmap(args):
  client_of(args.client)


# -- Device descriptions. ------------------------------------------------------


@implements("DeviceDescription_Id")
def _description_id(args):
  args.id = description_of(args.device_description).id


@implements("DeviceDescription_ProcessIndex")
def _description_process_index(args):
  args.process_index = description_of(args.device_description).process_index


@implements("DeviceDescription_Attributes")
def _description_attributes(args):
  description = description_of(args.device_description)
  array = description.c.get("attributes", lambda: cabi.named_value_array(
      description.attributes))
  args.attributes = ctypes.cast(array, abi.NAMED_VALUE_P)
  args.num_attributes = len(description.attributes)


@implements("DeviceDescription_Kind")
def _description_kind(args):
  description = description_of(args.device_description)
  _set_string(args, "device_kind", "device_kind_size", description, "kind",
              description.kind)


@implements("DeviceDescription_DebugString")
def _description_debug_string(args):
  description = description_of(args.device_description)
  _set_string(args, "debug_string", "debug_string_size", description,
              "debug", description.debug_string)


@implements("DeviceDescription_ToString")
def _description_to_string(args):
  description = description_of(args.device_description)
  _set_string(args, "to_string", "to_string_size", description, "to_string",
              description.to_string)


# -- Devices. ------------------------------------------------------------------


@implements("Device_GetDescription")
def _device_get_description(args):
  args.device_description = device_of(args.device).description.handle


@implements("Device_IsAddressable")
def _device_is_addressable(args):
  args.is_addressable = device_of(args.device).addressable


@implements("Device_LocalHardwareId")
def _device_local_hardware_id(args):
  args.local_hardware_id = device_of(args.device).local_hardware_id


@implements("Device_AddressableMemories")
def _device_addressable_memories(args):
  device = device_of(args.device)
  _set_handles(args, "memories", "num_memories", device, "memories",
               [m.handle for m in device.memories])


@implements("Device_DefaultMemory")
def _device_default_memory(args):
  args.memory = device_of(args.device).default_memory.handle


@implements("Device_MemoryStats")
def _device_memory_stats(args):
  device = device_of(args.device)
  stats = device.memory_stats()
  args.bytes_in_use = stats["bytes_in_use"]
  args.peak_bytes_in_use = stats["peak_bytes_in_use"]
  args.peak_bytes_in_use_is_set = True
  args.num_allocs = stats["num_allocs"]
  args.num_allocs_is_set = True
  for name in ("largest_alloc_size", "bytes_limit", "bytes_reserved",
               "peak_bytes_reserved", "bytes_reservable_limit",
               "largest_free_block_bytes", "pool_bytes", "peak_pool_bytes"):
    setattr(args, name + "_is_set", False)


@implements("Device_ClearMemoryStats")
def _device_clear_memory_stats(args):
  device_of(args.device).clear_memory_stats()


@implements("Device_GetAttributes")
def _device_get_attributes(args):
  device = device_of(args.device)
  attributes = dict(device.description.attributes)
  array = cabi.named_value_array(attributes)
  holder = ctypes.create_string_buffer(1)
  handle = ctypes.addressof(holder)
  cabi.keep(handle, (holder, array))
  args.attributes = ctypes.cast(array, abi.NAMED_VALUE_P)
  args.num_attributes = len(attributes)
  args.device_attributes = handle
  args.attributes_deleter = cabi.deleter_address()


@implements("Device_PoisonExecution")
def _device_poison_execution(args):
  device = device_of(args.device)
  code = int(args.error_code)
  if code == support.StatusCode.OK:
    raise support.InvalidArgumentError(
        "PJRT_Device_PoisonExecution needs a non-OK error code")
  message = cabi.string(args.error_message, args.error_message_size)
  args.poisoned = device.poison(int(args.launch_id), (code, message))


ASYNC_TRACKING_EVENT = "PJRT_AsyncTrackingEvent"


@implements("Device_CreateAsyncTrackingEvent")
def _device_create_async_tracking_event(args):
  device = device_of(args.device)
  description = cabi.string(args.description, args.description_size)
  args.event = handles.TABLE.add(ASYNC_TRACKING_EVENT, (device, description))


@implements("AsyncTrackingEvent_Destroy")
def _async_tracking_event_destroy(args):
  if args.event:
    handles.TABLE.remove(args.event, ASYNC_TRACKING_EVENT)


# -- Memories. -----------------------------------------------------------------


@implements("Memory_Id")
def _memory_id(args):
  args.id = memory_of(args.memory).id


@implements("Memory_Kind")
def _memory_kind(args):
  memory = memory_of(args.memory)
  kind = memory.kind_c
  if kind is None:  # (address, size), made once: asked on every dispatch.
    kind = memory.kind_c = memory.c.string("kind", memory.kind)
  args.kind, args.kind_size = kind  # (Also native: native_slots.py.)


@implements("Memory_Kind_Id")
def _memory_kind_id(args):
  args.kind_id = memory_of(args.memory).kind_id


@implements("Memory_DebugString")
def _memory_debug_string(args):
  memory = memory_of(args.memory)
  _set_string(args, "debug_string", "debug_string_size", memory, "debug",
              memory.debug_string)


@implements("Memory_ToString")
def _memory_to_string(args):
  memory = memory_of(args.memory)
  _set_string(args, "to_string", "to_string_size", memory, "to_string",
              memory.to_string)


@implements("Memory_AddressableByDevices")
def _memory_addressable_by_devices(args):
  memory = memory_of(args.memory)
  _set_handles(args, "devices", "num_devices", memory, "devices",
               [memory.device.handle])


# -- Topology descriptions. ----------------------------------------------------


@implements("TopologyDescription_Create")
def _topology_create(args):
  name = cabi.string(args.topology_name, args.topology_name_size)
  if name not in ("", runtime.PLATFORM_NAME, "cpu"):
    raise support.InvalidArgumentError(
        f"unknown topology {name!r} (the openxla_cpu plugin has one kind of "
        f"topology: {runtime.PLATFORM_NAME!r})")
  named = cabi.named_values(args.create_options, args.num_options)
  args.topology = topology_lib.Topology.create(named).handle


@implements("TopologyDescription_Destroy")
def _topology_destroy(args):
  if not args.topology:
    return
  topology = topology_of(args.topology)
  if topology.client is not None:
    raise support.InvalidArgumentError(
        "the topology of a client is owned by the client; do not destroy it")
  topology.destroy()


@implements("TopologyDescription_PlatformName")
def _topology_platform_name(args):
  topology = topology_of(args.topology)
  _set_string(args, "platform_name", "platform_name_size", topology,
              "platform_name", topology.platform_name)


@implements("TopologyDescription_PlatformVersion")
def _topology_platform_version(args):
  topology = topology_of(args.topology)
  _set_string(args, "platform_version", "platform_version_size", topology,
              "platform_version", topology.platform_version)


@implements("TopologyDescription_GetDeviceDescriptions")
def _topology_device_descriptions(args):
  topology = topology_of(args.topology)
  _set_handles(args, "descriptions", "num_descriptions", topology,
               "descriptions", [d.handle for d in topology.descriptions])


@implements("TopologyDescription_Serialize")
def _topology_serialize(args):
  topology = topology_of(args.topology)
  address, size, handle = cabi.give(topology.serialize())
  args.serialized_bytes = address
  args.serialized_bytes_size = size
  args.serialized_topology = handle
  args.serialized_topology_deleter = cabi.deleter_address()


@implements("TopologyDescription_Deserialize")
def _topology_deserialize(args):
  data = cabi.raw_bytes(args.serialized_topology,
                        args.serialized_topology_size)
  args.topology = topology_lib.Topology.deserialize(data).handle


@implements("TopologyDescription_Attributes")
def _topology_attributes(args):
  topology = topology_of(args.topology)
  array = topology.c.get("attributes", lambda: cabi.named_value_array(
      topology.attributes))
  args.attributes = ctypes.cast(array, abi.NAMED_VALUE_P)
  args.num_attributes = len(topology.attributes)


@implements("TopologyDescription_Fingerprint")
def _topology_fingerprint(args):
  args.fingerprint = topology_of(args.topology).fingerprint()


@implements("TopologyDescription_GetMemorySpaceKindIds")
def _topology_memory_space_kind_ids(args):
  topology = topology_of(args.topology)
  kind_ids = list(range(len(runtime.MEMORY_KINDS)))
  array = topology.c.get("kind_ids", lambda: (ctypes.c_int * len(kind_ids))(
      *kind_ids))
  args.memory_space_kind_ids = ctypes.cast(array, abi_types.INT_P)
  args.num_memory_space_kind_ids = len(kind_ids)


@implements("TopologyDescription_MakeCanonicalShapeForMemorySpace")
def _topology_canonical_shape(args):
  topology_of(args.topology)
  if not 0 <= args.memory_space_kind_id < len(runtime.MEMORY_KINDS):
    raise support.InvalidArgumentError(
        f"unknown memory space kind id {args.memory_space_kind_id}")
  shape = cabi.dims(args.dims, args.num_dims)
  try:
    element = abi.BufferType(args.element_type).name
  except ValueError:
    raise support.InvalidArgumentError(
        f"unknown PJRT_Buffer_Type {args.element_type}") from None
  minor_to_major = None
  if args.layout:
    from pjrt._src.plugin import layouts  # pylint: disable=g-import-not-at-top
    minor_to_major = layouts.minor_to_major(args.layout.contents, len(shape))
  data = topology_lib.shape_proto(element, shape, minor_to_major)
  address, size, handle = cabi.give(data)
  args.serialized_shape = address
  args.serialized_shape_size = size
  del handle  # The deleter receives serialized_shape itself.
  args.serialized_shape_deleter = cabi.deleter_address()
