"""Native fast paths for the query slots a framework calls on every dispatch.

JAX asks, around every execution, for an executable's replica / partition /
output counts, a buffer's device, memory, deletion state and ready event, a
memory's kind, and whether events are ready; each answer through a ctypes
callback costs microseconds of Python. The answers live in the C-side mirror
record behind every handle (handles.py), so these slots are small LLVM IR
functions that read the record and write the result without the GIL.

A fast path answers only the plain case and hands everything else to the
slot's regular entry (the trampoline into the Python implementation), which
reports errors exactly as before:

  * a NULL args pointer or a struct_size below what the slot needs;
  * a handle outside TABLE's record region, not aligned to a record, or
    whose record's tag is not the expected kind's (NULL, destroyed, of
    another type, or of another table);
  * state that is not known natively: a buffer that is still pending or
    failed (its mirror state is 0), an event other than the shared ready
    event (events.ready_event), an Error_Destroy of a real error.

Records are written by Python before their tag is set and their tag is
cleared before a handle is freed (x86-64 keeps stores in order), and the
state word of a buffer only ever moves to values that are true at once.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Callable

from pjrt._src import abi
from pjrt._src.plugin import handles
from pjrt._src.plugin import native

# Words of the mirror records (handles.py: word 0 is 0, word 1 the tag).
EXECUTABLE_WORDS = ("num_replicas", "num_partitions", "num_outputs")
MEMORY_WORDS = ("kind_address", "kind_size", "device")
DEVICE_WORDS = ("client", "default_memory", "stats")
# A buffer's data address and shape key (`shape_key`) are valid while its
# state is BUFFER_READY; `holds` counts native executions reading it and
# `owner` says who frees it (native_execute.py: a buffer that native code
# made, with the descriptor of the executable that made it and its output
# index, until Python adopts it). `dims` is the address of its dimensions
# (int64[rank], shared by every buffer of that shape: `shape_info`),
# `nbytes` its size, and `external_refs` counts the external references
# of a native-owned buffer (Python's Buffer counts them once it owns it).
BUFFER_WORDS = ("state", "device", "memory", "element_type", "data",
                "shape_key", "holds", "owner", "descriptor", "output",
                "dims", "rank", "nbytes", "external_refs")
# Buffer state word.
BUFFER_UNKNOWN = 0  # pending, failed, or not tracked: ask Python
BUFFER_READY = 1    # data ready, not deleted
BUFFER_DELETED = 2
# Buffer owner word.
OWNER_PYTHON = 0
OWNER_NATIVE = 1

_SHAPES: dict[tuple[int, tuple[int, ...]], tuple[int, int]] = {}
_SHAPE_DIMS: list = []  # Keeps every interned dims array alive.
_SHAPES_LOCK = threading.Lock()


def shape_info(element_type: int, shape: tuple[int, ...]) -> tuple[int, int]:
  """(key, dims address) of (element type, dimensions) in this process:
  the key is a nonzero number that native code compares between a buffer
  and a parameter; the dims are an int64 array that lives forever."""
  key = (int(element_type), shape)
  value = _SHAPES.get(key)
  if value is None:
    with _SHAPES_LOCK:
      value = _SHAPES.get(key)
      if value is None:
        dims = handles.immortal((ctypes.c_int64 * max(1, len(shape)))(*shape))
        _SHAPE_DIMS.append(dims)
        value = _SHAPES[key] = (len(_SHAPES) + 1, ctypes.addressof(dims))
  return value


def shape_key(element_type: int, shape: tuple[int, ...]) -> int:
  return shape_info(element_type, shape)[0]


def word(kind_words: tuple[str, ...], name: str) -> int:
  return 2 + kind_words.index(name)


def _args_type(slot: str):
  """The args struct of a slot, or of an extension function (its field name
  in the extension struct)."""
  found = abi.LAYOUTS_FUNCTIONS.get(slot)
  return found if found is not None else abi.args_type(slot)


def _offset(slot: str, field: str) -> int:
  return getattr(_args_type(slot), field).offset


class _Function:
  """Text of one fast-path function: guards first, then the body."""

  def __init__(self, slot: str, required: int, fallback: int, void: bool):
    self.slot = slot
    self.name = f"fast_{slot}"
    self.void = void
    self.fallback = fallback
    self._n = 0
    self.lines = [
        f"define {'void' if void else 'i64'} @{self.name}(i64 %args) {{",
        "entry:",
        "  %ap = inttoptr i64 %args to ptr",
    ]
    self.slow_unless(self.cmp("ne", "%args", "0"))
    size = self.load("%ap", 0)
    self.slow_unless(self.cmp("uge", size, str(required)))

  def tmp(self) -> str:
    self._n += 1
    return f"%t{self._n}"

  def emit(self, line: str) -> None:
    self.lines.append("  " + line)

  def load(self, base: str, offset: int, width: int = 64) -> str:
    pointer, value = self.tmp(), self.tmp()
    self.emit(f"{pointer} = getelementptr i8, ptr {base}, i64 {offset}")
    self.emit(f"{value} = load i{width}, ptr {pointer}")
    return value

  def store(self, base: str, offset: int, value: str, width: int = 64,
            value_width: int = 64) -> None:
    """Stores `value` (an i<value_width>, or a literal) as i<width>."""
    pointer = self.tmp()
    if width != value_width and not value.lstrip("-").isdigit():
      narrow = self.tmp()
      self.emit(f"{narrow} = trunc i64 {value} to i{width}")
      value = narrow
    self.emit(f"{pointer} = getelementptr i8, ptr {base}, i64 {offset}")
    self.emit(f"store i{width} {value}, ptr {pointer}")

  def cmp(self, op: str, a: str, b: str) -> str:
    result = self.tmp()
    self.emit(f"{result} = icmp {op} i64 {a}, {b}")
    return result

  def slow_unless(self, condition: str) -> None:
    self._n += 1
    label = f"ok{self._n}"
    self.emit(f"br i1 {condition}, label %{label}, label %slow")
    self.lines.append(f"{label}:")

  def record(self, field: str, kind: str, region: tuple[int, int]) -> str:
    """Loads handle `field` and checks it names a live `kind` record;
    returns the record pointer."""
    handle = self.load("%ap", _offset(self.slot, field))
    relative = self.tmp()
    self.emit(f"{relative} = sub i64 {handle}, {region[0]}")
    self.slow_unless(self.cmp("ult", relative, str(region[1] - region[0])))
    misaligned = self.tmp()
    self.emit(f"{misaligned} = and i64 {relative}, "
              f"{handles.RECORD_SIZE - 1}")
    self.slow_unless(self.cmp("eq", misaligned, "0"))
    record = self.tmp()
    self.emit(f"{record} = inttoptr i64 {handle} to ptr")
    tag = self.load(record, 8 * handles.TAG_WORD)
    self.slow_unless(self.cmp("eq", tag, str(handles.tag(kind))))
    return record

  def word(self, record: str, index: int) -> str:
    return self.load(record, 8 * index)

  def finish(self) -> str:
    self.emit("ret void" if self.void else "ret i64 0")
    self.lines.append("slow:")
    self.emit(f"%fallback = inttoptr i64 {self.fallback} to ptr")
    if self.void:
      self.emit("tail call void %fallback(i64 %args)")
      self.emit("ret void")
    else:
      self.emit("%r = tail call i64 %fallback(i64 %args)")
      self.emit("ret i64 %r")
    self.lines.append("}")
    return "\n".join(self.lines)


# slot -> fn(function, region, ready_event): emits the body after the
# struct_size guard.
_BODIES: dict[str, Callable[[_Function, tuple[int, int], int], None]] = {}


def _body(*slots: str):
  def register(fn):
    for slot in slots:
      _BODIES[slot] = fn
    return fn
  return register


def _copy_word(slot: str, handle_field: str, kind: str,
               kind_words: tuple[str, ...],
               outputs: tuple[tuple[str, str], ...]):
  """A body copying record words to output fields [(field, word name)]."""
  def body(f: _Function, region: tuple[int, int], ready: int) -> None:
    del ready
    record = f.record(handle_field, kind, region)
    args_type = _args_type(slot)
    for field, name in outputs:
      value = f.word(record, word(kind_words, name))
      descriptor = getattr(args_type, field)
      f.store("%ap", descriptor.offset, value, 8 * descriptor.size)
  _BODIES[slot] = body


_EXECUTABLE = "PJRT_Executable"
_MEMORY = "PJRT_Memory"
_BUFFER = "PJRT_Buffer"
READY_EVENT_TAG = "PJRT_Event(ready)"

_copy_word("Executable_NumReplicas", "executable", _EXECUTABLE,
           EXECUTABLE_WORDS, (("num_replicas", "num_replicas"),))
_copy_word("Executable_NumPartitions", "executable", _EXECUTABLE,
           EXECUTABLE_WORDS, (("num_partitions", "num_partitions"),))
_copy_word("Executable_NumOutputs", "executable", _EXECUTABLE,
           EXECUTABLE_WORDS, (("num_outputs", "num_outputs"),))
_copy_word("Memory_Kind", "memory", _MEMORY, MEMORY_WORDS,
           (("kind", "kind_address"), ("kind_size", "kind_size")))
_copy_word("Buffer_Device", "buffer", _BUFFER, BUFFER_WORDS,
           (("device", "device"),))
_copy_word("Buffer_Memory", "buffer", _BUFFER, BUFFER_WORDS,
           (("memory", "memory"),))
_copy_word("Buffer_ElementType", "buffer", _BUFFER, BUFFER_WORDS,
           (("type", "element_type"),))


@_body("Buffer_IsDeleted")
def _buffer_is_deleted(f: _Function, region, ready) -> None:
  del ready
  record = f.record("buffer", _BUFFER, region)
  state = f.word(record, word(BUFFER_WORDS, "state"))
  f.slow_unless(f.cmp("ne", state, str(BUFFER_UNKNOWN)))
  deleted = f.cmp("eq", state, str(BUFFER_DELETED))
  byte = f.tmp()
  f.emit(f"{byte} = zext i1 {deleted} to i8")
  f.store("%ap", _offset("Buffer_IsDeleted", "is_deleted"), byte, 8, 8)


@_body("Buffer_ReadyEvent")
def _buffer_ready_event(f: _Function, region, ready) -> None:
  record = f.record("buffer", _BUFFER, region)
  state = f.word(record, word(BUFFER_WORDS, "state"))
  f.slow_unless(f.cmp("eq", state, str(BUFFER_READY)))
  f.store("%ap", _offset("Buffer_ReadyEvent", "event"), str(ready))


def _dims_body(slot: str, dims_field: str):
  """Buffer_Dimensions / UnpaddedDimensions: the interned dims array."""
  def body(f: _Function, region, ready) -> None:
    del ready
    record = f.record("buffer", _BUFFER, region)
    dims = f.word(record, word(BUFFER_WORDS, "dims"))
    f.slow_unless(f.cmp("ne", dims, "0"))
    rank = f.word(record, word(BUFFER_WORDS, "rank"))
    f.store("%ap", _offset(slot, dims_field), dims)
    f.store("%ap", _offset(slot, "num_dims"), rank)
  _BODIES[slot] = body


_dims_body("Buffer_Dimensions", "dims")
_dims_body("Buffer_UnpaddedDimensions", "unpadded_dims")


@_body("Buffer_DynamicDimensionIndices")
def _buffer_dynamic_dims(f: _Function, region, ready) -> None:
  del ready
  f.record("buffer", _BUFFER, region)  # Every dimension is static.
  f.store("%ap", _offset("Buffer_DynamicDimensionIndices",
                         "dynamic_dim_indices"), "0")
  f.store("%ap", _offset("Buffer_DynamicDimensionIndices",
                         "num_dynamic_dims"), "0")


@_body("Buffer_IsOnCpu")
def _buffer_is_on_cpu(f: _Function, region, ready) -> None:
  del ready
  f.record("buffer", _BUFFER, region)
  f.store("%ap", _offset("Buffer_IsOnCpu", "is_on_cpu"), "1", 8)


def _ready_record(f: _Function, region) -> str:
  """The record of a live, ready buffer with its sizes known."""
  record = f.record("buffer", _BUFFER, region)
  state = f.word(record, word(BUFFER_WORDS, "state"))
  f.slow_unless(f.cmp("eq", state, str(BUFFER_READY)))
  dims = f.word(record, word(BUFFER_WORDS, "dims"))
  f.slow_unless(f.cmp("ne", dims, "0"))
  return record


@_body("Buffer_OnDeviceSizeInBytes")
def _buffer_on_device_size(f: _Function, region, ready) -> None:
  del ready
  record = _ready_record(f, region)
  f.store("%ap", _offset("Buffer_OnDeviceSizeInBytes",
                         "on_device_size_in_bytes"),
          f.word(record, word(BUFFER_WORDS, "nbytes")))


def _pointer_body(slot: str, field: str):
  """The data address of a ready buffer (0 for an empty one)."""
  def body(f: _Function, region, ready) -> None:
    del ready
    record = _ready_record(f, region)
    nbytes = f.word(record, word(BUFFER_WORDS, "nbytes"))
    data = f.word(record, word(BUFFER_WORDS, "data"))
    empty = f.cmp("eq", nbytes, "0")
    pointer = f.tmp()
    f.emit(f"{pointer} = select i1 {empty}, i64 0, i64 {data}")
    f.store("%ap", _offset(slot, field), pointer)
  _BODIES[slot] = body


_pointer_body("Buffer_OpaqueDeviceMemoryDataPointer", "device_memory_ptr")
_pointer_body("Buffer_UnsafePointer", "buffer_pointer")


@_body("Event_IsReady")
def _event_is_ready(f: _Function, region, ready) -> None:
  del ready
  f.record("event", READY_EVENT_TAG, region)
  f.store("%ap", _offset("Event_IsReady", "is_ready"), "1", 8)


@_body("Event_Error", "Event_Await", "Event_Destroy")
def _event_ok(f: _Function, region, ready) -> None:
  del ready
  f.record("event", READY_EVENT_TAG, region)  # Complete, no error.


@_body("Event_OnReady")
def _event_on_ready(f: _Function, region, ready) -> None:
  del ready
  f.record("event", READY_EVENT_TAG, region)
  callback = f.load("%ap", _offset("Event_OnReady", "callback"))
  f.slow_unless(f.cmp("ne", callback, "0"))
  user_arg = f.load("%ap", _offset("Event_OnReady", "user_arg"))
  function = f.tmp()
  f.emit(f"{function} = inttoptr i64 {callback} to ptr")
  f.emit(f"call void {function}(i64 0, i64 {user_arg})")


@_body("Error_Destroy")
def _error_destroy(f: _Function, region, ready) -> None:
  del region, ready
  error = f.load("%ap", _offset("Error_Destroy", "error"))
  f.slow_unless(f.cmp("eq", error, "0"))  # NULL: nothing to free.


# -- The Layouts extension (slots_layouts.py) -----------------------------
#
# JAX asks for the layout of every buffer it makes from host data: the
# extension's Buffer_MemoryLayout, MemoryLayout_Serialize and
# MemoryLayout_Destroy. Row-major layouts of small ranks are shared static
# handles whose records hold their serialized text, so all three are
# answered here; anything else goes to Python.

_LAYOUT = "PJRT_Layouts_MemoryLayout"
LAYOUT_WORDS = ("static", "text", "text_size")  # as slots_layouts writes them
_EXTENSION_BODIES: dict[str, Callable[..., None]] = {}
_LAYOUTS_BY_RANK = "@layouts_by_rank"
_KEEP_TEXT = "@layout_text_kept"  # the serialized text's no-op deleter


def _extension_body(name: str):
  def register(fn):
    _EXTENSION_BODIES[name] = fn
    return fn
  return register


@_extension_body("PJRT_Layouts_PJRT_Buffer_MemoryLayout")
def _buffer_memory_layout(f: _Function, region, static: list[int]) -> None:
  slot = "PJRT_Layouts_PJRT_Buffer_MemoryLayout"
  record = f.record("buffer", _BUFFER, region)
  dims = f.word(record, word(BUFFER_WORDS, "dims"))
  f.slow_unless(f.cmp("ne", dims, "0"))  # its shape is known
  rank = f.word(record, word(BUFFER_WORDS, "rank"))
  f.slow_unless(f.cmp("ult", rank, str(len(static))))
  pointer, layout = f.tmp(), f.tmp()
  f.emit(f"{pointer} = getelementptr [{len(static)} x i64], ptr "
         f"{_LAYOUTS_BY_RANK}, i64 0, i64 {rank}")
  f.emit(f"{layout} = load i64, ptr {pointer}")
  f.store("%ap", _offset(slot, "layout"), layout)


@_extension_body("PJRT_Layouts_MemoryLayout_Serialize")
def _layout_serialize(f: _Function, region, static: list[int]) -> None:
  del static
  slot = "PJRT_Layouts_MemoryLayout_Serialize"
  record = f.record("layout", _LAYOUT, region)
  is_static = f.word(record, word(LAYOUT_WORDS, "static"))
  f.slow_unless(f.cmp("eq", is_static, "1"))
  f.store("%ap", _offset(slot, "serialized_bytes"),
          f.word(record, word(LAYOUT_WORDS, "text")))
  f.store("%ap", _offset(slot, "serialized_bytes_size"),
          f.word(record, word(LAYOUT_WORDS, "text_size")))
  # The text lives as long as the layout, which is never freed: the
  # deleter does nothing.
  f.store("%ap", _offset(slot, "serialized_layout"),
          f.load("%ap", _offset(slot, "layout")))
  deleter = f.tmp()
  f.emit(f"{deleter} = ptrtoint ptr {_KEEP_TEXT} to i64")
  f.store("%ap", _offset(slot, "serialized_layout_deleter"), deleter)


@_extension_body("PJRT_Layouts_MemoryLayout_Destroy")
def _layout_destroy(f: _Function, region, static: list[int]) -> None:
  del static
  record = f.record("layout", _LAYOUT, region)
  is_static = f.word(record, word(LAYOUT_WORDS, "static"))
  f.slow_unless(f.cmp("eq", is_static, "1"))  # a shared layout stays


def build_extension(fallbacks: dict[str, int], required: dict[str, int],
                    region: tuple[int, int],
                    static_layouts: list[int]) -> dict[str, int]:
  """Compiles the fast paths of the Layouts extension's functions named in
  `fallbacks` (name -> address of its regular entry); `static_layouts`:
  the shared row-major layout handles, by rank. Returns name -> address."""
  prelude = [
      f"{_LAYOUTS_BY_RANK} = private unnamed_addr constant "
      f"[{len(static_layouts)} x i64] ["
      + ", ".join(f"i64 {h}" for h in static_layouts) + "]",
      f"define void {_KEEP_TEXT}(ptr %s) {{\nentry:\n  ret void\n}}",
  ]
  return _compile(_EXTENSION_BODIES, fallbacks, required, (), region,
                  static_layouts, prelude)


def slots() -> list[str]:
  """The slots that have a native fast path."""
  return sorted(_BODIES)


def _compile(bodies: dict, fallbacks: dict[str, int],
             required: dict[str, int], void_slots, region: tuple[int, int],
             context, prelude: list[str] = ()) -> dict[str, int]:
  """Compiles the fast paths of `bodies` (name -> body) that have a
  fallback, after the module-level lines `prelude`; each body gets
  `context`. Returns name -> address."""
  texts = list(prelude)
  names = []
  for name, body in sorted(bodies.items()):
    if name not in fallbacks:
      continue
    f = _Function(name, max(required.get(name, 0), 16), fallbacks[name],
                  name in void_slots)
    body(f, region, context)
    texts.append(f.finish())
    names.append((name, f.name))
  if not names:
    return {}
  addresses = native.compile_ir("\n\n".join(texts), [n for _, n in names])
  return {name: addresses[fn] for name, fn in names}


def build(fallbacks: dict[str, int], required: dict[str, int],
          void_slots: frozenset[str] | set[str], region: tuple[int, int],
          ready_event: int) -> dict[str, int]:
  """Compiles the fast paths; returns slot -> address.

  Args:
    fallbacks: slot -> address of its regular entry.
    required: slot -> the struct_size its implementation needs.
    void_slots: slots that return nothing.
    region: [start, end) of the records native code may read.
    ready_event: the shared ready PJRT_Event* (events.ready_event()).
  """
  return _compile(_BODIES, fallbacks, required, void_slots, region,
                  ready_event)
