"""ctypes types of the PJRT C API: scalars, enums and the shared structs.

The layouts follow `xla/pjrt/c/pjrt_c_api.h` at API version 0.112 (the
version jaxlib 0.10.2 was built against; see shared/notes/pjrt.md). Only the
facts of the header are used here (field order, C types, enum values); the
definitions are our own.

ABI rules this module relies on:
  * Every argument struct starts with `size_t struct_size` and
    `PJRT_Extension_Base* extension_start`.
  * `struct_size` is the offset of the struct's last field plus that field's
    size (the header's PJRT_STRUCT_SIZE), *not* `sizeof`, which may include
    tail padding. `struct_size()` computes it; every struct defined through
    `define_struct` carries it as `STRUCT_SIZE`.
  * Fields are only ever appended, so a caller may pass a newer (larger)
    struct to an older plugin and the plugin reads the prefix it knows.
  * C enums are `int`-sized on every platform PJRT supports.

The C API never hands out Python objects, so the ctypes field types are
chosen for convenience: opaque handles and `char*` are `c_void_p` (strings
come with an explicit size and may contain NULs), arrays of scalars are typed
pointers, function pointers are `c_void_p` (callers cast CFUNCTYPE thunks).
All pointers are the same size, so these choices never change a layout.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any, Sequence

from support import StatusCode

# --------------------------------------------------------------------------
# Scalar aliases, used by the field tables here and in abi_args.py.

SIZE = ctypes.c_size_t
INT = ctypes.c_int
INT32 = ctypes.c_int32
INT64 = ctypes.c_int64
UINT64 = ctypes.c_uint64
UINTPTR = ctypes.c_size_t  # uintptr_t: same size and signedness as size_t.
INTPTR = ctypes.c_ssize_t  # intptr_t.
BOOL = ctypes.c_bool
ENUM = ctypes.c_int  # Every PJRT enum.
PTR = ctypes.c_void_p  # Opaque handle (PJRT_Client*, PJRT_Buffer*, ...).
STR = ctypes.c_void_p  # const char*, always paired with a size field.
FN = ctypes.c_void_p  # Function pointer.
PTR_P = ctypes.POINTER(ctypes.c_void_p)  # Array of handles (T* const*).
INT_P = ctypes.POINTER(ctypes.c_int)
INT32_P = ctypes.POINTER(ctypes.c_int32)
INT64_P = ctypes.POINTER(ctypes.c_int64)
SIZE_P = ctypes.POINTER(ctypes.c_size_t)

# --------------------------------------------------------------------------
# Enums.

# PJRT_Error_Code is absl::StatusCode (the header numbers it the same way), so
# the project's StatusCode is used unchanged.
ErrorCode = StatusCode


class ExtensionType(enum.IntEnum):
  """PJRT_Extension_Type."""

  GPU_CUSTOM_CALL = 0
  PROFILER = 1
  CUSTOM_PARTITIONER = 2
  STREAM = 3
  LAYOUTS = 4
  FFI = 5
  MEMORY_DESCRIPTIONS = 6
  TRITON = 7
  RAW_BUFFER = 8
  PHASE_COMPILE = 9
  EXAMPLE = 10
  UNKNOWN = 11
  CROSS_HOST_TRANSFERS = 12
  EXECUTABLE_METADATA = 13
  CALLBACK = 14
  HOST_ALLOCATOR = 15
  TPU_TOPOLOGY = 16
  TPU_EXECUTABLE = 17
  MEGASCALE = 18
  SHARDINGS = 19
  ABI_VERSION = 20
  COLLECTIVES = 21
  MULTI_SLICE = 22
  HOST_MEMORY_ALLOCATOR = 23
  XLA_TRANSFORM = 24


class NamedValueType(enum.IntEnum):
  """PJRT_NamedValue_Type."""

  STRING = 0
  INT64 = 1
  INT64_LIST = 2
  FLOAT = 3
  BOOL = 4


class BufferType(enum.IntEnum):
  """PJRT_Buffer_Type: element types of buffers, XLA's names."""

  INVALID = 0
  PRED = 1
  S8 = 2
  S16 = 3
  S32 = 4
  S64 = 5
  U8 = 6
  U16 = 7
  U32 = 8
  U64 = 9
  F16 = 10
  F32 = 11
  F64 = 12
  BF16 = 13
  C64 = 14
  C128 = 15
  F8E5M2 = 16
  F8E4M3FN = 17
  F8E4M3B11FNUZ = 18
  F8E5M2FNUZ = 19
  F8E4M3FNUZ = 20
  S4 = 21
  U4 = 22
  TOKEN = 23
  S2 = 24
  U2 = 25
  F8E4M3 = 26
  F8E3M4 = 27
  F8E8M0FNU = 28
  F4E2M1FN = 29
  S1 = 30
  U1 = 31


class HostBufferSemantics(enum.IntEnum):
  """PJRT_HostBufferSemantics."""

  IMMUTABLE_ONLY_DURING_CALL = 0
  IMMUTABLE_UNTIL_TRANSFER_COMPLETES = 1
  IMMUTABLE_ZERO_COPY = 2
  MUTABLE_ZERO_COPY = 3


class MemoryLayoutType(enum.IntEnum):
  """PJRT_Buffer_MemoryLayout_Type."""

  TILED = 0
  STRIDES = 1


class ProcessState(enum.IntEnum):
  """PJRT_ProcessState."""

  UNSPECIFIED = 0
  UNINITIALIZED = 1
  DISCONNECTED = 2
  CONNECTED = 3
  ERROR = 4


# --------------------------------------------------------------------------
# Struct helpers.

Fields = Sequence[tuple[str, Any]]

# The two fields every argument struct starts with.
ARGS_HEADER: tuple[tuple[str, Any], ...] = (
    ("struct_size", SIZE),
    ("extension_start", PTR),
)


def struct_size(struct_type: type[ctypes.Structure]) -> int:
  """Offset of the last field plus its size (the header's PJRT_STRUCT_SIZE)."""
  # `_fields_` is how ctypes declares and lists a struct's fields; it has no
  # public accessor.
  name, ctype = struct_type._fields_[-1][:2]  # pylint: disable=protected-access
  return getattr(struct_type, name).offset + ctypes.sizeof(ctype)


def define_struct(name: str, fields: Fields,
                  anonymous: Sequence[str] = ()) -> type[ctypes.Structure]:
  """Returns a ctypes struct `name` with `fields` and its `STRUCT_SIZE`.

  Args:
    name: the C name of the struct.
    fields: (name, ctype) pairs in header order.
    anonymous: fields that are anonymous unions in C; their members are
      reachable directly on the struct, as in C.
  """
  namespace = {"_fields_": list(fields)}
  if anonymous:
    namespace["_anonymous_"] = tuple(anonymous)
  cls = type(name, (ctypes.Structure,), namespace)
  cls.STRUCT_SIZE = struct_size(cls)
  return cls


def define_args(name: str, fields: Fields,
                anonymous: Sequence[str] = ()) -> type[ctypes.Structure]:
  """An argument struct: the common header, then `fields`."""
  return define_struct(name, list(ARGS_HEADER) + list(fields), anonymous)


# ctypes' base classes of pointer types and of CFUNCTYPE thunks.
_POINTER_BASE = ctypes.POINTER(ctypes.c_int).__mro__[1]
_FUNCTION_BASE = ctypes.CFUNCTYPE(None).__mro__[1]


def _pointee(field_type: Any) -> Any:
  return getattr(field_type, "_type_", None)


def _is_pointer_type(field_type: Any) -> bool:
  return isinstance(field_type, type) and issubclass(field_type,
                                                     _POINTER_BASE)


_FIELD_TYPES: dict[type, dict[str, Any]] = {}

# The attribute of a ctypes object that holds the Python objects it points
# at (see `keep_alive`).
_KEEPALIVE = "_keepalive"


def keep_alive(obj: Any, *refs: Any) -> list[Any]:
  """Makes `refs` live as long as the ctypes object `obj` (which points at
  them, so they must not be freed first); returns `obj`'s keep-alive list.

  Structs made by `make_args` / `set_fields` already keep what they were
  given; this is for memory a caller points them at by hand.
  """
  keep = getattr(obj, _KEEPALIVE, None)
  if keep is None:
    keep = []
    setattr(obj, _KEEPALIVE, keep)
  keep.extend(refs)
  return keep


def kept_alive(obj: Any) -> tuple[Any, ...]:
  """What the ctypes object `obj` keeps alive (see `keep_alive`)."""
  return tuple(getattr(obj, _KEEPALIVE, ()))


def field_names(struct_type: type[ctypes.Structure]) -> tuple[str, ...]:
  """The names of `struct_type`'s fields, in order."""
  return tuple(_field_types(struct_type))


def _field_types(struct_type: type[ctypes.Structure]) -> dict[str, Any]:
  """name -> ctypes type of `struct_type`'s fields (built once per type:
  every PJRT call makes an args struct)."""
  types = _FIELD_TYPES.get(struct_type)
  if types is None:
    types = _FIELD_TYPES[struct_type] = {
        f[0]: f[1] for f in getattr(struct_type, "_fields_")}
  return types


def _convert(struct: ctypes.Structure, field_type: Any, value: Any) -> Any:
  """Converts a Python value for a pointer field; keeps what must stay alive.

  Returns the value to assign. Whatever the struct points at is appended to
  `struct._keepalive`, so it lives as long as the struct does.
  """
  keep = getattr(struct, _KEEPALIVE)
  if value is None:
    return None
  if field_type is ctypes.c_void_p:
    if isinstance(value, str):
      value = value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
      buf = ctypes.create_string_buffer(bytes(value), len(value) + 1)
      keep.append(buf)
      return ctypes.addressof(buf)
    if isinstance(value, _FUNCTION_BASE):
      keep.append(value)
      return ctypes.cast(value, ctypes.c_void_p).value
    if isinstance(value, (ctypes.Array, ctypes.Structure, ctypes.Union)):
      keep.append(value)
      return ctypes.addressof(value)
    if isinstance(value, ctypes.c_void_p):
      return value.value
    return value
  if _is_pointer_type(field_type):
    target = _pointee(field_type)
    if isinstance(value, (list, tuple)):
      value = (target * len(value))(*value)
    if isinstance(value, target):
      value = ctypes.pointer(value)
    if isinstance(value, ctypes.Array):
      keep.append(value)
      return ctypes.cast(value, field_type)
    keep.append(value)
    return value
  return value


def set_fields(struct: ctypes.Structure, **fields: Any) -> ctypes.Structure:
  """Sets fields of `struct`, converting Python values (see `make_args`)."""
  if not hasattr(struct, _KEEPALIVE):
    setattr(struct, _KEEPALIVE, [])
  types = _field_types(type(struct))
  for name, value in fields.items():
    if name not in types:
      raise AttributeError(
          f"{type(struct).__name__} has no field {name!r}")
    setattr(struct, name, _convert(struct, types[name], value))
  return struct


def make_args(struct_type: type[ctypes.Structure],
              **fields: Any) -> ctypes.Structure:
  """Returns a zeroed `struct_type` with `struct_size` set and `fields` set.

  Conveniences for pointer fields: `str`/`bytes` become a pointer to a copy
  (NUL-terminated, but pass the size field too); a list or tuple becomes a C
  array of the pointee type; a ctypes struct becomes a pointer to it; a
  CFUNCTYPE thunk becomes its address. Everything so created or passed is
  kept alive by the returned struct.

  Args:
    struct_type: a struct from this module or abi_args.
    **fields: field values by name.

  Raises:
    AttributeError: for a name that is not a field of `struct_type`.
  """
  struct = struct_type()
  setattr(struct, _KEEPALIVE, [])
  if "struct_size" in _field_types(struct_type):
    struct.struct_size = struct_type.STRUCT_SIZE
  return set_fields(struct, **fields)


# --------------------------------------------------------------------------
# Shared structs (not argument structs of one function).

PJRT_Extension_Base = define_struct("PJRT_Extension_Base", [
    ("struct_size", SIZE),
    ("type", ENUM),
    ("next", PTR),
])

PJRT_Api_Version = define_args("PJRT_Api_Version", [
    ("major_version", INT),
    ("minor_version", INT),
])


class _NamedValueUnion(ctypes.Union):
  _fields_ = [
      ("string_value", STR),
      ("int64_value", INT64),
      ("int64_array_value", INT64_P),
      ("float_value", ctypes.c_float),
      ("bool_value", BOOL),
  ]


PJRT_NamedValue = define_args("PJRT_NamedValue", [
    ("name", STR),
    ("name_size", SIZE),
    ("type", ENUM),
    ("value", _NamedValueUnion),
    # Number of elements for strings and lists, 1 for scalars.
    ("value_size", SIZE),
], anonymous=["value"])
NAMED_VALUE_P = ctypes.POINTER(PJRT_NamedValue)

PJRT_Program = define_args("PJRT_Program", [
    ("code", STR),  # Bytes, not NUL-terminated; may contain NULs.
    ("code_size", SIZE),
    ("format", STR),  # "mlir", "hlo", "hlo_with_config".
    ("format_size", SIZE),
])
PROGRAM_P = ctypes.POINTER(PJRT_Program)

PJRT_Buffer_MemoryLayout_Tiled = define_args(
    "PJRT_Buffer_MemoryLayout_Tiled", [
        ("minor_to_major", INT64_P),
        ("minor_to_major_size", SIZE),
        ("tile_dims", INT64_P),
        ("tile_dim_sizes", SIZE_P),
        ("num_tiles", SIZE),
    ])

PJRT_Buffer_MemoryLayout_Strides = define_args(
    "PJRT_Buffer_MemoryLayout_Strides", [
        ("byte_strides", INT64_P),
        ("num_byte_strides", SIZE),
    ])


class _MemoryLayoutUnion(ctypes.Union):
  _fields_ = [
      ("tiled", PJRT_Buffer_MemoryLayout_Tiled),
      ("strides", PJRT_Buffer_MemoryLayout_Strides),
  ]


PJRT_Buffer_MemoryLayout = define_args("PJRT_Buffer_MemoryLayout", [
    ("layout", _MemoryLayoutUnion),
    ("type", ENUM),
], anonymous=["layout"])
LAYOUT_P = ctypes.POINTER(PJRT_Buffer_MemoryLayout)

PJRT_ShapeSpec = define_args("PJRT_ShapeSpec", [
    ("dims", INT64_P),
    ("num_dims", SIZE),
    ("element_type", ENUM),
])
SHAPE_SPEC_P = ctypes.POINTER(PJRT_ShapeSpec)

# No extension_start in this one.
PJRT_ProcessInfo = define_struct("PJRT_ProcessInfo", [
    ("struct_size", SIZE),
    ("task_id", INT),
    ("incarnation_id", UINT64),
    ("state", ENUM),
    ("error_code", INT),
    ("error_message", STR),
    ("error_message_size", SIZE),
])
PROCESS_INFO_P = ctypes.POINTER(PJRT_ProcessInfo)

# Plain C structs without a struct_size.
PJRT_LogicalDeviceIds = define_struct("PJRT_LogicalDeviceIds", [
    ("replica", INT),
    ("partition", INT),
])
LOGICAL_IDS_P = ctypes.POINTER(PJRT_LogicalDeviceIds)

PJRT_Chunk = define_struct("PJRT_Chunk", [
    ("data", PTR),
    ("size", SIZE),
    ("deleter", FN),
    ("deleter_arg", PTR),
])
CHUNK_P = ctypes.POINTER(PJRT_Chunk)

PJRT_SendCallbackInfo = define_struct("PJRT_SendCallbackInfo", [
    ("channel_id", INT64),
    ("user_arg", PTR),
    ("send_callback", FN),
])

PJRT_RecvCallbackInfo = define_struct("PJRT_RecvCallbackInfo", [
    ("channel_id", INT64),
    ("user_arg", PTR),
    ("recv_callback", FN),
])

PJRT_HloOutputCallbackInfo = define_struct("PJRT_HloOutputCallbackInfo", [
    ("user_arg", PTR),
    ("callback", FN),
    ("callback_id", INT64),
    ("num_operands", SIZE),
])

PJRT_ExecuteOptions = define_args("PJRT_ExecuteOptions", [
    ("send_callbacks", PTR_P),
    ("recv_callbacks", PTR_P),
    ("num_send_ops", SIZE),
    ("num_recv_ops", SIZE),
    ("launch_id", INT),
    ("non_donatable_input_indices", INT64_P),
    ("num_non_donatable_input_indices", SIZE),
    ("context", PTR),
    ("call_location", STR),
    ("num_tasks", SIZE),
    ("task_ids", INT_P),
    ("incarnation_ids", INT64_P),
    ("multi_slice_config", PTR),
    ("use_major_to_minor_data_layout_for_callbacks", BOOL),
    ("hlo_output_callbacks", ctypes.POINTER(PJRT_HloOutputCallbackInfo)),
    ("num_hlo_output_callbacks", SIZE),
])
EXECUTE_OPTIONS_P = ctypes.POINTER(PJRT_ExecuteOptions)

# No extension_start in this one.
PJRT_LoadOptions = define_struct("PJRT_LoadOptions", [
    ("struct_size", SIZE),
    ("computation_origin", INT32_P),
    ("computation_origin_size", SIZE),
    ("multi_slice_config", PTR),
])
LOAD_OPTIONS_P = ctypes.POINTER(PJRT_LoadOptions)

# Payloads of the asynchronous callbacks of two Buffer functions: struct_size
# but no extension_start.
PJRT_Buffer_CopyRawToHostFuture_Callback_Args = define_struct(
    "PJRT_Buffer_CopyRawToHostFuture_Callback_Args", [
        ("struct_size", SIZE),
        ("callback_data", PTR),
        ("error_code", ENUM),
        ("error_message", STR),
        ("error_message_size", SIZE),
        ("dst", PTR),
    ])

PJRT_Buffer_DonateWithControlDependency_Callback_Args = define_struct(
    "PJRT_Buffer_DonateWithControlDependency_Callback_Args", [
        ("struct_size", SIZE),
        ("callback_data", PTR),
        ("error_code", ENUM),
        ("error_message", STR),
        ("error_message_size", SIZE),
    ])

# The object behind a PJRT_Error* / PJRT_Memory* of a plugin that exposes a
# vtable (newer plugins). Opaque to callers; defined for layout checks.
PJRT_Error_FunctionTable = define_struct("PJRT_Error_FunctionTable", [
    ("struct_size", SIZE),
    ("instance_size", SIZE),
    ("extension_start", PTR),
    ("destroy", FN),
    ("message", FN),
    ("get_code", FN),
    ("for_each_payload", FN),
])

PJRT_Memory_FunctionTable = define_args("PJRT_Memory_FunctionTable", [
    ("instance_struct_size", SIZE),
    ("get_user_data", FN),
    ("set_user_data", FN),
])

# Callback types (the function pointer fields are FN; these build thunks).
# void (*)(PJRT_Error* error, void* user_arg)
EVENT_ON_READY_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p,
                                           ctypes.c_void_p)
# void (*)(const char* key, size_t key_size, const char* value,
#          size_t value_size, void* user_arg)
ERROR_PAYLOAD_VISITOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, SIZE,
                                         ctypes.c_void_p, SIZE,
                                         ctypes.c_void_p)
