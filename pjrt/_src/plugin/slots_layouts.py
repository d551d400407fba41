"""The Layouts extension: memory layouts of buffers, of a client's default
layout for a shape, and of an executable's parameters and outputs.

Every array of this plugin is dense row-major (minor_to_major n-1, ..., 0),
as the core PJRT_Buffer_GetMemoryLayout slot reports. JAX asks each
executable it compiles for its parameter and output layouts; without this
extension jaxlib derives them from the optimized program instead
(PJRT_Executable_OptimizedProgram), which it parses and converts to HLO:
35-385 ms per compile on the programs of the workload suite, more than the
rest of some compiles.

A PJRT_Layouts_MemoryLayout is a handle of kind MEMORY_LAYOUT. Row-major
layouts of rank up to STATIC_RANKS are shared handles that are never freed
(MemoryLayout_Destroy leaves them alone), so the calls JAX makes for every
buffer it creates (Buffer_MemoryLayout, MemoryLayout_Serialize,
MemoryLayout_Destroy) have native fast paths (native_slots.py); others are
kept by their executable, or belong to the caller, who destroys them. A
layout serializes to XLA's layout text, `{1,0}`, which is what jaxlib's
PjRtLayout::Deserialize parses.
"""

from __future__ import annotations

import ctypes
import dataclasses
import weakref
from typing import Any

import support
from pjrt._src import abi
from pjrt._src.plugin import cabi
from pjrt._src.plugin import handles
from pjrt._src.plugin.slot_registry import implements_extension
from pjrt._src.plugin.slots_buffer import buffer_of
from pjrt._src.plugin.slots_client import client_of
from pjrt._src.plugin.slots_client import topology_of
from pjrt._src.plugin.slots_executable import executable_of

MEMORY_LAYOUT = "PJRT_Layouts_MemoryLayout"


@dataclasses.dataclass(frozen=True)
class MemoryLayout:
  minor_to_major: tuple[int, ...]
  # Made for an executable, which keeps it: not the caller's to destroy.
  owned_by_executable: bool = False
  # One of the shared row-major layouts of rank <= STATIC_RANKS (`static`):
  # never freed, and its serialized text lives as long as it.
  static: bool = False

  def serialize(self) -> bytes:
    """The layout as jaxlib's PjRtLayout::Deserialize reads it: XLA's
    layout text, `{1,0}` (dense, no tiling)."""
    return ("{" + ",".join(str(d) for d in self.minor_to_major) +
            "}").encode()


def row_major(rank: int) -> tuple[int, ...]:
  return tuple(range(rank - 1, -1, -1))


# Mirror words of a layout's handle (handles.py), which the native fast
# paths (native_slots.py) read: whether it is static, and the address and
# size of its serialized text (static layouts only).
LAYOUT_WORDS = ("static", "text", "text_size")
_TEXTS: dict[int, Any] = {}  # static layout handle -> its text buffer


def _layout_mirror(layout: MemoryLayout) -> tuple[int, ...]:
  if not layout.static:
    return (0, 0, 0)
  text = layout.serialize()
  buffer = handles.immortal(ctypes.create_string_buffer(text, len(text) + 1))
  return (1, ctypes.addressof(buffer), len(text))


handles.register_mirror(MEMORY_LAYOUT, _layout_mirror)

# Ranks whose row-major layout is one shared handle: JAX asks for the
# layout of every buffer it makes from host data, and a handle made and
# destroyed per buffer cost four calls into Python each time.
STATIC_RANKS = 16
_STATIC: list[int] = []


def static_layouts() -> list[int]:
  """The shared layout handles, by rank (made on first use)."""
  if not _STATIC:
    _STATIC.extend(handles.TABLE.add(
        MEMORY_LAYOUT, MemoryLayout(row_major(r), static=True))
                   for r in range(STATIC_RANKS + 1))
  return _STATIC


def _row_major_handle(rank: int, owned_by_executable: bool = False) -> int:
  if rank <= STATIC_RANKS:
    return static_layouts()[rank]
  return handles.TABLE.add(MEMORY_LAYOUT,
                           MemoryLayout(row_major(rank), owned_by_executable))


def _new_handle(minor_to_major: tuple[int, ...]) -> int:
  if minor_to_major == row_major(len(minor_to_major)):
    return _row_major_handle(len(minor_to_major))
  return handles.TABLE.add(MEMORY_LAYOUT, MemoryLayout(minor_to_major))


def _layout_of(address) -> MemoryLayout:
  return handles.TABLE.get(address, MEMORY_LAYOUT)


@implements_extension(
    "PJRT_Layouts_MemoryLayout_Destroy",
    abi.LAYOUTS_FUNCTIONS["PJRT_Layouts_MemoryLayout_Destroy"])
def _destroy(args):
  if not args.layout:
    return
  layout = _layout_of(args.layout)
  if layout.owned_by_executable or layout.static:
    return
  handles.TABLE.remove(args.layout, MEMORY_LAYOUT)


@implements_extension(
    "PJRT_Layouts_MemoryLayout_Serialize",
    abi.LAYOUTS_FUNCTIONS["PJRT_Layouts_MemoryLayout_Serialize"])
def _serialize(args):
  address, size, handle = cabi.give(_layout_of(args.layout).serialize())
  args.serialized_bytes, args.serialized_bytes_size = address, size
  args.serialized_layout = handle
  args.serialized_layout_deleter = cabi.deleter_address()


def _default_layout(args, what: str) -> None:
  rank = args.num_dims
  cabi.dims(args.dims, rank, what)  # checks the pointer and the sizes
  args.layout = _row_major_handle(rank)


@implements_extension(
    "PJRT_Layouts_PJRT_Client_GetDefaultLayout",
    abi.LAYOUTS_FUNCTIONS["PJRT_Layouts_PJRT_Client_GetDefaultLayout"])
def _client_default_layout(args):
  client_of(args.client)
  _default_layout(args, "dims")


@implements_extension(
    "PJRT_Layouts_PJRT_Topology_GetDefaultLayout",
    abi.LAYOUTS_FUNCTIONS["PJRT_Layouts_PJRT_Topology_GetDefaultLayout"])
def _topology_default_layout(args):
  topology_of(args.topology_description)
  _default_layout(args, "dims")


@implements_extension(
    "PJRT_Layouts_PJRT_Buffer_MemoryLayout",
    abi.LAYOUTS_FUNCTIONS["PJRT_Layouts_PJRT_Buffer_MemoryLayout"])
def _buffer_layout(args):
  args.layout = _new_handle(tuple(buffer_of(args.buffer).minor_to_major))


def _remove_all(addresses: list[int]) -> None:
  for address in addresses:
    try:
      handles.TABLE.remove(address, MEMORY_LAYOUT)
    except support.XlaError:
      pass


def _executable_layouts(executable, which: str) -> tuple[Any, int]:
  """(address of the layout handle array, count) of the executable's
  parameters or outputs, made once and kept by the executable."""

  def make():
    signature = executable.compiled.per_device_signature()
    if signature is None:
      parameters = executable.parameter_types
      results = [(s.element_type, s.shape) for s in executable.result_specs]
    else:
      parameters, results = signature
    shapes = [shape for _, shape in
              (parameters if which == "parameters" else results)]
    layouts = [_row_major_handle(len(shape), True) for shape in shapes]
    # Handles of its own (ranks beyond the shared ones) go with it.
    own = [h for h in layouts if h not in static_layouts()]
    if own:
      weakref.finalize(executable, _remove_all, own)
    array = (ctypes.c_void_p * max(1, len(layouts)))(*layouts)
    return array, len(layouts)

  array, count = executable.c.get(f"{which}_layouts", make)
  return ctypes.addressof(array), count


@implements_extension(
    "PJRT_Layouts_PJRT_Executable_GetOutputLayouts",
    abi.LAYOUTS_FUNCTIONS["PJRT_Layouts_PJRT_Executable_GetOutputLayouts"])
def _executable_output_layouts(args):
  args.layouts, args.num_outputs = _executable_layouts(
      executable_of(args.executable), "outputs")


@implements_extension(
    "PJRT_Layouts_PJRT_Executable_GetParameterLayouts",
    abi.LAYOUTS_FUNCTIONS[
        "PJRT_Layouts_PJRT_Executable_GetParameterLayouts"])
def _executable_parameter_layouts(args):
  args.layouts, args.num_parameters = _executable_layouts(
      executable_of(args.executable), "parameters")
