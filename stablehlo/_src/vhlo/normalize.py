"""A canonical structural form of a module, for comparing modules by meaning.

Two modules that print the same through upstream `stablehlo-opt` should
compare equal here even when their texts differ in spelling: the long and
short spellings of enum attributes (`#stablehlo<precision HIGH>` vs
`#stablehlo.precision<HIGH>`), the parameter order and omitted empty fields of
struct attributes (`#stablehlo.gather<...>`), `#stablehlo.type_extensions` vs
`#stablehlo.bounds`, explicit vs implied quantization storage ranges,
dense elements written as splats or in full, and attributes written out with
their default value (which StableHLO's printer elides). Locations are left
out. Values are numbered in definition order.

This is the comparison the VHLO conformance mode uses: upstream checks that
`deserialize(X.mlir.bc)` and `X.mlir` print identically.
"""

from __future__ import annotations

import re

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.text import dense

# Struct attributes: fields that may be left out, with their value then.
_STRUCT_DEFAULTS = {
    "stablehlo.gather": {"offset_dims": (), "collapsed_slice_dims": (),
                         "operand_batching_dims": (),
                         "start_indices_batching_dims": (),
                         "start_index_map": (), "index_vector_dim": 0},
    "stablehlo.scatter": {"update_window_dims": (), "inserted_window_dims": (),
                          "input_batching_dims": (),
                          "scatter_indices_batching_dims": (),
                          "scatter_dims_to_operand_dims": (),
                          "index_vector_dim": 0},
    "stablehlo.dot": {"lhs_batching_dimensions": (),
                      "rhs_batching_dimensions": (),
                      "lhs_contracting_dimensions": (),
                      "rhs_contracting_dimensions": ()},
    "stablehlo.result_accuracy": {"atol": 0.0, "rtol": 0.0, "ulps": 0},
    "stablehlo.output_operand_alias": {"output_tuple_indices": (),
                                       "operand_tuple_indices": ()},
}
_RENAMES = {"stablehlo.type_extensions": "stablehlo.bounds"}


def _float(x) -> str:
  return float(x).hex()


def type_key(ty) -> tuple:
  if isinstance(ty, t.RankedTensorType):
    enc = None if ty.encoding is None else attr_key(ty.encoding)
    return ("tensor", ty.shape, type_key(ty.element_type), enc)
  if isinstance(ty, t.UnrankedTensorType):
    return ("utensor", type_key(ty.element_type))
  if isinstance(ty, t.ComplexType):
    return ("complex", type_key(ty.element_type))
  if isinstance(ty, t.TupleType):
    return ("tuple", tuple(type_key(x) for x in ty.types))
  if isinstance(ty, t.FunctionType):
    return ("fn", tuple(type_key(x) for x in ty.inputs),
            tuple(type_key(x) for x in ty.results))
  if isinstance(ty, t.QuantizedType):
    unsigned = ty.storage_unsigned or ty.storage_type.unsigned
    w = ty.storage_type.width
    lo, hi = (0, (1 << w) - 1) if unsigned else (-(1 << (w - 1)),
                                                 (1 << (w - 1)) - 1)
    smin = lo if ty.storage_min is None else ty.storage_min
    smax = hi if ty.storage_max is None else ty.storage_max
    return ("quant", w, unsigned, type_key(ty.expressed_type),
            tuple(_float(s) for s in ty.scales), tuple(ty.zero_points),
            ty.quantized_dimension, smin, smax)
  if isinstance(ty, t.OpaqueType):
    return ("opaque", ty.dialect, re.sub(r"\s+", "", ty.body))
  return ("type", repr(ty))


def _param_key(v):
  if isinstance(v, bool):
    return ("b", v)
  if isinstance(v, float):
    return ("f", _float(v))
  if isinstance(v, (tuple, list)):
    return tuple(_param_key(x) for x in v)
  if isinstance(v, t.Type):
    return type_key(v)
  if isinstance(v, a.Attribute):
    return attr_key(v)
  return repr(v)


def attr_key(attr) -> tuple:
  if isinstance(attr, a.DenseElementsAttr):
    arr = np.ascontiguousarray(attr.array)
    return ("dense", type_key(attr.type), arr.shape, arr.dtype.str,
            arr.tobytes())
  if isinstance(attr, a.FloatAttr):
    # Compare as the attribute's type holds it (the text parser keeps the
    # literal as a double; MLIR rounds it to the type).
    value = attr.value
    if isinstance(attr.type, t.FloatType) and dense.numpy_dtype(attr.type) \
        is not None:
      return ("float", dense.float_to_bits(value, attr.type),
              type_key(attr.type))
    return ("float", _float(value), type_key(attr.type))
  if isinstance(attr, a.IntegerAttr):
    return ("int", int(attr.value), type_key(attr.type))
  if isinstance(attr, a.ArrayAttr):
    return ("array", tuple(attr_key(e) for e in attr.elements))
  if isinstance(attr, a.DictionaryAttr):
    return ("dict", tuple(sorted((k, attr_key(v)) for k, v in attr.entries)))
  if isinstance(attr, a.TypeAttr):
    return ("typeattr", type_key(attr.value))
  if isinstance(attr, a.DialectAttr):
    name = _RENAMES.get(attr.name, attr.name)
    params = dict(_STRUCT_DEFAULTS.get(name, {}))
    params.update(attr.params)
    return ("dialect", name,
            tuple(sorted((k, _param_key(v)) for k, v in params.items())))
  if isinstance(attr, a.OpaqueAttr):
    return ("opaque", re.sub(r"\s+", "", attr.text))
  if isinstance(attr, a.DenseArrayAttr):
    return ("darray", type_key(attr.element_type),
            tuple(_float(x) if isinstance(x, float) else x
                  for x in attr.values))
  if isinstance(attr, a.StringAttr):
    return ("str", attr.value,
            None if attr.type is None else type_key(attr.type))
  return ("attr", repr(attr))


def _is_default(op_name: str, name: str, attr) -> bool:
  """Whether `attr` spells out the value StableHLO assumes when absent."""
  key = attr_key(attr)
  for value in _DEFAULTS.get((op_name, name), ()):
    if key == attr_key(value):
      return True
  return False


def _enum(kind: str, value: str) -> a.DialectAttr:
  return a.DialectAttr(f"stablehlo.{kind}", (("value", value),))


_EMPTY_I64 = a.DenseElementsAttr(t.RankedTensorType((0,), t.i64),
                                 np.zeros((0,), np.int64))

_DEFAULTS = {
    ("stablehlo.compare", "compare_type"): (_enum("comparison_type",
                                                  "NOTYPE"),),
    ("stablehlo.cholesky", "lower"): (a.BoolAttr(False),),
    ("stablehlo.custom_call", "has_side_effect"): (a.BoolAttr(False),),
    ("stablehlo.custom_call", "backend_config"): (a.StringAttr(""),
                                                  a.DictionaryAttr(())),
    ("stablehlo.custom_call", "api_version"): (a.IntegerAttr(1, t.i32),),
    ("stablehlo.custom_call", "called_computations"): (a.ArrayAttr(()),),
    ("stablehlo.custom_call", "output_operand_aliases"): (a.ArrayAttr(()),),
    ("stablehlo.custom_call", "result_tilings"): (a.ArrayAttr(()),),
    ("stablehlo.gather", "indices_are_sorted"): (a.BoolAttr(False),),
    ("stablehlo.dynamic_gather", "indices_are_sorted"): (a.BoolAttr(False),),
    ("stablehlo.scatter", "indices_are_sorted"): (a.BoolAttr(False),),
    ("stablehlo.scatter", "unique_indices"): (a.BoolAttr(False),),
    ("stablehlo.sort", "dimension"): (a.IntegerAttr(-1, t.i64),),
    ("stablehlo.sort", "is_stable"): (a.BoolAttr(False),),
    ("stablehlo.send", "is_host_transfer"): (a.BoolAttr(False),),
    ("stablehlo.recv", "is_host_transfer"): (a.BoolAttr(False),),
    ("stablehlo.send", "source_target_pairs"): (_EMPTY_I64,),
    ("stablehlo.recv", "source_target_pairs"): (_EMPTY_I64,),
    ("stablehlo.infeed", "infeed_config"): (a.StringAttr(""),),
    ("stablehlo.outfeed", "outfeed_config"): (a.StringAttr(""),),
    ("stablehlo.composite", "version"): (a.IntegerAttr(0, t.i32),
                                         a.IntegerAttr(0, t.i64)),
    ("stablehlo.composite", "composite_attributes"): (a.DictionaryAttr(()),),
    ("func.func", "sym_visibility"): (a.StringAttr(""),),
    **{(name, "result_accuracy"): (a.DialectAttr(
        "stablehlo.result_accuracy",
        (("atol", 0.0), ("rtol", 0.0), ("ulps", 0),
         ("mode", a.DialectAttr("stablehlo.result_accuracy_mode",
                                (("value", "DEFAULT"),))))),)
       for name in ("stablehlo.cbrt", "stablehlo.cosine",
                    "stablehlo.exponential", "stablehlo.exponential_minus_one",
                    "stablehlo.log", "stablehlo.log_plus_one",
                    "stablehlo.logistic", "stablehlo.rsqrt", "stablehlo.sine",
                    "stablehlo.sqrt", "stablehlo.tan", "stablehlo.tanh")},
    ("func.func", "arg_attrs"): (a.ArrayAttr(()),),
    ("func.func", "res_attrs"): (a.ArrayAttr(()),),
}


def dump(module: core.Module, drop_defaults: bool = True) -> tuple:
  """The canonical structure of `module` (hashable, comparable)."""
  ids: dict = {}
  blocks: dict = {}

  def value_id(v):
    return ids.setdefault(id(v), len(ids))

  def dump_op(op):
    attrs = dict(op.attributes)
    attrs.update(op.properties)
    if drop_defaults:
      attrs = {k: v for k, v in attrs.items()
               if not _is_default(op.name, k, v)}
    return (op.name, tuple(value_id(v) for v in op.operands),
            tuple(type_key(r.type) for r in op.results),
            tuple(value_id(r) for r in op.results),
            tuple(sorted((k, attr_key(v)) for k, v in attrs.items())),
            tuple(dump_region(r) for r in op.regions),
            tuple(blocks.setdefault(id(b), len(blocks))
                  for b in op.successors))

  def dump_region(region):
    out = []
    for b in region.blocks:
      blocks.setdefault(id(b), len(blocks))
      out.append((blocks[id(b)],
                  tuple((type_key(v.type), value_id(v)) for v in b.arguments),
                  tuple(dump_op(op) for op in b.operations)))
    return tuple(out)

  return dump_op(module.op)


def first_difference(x, y, path="module") -> str | None:
  """A readable description of where two dumps first differ."""
  if x == y:
    return None
  if isinstance(x, tuple) and isinstance(y, tuple):
    label = path
    if x and isinstance(x[0], str) and x[0] == y[:1][0] if y else False:
      label = f"{path}/{x[0]}"
    for i, (xi, yi) in enumerate(zip(x, y)):
      if xi != yi:
        return first_difference(xi, yi, f"{label}[{i}]")
    return f"{label}: lengths differ ({len(x)} vs {len(y)})"
  return f"{path}: {str(x)[:400]} != {str(y)[:400]}"
