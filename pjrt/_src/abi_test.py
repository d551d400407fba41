"""Layout tests of the PJRT C API ctypes definitions (no plugin needed).

The expected numbers were computed by compiling `pjrt_c_api.h` of API 0.112
with gcc on x86-64 Linux (offsetof / sizeof / PJRT_STRUCT_SIZE); every struct
of the header was checked once that way, and a sample is pinned here.
"""

import ctypes

import pytest

from pjrt._src import abi
from support import StatusCode

# struct -> (sizeof, PJRT_STRUCT_SIZE, {field: offset}) from the C header.
_HEADER_LAYOUTS = {
    "PJRT_Api_Version": (24, 24, {"major_version": 16, "minor_version": 20}),
    "PJRT_NamedValue": (56, 56, {
        "name": 16, "name_size": 24, "type": 32, "string_value": 40,
        "int64_value": 40, "bool_value": 40, "value_size": 48}),
    "PJRT_Program": (48, 48, {
        "code": 16, "code_size": 24, "format": 32, "format_size": 40}),
    "PJRT_Buffer_MemoryLayout": (80, 76, {
        "tiled": 16, "strides": 16, "type": 72}),
    "PJRT_ProcessInfo": (48, 48, {
        "incarnation_id": 16, "state": 24, "error_code": 28,
        "error_message": 32, "error_message_size": 40}),
    "PJRT_ExecuteOptions": (144, 144, {
        "launch_id": 48, "non_donatable_input_indices": 56, "context": 72,
        "call_location": 80, "multi_slice_config": 112,
        "use_major_to_minor_data_layout_for_callbacks": 120,
        "num_hlo_output_callbacks": 136}),
    "PJRT_Error_GetCode_Args": (32, 28, {"error": 16, "code": 24}),
    "PJRT_Event_IsReady_Args": (32, 25, {"event": 16, "is_ready": 24}),
    "PJRT_Client_Create_Args": (88, 88, {
        "create_options": 16, "num_options": 24, "kv_get_callback": 32,
        "client": 64, "kv_try_get_user_arg": 80}),
    "PJRT_Client_BufferFromHostBuffer_Args": (120, 120, {
        "client": 16, "data": 24, "type": 32, "dims": 40, "num_dims": 48,
        "byte_strides": 56, "host_buffer_semantics": 72, "device": 80,
        "memory": 88, "device_layout": 96, "done_with_host_buffer": 104,
        "buffer": 112}),
    "PJRT_LoadedExecutable_Execute_Args": (80, 80, {
        "executable": 16, "options": 24, "argument_lists": 32,
        "num_devices": 40, "num_args": 48, "output_lists": 56,
        "device_complete_events": 64, "execute_device": 72}),
    "PJRT_Buffer_ToHostBuffer_Args": (56, 56, {
        "src": 16, "host_layout": 24, "dst": 32, "dst_size": 40,
        "event": 48}),
    "PJRT_Buffer_GetMemoryLayout_Args": (104, 104, {
        "buffer": 16, "layout": 24}),
    "PJRT_Device_MemoryStats_Args": (192, 185, {
        "bytes_in_use": 24, "peak_bytes_in_use_is_set": 40,
        "peak_pool_bytes": 176, "peak_pool_bytes_is_set": 184}),
    "PJRT_DeviceDescription_Attributes_Args": (40, 40, {
        "num_attributes": 24, "attributes": 32}),
    "PJRT_Client_CreateViewOfDeviceBuffer_Args": (112, 112, {
        "element_type": 48, "on_delete_callback": 72, "stream": 88,
        "buffer": 96, "memory": 104}),
    "PJRT_Executable_GetCompiledMemoryStats_Args": (144, 144, {
        "peak_memory_in_bytes": 104, "peak_unpadded_heap_bytes": 136}),
}

# PJRT_Api slot offsets from the C header.
_HEADER_SLOT_OFFSETS = {
    "Error_Destroy": 40,
    "Client_Create": 120,
    "LoadedExecutable_GetDeviceAssignment": 976,
    "Client_CreateErrorBuffer": 984,
    "TopologyDescription_GetMemorySpaceKindIds": 1136,
}


def _struct(name):
  if name.endswith("_Args"):
    return abi.args_type(name)
  return getattr(abi, name)


@pytest.mark.parametrize("name", sorted(_HEADER_LAYOUTS))
def test_layout_matches_header(name):
  size, struct_size, offsets = _HEADER_LAYOUTS[name]
  cls = _struct(name)
  assert ctypes.sizeof(cls) == size
  assert cls.STRUCT_SIZE == struct_size == abi.struct_size(cls)
  for field, offset in offsets.items():
    assert getattr(cls, field).offset == offset, field


def test_every_args_struct_starts_with_the_header():
  for name, cls in abi.ARGS.items():
    assert cls._fields_[0][0] == "struct_size", name
    assert cls._fields_[1][0] == "extension_start", name
    assert cls.extension_start.offset == 8, name
    assert cls.__name__ == f"PJRT_{name}_Args"


def test_api_table():
  assert (abi.API_MAJOR, abi.API_MINOR) == (0, 112)
  assert len(abi.SLOTS) == 138
  assert len(set(abi.SLOTS)) == 138
  assert abi.SLOTS[:5] == ("Error_Destroy", "Error_Message", "Error_GetCode",
                           "Plugin_Initialize", "Plugin_Attributes")
  assert abi.SLOTS[-1] == "TopologyDescription_GetMemorySpaceKindIds"
  assert ctypes.sizeof(abi.PJRT_Api) == abi.PJRT_Api.STRUCT_SIZE == 1144
  assert abi.PJRT_Api.pjrt_api_version.offset == 16
  assert abi.FIRST_SLOT_OFFSET == 40
  for slot, offset in _HEADER_SLOT_OFFSETS.items():
    assert abi.slot_offset(slot) == offset
    assert abi.slot_offset("PJRT_" + slot) == offset


def test_every_slot_has_an_args_struct():
  for slot in abi.SLOTS:
    assert abi.args_type(slot).__name__ == f"PJRT_{slot}_Args"
    abi.function_type(slot)  # Builds.


def test_enums():
  assert abi.ErrorCode is StatusCode
  assert StatusCode.INVALID_ARGUMENT == 3 and StatusCode.UNIMPLEMENTED == 12
  assert abi.BufferType.PRED == 1 and abi.BufferType.F32 == 11
  assert abi.BufferType.BF16 == 13 and abi.BufferType.C128 == 15
  assert abi.BufferType.S4 == 21 and abi.BufferType.TOKEN == 23
  assert abi.BufferType.F4E2M1FN == 29 and abi.BufferType.U1 == 31
  assert abi.NamedValueType.INT64_LIST == 2 and abi.NamedValueType.BOOL == 4
  assert abi.MemoryLayoutType.STRIDES == 1
  assert abi.HostBufferSemantics.MUTABLE_ZERO_COPY == 3
  assert abi.ExtensionType.XLA_TRANSFORM == 24


def test_make_args_sets_struct_size_and_converts():
  args = abi.make_args(abi.PJRT_Client_BufferFromHostBuffer_Args,
                       dims=[2, 3], num_dims=2, type=abi.BufferType.F32)
  assert args.struct_size == 120
  assert not args.extension_start
  assert [args.dims[0], args.dims[1]] == [2, 3]
  assert not args.byte_strides

  program = abi.make_args(abi.PJRT_Program, code=b"a\0b", code_size=3,
                          format="mlir", format_size=4)
  assert ctypes.string_at(program.code, 3) == b"a\0b"
  assert ctypes.string_at(program.format, 4) == b"mlir"

  compile_args = abi.make_args(abi.PJRT_Client_Compile_Args, program=program)
  assert compile_args.program.contents.code_size == 3

  with pytest.raises(AttributeError, match="no field 'nope'"):
    abi.make_args(abi.PJRT_Program, nope=1)


def test_struct_without_struct_size_field():
  ids = abi.make_args(abi.PJRT_LogicalDeviceIds, replica=1, partition=2)
  assert (ids.replica, ids.partition) == (1, 2)


def test_args_type_lookup():
  cls = abi.args_type("Client_Create")
  assert abi.args_type("PJRT_Client_Create") is cls
  assert abi.args_type("PJRT_Client_Create_Args") is cls
  assert abi.PJRT_Client_Create_Args is cls
  with pytest.raises(KeyError):
    abi.args_type("No_Such")
  with pytest.raises(AttributeError):
    abi.PJRT_No_Such_Args  # pylint: disable=pointless-statement


def _fake_api(num_slots, major=0, minor=81):
  api = abi.PJRT_Api()
  api.struct_size = abi.FIRST_SLOT_OFFSET + 8 * num_slots
  api.pjrt_api_version.major_version = major
  api.pjrt_api_version.minor_version = minor
  return api


def test_version_negotiation_on_a_shorter_table():
  api = _fake_api(num_slots=118, major=0, minor=81)
  assert abi.api_version(api) == (0, 81)
  assert abi.num_slots(api) == 118
  # Inside the table but NULL: absent.
  assert not abi.has_slot(api, "Client_Create")
  api.PJRT_Client_Create = 1234
  assert abi.has_slot(api, "Client_Create")
  assert abi.has_slot(api, "PJRT_Client_Create")
  # Slot 117 is the last of a 118-slot table; 118 lies past it.
  api.PJRT_LoadedExecutable_GetDeviceAssignment = 1234
  api.PJRT_Client_CreateErrorBuffer = 1234
  assert abi.has_slot(api, "LoadedExecutable_GetDeviceAssignment")
  assert not abi.has_slot(api, "Client_CreateErrorBuffer")
  assert abi.slot_function(api, "Client_CreateErrorBuffer") is None
  with pytest.raises(KeyError):
    abi.has_slot(api, "Not_A_Slot")
