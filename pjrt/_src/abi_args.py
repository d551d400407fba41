"""The `PJRT_*_Args` structs of the PJRT C API 0.112, one per function.

Each struct is declared by one entry of `_ARGS_FIELDS`: the function name
without the `PJRT_` prefix (so `"Client_Create"` is `PJRT_Client_Create_Args`)
and its fields after the common `struct_size` / `extension_start` header, in
header order, as `name:TYPE` words. TYPE names an alias of abi_types (PTR, STR,
SIZE, INT, ...); `LAYOUT` is a `PJRT_Buffer_MemoryLayout` held by value.

The three `KeyValue*Callback` entries are the arguments a plugin passes to
callbacks of Client_Create, not functions of the table.

Every class is also a module attribute under its C name, e.g.
`abi_args.PJRT_Buffer_ToHostBuffer_Args`; `args_type(name)` looks one up.
"""

from __future__ import annotations

import ctypes

from pjrt._src import abi_types

# Type words of the field specs below.
_TYPES = {
    "PTR": abi_types.PTR,
    "STR": abi_types.STR,
    "FN": abi_types.FN,
    "SIZE": abi_types.SIZE,
    "INT": abi_types.INT,
    "INT32": abi_types.INT32,
    "INT64": abi_types.INT64,
    "UINT64": abi_types.UINT64,
    "UINTPTR": abi_types.UINTPTR,
    "INTPTR": abi_types.INTPTR,
    "BOOL": abi_types.BOOL,
    "ENUM": abi_types.ENUM,
    "PTR_P": abi_types.PTR_P,
    "INT_P": abi_types.INT_P,
    "INT32_P": abi_types.INT32_P,
    "INT64_P": abi_types.INT64_P,
    "SIZE_P": abi_types.SIZE_P,
    "NAMED_VALUE_P": abi_types.NAMED_VALUE_P,
    "PROGRAM_P": abi_types.PROGRAM_P,
    "LAYOUT": abi_types.PJRT_Buffer_MemoryLayout,
    "LAYOUT_P": abi_types.LAYOUT_P,
    "SHAPE_SPEC_P": abi_types.SHAPE_SPEC_P,
    "PROCESS_INFO_P": abi_types.PROCESS_INFO_P,
    "LOGICAL_IDS_P": abi_types.LOGICAL_IDS_P,
    "CHUNK_P": abi_types.CHUNK_P,
    "EXECUTE_OPTIONS_P": abi_types.EXECUTE_OPTIONS_P,
    "LOAD_OPTIONS_P": abi_types.LOAD_OPTIONS_P,
}

# Function name -> fields after the header, in header order.
_ARGS_FIELDS: dict[str, str] = {
    "Error_Destroy": "error:PTR",
    "Error_Message": "error:PTR message:STR message_size:SIZE",
    "Error_GetCode": "error:PTR code:ENUM",
    "Error_ForEachPayload": "error:PTR visitor:FN user_arg:PTR",
    "Plugin_Initialize": "",
    "Plugin_Attributes": "attributes:NAMED_VALUE_P num_attributes:SIZE",
    "Event_Destroy": "event:PTR",
    "Event_IsReady": "event:PTR is_ready:BOOL",
    "Event_Error": "event:PTR",
    "Event_Await": "event:PTR",
    "Event_OnReady": "event:PTR callback:FN user_arg:PTR",
    "Event_Create": "event:PTR",
    "Event_Set": (
        "event:PTR error_code:ENUM error_message:STR error_message_size:SIZE"),
    "KeyValueGetCallback": (
        "key:STR key_size:SIZE timeout_in_ms:INT callback_error:PTR "
        "user_arg:PTR value:STR value_size:SIZE value_deleter_callback:FN"),
    "KeyValueTryGetCallback": (
        "key:STR key_size:SIZE callback_error:PTR user_arg:PTR value:STR "
        "value_size:SIZE value_deleter_callback:FN"),
    "KeyValuePutCallback": (
        "key:STR key_size:SIZE value:STR value_size:SIZE callback_error:PTR "
        "user_arg:PTR"),
    "Client_Create": (
        "create_options:NAMED_VALUE_P num_options:SIZE kv_get_callback:FN "
        "kv_get_user_arg:PTR kv_put_callback:FN kv_put_user_arg:PTR client:PTR "
        "kv_try_get_callback:FN kv_try_get_user_arg:PTR"),
    "Client_Destroy": "client:PTR",
    "Client_PlatformName": (
        "client:PTR platform_name:STR platform_name_size:SIZE"),
    "Client_ProcessIndex": "client:PTR process_index:INT",
    "Client_PlatformVersion": (
        "client:PTR platform_version:STR platform_version_size:SIZE"),
    "Client_TopologyDescription": "client:PTR topology:PTR",
    "Client_Devices": "client:PTR devices:PTR_P num_devices:SIZE",
    "Client_AddressableDevices": (
        "client:PTR addressable_devices:PTR_P num_addressable_devices:SIZE"),
    "Client_LookupDevice": "client:PTR id:INT device:PTR",
    "Client_LookupAddressableDevice": (
        "client:PTR local_hardware_id:INT addressable_device:PTR"),
    "Client_UpdateGlobalProcessInfo": (
        "client:PTR process_infos:PROCESS_INFO_P num_process_infos:SIZE"),
    "Client_AddressableMemories": (
        "client:PTR addressable_memories:PTR_P num_addressable_memories:SIZE"),
    "Client_Compile": (
        "client:PTR program:PROGRAM_P compile_options:STR "
        "compile_options_size:SIZE executable:PTR"),
    "Client_Load": (
        "client:PTR executable:PTR compile_options:STR "
        "compile_options_size:SIZE loaded_executable:PTR"),
    "Client_DefaultDeviceAssignment": (
        "client:PTR num_replicas:INT num_partitions:INT "
        "default_assignment_size:SIZE default_assignment:INT_P"),
    "Client_DmaMap": "client:PTR data:PTR size:SIZE",
    "Client_DmaUnmap": "client:PTR data:PTR",
    "AsyncHostToDeviceTransferManager_Destroy": "transfer_manager:PTR",
    "AsyncHostToDeviceTransferManager_TransferData": (
        "transfer_manager:PTR buffer_index:INT data:PTR offset:INT64 "
        "transfer_size:INT64 is_last_transfer:BOOL done_with_h2d_transfer:PTR"),
    "AsyncHostToDeviceTransferManager_RetrieveBuffer": (
        "transfer_manager:PTR buffer_index:INT buffer_out:PTR"),
    "AsyncHostToDeviceTransferManager_Device": (
        "transfer_manager:PTR device_out:PTR"),
    "AsyncHostToDeviceTransferManager_BufferCount": (
        "transfer_manager:PTR buffer_count:SIZE"),
    "AsyncHostToDeviceTransferManager_BufferSize": (
        "transfer_manager:PTR buffer_index:INT buffer_size:SIZE"),
    "AsyncHostToDeviceTransferManager_SetBufferError": (
        "transfer_manager:PTR buffer_index:INT error_code:ENUM "
        "error_message:STR error_message_size:SIZE"),
    "AsyncHostToDeviceTransferManager_AddMetadata": (
        "transfer_manager:PTR transfer_metadata:NAMED_VALUE_P "
        "num_metadata:SIZE"),
    "AsyncHostToDeviceTransferManager_TransferLiteral": (
        "transfer_manager:PTR buffer_index:INT data:PTR shape_dims:INT64_P "
        "shape_num_dims:SIZE shape_element_type:ENUM shape_layout:LAYOUT_P "
        "done_with_h2d_transfer:PTR"),
    "Client_CreateUninitializedBuffer": (
        "client:PTR shape_dims:INT64_P shape_num_dims:SIZE "
        "shape_element_type:ENUM shape_layout:LAYOUT_P device:PTR memory:PTR "
        "buffer:PTR"),
    "Client_CreateErrorBuffer": (
        "client:PTR error_code:ENUM error_message:STR error_message_size:SIZE "
        "shape_dims:INT64_P shape_num_dims:SIZE shape_element_type:ENUM "
        "shape_layout:LAYOUT_P memory:PTR buffer:PTR payload:NAMED_VALUE_P "
        "num_payload:SIZE"),
    "Client_CreateAliasBuffer": (
        "client:PTR memory:PTR shape_dims:INT64_P shape_num_dims:SIZE "
        "shape_element_type:ENUM shape_layout:LAYOUT_P alias_buffer:PTR "
        "fulfill_alias_buffer_cb:PTR"),
    "Client_FulfillAliasBuffer": (
        "client:PTR buffer:PTR status_code:ENUM error_message:STR "
        "error_message_size:SIZE fulfill_alias_buffer_cb:PTR"),
    "Client_BufferFromHostBuffer": (
        "client:PTR data:PTR type:ENUM dims:INT64_P num_dims:SIZE "
        "byte_strides:INT64_P num_byte_strides:SIZE host_buffer_semantics:ENUM "
        "device:PTR memory:PTR device_layout:LAYOUT_P "
        "done_with_host_buffer:PTR buffer:PTR"),
    "Client_CreateViewOfDeviceBuffer": (
        "client:PTR device_buffer_ptr:PTR dims:INT64_P num_dims:SIZE "
        "element_type:ENUM layout:LAYOUT_P device:PTR on_delete_callback:FN "
        "on_delete_callback_arg:PTR stream:INTPTR buffer:PTR memory:PTR"),
    "Client_CreateBuffersForAsyncHostToDevice": (
        "client:PTR shape_specs:SHAPE_SPEC_P num_shape_specs:SIZE "
        "device_layouts:PTR_P num_device_layouts:SIZE memory:PTR "
        "transfer_manager:PTR"),
    "DeviceDescription_Id": "device_description:PTR id:INT",
    "DeviceDescription_ProcessIndex": (
        "device_description:PTR process_index:INT"),
    "DeviceDescription_Attributes": (
        "device_description:PTR num_attributes:SIZE attributes:NAMED_VALUE_P"),
    "DeviceDescription_Kind": (
        "device_description:PTR device_kind:STR device_kind_size:SIZE"),
    "DeviceDescription_DebugString": (
        "device_description:PTR debug_string:STR debug_string_size:SIZE"),
    "DeviceDescription_ToString": (
        "device_description:PTR to_string:STR to_string_size:SIZE"),
    "Device_GetDescription": "device:PTR device_description:PTR",
    "Device_IsAddressable": "device:PTR is_addressable:BOOL",
    "Device_LocalHardwareId": "device:PTR local_hardware_id:INT",
    "Device_AddressableMemories": "device:PTR memories:PTR_P num_memories:SIZE",
    "Device_DefaultMemory": "device:PTR memory:PTR",
    "Device_MemoryStats": (
        "device:PTR bytes_in_use:INT64 peak_bytes_in_use:INT64 "
        "peak_bytes_in_use_is_set:BOOL num_allocs:INT64 num_allocs_is_set:BOOL "
        "largest_alloc_size:INT64 largest_alloc_size_is_set:BOOL "
        "bytes_limit:INT64 bytes_limit_is_set:BOOL bytes_reserved:INT64 "
        "bytes_reserved_is_set:BOOL peak_bytes_reserved:INT64 "
        "peak_bytes_reserved_is_set:BOOL bytes_reservable_limit:INT64 "
        "bytes_reservable_limit_is_set:BOOL largest_free_block_bytes:INT64 "
        "largest_free_block_bytes_is_set:BOOL pool_bytes:INT64 "
        "pool_bytes_is_set:BOOL peak_pool_bytes:INT64 "
        "peak_pool_bytes_is_set:BOOL"),
    "Device_ClearMemoryStats": "device:PTR",
    "Device_PoisonExecution": (
        "device:PTR launch_id:INT32 error_code:ENUM error_message:STR "
        "error_message_size:SIZE poisoned:BOOL payload:NAMED_VALUE_P "
        "num_payload:SIZE"),
    "Device_GetAttributes": (
        "device:PTR attributes:NAMED_VALUE_P num_attributes:SIZE "
        "device_attributes:PTR attributes_deleter:FN"),
    "Device_CreateAsyncTrackingEvent": (
        "device:PTR description:STR description_size:SIZE event:PTR"),
    "AsyncTrackingEvent_Destroy": "event:PTR",
    "Memory_Id": "memory:PTR id:INT",
    "Memory_Kind": "memory:PTR kind:STR kind_size:SIZE",
    "Memory_Kind_Id": "memory:PTR kind_id:INT",
    "Memory_DebugString": "memory:PTR debug_string:STR debug_string_size:SIZE",
    "Memory_ToString": "memory:PTR to_string:STR to_string_size:SIZE",
    "Memory_AddressableByDevices": "memory:PTR devices:PTR_P num_devices:SIZE",
    "ExecuteContext_Create": "context:PTR",
    "ExecuteContext_Destroy": "context:PTR",
    "Executable_Destroy": "executable:PTR",
    "LoadedExecutable_Destroy": "executable:PTR",
    "LoadedExecutable_GetExecutable": "loaded_executable:PTR executable:PTR",
    "LoadedExecutable_GetDeviceAssignment": (
        "executable:PTR serialized_bytes:STR serialized_bytes_size:SIZE "
        "serialized_device_assignment:PTR "
        "serialized_device_assignment_deleter:FN"),
    "Executable_Name": (
        "executable:PTR executable_name:STR executable_name_size:SIZE"),
    "Executable_NumReplicas": "executable:PTR num_replicas:SIZE",
    "Executable_NumPartitions": "executable:PTR num_partitions:SIZE",
    "LoadedExecutable_AddressableDevices": (
        "executable:PTR addressable_devices:PTR_P "
        "num_addressable_devices:SIZE"),
    "LoadedExecutable_AddressableDeviceLogicalIds": (
        "executable:PTR addressable_device_logical_ids:LOGICAL_IDS_P "
        "num_addressable_device_logical_ids:SIZE"),
    "Executable_OptimizedProgram": "executable:PTR program:PROGRAM_P",
    "LoadedExecutable_Delete": "executable:PTR",
    "LoadedExecutable_IsDeleted": "executable:PTR is_deleted:BOOL",
    "LoadedExecutable_Execute": (
        "executable:PTR options:EXECUTE_OPTIONS_P argument_lists:PTR_P "
        "num_devices:SIZE num_args:SIZE output_lists:PTR_P "
        "device_complete_events:PTR_P execute_device:PTR"),
    "Executable_NumOutputs": "executable:PTR num_outputs:SIZE",
    "Executable_SizeOfGeneratedCodeInBytes": (
        "executable:PTR size_in_bytes:INT64"),
    "Executable_Fingerprint": (
        "executable:PTR executable_fingerprint:STR "
        "executable_fingerprint_size:SIZE"),
    "Executable_GetCostAnalysis": (
        "executable:PTR num_properties:SIZE properties:NAMED_VALUE_P"),
    "Executable_GetCompiledMemoryStats": (
        "executable:PTR generated_code_size_in_bytes:INT64 "
        "argument_size_in_bytes:INT64 output_size_in_bytes:INT64 "
        "alias_size_in_bytes:INT64 temp_size_in_bytes:INT64 "
        "host_generated_code_size_in_bytes:INT64 "
        "host_argument_size_in_bytes:INT64 host_output_size_in_bytes:INT64 "
        "host_alias_size_in_bytes:INT64 host_temp_size_in_bytes:INT64 "
        "peak_memory_in_bytes:INT64 total_size_in_bytes:INT64 "
        "total_allocation_bytes:INT64 indefinite_allocations:INT64 "
        "peak_unpadded_heap_bytes:INT64"),
    "Executable_OutputElementTypes": (
        "executable:PTR output_types:INT_P num_output_types:SIZE"),
    "Executable_OutputDimensions": (
        "executable:PTR num_outputs:SIZE dims:INT64_P dim_sizes:SIZE_P"),
    "Executable_ParameterMemoryKinds": (
        "executable:PTR num_parameters:SIZE memory_kinds:PTR_P "
        "memory_kind_sizes:SIZE_P"),
    "Executable_OutputMemoryKinds": (
        "executable:PTR num_outputs:SIZE memory_kinds:PTR_P "
        "memory_kind_sizes:SIZE_P"),
    "Executable_Serialize": (
        "executable:PTR serialized_bytes:STR serialized_bytes_size:SIZE "
        "serialized_executable:PTR serialized_executable_deleter:FN"),
    "Executable_GetCompileOptions": (
        "executable:PTR serialized_bytes:STR serialized_bytes_size:SIZE "
        "serialized_compile_options:PTR serialized_compile_options_deleter:FN"),
    "Executable_DeserializeAndLoad": (
        "client:PTR serialized_executable:STR serialized_executable_size:SIZE "
        "loaded_executable:PTR overridden_serialized_compile_options:STR "
        "overridden_serialized_compile_options_size:SIZE "
        "load_options:LOAD_OPTIONS_P"),
    "LoadedExecutable_Fingerprint": (
        "executable:PTR executable_fingerprint:STR "
        "executable_fingerprint_size:SIZE"),
    "Buffer_Destroy": "buffer:PTR",
    "Buffer_ElementType": "buffer:PTR type:ENUM",
    "Buffer_Dimensions": "buffer:PTR dims:INT64_P num_dims:SIZE",
    "Buffer_UnpaddedDimensions": (
        "buffer:PTR unpadded_dims:INT64_P num_dims:SIZE"),
    "Buffer_DynamicDimensionIndices": (
        "buffer:PTR dynamic_dim_indices:SIZE_P num_dynamic_dims:SIZE"),
    "Buffer_GetMemoryLayout": "buffer:PTR layout:LAYOUT",
    "Buffer_ToHostBuffer": (
        "src:PTR host_layout:LAYOUT_P dst:PTR dst_size:SIZE event:PTR"),
    "Buffer_OnDeviceSizeInBytes": "buffer:PTR on_device_size_in_bytes:SIZE",
    "Buffer_Delete": "buffer:PTR",
    "Buffer_IsDeleted": "buffer:PTR is_deleted:BOOL",
    "Buffer_CopyRawToHost": (
        "buffer:PTR dst:PTR offset:INT64 transfer_size:INT64 event:PTR"),
    "Buffer_CopyRawToHostFuture": (
        "buffer:PTR offset:INT64 transfer_size:INT64 event:PTR "
        "callback_data:PTR future_ready_callback:FN"),
    "Buffer_CopyToDevice": "buffer:PTR dst_device:PTR dst_buffer:PTR",
    "Buffer_CopyToMemory": "buffer:PTR dst_memory:PTR dst_buffer:PTR",
    "Buffer_Bitcast": (
        "buffer:PTR element_type:ENUM dims:INT64_P num_dims:SIZE "
        "device_layout:LAYOUT_P out_buffer:PTR"),
    "Buffer_IsOnCpu": "buffer:PTR is_on_cpu:BOOL",
    "Buffer_Device": "buffer:PTR device:PTR",
    "Buffer_Memory": "buffer:PTR memory:PTR",
    "Buffer_ReadyEvent": "buffer:PTR event:PTR",
    "Buffer_UnsafePointer": "buffer:PTR buffer_pointer:UINTPTR",
    "Buffer_IncreaseExternalReferenceCount": "buffer:PTR",
    "Buffer_DecreaseExternalReferenceCount": "buffer:PTR",
    "Buffer_OpaqueDeviceMemoryDataPointer": "buffer:PTR device_memory_ptr:PTR",
    "Buffer_DonateWithControlDependency": (
        "buffer:PTR callback_data:PTR dependency_ready_callback:FN "
        "out_buffer:PTR"),
    "CopyToDeviceStream_Destroy": "stream:PTR",
    "CopyToDeviceStream_AddChunk": (
        "stream:PTR chunk:CHUNK_P transfer_complete:PTR"),
    "CopyToDeviceStream_TotalBytes": "stream:PTR total_bytes:INT64",
    "CopyToDeviceStream_GranuleSize": "stream:PTR granule_size_in_bytes:INT64",
    "CopyToDeviceStream_CurrentBytes": "stream:PTR current_bytes:INT64",
    "TopologyDescription_Create": (
        "topology_name:STR topology_name_size:SIZE "
        "create_options:NAMED_VALUE_P num_options:SIZE topology:PTR"),
    "TopologyDescription_Destroy": "topology:PTR",
    "TopologyDescription_PlatformVersion": (
        "topology:PTR platform_version:STR platform_version_size:SIZE"),
    "TopologyDescription_PlatformName": (
        "topology:PTR platform_name:STR platform_name_size:SIZE"),
    "TopologyDescription_GetDeviceDescriptions": (
        "topology:PTR descriptions:PTR_P num_descriptions:SIZE"),
    "TopologyDescription_Serialize": (
        "topology:PTR serialized_bytes:STR serialized_bytes_size:SIZE "
        "serialized_topology:PTR serialized_topology_deleter:FN"),
    "TopologyDescription_Deserialize": (
        "serialized_topology:STR serialized_topology_size:SIZE topology:PTR"),
    "TopologyDescription_Attributes": (
        "topology:PTR attributes:NAMED_VALUE_P num_attributes:SIZE"),
    "TopologyDescription_Fingerprint": "topology:PTR fingerprint:UINT64",
    "TopologyDescription_MakeCanonicalShapeForMemorySpace": (
        "topology:PTR memory_space_kind_id:INT dims:INT64_P num_dims:SIZE "
        "element_type:ENUM layout:LAYOUT_P serialized_shape:STR "
        "serialized_shape_size:SIZE serialized_shape_deleter:FN"),
    "TopologyDescription_GetMemorySpaceKindIds": (
        "topology:PTR memory_space_kind_ids:INT_P "
        "num_memory_space_kind_ids:SIZE"),
    "Compile": (
        "topology:PTR program:PROGRAM_P compile_options:STR "
        "compile_options_size:SIZE client:PTR executable:PTR"),
}


def _parse_fields(spec: str) -> list[tuple[str, object]]:
  fields = []
  for word in spec.split():
    name, type_name = word.split(":")
    fields.append((name, _TYPES[type_name]))
  return fields


# Function name -> args struct class.
ARGS: dict[str, type[ctypes.Structure]] = {}
for _name, _spec in _ARGS_FIELDS.items():
  _cls = abi_types.define_args(f"PJRT_{_name}_Args", _parse_fields(_spec))
  ARGS[_name] = _cls
  globals()[_cls.__name__] = _cls
del _name, _spec, _cls


def args_type(name: str) -> type[ctypes.Structure]:
  """The args struct of function `name` ("Client_Create" or with "PJRT_")."""
  key = name[len("PJRT_"):] if name.startswith("PJRT_") else name
  if key.endswith("_Args"):
    key = key[:-len("_Args")]
  try:
    return ARGS[key]
  except KeyError:
    raise KeyError(f"no PJRT args struct for {name!r}") from None
