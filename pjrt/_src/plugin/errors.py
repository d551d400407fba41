"""PJRT_Error objects of our plugin, and exceptions -> PJRT error codes.

A `PJRT_Error*` we return is a handle (see handles.py) whose slot holds a
pointer to our `PJRT_Error_FunctionTable`, as the header's `PJRT_Error`
struct declares, so a caller may use either the API functions
(`PJRT_Error_Message`, ...) or the vtable. The record behind it keeps the
message bytes alive until `PJRT_Error_Destroy`.

Every callback catches every exception and returns it as an error (a Python
exception must never unwind into C): `support` errors keep their code,
`MemoryError` is RESOURCE_EXHAUSTED, `RecursionError` INVALID_ARGUMENT
(a program nested too deeply), and anything else is a bug of ours,
reported as INTERNAL with the exception's type and place.
"""

from __future__ import annotations

import ctypes
import dataclasses

import support
from pjrt._src import abi_types
from pjrt._src.plugin import handles
from pjrt._src.plugin import native

KIND = "PJRT_Error"


@dataclasses.dataclass
class ErrorRecord:
  """What a PJRT_Error holds: its code and message (kept as C bytes)."""

  code: int
  message: str
  c_message: ctypes.Array = dataclasses.field(init=False, repr=False)

  def __post_init__(self):
    data = self.message.encode("utf-8", errors="replace")
    self.c_message = ctypes.create_string_buffer(data, len(data) + 1)
    self.size = len(data)

  @property
  def message_address(self) -> int:
    return ctypes.addressof(self.c_message)


def status_of(exc: BaseException) -> tuple[int, str]:
  """(PJRT error code, message) for an exception raised in the plugin."""
  if isinstance(exc, support.XlaError):
    code = int(exc.code)
    if code == support.StatusCode.OK:
      code = support.StatusCode.UNKNOWN
    return code, str(exc) or type(exc).__name__
  if isinstance(exc, MemoryError):
    return support.StatusCode.RESOURCE_EXHAUSTED, f"out of memory: {exc}"
  if isinstance(exc, RecursionError):
    return (support.StatusCode.INVALID_ARGUMENT,
            f"input nested too deeply: {exc}")
  where = ""
  tb = exc.__traceback__
  while tb is not None and tb.tb_next is not None:
    tb = tb.tb_next
  if tb is not None:
    filename = tb.tb_frame.f_code.co_filename.rsplit("/", 1)[-1]
    where = f" at {filename}:{tb.tb_lineno}"
  return (support.StatusCode.INTERNAL,
          f"internal error in the openxla_cpu plugin: "
          f"{type(exc).__name__}: {exc}{where}")


def new_error(code: int, message: str) -> int:
  """A new PJRT_Error* with `code` and `message` (caller must destroy it)."""
  record = ErrorRecord(int(code), message)
  address = handles.TABLE.add(KIND, record)
  ctypes.c_void_p.from_address(address).value = _vtable_address()
  return address


_PERMANENT: set[int] = set()
# Returned when reporting an error itself fails (set by api.get_api).
FALLBACK: int | None = None


def new_permanent_error(code: int, message: str) -> int:
  """An error that PJRT_Error_Destroy never frees (returned many times)."""
  address = new_error(code, message)
  _PERMANENT.add(address)
  return address


def from_exception(exc: BaseException) -> int:
  return new_error(*status_of(exc))


def get(address: int) -> ErrorRecord:
  return handles.TABLE.get(address, KIND)


def destroy(address: int) -> None:
  """Frees a PJRT_Error; NULL and unknown addresses are ignored (void API)."""
  if not address or address in _PERMANENT:
    return
  try:
    handles.TABLE.remove(address, KIND)
  except support.XlaError:
    pass


# -- The vtable (PJRT_Error_FunctionTable). ----------------------------------

_DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_MESSAGE = ctypes.CFUNCTYPE(None, ctypes.c_void_p,
                            ctypes.POINTER(ctypes.c_void_p),
                            ctypes.POINTER(ctypes.c_size_t))
_GET_CODE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_FOR_EACH_PAYLOAD = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_void_p)


def _vtable_destroy(address):
  try:
    destroy(address)
  except BaseException:  # pylint: disable=broad-except
    pass


def _vtable_message(address, message_out, size_out):
  try:
    record = get(address)
    message_out[0] = record.message_address
    size_out[0] = record.size
  except BaseException:  # pylint: disable=broad-except
    pass


def _vtable_get_code(address):
  try:
    return get(address).code
  except BaseException:  # pylint: disable=broad-except
    return support.StatusCode.UNKNOWN


def _vtable_for_each_payload(address, visitor, user_arg):
  del address, visitor, user_arg  # Our errors carry no payloads.


# After shutdown (native.close_gate) every error reads as the refusal.
_ENTRIES = (("destroy", _DESTROY(_vtable_destroy), "p>v", native.NO_RESULT),
            ("message", _MESSAGE(_vtable_message), "ppp>v",
             native.Refusal(stores=((1, 0, 64, "message"),
                                    (2, 0, 64, "message_size")))),
            ("get_code", _GET_CODE(_vtable_get_code), "p>i",
             native.Refusal(result=("code", 0, None))),
            ("for_each_payload", _FOR_EACH_PAYLOAD(_vtable_for_each_payload),
             "ppp>v", native.NO_RESULT))
for _name, _thunk, _signature, _refusal in _ENTRIES:
  native.register("error." + _name, _thunk, _signature, _refusal)
del _name, _thunk, _signature, _refusal

_VTABLE = handles.immortal(abi_types.PJRT_Error_FunctionTable())
_vtable_ready = False


def _vtable_address() -> int:
  """The PJRT_Error_FunctionTable every error points to (filled once)."""
  global _vtable_ready
  if not _vtable_ready:
    _VTABLE.struct_size = abi_types.PJRT_Error_FunctionTable.STRUCT_SIZE
    _VTABLE.instance_size = handles.SLOT_SIZE
    for name, _, _, _ in _ENTRIES:
      setattr(_VTABLE, name, native.address("error." + name))
    _vtable_ready = True
  return ctypes.addressof(_VTABLE)
