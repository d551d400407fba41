"""Reading and writing C data inside callbacks.

Inputs (strings with sizes, int arrays, named values) are copied into Python
objects at once, since the caller owns them only for the call. Outputs the
plugin hands back either live as long as an object (`runtime.CStrings`) or,
for "serialized bytes + deleter" outputs, in `OWNED` until the caller calls
the deleter we return (`deleter_address()`).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import support
from pjrt._src import abi
from pjrt._src import loader
from pjrt._src.plugin import native


def string(pointer: int | None, size: int) -> str:
  """`size` bytes at `pointer` as UTF-8 (NULL or 0 -> "")."""
  if not size:
    return ""
  if not pointer:
    raise support.InvalidArgumentError(f"NULL string of size {size}")
  return ctypes.string_at(pointer, size).decode("utf-8", errors="replace")


def raw_bytes(pointer: int | None, size: int) -> bytes:
  if not size:
    return b""
  if not pointer:
    raise support.InvalidArgumentError(f"NULL data of size {size}")
  return ctypes.string_at(pointer, size)


def int64s(pointer: Any, count: int, what: str) -> tuple[int, ...]:
  """`count` int64s from a typed pointer (NULL allowed when count is 0)."""
  if not count:
    return ()
  if not pointer:
    raise support.InvalidArgumentError(f"{what} is NULL but has {count} "
                                       "entries")
  return tuple(int(pointer[i]) for i in range(count))


def dims(pointer: Any, count: int, what: str = "dims") -> tuple[int, ...]:
  values = int64s(pointer, count, what)
  if any(d < 0 for d in values):
    raise support.InvalidArgumentError(
        f"{what} {list(values)} has a negative dimension")
  return values


def named_values(pointer: Any, count: int) -> dict[str, Any]:
  """PJRT_NamedValue[count] -> dict (INVALID_ARGUMENT on bad entries)."""
  if not count:
    return {}
  if not pointer:
    raise support.InvalidArgumentError(
        f"named values pointer is NULL but count is {count}")
  for i in range(count):
    size = pointer[i].struct_size
    if size < abi.PJRT_NamedValue.STRUCT_SIZE:
      raise support.InvalidArgumentError(
          f"PJRT_NamedValue[{i}].struct_size is {size}, expected at least "
          f"{abi.PJRT_NamedValue.STRUCT_SIZE}")
  return loader.decode_named_values(pointer, count)


def named_value_array(values: dict[str, Any]) -> Any:
  """A C array of PJRT_NamedValue for `values` (keeps its data alive)."""
  array = loader.encode_named_values(values)
  if array is None:
    array = (abi.PJRT_NamedValue * 1)()
    abi.keep_alive(array)
  return array


# --------------------------------------------------------------------------
# Outputs released by a caller-invoked deleter.

OWNED: dict[int, Any] = {}
_owned_lock = threading.Lock()


def give(data: bytes) -> tuple[int, int, int]:
  """Copies `data` into C memory the caller frees with the deleter.

  Returns (data address, size, opaque handle for the deleter).
  """
  buf = ctypes.create_string_buffer(bytes(data), len(data) + 1)
  address = ctypes.addressof(buf)
  with _owned_lock:
    OWNED[address] = buf
  return address, len(data), address


def _release(handle) -> None:
  try:
    with _owned_lock:
      OWNED.pop(handle, None)
  except BaseException:  # pylint: disable=broad-except
    pass


native.register("cabi.deleter",
                ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_release), "p>v")


def deleter_address() -> int:
  """The deleter function handed out with `give` / `keep` outputs."""
  return native.address("cabi.deleter")


def keep(handle: int, obj: Any) -> None:
  """Keeps `obj` alive until the deleter is called with `handle`."""
  with _owned_lock:
    OWNED[handle] = obj
