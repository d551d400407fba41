"""A printer-independent structural dump of a module, for round-trip checks.

Values are numbered by definition order; attributes are reduced to hashable
keys (dense arrays by bit pattern; floats rounded to their type, by their hex
form so NaN == NaN); properties and attributes are merged, since a pretty form
decides where an inherent attribute lives; attributes (and attribute
parameters) holding their default are dropped, since pretty forms elide them.
Locations are left out.
"""

from __future__ import annotations

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.text import dense
from stablehlo._src.text import op_defaults


def _attr_key(attr):
  if isinstance(attr, a.DenseElementsAttr):
    arr = np.ascontiguousarray(attr.array)
    return ("dense", attr.type, arr.shape, arr.dtype.str, arr.tobytes())
  if isinstance(attr, a.FloatAttr):
    # The value the attribute holds is the literal rounded to its type.
    return ("float", dense.round_to_type(attr.value, attr.type).hex(),
            attr.type)
  if isinstance(attr, a.ArrayAttr):
    return ("array", tuple(_attr_key(e) for e in attr.elements))
  if isinstance(attr, a.DictionaryAttr):
    return ("dict", tuple(sorted((k, _attr_key(v)) for k, v in attr.entries)))
  if isinstance(attr, a.DialectAttr):
    return ("dialect", attr.name, attr.short_form,
            tuple((k, _param_key(v))
                  for k, v in op_defaults.canonical_params(attr)))
  if isinstance(attr, a.DenseArrayAttr):
    return ("darray", attr.element_type,
            tuple(dense.round_to_type(v, attr.element_type).hex()
                  if isinstance(v, float) else v for v in attr.values))
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
    # An attribute holding its default is the same op as one without it.
    attrs = {k: v for k, v in attrs.items()
             if not op_defaults.is_default_attr(op.name, k, v)}
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
