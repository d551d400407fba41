"""Pretty forms of the ops without regions whose syntax is shared or small:
`op %a, %b attr-dict : T`, keyword forms, constants, compare, select,
slice, tuples and the like (see `pretty_ops` for the whole table).
"""

from __future__ import annotations

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t
from stablehlo._src.text import op_defaults
from stablehlo._src.text import pretty_common as pc
from stablehlo._src.text.pretty_common import PrettyForm
from stablehlo._src.text.pretty_registry import register


# --- `op %a, %b attr-dict : T` / `: (Ts) -> R` ---------------------------------


def _parse_same_type(p, name, pos):
  toks = pc.parse_operand_toks(p)
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_same_or_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs)


# Ops whose operand list is variadic: upstream's declarative printer writes
# the space before it even when it is empty (`stablehlo.after_all  : T`).
_VARIADIC_OPERANDS = frozenset(("stablehlo.after_all", "stablehlo.tuple"))


def _operands_prefix(pr, op) -> str:
  """`%a, %b ` before the attr-dict; ` ` for an empty variadic list."""
  ops = pr.vs(op.operands)
  if ops:
    return ops + " "
  return " " if op.name in _VARIADIC_OPERANDS else ""


def _print_same_type(pr, op):
  if len(op.results) != 1:
    return None
  return f"{_operands_prefix(pr, op)}{pr.attr_dict(op)}: " + \
      pc.same_or_functional(pr, op)


SAME_TYPE = PrettyForm(_parse_same_type, _print_same_type,
                       "op %a, %b attr-dict : T | (Ts) -> R",
                       fast=pc.fast_same_type)

_SAME_TYPE_OPS = (
    "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "convert",
    "cosine", "count_leading_zeros", "divide", "exponential",
    "exponential_minus_one", "floor", "imag", "log", "log_plus_one",
    "logistic", "maximum", "minimum", "multiply", "negate", "not", "or",
    "popcnt", "power", "real", "remainder", "round_nearest_afz",
    "round_nearest_even", "rsqrt", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "sign", "sine", "sqrt", "subtract", "tan", "tanh",
    "xor", "uniform_quantize", "uniform_dequantize", "after_all",
    "replica_id", "partition_id", "create_token",
)
for _op in _SAME_TYPE_OPS:
  register("stablehlo." + _op, SAME_TYPE)
register("arith.addf", SAME_TYPE)
register("arith.mulf", SAME_TYPE)
register("arith.subf", SAME_TYPE)
register("arith.addi", SAME_TYPE)


# --- `op %a, kw = v, ... attr-dict : types` ------------------------------------

_KIND_PARSERS = {
    "i64list": pc.parse_i64_list,
    "i64": pc.parse_i64,
}


def _kind_check(kind, attr) -> bool:
  if kind == "i64list":
    return pc.is_i64_array(attr)
  if kind == "i64":
    return pc.is_i64(attr)
  if kind.startswith("enum:"):
    return pc.is_enum(attr, kind[5:])
  return False


def _kind_format(pr, kind, attr) -> str:
  if kind == "i64list":
    return pc.format_i64_list(attr)
  if kind == "i64":
    return str(attr.value)
  return attr.params[0][1]


def _kind_parse(p, kind):
  if kind.startswith("enum:"):
    return pc.enum_parser(kind[5:])(p)
  return _KIND_PARSERS[kind](p)


def keyword_form(keywords, types="functional", result_only=False):
  """keywords: [(syntax word, attribute name, kind)], all required."""

  def parse(p, name, pos):
    toks = pc.parse_operand_toks(p)
    props = {}
    for i, (word, attr_name, kind) in enumerate(keywords):
      if i == 0 and not toks:
        p.expect_keyword(word)
        p.expect_punct("=", f"after '{word}'")
      elif not pc.parse_keyword_comma(p, word):
        raise p.error(f"expected ', {word} ='")
      props[attr_name] = _kind_parse(p, kind)
    attrs = pc.parse_opt_attr_dict(p)
    if result_only:
      p.expect_punct(":", "followed by type")
      ty = p.parse_type()
      return pc.make_op(name, p.resolve_values(toks, []), [ty], attrs, props)
    if types == "same":
      operands, results = pc.parse_same_or_functional_type(p, toks)
    else:
      operands, results = pc.parse_functional_type(p, toks)
    return pc.make_op(name, operands, results, attrs, props)

  def print_(pr, op):
    parts = []
    elide = set()
    for word, attr_name, kind in keywords:
      attr = op.attr(attr_name)
      if not _kind_check(kind, attr):
        return None
      parts.append(f"{word} = {_kind_format(pr, kind, attr)}")
      elide.add(attr_name)
    if result_only:
      if op.operands or len(op.results) != 1:
        return None
      ty = pr.t(op.results[0].type)
    elif types == "same":
      if len(op.results) != 1:
        return None
      ty = pc.same_or_functional(pr, op)
    else:
      ty = pr.fn_type(op.operand_types, op.result_types)
    head = ", ".join(([pr.vs(op.operands)] if op.operands else []) + parts)
    return f"{head} {pr.attr_dict(op, elide)}: {ty}"

  return PrettyForm(parse, print_, "op %a, kw = v attr-dict : types",
                    fast=pc.fast_keyword(keywords, types, result_only))


def _reg_kw(op, keywords, **kwargs):
  register("stablehlo." + op, keyword_form(keywords, **kwargs))


_reg_kw("broadcast_in_dim", [("dims", "broadcast_dimensions", "i64list")])
_reg_kw("dynamic_broadcast_in_dim",
        [("dims", "broadcast_dimensions", "i64list")])
_reg_kw("transpose", [("dims", "permutation", "i64list")])
_reg_kw("reverse", [("dims", "dimensions", "i64list")], types="same")
_reg_kw("concatenate", [("dim", "dimension", "i64")])
_reg_kw("get_dimension_size", [("dim", "dimension", "i64")])
_reg_kw("dynamic_iota", [("dim", "iota_dimension", "i64")])
_reg_kw("iota", [("dim", "iota_dimension", "i64")], result_only=True)
_reg_kw("dynamic_slice", [("sizes", "slice_sizes", "i64list")])
_reg_kw("pad", [("low", "edge_padding_low", "i64list"),
                ("high", "edge_padding_high", "i64list"),
                ("interior", "interior_padding", "i64list")])
_reg_kw("fft", [("type", "fft_type", "enum:stablehlo.fft_type"),
                ("length", "fft_length", "i64list")])

for _op in ("reshape", "bitcast_convert", "is_finite", "dynamic_reshape",
            "real_dynamic_slice", "dynamic_pad", "dynamic_update_slice"):
  _reg_kw(_op, [])


# --- constants -----------------------------------------------------------------


def _parse_constant(p, name, pos):
  if p.at_punct("("):  # `() attr-dict : () -> T` for mismatched types
    p.next()
    p.expect_punct(")")
    attrs = pc.parse_opt_attr_dict(p)
    _, results = pc.parse_functional_type(p, [])
    value = attrs.pop("value", None)
    props = {"value": value} if value is not None else {}
    return pc.make_op(name, [], results, attrs, props)
  attrs = pc.parse_opt_attr_dict(p)
  vpos = p.lex.token_start()
  value = p.parse_attribute()
  ty = getattr(value, "type", None)
  if not isinstance(value, (a.DenseElementsAttr, a.DenseResourceAttr)):
    if isinstance(value, (a.IntegerAttr, a.FloatAttr)):
      ty = value.type
    else:
      raise p.error("expected elements attribute with a type", vpos)
  return pc.make_op(name, [], [ty], attrs, {"value": value})


def _print_constant(pr, op):
  value = op.attr("value")
  if len(op.results) != 1 or op.operands or value is None:
    return None
  if getattr(value, "type", None) != op.results[0].type:
    return (f"() {pr.attr_dict(op, set(), extra={'value': value})}: "
            f"{pr.fn_type([], op.result_types)}")
  d = pr.attr_dict(op, {"value"})
  return f"{d}{pr.a(value)}"


register("stablehlo.constant", PrettyForm(_parse_constant, _print_constant,
                                         fast=pc.fast_constant))


def _parse_arith_constant(p, name, pos):
  attrs = pc.parse_opt_attr_dict(p)
  value = p.parse_attribute()
  if isinstance(value, a.BoolAttr):  # `arith.constant true` is an i1
    value = a.IntegerAttr(int(value.value), t.i1)
  ty = getattr(value, "type", None)
  if not isinstance(ty, t.Type):
    raise p.error("expected typed attribute", pos)
  return pc.make_op(name, [], [ty], attrs, {"value": value})


def _print_arith_constant(pr, op):
  value = op.attr("value")
  if getattr(value, "type", None) != op.results[0].type:
    return None
  return f"{pr.attr_dict(op, {'value'})}{pr.a(value)}"


def _parse_cholesky(p, name, pos):
  toks = pc.parse_operand_toks(p, allow_empty=False)
  props = {}
  if pc.parse_keyword_comma(p, "lower"):
    if p.consume_keyword("true"):
      props["lower"] = a.BoolAttr(True)
    elif p.consume_keyword("false"):
      props["lower"] = a.BoolAttr(False)
    else:
      raise p.error("expected 'true' or 'false' after 'lower ='")
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_same_or_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs, props)


def _print_cholesky(pr, op):
  """`%a (, lower = true)? attr-dict : T` (a false `lower` is elided)."""
  if len(op.operands) != 1 or len(op.results) != 1:
    return None
  lower = op.attr("lower")
  head = pr.v(op.operands[0])
  if lower is not None and not op_defaults.is_default_attr(
      op.name, "lower", lower):
    if not isinstance(lower, a.BoolAttr):
      return None
    head += ", lower = true"
  return (f"{head} {pr.attr_dict(op, {'lower'})}: "
          f"{pc.same_or_functional(pr, op)}")


register("stablehlo.cholesky", PrettyForm(_parse_cholesky, _print_cholesky))


register("arith.constant", PrettyForm(_parse_arith_constant,
                                      _print_arith_constant))


# --- compare / select / complex / tuple ----------------------------------------


def _parse_compare(p, name, pos):
  direction = pc.enum_parser("stablehlo.comparison_direction")(p)
  p.expect_punct(",")
  toks = pc.parse_operand_toks(p, allow_empty=False)
  props = {"comparison_direction": direction}
  if p.consume_punct(","):
    props["compare_type"] = pc.enum_parser("stablehlo.comparison_type")(p)
  attrs = pc.parse_opt_attr_dict(p)
  # Upstream's format is always `functional-type(operands, results)`.
  operands, results = pc.parse_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs, props)


def _print_compare(pr, op):
  direction = op.attr("comparison_direction")
  if not pc.is_enum(direction, "stablehlo.comparison_direction"):
    return None
  elide = {"comparison_direction"}
  head = f"{direction.params[0][1]}, {pr.vs(op.operands)}"
  ctype = op.attr("compare_type")
  if ctype is not None:
    if not pc.is_enum(ctype, "stablehlo.comparison_type"):
      return None
    head += f", {ctype.params[0][1]}"
    elide.add("compare_type")
  fn_type = pr.fn_type(op.operand_types, op.result_types)
  return f"{head} {pr.attr_dict(op, elide)}: {fn_type}"


register("stablehlo.compare", PrettyForm(_parse_compare, _print_compare,
                                          fast=pc.fast_compare))


def _parse_select(p, name, pos):
  toks = pc.parse_operand_toks(p)
  attrs = pc.parse_opt_attr_dict(p)
  tpos = p.lex.token_start()
  p.expect_punct(":")
  if p.at_punct("("):
    p.lex.reset(tpos)
    operands, results = pc.parse_functional_type(p, toks)
  else:
    pred = p.parse_type()
    p.expect_punct(",", "after predicate type")
    ty = p.parse_type()
    operands, results = p.resolve_values(toks, [pred, ty, ty]), [ty]
  return pc.make_op(name, operands, results, attrs)


def _print_select(pr, op):
  if len(op.operands) != 3 or len(op.results) != 1:
    return None
  tys = op.operand_types
  if tys[1] == tys[2] == op.results[0].type:
    ty = f"{pr.t(tys[0])}, {pr.t(tys[1])}"
  else:
    ty = pr.fn_type(tys, op.result_types)
  return f"{pr.vs(op.operands)} {pr.attr_dict(op)}: {ty}"


register("stablehlo.select", PrettyForm(_parse_select, _print_select,
                                         fast=pc.fast_select))


def _real_of(ty):
  if isinstance(ty, t.RankedTensorType) and isinstance(ty.element_type,
                                                        t.ComplexType):
    return t.RankedTensorType(ty.shape, ty.element_type.element_type,
                              ty.encoding)
  return None


def _parse_complex(p, name, pos):
  toks = pc.parse_operand_toks(p)
  attrs = pc.parse_opt_attr_dict(p)
  tpos = p.lex.token_start()
  p.expect_punct(":")
  if p.at_punct("("):
    p.lex.reset(tpos)
    operands, results = pc.parse_functional_type(p, toks)
  else:
    ty = p.parse_type()
    real = _real_of(ty)
    if real is None:
      raise p.error("expected tensor of complex type", tpos)
    operands, results = p.resolve_values(toks, [real] * len(toks)), [ty]
  return pc.make_op(name, operands, results, attrs)


def _print_complex(pr, op):
  if len(op.results) != 1:
    return None
  real = _real_of(op.results[0].type)
  if real is not None and all(ty == real for ty in op.operand_types):
    ty = pr.t(op.results[0].type)
  else:
    ty = pr.fn_type(op.operand_types, op.result_types)
  return f"{pr.vs(op.operands)} {pr.attr_dict(op)}: {ty}"


register("stablehlo.complex", PrettyForm(_parse_complex, _print_complex))


def _parse_tuple(p, name, pos):
  toks = pc.parse_operand_toks(p)
  attrs = pc.parse_opt_attr_dict(p)
  tpos = p.lex.token_start()
  p.expect_punct(":")
  ty = p.parse_type()
  if not isinstance(ty, t.TupleType):
    raise p.error("expected tuple type", tpos)
  return pc.make_op(name, p.resolve_values(toks, list(ty.types)), [ty], attrs)


def _print_tuple(pr, op):
  ty = op.results[0].type if len(op.results) == 1 else None
  if not isinstance(ty, t.TupleType) or list(ty.types) != op.operand_types:
    return None
  return f"{_operands_prefix(pr, op)}{pr.attr_dict(op)}: {pr.t(ty)}"


register("stablehlo.tuple", PrettyForm(_parse_tuple, _print_tuple))


def _parse_gte(p, name, pos):
  tok = p.expect_kind("percent_id", "SSA operand")
  p.expect_punct("[")
  index = p.parse_int("tuple index")
  p.expect_punct("]")
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, [tok])
  return pc.make_op(name, operands, results, attrs,
                    {"index": a.IntegerAttr(index, t.i32)})


def _print_gte(pr, op):
  index = op.attr("index")
  if not isinstance(index, a.IntegerAttr) or len(op.operands) != 1:
    return None
  return (f"{pr.v(op.operands[0])}[{index.value}] "
          f"{pr.attr_dict(op, {'index'})}: "
          f"{pr.fn_type(op.operand_types, op.result_types)}")


register("stablehlo.get_tuple_element", PrettyForm(_parse_gte, _print_gte))


# --- slice / reduce_precision / rng_bit_generator / optimization_barrier --------


def _parse_slice(p, name, pos):
  tok = p.expect_kind("percent_id", "SSA operand")
  starts, limits, strides = [], [], []

  def dim():
    starts.append(p.parse_int())
    p.expect_punct(":")
    limits.append(p.parse_int())
    strides.append(p.parse_int() if p.consume_punct(":") else 1)

  p.parse_delimited("[", "]", dim)
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, [tok])
  props = {k: a.DenseArrayAttr(t.i64, tuple(v)) for k, v in (
      ("start_indices", starts), ("limit_indices", limits),
      ("strides", strides))}
  return pc.make_op(name, operands, results, attrs, props)


def _print_slice(pr, op):
  names = ("start_indices", "limit_indices", "strides")
  arrs = [op.attr(n) for n in names]
  if not all(pc.is_i64_array(x) for x in arrs) or len(op.operands) != 1:
    return None
  if not len(arrs[0].values) == len(arrs[1].values) == len(arrs[2].values):
    return None
  dims = []
  for s, l, st in zip(arrs[0].values, arrs[1].values, arrs[2].values):
    dims.append(f"{s}:{l}" + (f":{st}" if st != 1 else ""))
  return (f"{pr.v(op.operands[0])} [{', '.join(dims)}] "
          f"{pr.attr_dict(op, set(names))}: "
          f"{pr.fn_type(op.operand_types, op.result_types)}")


register("stablehlo.slice", PrettyForm(_parse_slice, _print_slice,
                                        fast=pc.fast_slice))


def _parse_reduce_precision(p, name, pos):
  toks = pc.parse_operand_toks(p, allow_empty=False)
  if not pc.parse_keyword_comma(p, "format"):
    raise p.error("expected ', format ='")
  ftok = p.expect_kind("bare_id", "format such as e5m10")
  import re  # pylint: disable=g-import-not-at-top
  m = re.fullmatch(r"e([0-9]+)m([0-9]+)", ftok.text)
  if m is None:
    raise p.error("expected format 'e<exponent bits>m<mantissa bits>'",
                  ftok.pos)
  props = {"exponent_bits": a.IntegerAttr(int(m.group(1)), t.i32),
           "mantissa_bits": a.IntegerAttr(int(m.group(2)), t.i32)}
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_same_or_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs, props)


def _print_reduce_precision(pr, op):
  e, m = op.attr("exponent_bits"), op.attr("mantissa_bits")
  if not (isinstance(e, a.IntegerAttr) and isinstance(m, a.IntegerAttr)):
    return None
  if len(op.results) != 1:
    return None
  return (f"{pr.vs(op.operands)}, format = e{e.value}m{m.value} "
          f"{pr.attr_dict(op, {'exponent_bits', 'mantissa_bits'})}: "
          f"{pc.same_or_functional(pr, op)}")


register("stablehlo.reduce_precision",
         PrettyForm(_parse_reduce_precision, _print_reduce_precision))


def _parse_rng_bit_generator(p, name, pos):
  toks = pc.parse_operand_toks(p, allow_empty=False)
  if not pc.parse_keyword_comma(p, "algorithm"):
    raise p.error("expected ', algorithm ='")
  props = {"rng_algorithm": pc.enum_parser("stablehlo.rng_algorithm")(p)}
  attrs = pc.parse_opt_attr_dict(p)
  operands, results = pc.parse_functional_type(p, toks)
  return pc.make_op(name, operands, results, attrs, props)


def _print_rng_bit_generator(pr, op):
  alg = op.attr("rng_algorithm")
  if not pc.is_enum(alg, "stablehlo.rng_algorithm"):
    return None
  return (f"{pr.vs(op.operands)}, algorithm = {alg.params[0][1]} "
          f"{pr.attr_dict(op, {'rng_algorithm'})}: "
          f"{pr.fn_type(op.operand_types, op.result_types)}")


register("stablehlo.rng_bit_generator",
         PrettyForm(_parse_rng_bit_generator, _print_rng_bit_generator))


def _parse_type_list_op(p, name, pos):
  """`op attr-dict %a, %b : T1, T2` (results typed like the operands).
  Upstream writes the attribute dictionary first; one after the operands
  is accepted too."""
  attrs = pc.parse_opt_attr_dict(p)
  toks = pc.parse_operand_toks(p)
  if not attrs:
    attrs = pc.parse_opt_attr_dict(p)
  types = []
  if not toks and p.consume_punct("("):  # no operands: upstream prints `()`
    p.expect_punct(")")
  elif toks:
    p.expect_punct(":", "followed by types")
    types = p.parse_type_list()
  operands = p.resolve_values(toks, types)
  return pc.make_op(name, operands, types, attrs)


def _print_type_list_op(pr, op):
  if op.operand_types != op.result_types:
    return None
  if not op.operands:
    return pr.attr_dict(op).rstrip() + "()"
  return (f"{pr.attr_dict(op)}{pr.vs(op.operands)} : "
          f"{pr.ts(op.operand_types)}")


register("stablehlo.optimization_barrier",
         PrettyForm(_parse_type_list_op, _print_type_list_op))
