"""ctypes ABI of the PJRT extensions this package knows.

A plugin lists its extensions in a chain that starts at its PJRT_Api's
`extension_start`: each extension struct begins with a PJRT_Extension_Base
(`struct_size`, `type`, `next`), followed by its function pointers.

Shardings (type 19, xla/pjrt/c/pjrt_c_api_shardings_extension.h, version
1): the parameter and output shardings of a compiled PJRT_Executable, as
arrays of serialized `xla.OpSharding` protos owned by the executable.

Layouts (type 4, xla/pjrt/c/pjrt_c_api_layouts_extension.h, version 4):
opaque PJRT_Layouts_MemoryLayout objects for a buffer, a client's or a
topology's default layout of a shape, and the parameters and outputs of an
executable (those owned by the executable, the others freed with
MemoryLayout_Destroy); a layout serializes to XLA's layout text
(`{1,0}`).
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

from pjrt._src.abi_types import define_args
from pjrt._src.abi_types import define_struct
from pjrt._src.abi_types import ExtensionType
from pjrt._src.abi_types import ENUM
from pjrt._src.abi_types import FN
from pjrt._src.abi_types import INT64_P
from pjrt._src.abi_types import PJRT_Extension_Base
from pjrt._src.abi_types import PTR
from pjrt._src.abi_types import SIZE

SHARDINGS_EXTENSION_VERSION = 1

PJRT_Shardings_PJRT_Executable_ParameterShardings_Args = define_args(
    "PJRT_Shardings_PJRT_Executable_ParameterShardings_Args", [
        ("executable", PTR),
        ("num_parameters", SIZE),  # out
        ("shardings", PTR),  # out: const char* const*
        ("sharding_sizes", PTR),  # out: const size_t*
    ])

PJRT_Shardings_PJRT_Executable_OutputShardings_Args = define_args(
    "PJRT_Shardings_PJRT_Executable_OutputShardings_Args", [
        ("executable", PTR),
        ("num_outputs", SIZE),  # out
        ("shardings", PTR),  # out: const char* const*
        ("sharding_sizes", PTR),  # out: const size_t*
    ])

PJRT_Shardings_Extension = define_struct("PJRT_Shardings_Extension", [
    ("base", PJRT_Extension_Base),
    ("PJRT_Shardings_PJRT_Executable_ParameterShardings", FN),
    ("PJRT_Shardings_PJRT_Executable_OutputShardings", FN),
])

# Function name (the extension struct's field) -> its args struct.
SHARDINGS_FUNCTIONS = {
    "PJRT_Shardings_PJRT_Executable_ParameterShardings":
        PJRT_Shardings_PJRT_Executable_ParameterShardings_Args,
    "PJRT_Shardings_PJRT_Executable_OutputShardings":
        PJRT_Shardings_PJRT_Executable_OutputShardings_Args,
}


LAYOUTS_EXTENSION_VERSION = 4

PJRT_Layouts_MemoryLayout_Destroy_Args = define_args(
    "PJRT_Layouts_MemoryLayout_Destroy_Args", [("layout", PTR)])

PJRT_Layouts_MemoryLayout_Serialize_Args = define_args(
    "PJRT_Layouts_MemoryLayout_Serialize_Args", [
        ("layout", PTR),
        ("serialized_bytes", PTR),  # out
        ("serialized_bytes_size", SIZE),  # out
        ("serialized_layout", PTR),  # out
        ("serialized_layout_deleter", FN),  # out
    ])

PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args = define_args(
    "PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args", [
        ("client", PTR),
        ("type", ENUM),
        ("dims", INT64_P),
        ("num_dims", SIZE),
        ("layout", PTR),  # out
    ])

PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args = define_args(
    "PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args", [
        ("buffer", PTR),
        ("layout", PTR),  # out
    ])

PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args = define_args(
    "PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args", [
        ("topology_description", PTR),
        ("type", ENUM),
        ("dims", INT64_P),
        ("num_dims", SIZE),
        ("layout", PTR),  # out
    ])

PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args = define_args(
    "PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args", [
        ("executable", PTR),
        ("num_outputs", SIZE),  # out
        ("layouts", PTR),  # out: PJRT_Layouts_MemoryLayout**
    ])

PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args = define_args(
    "PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args", [
        ("executable", PTR),
        ("num_parameters", SIZE),  # out
        ("layouts", PTR),  # out: PJRT_Layouts_MemoryLayout**
    ])

# Function name (the extension struct's field, in header order) -> its
# args struct.
LAYOUTS_FUNCTIONS = {
    "PJRT_Layouts_MemoryLayout_Destroy":
        PJRT_Layouts_MemoryLayout_Destroy_Args,
    "PJRT_Layouts_MemoryLayout_Serialize":
        PJRT_Layouts_MemoryLayout_Serialize_Args,
    "PJRT_Layouts_PJRT_Client_GetDefaultLayout":
        PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args,
    "PJRT_Layouts_PJRT_Buffer_MemoryLayout":
        PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args,
    "PJRT_Layouts_PJRT_Topology_GetDefaultLayout":
        PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args,
    "PJRT_Layouts_PJRT_Executable_GetOutputLayouts":
        PJRT_Layouts_PJRT_Executable_GetOutputLayouts_Args,
    "PJRT_Layouts_PJRT_Executable_GetParameterLayouts":
        PJRT_Layouts_PJRT_Executable_GetParameterLayouts_Args,
}

PJRT_Layouts_Extension = define_struct(
    "PJRT_Layouts_Extension",
    [("base", PJRT_Extension_Base)] + [(name, FN)
                                       for name in LAYOUTS_FUNCTIONS])


def extension_function_type(args_type: Any) -> Any:
  """`PJRT_Error* f(Args*)` for an extension function's args struct."""
  return ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(args_type))


def find_extension(api: Any, kind: ExtensionType) -> Optional[int]:
  """The address of the first extension of type `kind` in the chain of
  PJRT_Api `api`, or None."""
  address = api.extension_start
  seen = 0
  while address and seen < 64:
    base = PJRT_Extension_Base.from_address(address)
    if base.type == int(kind):
      return address
    address = base.next
    seen += 1
  return None
