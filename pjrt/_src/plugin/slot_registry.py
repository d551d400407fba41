"""The table of our PJRT slot implementations, filled by the `implements`
decorator where each slot is defined (slots_*.py); `api` builds the C
function table from it. Functions of the PJRT extensions the plugin
offers register the same way, with `implements_extension`."""

from __future__ import annotations

from typing import Any, Callable

from pjrt._src import abi

# name -> (implementation, minimum struct_size)
IMPLEMENTATIONS: dict[str, tuple[Callable[[Any], None], int]] = {}


def implements(name: str, *, last_field: str | None = None):
  """Registers the decorated `fn(args)` as the implementation of slot `name`.

  Args:
    name: the slot, e.g. "Client_Create".
    last_field: the last field the implementation reads or writes; callers
      may pass a struct that ends there (fields appended later in the header
      are then treated as absent). Default: the struct's last field.
  """
  args_type = abi.args_type(name)
  if last_field is None:
    required = args_type.STRUCT_SIZE
  else:
    field = getattr(args_type, last_field)
    required = field.offset + field.size

  def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    if name in IMPLEMENTATIONS:
      raise ValueError(f"PJRT_{name} is implemented twice")
    IMPLEMENTATIONS[name] = (fn, required)
    return fn

  return register


# Extension function (its field in the extension struct, e.g.
# "PJRT_Shardings_PJRT_Executable_ParameterShardings") -> (implementation,
# minimum struct_size, args struct).
EXTENSION_IMPLEMENTATIONS: dict[str, tuple[Callable[[Any], None], int,
                                           Any]] = {}


def implements_extension(name: str, args_type: Any):
  """Registers the decorated `fn(args)` as extension function `name`, whose
  arguments are the ctypes struct `args_type` (read whole)."""

  def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
    if name in EXTENSION_IMPLEMENTATIONS:
      raise ValueError(f"{name} is implemented twice")
    EXTENSION_IMPLEMENTATIONS[name] = (fn, args_type.STRUCT_SIZE, args_type)
    return fn

  return register
