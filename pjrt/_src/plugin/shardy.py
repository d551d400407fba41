"""Reading portable artifacts that carry Shardy (sdy) annotations.

jaxlib serializes programs with "mixed" dialects: the StableHLO ops as VHLO,
plus Shardy's own ops and attributes (`sdy.mesh` at module level,
`sdy.sharding` on function arguments, `sdy.sharding_constraint` in bodies)
whenever an argument is committed to a device. `stablehlo.vhlo` reads them
into our IR (`stablehlo.sdy`).

A program compiled for several partitions keeps them: the HLO import
(xla/translate/sharding_import.py) turns them into the shardings the SPMD
partitioner follows. For a program that runs unpartitioned (one partition,
or a backend that does not partition a program with nothing to split),
this module removes them. That is exact: such a program's shardings only
restate that every value lives whole on its device. Ops that change the
computation (`sdy.manual_computation`, `sdy.named_computation`, the
collectives, ...) are refused with UNIMPLEMENTED.
"""

from __future__ import annotations

import support
from stablehlo import attributes as a
from stablehlo import ir as core
from stablehlo import sdy
from stablehlo.bytecode import reader

DIALECT = sdy.DIALECT

# Shardy ops that only annotate their single operand: result := operand.
_PASS_THROUGH = frozenset({"sdy.sharding_constraint", "sdy.reshard",
                           "sdy.propagation_barrier"})
# Shardy ops without results that only annotate: dropped.
_DROPPED = frozenset({"sdy.mesh", "sdy.sharding_group"})

_REMOVE = object()


def _is_shardy(attr) -> bool:
  return isinstance(attr, sdy.SdyAttr) or (
      isinstance(attr, a.OpaqueAttr) and attr.text.startswith("#sdy"))


def _strip_attr(attr):
  """`attr` without Shardy attributes nested in it (_REMOVE if it is one)."""
  if _is_shardy(attr):
    return _REMOVE
  if isinstance(attr, a.DictionaryAttr):
    entries = tuple((k, _strip_attr(v)) for k, v in attr.entries)
    entries = tuple((k, v) for k, v in entries if v is not _REMOVE)
    return attr if entries == attr.entries else a.DictionaryAttr(entries)
  if isinstance(attr, a.ArrayAttr):
    elements = tuple(_strip_attr(x) for x in attr.elements)
    elements = tuple(x for x in elements if x is not _REMOVE)
    return attr if elements == attr.elements else a.ArrayAttr(elements)
  return attr


def _strip_op_attributes(op: core.Operation) -> None:
  for table in (op.attributes, op.properties):
    for name in list(table):
      stripped = _strip_attr(table[name])
      if stripped is _REMOVE:
        del table[name]
      else:
        table[name] = stripped


def strip(module: core.Module) -> int:
  """Removes Shardy ops and attributes from `module` in place; returns how
  many ops were removed (attributes are removed in any case).

  Raises:
    support.UnimplementedError: a Shardy op that changes the computation.
  """
  replaced: dict[int, core.Value] = {}
  removed = 0

  def visit(op: core.Operation) -> None:
    nonlocal removed
    for region in op.regions:
      for block in region.blocks:
        kept = []
        for child in block.operations:
          child.operands = [replaced.get(id(v), v) for v in child.operands]
          if child.dialect == DIALECT:
            removed += 1
            if child.name in _PASS_THROUGH and len(child.operands) == 1 and (
                len(child.results) == 1):
              replaced[id(child.results[0])] = child.operands[0]
              continue
            if child.name in _DROPPED and not child.results:
              continue
            raise support.UnimplementedError(
                f"Shardy op '{child.name}' is not supported by the "
                "openxla_cpu plugin (it runs unpartitioned programs only)")
          _strip_op_attributes(child)
          visit(child)
          kept.append(child)
        block.operations = kept

  _strip_op_attributes(module.op)
  visit(module.op)
  return removed


def deserialize(data: bytes) -> core.Module:
  """The StableHLO module of a portable artifact, Shardy parts removed."""
  from stablehlo import vhlo  # pylint: disable=g-import-not-at-top
  if not reader.is_bytecode(data):
    raise support.InvalidArgumentError("not MLIR bytecode")
  module = vhlo.deserialize_portable_artifact(bytes(data))
  strip(module)
  return module
