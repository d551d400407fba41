"""Reading portable artifacts that carry Shardy (sdy) annotations.

jaxlib serializes programs with "mixed" dialects: the StableHLO ops as VHLO,
plus Shardy's own ops and attributes (`sdy.mesh` at module level,
`sdy.sharding` on function arguments, `sdy.sharding_constraint` in bodies)
whenever an argument is committed to a device. StableHLO's deserializer
takes VHLO only, so this module removes the Shardy parts from the generic
bytecode tree first, then runs the rest of the deserialization.

Removing them is exact for what this plugin runs: a program compiled for
one partition has nothing to partition, so its shardings only restate that
every value lives whole on its device. Ops that change the computation
(`sdy.manual_computation`, `sdy.named_computation`, ...) are refused with
UNIMPLEMENTED.
"""

from __future__ import annotations

import dataclasses

import support
from stablehlo import ir as core
from stablehlo.bytecode import reader
from stablehlo.bytecode import tree

DIALECT = "sdy"

# Shardy ops that only annotate their single operand: result := operand.
_PASS_THROUGH = frozenset({"sdy.sharding_constraint", "sdy.reshard",
                           "sdy.propagation_barrier"})
# Mixed serialization wraps each Shardy op's operands and results in casts
# between VHLO and builtin tensor types; with the Shardy op gone, a cast is
# the identity on the value.
_CAST = "builtin.unrealized_conversion_cast"
# Shardy ops without results that only annotate: dropped.
_DROPPED = frozenset({"sdy.mesh", "sdy.sharding_group"})

_REMOVE = object()


def _is_shardy(value) -> bool:
  return (isinstance(value, (tree.Attr, tree.AsmAttr, tree.OpaqueAttr)) and
          value.dialect == DIALECT)


def _strip_field(value):
  """`value` without Shardy attributes (or _REMOVE when it is one)."""
  if _is_shardy(value):
    return _REMOVE
  if isinstance(value, tree.Attr):
    fields = tuple(_strip_field(f) for f in value.fields)
    fields = tuple(None if f is _REMOVE else f for f in fields)
    if fields == value.fields:
      return value
    return dataclasses.replace(value, fields=fields)
  if isinstance(value, (tuple, list)):
    items = []
    for item in value:
      # A (name, value) pair of a dictionary whose value is Shardy's.
      if (isinstance(item, tuple) and len(item) == 2 and
          _is_shardy(item[1])):
        continue
      stripped = _strip_field(item)
      if stripped is not _REMOVE:
        items.append(stripped)
    return type(value)(items)
  return value


def _strip_op_attributes(op: tree.Op) -> None:
  if op.attrs is not None:
    attrs = _strip_field(op.attrs)
    op.attrs = None if attrs is _REMOVE else attrs
  if isinstance(op.properties, tree.Properties):
    values = tuple(_strip_field(v) for v in op.properties.values)
    values = tuple(None if v is _REMOVE else v for v in values)
    op.properties = dataclasses.replace(op.properties, values=values)


def strip(root: tree.Op) -> int:
  """Removes Shardy ops and attributes from `root` in place; returns how many
  ops were removed (attributes are removed in any case).

  Raises:
    support.UnimplementedError: a Shardy op that changes the computation.
  """
  replaced: dict[int, tree.Value] = {}
  removed = 0

  def visit(op: tree.Op) -> None:
    nonlocal removed
    for region in op.regions:
      for block in region.blocks:
        kept = []
        for child in block.ops:
          child.operands = [replaced.get(id(v), v) for v in child.operands]
          if (child.name == _CAST and len(child.operands) == 1 and
              len(child.results) == 1):
            replaced[id(child.results[0])] = child.operands[0]
            removed += 1
            continue
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
        block.ops = kept

  _strip_op_attributes(root)
  visit(root)
  return removed


def _holds_shardy(value) -> bool:
  """Whether an attribute value is, or contains, a Shardy attribute."""
  if _is_shardy(value):
    return True
  if isinstance(value, tree.Attr):
    return any(_holds_shardy(f) for f in value.fields)
  if isinstance(value, (tuple, list)):
    return any(_holds_shardy(item) for item in value)
  return False


def _has_shardy(f: tree.BytecodeFile) -> bool:
  if DIALECT in f.dialect_versions:
    return True
  for op in f.root.walk():
    if op.dialect == DIALECT:
      return True
    # An op of another dialect can carry a Shardy attribute without any
    # Shardy op in the module: JAX's LAPACK custom calls have an
    # `sdy.sharding_rule` even in unsharded programs.
    if op.attrs is not None and _holds_shardy(op.attrs):
      return True
    if isinstance(op.properties, tree.Properties) and _holds_shardy(
        op.properties.values):
      return True
  return False


def deserialize(data: bytes) -> core.Module:
  """The StableHLO module of a portable artifact, Shardy parts removed."""
  from stablehlo import vhlo  # pylint: disable=g-import-not-at-top
  if not reader.is_bytecode(data):
    raise support.InvalidArgumentError("not MLIR bytecode")
  try:
    f = reader.read(data)
  except support.XlaError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise support.InvalidArgumentError(
        f"cannot read the program's MLIR bytecode: {type(e).__name__}: {e}"
    ) from e
  if not _has_shardy(f):
    return vhlo.deserialize_portable_artifact(data)
  strip(f.root)
  return _deserialize_tree(f)


def _deserialize_tree(f: tree.BytecodeFile) -> core.Module:
  """The remaining steps of deserialize_portable_artifact, on a read file."""
  # pylint: disable=g-import-not-at-top
  from stablehlo.vhlo import extern_constants
  from stablehlo.vhlo import unlegalize
  from stablehlo.vhlo import versioning
  from stablehlo.vhlo import vhlo_ir
  # pylint: enable=g-import-not-at-top
  try:
    root = vhlo_ir.from_file(f)
    extern_constants.resolve(root, f, None, True)
    for op in root.walk():
      if op is not root and op.dialect != "vhlo":
        raise support.UnimplementedError(
            f"operation '{op.name}' of dialect '{op.dialect}' in a portable "
            "artifact is not supported (only VHLO ops are)")
    versioning.upgrade(root)
    return unlegalize.vhlo_to_module(root)
  except support.XlaError:
    raise
  except RecursionError as e:
    raise support.InvalidArgumentError("program nested too deeply") from e
  except Exception as e:  # pylint: disable=broad-except
    raise support.InternalError(
        f"deserializing the portable artifact failed: {type(e).__name__}: "
        f"{e}") from e
