"""Small IR-rewriting utilities shared by the passes: cloning ops with a
value mapping, and building new ops next to the one they replace."""

from __future__ import annotations

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t


def clone_op(op: core.Operation, mapping: dict) -> core.Operation:
  """A deep copy of `op` (with its regions) whose operands are looked up in
  `mapping` (value -> value; unmapped values stay). The results and block
  arguments of the copy are added to `mapping`."""
  new = core.Operation(op.name, [mapping.get(v, v) for v in op.operands],
                       op.result_types, attributes=dict(op.attributes),
                       properties=dict(op.properties),
                       location=op.location)
  for region in op.regions:
    nr = core.Region()
    for block in region.blocks:
      nb = core.Block(label=block.label)
      for arg, loc in zip(block.arguments, block.argument_locations):
        mapping[arg] = nb.add_argument(arg.type, arg.name_hint, loc)
      nr.append(nb)
    new.add_region(nr)
    for block, nb in zip(region.blocks, nr.blocks):
      for inner in block.operations:
        nb.append(clone_op(inner, mapping))
  for old, nv in zip(op.results, new.results):
    nv.name_hint = old.name_hint
    mapping[old] = nv
  return new


class Builder:
  """Collects new ops for a block, each at the location of `loc_of`."""

  def __init__(self, location: a.Location):
    self.location = location
    self.ops: list[core.Operation] = []

  def op(self, name: str, operands, result_types, properties=None,
         attributes=None, regions=()) -> core.Operation:
    o = core.Operation(name, operands, result_types, attributes=attributes,
                       properties=properties, regions=regions,
                       location=self.location)
    self.ops.append(o)
    return o

  def one(self, name, operands, result_type, **kw) -> core.Value:
    return self.op(name, operands, [result_type], **kw).results[0]

  def constant(self, array, ty: t.Type) -> core.Value:
    import numpy as np  # pylint: disable=g-import-not-at-top
    return self.one("stablehlo.constant", [], ty, properties={
        "value": a.DenseElementsAttr(ty, np.asarray(array), splat=np.ndim(
            array) == 0)})


def i64_array(values) -> a.DenseArrayAttr:
  return a.DenseArrayAttr(t.i64, tuple(int(v) for v in values))


def with_element_type(ty: t.RankedTensorType,
                      et: t.Type) -> t.RankedTensorType:
  return t.RankedTensorType(ty.shape, et, ty.encoding)
