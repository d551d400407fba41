"""Default values of optional op attributes and attribute parameters.

Upstream's op definitions give some optional attributes a default
(`DefaultValuedOptionalAttr`); its declarative printers leave out an
attribute that holds exactly its default, and `#stablehlo.result_accuracy`
leaves out zero tolerances. Writing the default or leaving it out means the
same op, so the printer elides such values and the structural round-trip
comparison (`structural.py`) treats them as absent.
"""

from __future__ import annotations

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t

# The unary ops that take an optional `result_accuracy` (default: mode
# DEFAULT, zero tolerances).
# The dialect whose ops an op's regions may name without a prefix.
DEFAULT_DIALECT = {"func.func": "func", "builtin.module": "builtin"}

RESULT_ACCURACY_OPS = frozenset(
    "stablehlo." + n for n in (
        "cbrt", "cosine", "exponential", "exponential_minus_one", "log",
        "log_plus_one", "logistic", "rsqrt", "sine", "sqrt", "tan", "tanh"))

_RESULT_ACCURACY = "stablehlo.result_accuracy"
_ZERO_PARAMS = ("atol", "rtol", "ulps")


def _is_bool(attr, value: bool) -> bool:
  if isinstance(attr, a.BoolAttr):
    return attr.value is value
  return (isinstance(attr, a.IntegerAttr) and
          isinstance(attr.type, t.IntegerType) and attr.type.width == 1 and
          bool(attr.value) is value)


def _is_int(attr, value: int, width: int) -> bool:
  return (isinstance(attr, a.IntegerAttr) and
          isinstance(attr.type, t.IntegerType) and attr.type.width == width and
          not attr.type.unsigned and attr.value == value)


def _is_empty_array(attr) -> bool:
  return isinstance(attr, a.ArrayAttr) and not attr.elements


def _is_empty_dict(attr) -> bool:
  return isinstance(attr, a.DictionaryAttr) and not attr.entries


def _is_default_accuracy(attr) -> bool:
  if not isinstance(attr, a.DialectAttr) or attr.name != _RESULT_ACCURACY:
    return False
  params = dict(attr.params)
  mode = params.get("mode")
  return (all(params.get(k, 0) == 0 for k in _ZERO_PARAMS) and
          isinstance(mode, a.DialectAttr) and len(mode.params) == 1 and
          mode.params[0][1] == "DEFAULT")


# op name -> {attribute name -> predicate "holds the default"}.
_DEFAULTS = {
    "stablehlo.cholesky": {"lower": lambda v: _is_bool(v, False)},
    "stablehlo.composite": {
        "composite_attributes": _is_empty_dict,
        "version": lambda v: _is_int(v, 0, 32),
    },
    "stablehlo.custom_call": {
        "has_side_effect": lambda v: _is_bool(v, False),
        "api_version": lambda v: _is_int(v, 1, 32),  # API_VERSION_ORIGINAL
        "called_computations": _is_empty_array,
        "output_operand_aliases": _is_empty_array,
    },
}
for _name in RESULT_ACCURACY_OPS:
  _DEFAULTS[_name] = {"result_accuracy": _is_default_accuracy}


def defaulted_names(op_name: str) -> frozenset:
  """The op's attributes that have a default (all inherent attributes)."""
  return frozenset(_DEFAULTS.get(op_name, ()))


def is_default_attr(op_name: str, key: str, value: a.Attribute) -> bool:
  """Whether attribute `key` of an `op_name` op holds its default value."""
  check = _DEFAULTS.get(op_name, {}).get(key)
  return check is not None and check(value)


# Dimension-number attributes whose printer leaves out empty dimension lists
# and a zero `index_vector_dim` (`#stablehlo.dot<>` when nothing is left).
STRUCT_DIMS = frozenset(("stablehlo.dot", "stablehlo.gather",
                         "stablehlo.scatter", "chlo.ragged_dot"))


def _is_zero_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0


def canonical_params(attr: a.DialectAttr) -> tuple:
  """The attribute's parameters without those holding their default (as
  upstream prints them): zero atol / rtol / ulps of a result_accuracy, empty
  dimension lists and a zero index_vector_dim of dimension numbers. Returns
  `attr.params` itself when nothing is dropped."""
  if attr.name == _RESULT_ACCURACY:
    drop = lambda k, v: k in _ZERO_PARAMS and _is_zero_number(v)
  elif attr.name in STRUCT_DIMS:
    drop = lambda k, v: (isinstance(v, tuple) and not v) or (
        k == "index_vector_dim" and _is_zero_number(v))
  else:
    return attr.params
  kept = tuple((k, v) for k, v in attr.params if not drop(k, v))
  return attr.params if len(kept) == len(attr.params) else kept
