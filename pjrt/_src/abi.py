"""ctypes ABI of the PJRT C API 0.112: one import for the rest of pjrt.

The definitions live in four modules:
  * abi_types: scalar aliases, enums, shared structs (PJRT_NamedValue,
    PJRT_Program, PJRT_Buffer_MemoryLayout, PJRT_ExecuteOptions, ...),
    `struct_size`, `make_args`, `keep_alive`.
  * abi_args: every `PJRT_*_Args` struct, by function name (`args_type`).
  * abi_api: `PJRT_Api`, its slot order, version negotiation (`api_version`,
    `has_slot`, `slot_function`).
  * abi_extensions: the extensions' structs (Shardings) and
    `find_extension`.
"""

# pylint: disable=g-importing-member,unused-import
from pjrt._src.abi_api import API_MAJOR
from pjrt._src.abi_api import API_MINOR
from pjrt._src.abi_api import API_P
from pjrt._src.abi_api import api_version
from pjrt._src.abi_api import FIRST_SLOT_OFFSET
from pjrt._src.abi_api import function_type
from pjrt._src.abi_api import has_slot
from pjrt._src.abi_api import num_slots
from pjrt._src.abi_api import PJRT_Api
from pjrt._src.abi_api import slot_function
from pjrt._src.abi_api import slot_offset
from pjrt._src.abi_api import SLOTS
from pjrt._src.abi_api import VOID_SLOTS
from pjrt._src.abi_args import ARGS
from pjrt._src.abi_args import args_type
from pjrt._src.abi_extensions import extension_function_type
from pjrt._src.abi_extensions import find_extension
from pjrt._src.abi_extensions import LAYOUTS_EXTENSION_VERSION
from pjrt._src.abi_extensions import LAYOUTS_FUNCTIONS
from pjrt._src.abi_extensions import PJRT_Layouts_Extension
from pjrt._src.abi_extensions import PJRT_Shardings_Extension
from pjrt._src.abi_extensions import SHARDINGS_EXTENSION_VERSION
from pjrt._src.abi_extensions import SHARDINGS_FUNCTIONS
from pjrt._src.abi_types import ARGS_HEADER
from pjrt._src.abi_types import BufferType
from pjrt._src.abi_types import ERROR_PAYLOAD_VISITOR
from pjrt._src.abi_types import ErrorCode
from pjrt._src.abi_types import EVENT_ON_READY_CALLBACK
from pjrt._src.abi_types import ExtensionType
from pjrt._src.abi_types import field_names
from pjrt._src.abi_types import HostBufferSemantics
from pjrt._src.abi_types import INT64_P
from pjrt._src.abi_types import keep_alive
from pjrt._src.abi_types import kept_alive
from pjrt._src.abi_types import make_args
from pjrt._src.abi_types import MemoryLayoutType
from pjrt._src.abi_types import NAMED_VALUE_P
from pjrt._src.abi_types import NamedValueType
from pjrt._src.abi_types import PJRT_Api_Version
from pjrt._src.abi_types import PJRT_Buffer_MemoryLayout
from pjrt._src.abi_types import PJRT_Buffer_MemoryLayout_Strides
from pjrt._src.abi_types import PJRT_Buffer_MemoryLayout_Tiled
from pjrt._src.abi_types import PJRT_Chunk
from pjrt._src.abi_types import PJRT_ExecuteOptions
from pjrt._src.abi_types import PJRT_Extension_Base
from pjrt._src.abi_types import PJRT_LoadOptions
from pjrt._src.abi_types import PJRT_LogicalDeviceIds
from pjrt._src.abi_types import PJRT_NamedValue
from pjrt._src.abi_types import PJRT_ProcessInfo
from pjrt._src.abi_types import PJRT_Program
from pjrt._src.abi_types import PJRT_ShapeSpec
from pjrt._src.abi_types import ProcessState
from pjrt._src.abi_types import set_fields
from pjrt._src.abi_types import struct_size
# pylint: enable=g-importing-member,unused-import


def __getattr__(name: str):
  """`abi.PJRT_<Function>_Args` for every args struct of abi_args."""
  if name.startswith("PJRT_") and name.endswith("_Args"):
    try:
      return args_type(name)
    except KeyError:
      pass
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
