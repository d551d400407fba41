"""`PJRT_Api`, the function table a plugin returns, and version negotiation.

`SLOTS` lists the table's function pointers in header order (API 0.112); the
struct is `struct_size`, `extension_start`, `PJRT_Api_Version`, then one
pointer per slot. A plugin built against an older header returns a shorter
table and says so in `PJRT_Api.struct_size`, so a slot exists for a plugin
only when it lies inside that size (`has_slot`). Fields are only appended, so
the slot offsets of a shorter table match ours.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

from pjrt._src import abi_args
from pjrt._src import abi_types

# The API version these definitions follow (PJRT_API_MAJOR / _MINOR).
API_MAJOR = 0
API_MINOR = 112

# Function slots of PJRT_Api, in header order. Each is named by its function
# without the "PJRT_" prefix; the struct field carries the prefix, as in C.
SLOTS: tuple[str, ...] = (
    "Error_Destroy",
    "Error_Message",
    "Error_GetCode",
    "Plugin_Initialize",
    "Plugin_Attributes",
    "Event_Destroy",
    "Event_IsReady",
    "Event_Error",
    "Event_Await",
    "Event_OnReady",
    "Client_Create",
    "Client_Destroy",
    "Client_PlatformName",
    "Client_ProcessIndex",
    "Client_PlatformVersion",
    "Client_Devices",
    "Client_AddressableDevices",
    "Client_LookupDevice",
    "Client_LookupAddressableDevice",
    "Client_AddressableMemories",
    "Client_Compile",
    "Client_DefaultDeviceAssignment",
    "Client_BufferFromHostBuffer",
    "DeviceDescription_Id",
    "DeviceDescription_ProcessIndex",
    "DeviceDescription_Attributes",
    "DeviceDescription_Kind",
    "DeviceDescription_DebugString",
    "DeviceDescription_ToString",
    "Device_GetDescription",
    "Device_IsAddressable",
    "Device_LocalHardwareId",
    "Device_AddressableMemories",
    "Device_DefaultMemory",
    "Device_MemoryStats",
    "Memory_Id",
    "Memory_Kind",
    "Memory_DebugString",
    "Memory_ToString",
    "Memory_AddressableByDevices",
    "Executable_Destroy",
    "Executable_Name",
    "Executable_NumReplicas",
    "Executable_NumPartitions",
    "Executable_NumOutputs",
    "Executable_SizeOfGeneratedCodeInBytes",
    "Executable_GetCostAnalysis",
    "Executable_OutputMemoryKinds",
    "Executable_OptimizedProgram",
    "Executable_Serialize",
    "LoadedExecutable_Destroy",
    "LoadedExecutable_GetExecutable",
    "LoadedExecutable_AddressableDevices",
    "LoadedExecutable_Delete",
    "LoadedExecutable_IsDeleted",
    "LoadedExecutable_Execute",
    "Executable_DeserializeAndLoad",
    "LoadedExecutable_Fingerprint",
    "Buffer_Destroy",
    "Buffer_ElementType",
    "Buffer_Dimensions",
    "Buffer_UnpaddedDimensions",
    "Buffer_DynamicDimensionIndices",
    "Buffer_GetMemoryLayout",
    "Buffer_OnDeviceSizeInBytes",
    "Buffer_Device",
    "Buffer_Memory",
    "Buffer_Delete",
    "Buffer_IsDeleted",
    "Buffer_CopyToDevice",
    "Buffer_ToHostBuffer",
    "Buffer_IsOnCpu",
    "Buffer_ReadyEvent",
    "Buffer_UnsafePointer",
    "Buffer_IncreaseExternalReferenceCount",
    "Buffer_DecreaseExternalReferenceCount",
    "Buffer_OpaqueDeviceMemoryDataPointer",
    "CopyToDeviceStream_Destroy",
    "CopyToDeviceStream_AddChunk",
    "CopyToDeviceStream_TotalBytes",
    "CopyToDeviceStream_GranuleSize",
    "CopyToDeviceStream_CurrentBytes",
    "TopologyDescription_Create",
    "TopologyDescription_Destroy",
    "TopologyDescription_PlatformName",
    "TopologyDescription_PlatformVersion",
    "TopologyDescription_GetDeviceDescriptions",
    "TopologyDescription_Serialize",
    "TopologyDescription_Attributes",
    "Compile",
    "Executable_OutputElementTypes",
    "Executable_OutputDimensions",
    "Buffer_CopyToMemory",
    "Client_CreateViewOfDeviceBuffer",
    "Executable_Fingerprint",
    "Client_TopologyDescription",
    "Executable_GetCompiledMemoryStats",
    "Memory_Kind_Id",
    "ExecuteContext_Create",
    "ExecuteContext_Destroy",
    "Buffer_CopyRawToHost",
    "AsyncHostToDeviceTransferManager_Destroy",
    "AsyncHostToDeviceTransferManager_TransferData",
    "Client_CreateBuffersForAsyncHostToDevice",
    "AsyncHostToDeviceTransferManager_RetrieveBuffer",
    "AsyncHostToDeviceTransferManager_Device",
    "AsyncHostToDeviceTransferManager_BufferCount",
    "AsyncHostToDeviceTransferManager_BufferSize",
    "AsyncHostToDeviceTransferManager_SetBufferError",
    "AsyncHostToDeviceTransferManager_AddMetadata",
    "Client_DmaMap",
    "Client_DmaUnmap",
    "Client_CreateUninitializedBuffer",
    "Client_UpdateGlobalProcessInfo",
    "TopologyDescription_Deserialize",
    "Client_CreateAliasBuffer",
    "Client_FulfillAliasBuffer",
    "LoadedExecutable_GetDeviceAssignment",
    "Client_CreateErrorBuffer",
    "AsyncHostToDeviceTransferManager_TransferLiteral",
    "Buffer_CopyRawToHostFuture",
    "Device_PoisonExecution",
    "Device_CreateAsyncTrackingEvent",
    "AsyncTrackingEvent_Destroy",
    "Executable_GetCompileOptions",
    "Buffer_DonateWithControlDependency",
    "Event_Create",
    "Event_Set",
    "Device_GetAttributes",
    "Client_Load",
    "LoadedExecutable_AddressableDeviceLogicalIds",
    "Buffer_Bitcast",
    "Error_ForEachPayload",
    "TopologyDescription_Fingerprint",
    "Executable_ParameterMemoryKinds",
    "Device_ClearMemoryStats",
    "TopologyDescription_MakeCanonicalShapeForMemorySpace",
    "TopologyDescription_GetMemorySpaceKindIds",
)

# Slots whose function returns void instead of PJRT_Error*.
VOID_SLOTS = frozenset({"Error_Destroy", "Error_Message"})

PJRT_Api = abi_types.define_struct(
    "PJRT_Api",
    [
        ("struct_size", abi_types.SIZE),
        ("extension_start", abi_types.PTR),
        ("pjrt_api_version", abi_types.PJRT_Api_Version),
    ] + [("PJRT_" + name, abi_types.FN) for name in SLOTS],
)
API_P = ctypes.POINTER(PJRT_Api)

# Byte offset of the first function slot (after the version struct).
FIRST_SLOT_OFFSET = PJRT_Api.PJRT_Error_Destroy.offset


def _slot_key(name: str) -> str:
  key = name[len("PJRT_"):] if name.startswith("PJRT_") else name
  if key not in _SLOT_INDEX:
    raise KeyError(f"{name!r} is not a PJRT_Api slot")
  return key


_SLOT_INDEX = {name: i for i, name in enumerate(SLOTS)}


def slot_offset(name: str) -> int:
  """Byte offset of slot `name` ("Client_Create" or "PJRT_Client_Create")."""
  return getattr(PJRT_Api, "PJRT_" + _slot_key(name)).offset


def api_version(api: Any) -> tuple[int, int]:
  """(major, minor) that the plugin behind `api` reports."""
  version = api.pjrt_api_version
  return version.major_version, version.minor_version


def num_slots(api: Any) -> int:
  """How many function slots the plugin's table holds (by its struct_size)."""
  size = int(api.struct_size) - FIRST_SLOT_OFFSET
  return max(0, min(len(SLOTS), size // ctypes.sizeof(abi_types.FN)))


def has_slot(api: Any, name: str) -> bool:
  """Whether the plugin's table holds slot `name` with a non-NULL function.

  The slot must end inside the plugin's reported `struct_size`: an older
  plugin's table is shorter, and memory past it is not part of the table.
  """
  key = _slot_key(name)
  offset = slot_offset(key)
  if offset + ctypes.sizeof(abi_types.FN) > int(api.struct_size):
    return False
  return bool(getattr(api, "PJRT_" + key))


def function_type(name: str) -> Any:
  """The CFUNCTYPE of slot `name`: `PJRT_Error* f(PJRT_<name>_Args*)`."""
  key = _slot_key(name)
  restype = None if key in VOID_SLOTS else ctypes.c_void_p
  return ctypes.CFUNCTYPE(restype, ctypes.POINTER(abi_args.args_type(key)))


def slot_function(api: Any, name: str) -> Callable[..., Any] | None:
  """The callable in slot `name`, or None where the plugin lacks it."""
  if not has_slot(api, name):
    return None
  key = _slot_key(name)
  return function_type(key)(getattr(api, "PJRT_" + key))
