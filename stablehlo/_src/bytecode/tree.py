"""The generic in-memory form of an MLIR bytecode file.

Attributes and types are immutable values compared by content, as MLIR
uniques them: `Attr`/`Type` carry a dialect, a kind name from that dialect's
codec (`codec.py`) and the decoded fields (ints, strings, bytes, nested
`Attr`/`Type`, tuples of those). Entries a codec cannot decode stay
`OpaqueAttr`/`OpaqueType` (dialect + raw bytes), entries written in textual
form are `AsmAttr`/`AsmType`.

Operations, blocks and values are mutable objects with identity. Each
`Value` is numbered (`Value.id`) in definition order by the reader. Nothing
here depends on `stablehlo._src.ir`; the VHLO <-> StableHLO conversion builds
on this tree.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union


class _Uniqued:
  """Hashing and equality of an `Attr` / `Type` by content, as MLIR uniques
  them, with the hash computed once: the writer keys its numbering tables
  by entries, and a nested entry would otherwise rehash its whole tree on
  every lookup. The cached hash is not pickled (string hashes differ
  between processes)."""

  def __init__(self, dialect: str, kind: str, fields: tuple = ()):
    # Stores the fields directly: the frozen dataclass __init__ goes
    # through object.__setattr__ per field, and readers make one entry per
    # attribute / type they decode.
    d = self.__dict__
    d["dialect"] = dialect
    d["kind"] = kind
    d["fields"] = fields

  def __hash__(self):
    try:
      return self._hash
    except AttributeError:
      h = self.__dict__["_hash"] = hash((self.dialect, self.kind,
                                         self.fields))
      return h

  def __eq__(self, other):
    if self is other:
      return True
    if other.__class__ is not self.__class__:
      return NotImplemented
    return (hash(self) == hash(other) and self.kind == other.kind and
            self.dialect == other.dialect and self.fields == other.fields)

  def __getstate__(self):
    state = dict(self.__dict__)
    state.pop("_hash", None)
    return state


@dataclasses.dataclass(frozen=True)
class Attr(_Uniqued):
  """An attribute with a dialect encoding: `dialect`.`kind` + fields."""
  dialect: str
  kind: str
  fields: tuple = ()

  __hash__ = _Uniqued.__hash__
  __eq__ = _Uniqued.__eq__
  __init__ = _Uniqued.__init__

  def __repr__(self):
    return f"Attr({self.dialect}.{self.kind}{self.fields!r})"


@dataclasses.dataclass(frozen=True)
class Type(_Uniqued):
  """A type with a dialect encoding: `dialect`.`kind` + fields."""
  dialect: str
  kind: str
  fields: tuple = ()

  __hash__ = _Uniqued.__hash__
  __eq__ = _Uniqued.__eq__
  __init__ = _Uniqued.__init__

  def __repr__(self):
    return f"Type({self.dialect}.{self.kind}{self.fields!r})"


@dataclasses.dataclass(frozen=True)
class AsmAttr:
  """An attribute stored in its textual assembly form."""
  dialect: str
  text: bytes


@dataclasses.dataclass(frozen=True)
class AsmType:
  """A type stored in its textual assembly form."""
  dialect: str
  text: bytes


@dataclasses.dataclass(frozen=True)
class OpaqueAttr:
  """A custom-encoded attribute of a dialect without a codec (raw bytes).

  Its bytes may hold attribute/type indices of the file it came from, so it
  only round-trips when the numbering does not change.
  """
  dialect: str
  data: bytes


@dataclasses.dataclass(frozen=True)
class OpaqueType:
  dialect: str
  data: bytes


AnyAttr = Union[Attr, AsmAttr, OpaqueAttr]
AnyType = Union[Type, AsmType, OpaqueType]


@dataclasses.dataclass(frozen=True)
class ResourceHandle:
  """A reference to a dialect resource (`dialect`, `key`)."""
  dialect: str
  key: str


@dataclasses.dataclass(frozen=True)
class Properties:
  """An op's native properties (bytecode >= 5) as attribute references.

  `kinds[i]` is "attr" (a required reference) or "opt_attr" (optional,
  `values[i]` may be None); this matches ODS-generated `writeProperties`.
  """
  kinds: tuple
  values: tuple

  def __init__(self, kinds: tuple, values: tuple):
    # As _Uniqued: serializing makes one per op with properties.
    d = self.__dict__
    d["kinds"] = kinds
    d["values"] = values


@dataclasses.dataclass(frozen=True)
class RawProperties:
  """Properties of an op whose encoding no codec knows: raw bytes."""
  data: bytes


class Value:
  """An SSA value: an op result or a block argument."""

  __slots__ = ("type", "id", "loc")

  def __init__(self, type_: AnyType, id_: int = -1, loc: Optional[AnyAttr] = None):
    self.type = type_
    self.id = id_
    self.loc = loc  # Block arguments only.

  def __repr__(self):
    return f"Value(%{self.id})"


@dataclasses.dataclass(eq=False)
class Block:
  args: list = dataclasses.field(default_factory=list)  # list[Value]
  ops: list = dataclasses.field(default_factory=list)  # list[Op]
  # Use-list order records of the arguments, as read: list of
  # (arg index, is_index_pair, list of ints).
  use_list_orders: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class Region:
  blocks: list = dataclasses.field(default_factory=list)  # list[Block]


@dataclasses.dataclass(eq=False)
class Op:
  """A generic operation, e.g. `vhlo.add_v1`."""
  name: str
  location: AnyAttr
  attrs: Optional[AnyAttr] = None  # A builtin Dictionary, or None.
  results: list = dataclasses.field(default_factory=list)  # list[Value]
  operands: list = dataclasses.field(default_factory=list)  # list[Value]
  successors: list = dataclasses.field(default_factory=list)  # list[Block]
  regions: list = dataclasses.field(default_factory=list)  # list[Region]
  properties: Optional[Union[Properties, RawProperties]] = None
  use_list_orders: list = dataclasses.field(default_factory=list)
  # Whether the file stored the regions as isolated from above (informative;
  # the writer recomputes it).
  isolated: bool = False

  @property
  def result_types(self) -> list:
    return [v.type for v in self.results]

  @property
  def dialect(self) -> str:
    return self.name.split(".", 1)[0]

  def walk(self):
    """Yields this op and every nested op, in pre-order."""
    stack = [self]
    while stack:
      op = stack.pop()
      yield op
      if op.regions:  # most ops have none
        nested = [o for r in op.regions for b in r.blocks for o in b.ops]
        stack.extend(reversed(nested))


@dataclasses.dataclass(frozen=True)
class ResourceEntry:
  key: str
  kind: str  # "blob", "bool" or "string".
  value: Any  # bytes (blob), bool, str; None for a declaration only.
  alignment: int = 1  # Blobs only.


@dataclasses.dataclass
class ResourceGroup:
  name: str  # External printer name or dialect name.
  entries: list = dataclasses.field(default_factory=list)
  external: bool = False


@dataclasses.dataclass(eq=False)
class BytecodeFile:
  """A whole bytecode file: header facts plus the root operation."""
  version: int
  producer: str
  root: Op
  # Dialect -> raw bytes of its version record (bytecode >= 1).
  dialect_versions: dict = dataclasses.field(default_factory=dict)
  # Op names known to be unregistered (the flag in bytecode >= 5).
  unregistered_ops: set = dataclasses.field(default_factory=set)
  resources: list = dataclasses.field(default_factory=list)

  def ops(self):
    return self.root.walk()
