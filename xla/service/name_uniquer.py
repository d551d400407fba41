"""Unique names for instructions and computations (xla/service/name_uniquer).

`get_unique_name("add")` returns "add" the first time, then "add.1",
"add.2", ...; a name that already ends in `.<number>` keeps that number if it
is free. Names are first sanitized to HLO's identifier syntax
`[a-zA-Z_][a-zA-Z0-9_.-]*`.
"""

from __future__ import annotations

import re

_INVALID_CHAR = re.compile(r"[^a-zA-Z0-9_.\-]")


def sanitize_name(name: str) -> str:
  """`name` made a valid HLO identifier (invalid characters become '_')."""
  name = _INVALID_CHAR.sub("_", name)
  if not name or not (name[0].isalpha() or name[0] == "_"):
    name = "_" + name
  return name


class _Ids:
  """The ids handed out for one root name."""

  def __init__(self):
    self.used: set[int] = set()
    self.next = 0

  def register(self, wanted: int) -> int:
    if wanted not in self.used:
      self.used.add(wanted)
      return wanted
    while self.next in self.used:
      self.next += 1
    self.used.add(self.next)
    return self.next


class NameUniquer:
  """Hands out names that are unique among those it has handed out."""

  def __init__(self, separator: str = "."):
    self._separator = separator
    self._ids: dict[str, _Ids] = {}

  def get_unique_name(self, prefix: str = "") -> str:
    root = sanitize_name(prefix or "name")
    wanted = 0
    has_suffix = False
    head, sep, tail = root.rpartition(self._separator)
    if sep and head and tail.isdigit() and (tail == "0" or tail[0] != "0"):
      root, wanted, has_suffix = head, int(tail), True
    ids = self._ids.setdefault(root, _Ids())
    got = ids.register(wanted)
    if got == 0 and not has_suffix:
      return root
    return f"{root}{self._separator}{got}"
