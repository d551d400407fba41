"""A printer-independent structural dump of a module, for round-trip checks.

Values are numbered by definition order; attributes are reduced to hashable
keys (dense arrays by bit pattern, floats by their hex form so NaN == NaN);
properties and attributes are merged, since a pretty form decides where an
inherent attribute lives. Locations are left out.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core


def _attr_key(attr):
  if isinstance(attr, a.DenseElementsAttr):
    arr = np.ascontiguousarray(attr.array)
    return ("dense", attr.type, arr.shape, arr.dtype.str, arr.tobytes())
  if isinstance(attr, a.FloatAttr):
    return ("float", float(attr.value).hex(), attr.type)
  if isinstance(attr, a.ArrayAttr):
    return ("array", tuple(_attr_key(e) for e in attr.elements))
  if isinstance(attr, a.DictionaryAttr):
    return ("dict", tuple(sorted((k, _attr_key(v)) for k, v in attr.entries)))
  if isinstance(attr, a.DialectAttr):
    return ("dialect", attr.name, attr.short_form,
            tuple((k, _param_key(v)) for k, v in attr.params))
  if isinstance(attr, a.DenseArrayAttr):
    return ("darray", attr.element_type,
            tuple(float(v).hex() if isinstance(v, float) else v
                  for v in attr.values))
  return ("attr", repr(attr))


def _param_key(v):
  if isinstance(v, float):
    return ("f", v.hex())
  if isinstance(v, tuple):
    return tuple(_param_key(x) for x in v)
  if isinstance(v, a.Attribute):
    return _attr_key(v)
  return repr(v)


def dump_module(module: core.Module) -> tuple:
  ids: dict[int, int] = {}
  blocks: dict[int, int] = {}

  def value_id(v):
    if id(v) not in ids:
      ids[id(v)] = len(ids)
    return ids[id(v)]

  def dump_op(op):
    attrs = dict(op.attributes)
    attrs.update(op.properties)
    return (op.name, tuple(value_id(v) for v in op.operands),
            tuple(repr(v.type) for v in op.results),
            tuple((r, value_id(r)) [1] for r in op.results),
            tuple(sorted((k, _attr_key(v)) for k, v in attrs.items())),
            tuple(dump_region(r) for r in op.regions),
            tuple(blocks.setdefault(id(b), len(blocks)) for b in
                  op.successors))

  def dump_region(region):
    out = []
    for b in region.blocks:
      blocks.setdefault(id(b), len(blocks))
      out.append((blocks[id(b)],
                  tuple((repr(v.type), value_id(v)) for v in b.arguments),
                  tuple(dump_op(op) for op in b.operations)))
    return tuple(out)

  return dump_op(module.op)
