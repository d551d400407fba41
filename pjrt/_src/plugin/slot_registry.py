"""The table of our PJRT slot implementations, filled by the `implements`
decorator where each slot is defined (slots_*.py); `api` builds the C
function table from it."""

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
