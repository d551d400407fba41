"""VHLO ops with named attributes, on top of the generic bytecode tree.

The bytecode tree stores an op's attributes either as native properties
(bytecode >= 5: the declared attributes, sorted by name, then a dictionary of
the discardable rest) or as one attribute dictionary (older versions). The
conversions in this package want one view: `VhloOp.named`, a dict from
attribute name to VHLO attribute holding both kinds, as MLIR's
`op->getAttrs()` does. `from_file` builds that view from a file read by
`bytecode.reader`; `to_file` splits it again for the target bytecode version.
"""

from __future__ import annotations

import dataclasses

import support
from stablehlo._src.bytecode import encoding
from stablehlo._src.bytecode import sdy_codec
from stablehlo._src.bytecode import tree
from stablehlo._src.vhlo import builtin_conversion as bc
from stablehlo._src.vhlo import ops

MODULE = "builtin.module"
# builtin.module's properties: OptionalAttr sym_name, sym_visibility.
MODULE_PROPERTIES = ("sym_name", "sym_visibility")
# Mixed serialization (see vhlo/sdy_conversion.py): casts between VHLO and
# builtin types around the sdy ops.
CAST = "builtin.unrealized_conversion_cast"


def foreign_properties(op_name: str):
  """((name, kind), ...) of the properties of a non-VHLO op a portable
  artifact may hold (the module, sdy ops, casts), or None for any other."""
  if op_name == MODULE:
    return tuple((n, "opt_attr") for n in MODULE_PROPERTIES)
  if op_name == CAST:
    return ()
  return sdy_codec.OP_PROPERTIES.get(op_name)


@dataclasses.dataclass(eq=False)
class VhloOp(tree.Op):
  """A tree op plus its attributes by name (inherent and discardable)."""
  named: dict = dataclasses.field(default_factory=dict)

  @property
  def definition(self) -> ops.OpDef | None:
    return ops.lookup(self.name)

  @classmethod
  def make(cls, name: str, location, operands: list, named: dict) -> "VhloOp":
    """`VhloOp(name=..., location=..., operands=..., named=...)` with the
    fields passed by position (legalization makes one per op)."""
    return cls(name, location, None, [], operands, [], [], None, [], False,
               named)


def _dict_entries(attr) -> list:
  if attr is None:
    return []
  if not (isinstance(attr, tree.Attr) and attr.dialect == "builtin" and
          attr.kind == "DictionaryAttr"):
    raise support.DataLossError(
        f"op attributes must be a builtin dictionary, got {attr!r}")
  out = []
  for key, value in attr.fields[0]:
    if not (isinstance(key, tree.Attr) and key.kind == "StringAttr"):
      raise support.DataLossError("attribute names must be strings")
    out.append((key.fields[0], value))
  return out


def _named_of(op: tree.Op) -> dict:
  named = {}
  props = op.properties
  if props is not None:
    if isinstance(props, tree.RawProperties):
      raise support.DataLossError(f"{op.name}: undecodable properties")
    layout = _LAYOUTS.get(op.name)
    if layout is not None:
      names = layout[0]
    else:
      foreign = foreign_properties(op.name)
      if foreign is not None:
        names = tuple(n for n, _ in foreign)
      else:
        definition = ops.lookup(op.name)
        if definition is None:
          raise support.InvalidArgumentError(
              f"unregistered operation '{op.name}' found in dialect "
              f"('{op.dialect}')")
        names = definition.property_names
      _layout(op.name)  # a known op: the next ones find its names there
    if len(props.values) != len(names):
      raise support.DataLossError(
          f"{op.name}: expected {len(names)} properties, found "
          f"{len(props.values)}")
    for name, value in zip(names, props.values):
      if value is not None:
        named[name] = value
  for name, value in _dict_entries(op.attrs):
    named[name] = value
  return named


def from_file(f: tree.BytecodeFile) -> VhloOp:
  """The root op of `f` with every op turned into a `VhloOp`; a file read
  with `op_class=VhloOp` gets its ops' `named` set in place."""
  if isinstance(f.root, VhloOp):
    for op in f.root.walk():
      op.named = _named_of(op)
    return f.root

  def convert_op(op: tree.Op) -> VhloOp:
    new = VhloOp(name=op.name, location=op.location, results=op.results,
                 operands=op.operands, successors=op.successors,
                 regions=[], named=_named_of(op),
                 use_list_orders=op.use_list_orders)
    new.regions = [tree.Region([convert_block(b) for b in r.blocks])
                   for r in op.regions]
    return new

  block_map = {}

  def convert_block(block: tree.Block) -> tree.Block:
    new = block_map.setdefault(id(block), tree.Block())
    new.args = block.args
    new.use_list_orders = block.use_list_orders
    new.ops = [convert_op(o) for o in block.ops]
    return new

  root = convert_op(f.root)
  # Successors refer to blocks by identity: remap them.
  for op in root.walk():
    op.successors = [block_map.get(id(b), b) for b in op.successors]
  return root


def _dictionary(entries) -> tree.Attr | None:
  if not entries:
    return None
  pairs = sorted(entries, key=lambda e: e[0])
  return tree.Attr("builtin", "DictionaryAttr",
                   (tuple((bc.string(k), v) for k, v in pairs),))


# op name -> (declared attribute names, their property kinds, the names
# that must be present); see _layout.
_LAYOUTS: dict = {}


def _layout(name: str) -> tuple:
  """How op `name` stores its attributes: (declared names in properties
  order, their kinds, the required names)."""
  hit = _LAYOUTS.get(name)
  if hit is not None:
    return hit
  foreign = foreign_properties(name)
  if foreign is not None:
    hit = (tuple(n for n, _ in foreign), tuple(k for _, k in foreign),
           tuple(n for n, k in foreign if k == "attr"))
  else:
    definition = ops.lookup(name)
    if definition is None:
      raise support.InternalError(f"no VHLO definition for {name}")
    declared = definition.property_names
    hit = (declared, ("attr",) * len(declared), declared)
  _LAYOUTS[name] = hit
  return hit


def finalize(root: VhloOp, bytecode_version: int) -> None:
  """Sets `attrs` / `properties` of every op from `named`."""
  native = bytecode_version >= encoding.V_NATIVE_PROPERTIES
  layouts = _LAYOUTS
  properties = tree.Properties
  # Pre-order, as root.walk() (an op's error is found before its nested
  # ones'), with the walk inline: this runs once per op.
  stack = [root]
  pop = stack.pop
  while stack:
    op = pop()
    if op.regions:
      stack.extend(reversed([o for r in op.regions for b in r.blocks
                             for o in b.ops]))
    if op.__class__ is not VhloOp and not isinstance(op, VhloOp):
      continue
    layout = layouts.get(op.name)
    declared, kinds, required = layout or _layout(op.name)
    named = op.named
    if native:
      if declared:
        # (Counted by key: comparing the attributes with None would call
        # their __eq__.)
        present = sum(map(named.__contains__, declared))
        # A VHLO op requires all it declares: only an absent one calls
        # for the check by name.
        if required is not declared or present < len(declared):
          _check_required(op, required)
        # Ops with declared attributes carry a properties blob (ODS gives
        # them a properties struct); the others carry none.
        op.properties = properties(kinds, tuple(map(named.get, declared)))
      else:  # (required is then empty too)
        present = 0
        op.properties = None
      if len(named) > present:
        op.attrs = _dictionary([(k, v) for k, v in named.items()
                                if k not in declared])
      else:  # every attribute is a declared one
        op.attrs = None
    else:
      _check_required(op, required)
      op.properties = None
      op.attrs = _dictionary(list(named.items()))


def _check_required(op: VhloOp, required: tuple) -> None:
  missing = [n for n in required if n not in op.named]
  if missing:
    raise support.InternalError(
        f"{op.name} lacks required attributes {missing}")


def to_file(root: VhloOp, bytecode_version: int,
            producer: str) -> tree.BytecodeFile:
  finalize(root, bytecode_version)
  return tree.BytecodeFile(version=bytecode_version, producer=producer,
                           root=root)
