"""The StableHLO program structure: modules, functions, ops, regions, blocks,
values (spec section "Programs").

Everything is a generic `Operation` (name, operands, results, attributes,
regions), as in MLIR; `func.func` and `builtin.module` are operations too.
Per-op knowledge (schema, verifier, pretty syntax, kernel) lives in
registries keyed by the op name, never in subclasses here.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t


class Value:
  """An SSA value: an op result or a block argument."""

  __slots__ = ("type", "owner", "index", "name_hint")

  def __init__(self, type_: t.Type, owner, index: int,
               name_hint: Optional[str] = None):
    self.type = type_
    self.owner = owner  # Operation (result) or Block (argument)
    self.index = index
    self.name_hint = name_hint  # the source name without '%', if any

  @property
  def is_block_argument(self) -> bool:
    return isinstance(self.owner, Block)

  def __repr__(self):
    kind = "arg" if self.is_block_argument else "result"
    return f"<Value {kind}#{self.index} {self.type}>"


class Block:
  __slots__ = ("arguments", "operations", "parent", "label",
               "argument_locations")

  def __init__(self, arg_types=(), label: Optional[str] = None):
    self.arguments: list[Value] = [
        Value(ty, self, i) for i, ty in enumerate(arg_types)]
    self.operations: list[Operation] = []
    self.parent: Optional[Region] = None
    self.label = label
    self.argument_locations: list[Optional[a.Location]] = [
        None] * len(self.arguments)

  def add_argument(self, type_: t.Type, name_hint=None,
                   loc: Optional[a.Location] = None) -> Value:
    v = Value(type_, self, len(self.arguments), name_hint)
    self.arguments.append(v)
    self.argument_locations.append(loc)
    return v

  def append(self, op: "Operation") -> "Operation":
    op.parent = self
    self.operations.append(op)
    return op

  @property
  def terminator(self) -> Optional["Operation"]:
    return self.operations[-1] if self.operations else None


class Region:
  __slots__ = ("blocks", "parent")

  def __init__(self, blocks=None):
    self.blocks: list[Block] = []
    self.parent: Optional[Operation] = None
    for b in blocks or ():
      self.append(b)

  def append(self, block: Block) -> Block:
    block.parent = self
    self.blocks.append(block)
    return block

  @property
  def entry(self) -> Block:
    return self.blocks[0]


_SEQUENCES = (tuple, list)
# The regions and successors of an op that has none (see Operation).
_NONE = ()


class Operation:
  """A generic operation.

  attributes: ordered dict name -> Attribute (discardable + inherent).
  properties: ordered dict name -> Attribute for the `<{...}>` inherent
    properties when the op was written in generic form with properties; the
    printer decides how to spell them. Verifiers should read attributes via
    `attr(name)`, which looks in both.
  regions, successors: sequences. An op without any holds one shared empty
    tuple (most ops: two lists fewer per op for the allocator and the cyclic
    collector to handle); add regions with `add_region`, and set successors
    by assigning a list.
  """

  __slots__ = ("name", "operands", "results", "attributes", "properties",
               "regions", "successors", "location", "parent")

  def __init__(self, name: str, operands=(), result_types=(),
               attributes=None, properties=None, regions=(),
               successors=(), location: a.Location = a.UNKNOWN_LOC):
    # (Written for speed: the text parser makes one per op. No temporary
    # dicts for absent attributes; one result, the common case, without a
    # comprehension.)
    self.name = name
    self.operands: list[Value] = list(operands)
    if result_types.__class__ in _SEQUENCES and len(result_types) == 1:
      self.results: list[Value] = [Value(result_types[0], self, 0)]
    else:
      self.results = [Value(ty, self, i) for i, ty in enumerate(result_types)]
    self.attributes: dict[str, a.Attribute] = (
        dict(attributes) if attributes else {})
    self.properties: dict[str, a.Attribute] = (
        dict(properties) if properties else {})
    self.regions: list[Region] = _NONE
    for r in regions:
      self.add_region(r)
    self.successors: list[Block] = list(successors) if successors else _NONE
    self.location = location
    self.parent: Optional[Block] = None

  def add_region(self, region: Region) -> Region:
    region.parent = self
    if self.regions is _NONE:
      self.regions = []
    self.regions.append(region)
    return region

  def attr(self, name: str, default=None):
    if name in self.properties:
      return self.properties[name]
    return self.attributes.get(name, default)

  @property
  def dialect(self) -> str:
    return self.name.split(".", 1)[0]

  @property
  def result(self) -> Value:
    assert len(self.results) == 1, self.name
    return self.results[0]

  @property
  def operand_types(self) -> list[t.Type]:
    return [v.type for v in self.operands]

  @property
  def result_types(self) -> list[t.Type]:
    return [v.type for v in self.results]

  def walk(self) -> Iterator["Operation"]:
    """Pre-order walk over this op and every op nested in its regions."""
    yield self
    for region in self.regions:
      for block in region.blocks:
        for op in block.operations:
          yield from op.walk()

  def __repr__(self):
    return f"<Operation {self.name}>"


@dataclasses.dataclass
class Module:
  """A `builtin.module`: its body op plus file-level extras.

  `op` is the `builtin.module` Operation whose single region holds the
  functions and globals. `resources` maps dialect -> {key -> blob text} from a
  `{-# dialect_resources: ... #-}` block. `attribute_aliases` /
  `type_aliases` keep `#alias = ...` / `!alias = ...` definitions in order so
  the printer can reproduce them.
  """

  op: Operation
  resources: dict = dataclasses.field(default_factory=dict)
  attribute_aliases: dict = dataclasses.field(default_factory=dict)
  type_aliases: dict = dataclasses.field(default_factory=dict)
  # `#loc1 = loc(...)` definitions (name -> Location); uses are resolved at
  # parse time, the printer re-emits these when printing locations.
  location_aliases: dict = dataclasses.field(default_factory=dict)

  @property
  def body(self) -> Block:
    return self.op.regions[0].entry

  @property
  def functions(self) -> list[Operation]:
    return [op for op in self.body.operations if op.name == "func.func"]

  def lookup(self, symbol: str) -> Optional[Operation]:
    for op in self.body.operations:
      sym = op.attr("sym_name")
      if isinstance(sym, a.StringAttr) and sym.value == symbol:
        return op
    return None

  def walk(self) -> Iterator[Operation]:
    return self.op.walk()
