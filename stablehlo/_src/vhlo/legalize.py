"""StableHLO (our IR) -> VHLO at the current version.

The rules are those of StableHLO's `StablehloLegalizeToVhlo.cpp`: every
`stablehlo.*` op and `func.func` / `func.call` / `func.return` becomes the
newest `vhlo.*_vN` op; attributes the StableHLO op leaves out get their
default value (VHLO ops always carry every declared attribute); struct
attributes such as dimension numbers are spread into one VHLO attribute per
field; discardable attributes are converted generically and kept.

VHLO has no CHLO ops: a module holding them is rejected, as upstream does;
legalize CHLO to StableHLO first. Shardy (`sdy`) ops stay as they are, with
builtin types, as jaxlib's "mixed" serialization keeps them: a value
crossing between a VHLO op and an sdy op goes through a
`builtin.unrealized_conversion_cast`, placed where MLIR's dialect
conversion materializes it (`_Casts`).
"""

from __future__ import annotations

import functools

import numpy as np

import support
from stablehlo._src.bytecode import tree
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import builtin_conversion as bc
from stablehlo._src.vhlo import ops
from stablehlo._src.vhlo import sdy_conversion
from stablehlo._src.vhlo import type_conversion as tc
from stablehlo._src.vhlo import vhlo_ir


class LegalizationError(support.InvalidArgumentError):
  """The module holds something VHLO cannot express."""


_COLLECTIVES = ("stablehlo.all_gather", "stablehlo.all_reduce",
                "stablehlo.all_to_all", "stablehlo.collective_permute",
                "stablehlo.reduce_scatter", "stablehlo.collective_broadcast",
                "stablehlo.collective_reduce")
RESULT_ACCURACY_OPS = (
    "stablehlo.cbrt", "stablehlo.cosine", "stablehlo.exponential",
    "stablehlo.exponential_minus_one", "stablehlo.log",
    "stablehlo.log_plus_one", "stablehlo.logistic", "stablehlo.rsqrt",
    "stablehlo.sine", "stablehlo.sqrt", "stablehlo.tan", "stablehlo.tanh")
CONV_FIELDS = (
    "input_batch_dimension", "input_feature_dimension",
    "input_spatial_dimensions", "kernel_input_feature_dimension",
    "kernel_output_feature_dimension", "kernel_spatial_dimensions",
    "output_batch_dimension", "output_feature_dimension",
    "output_spatial_dimensions")
DOT_FIELDS = ("lhs_batching_dimensions", "rhs_batching_dimensions",
              "lhs_contracting_dimensions", "rhs_contracting_dimensions")
GATHER_FIELDS = ("offset_dims", "collapsed_slice_dims",
                 "operand_batching_dims", "start_indices_batching_dims",
                 "start_index_map", "index_vector_dim")
SCATTER_FIELDS = ("update_window_dims", "inserted_window_dims",
                  "input_batching_dims", "scatter_indices_batching_dims",
                  "scatter_dims_to_operand_dims", "index_vector_dim")
ALGORITHM_FIELDS = ("lhs_precision_type", "rhs_precision_type",
                    "accumulation_type", "lhs_component_count",
                    "rhs_component_count", "num_primitive_operations",
                    "allow_imprecise_accumulation")
# StableHLO's CustomCallApiVersion enum, by its integer value.
API_VERSIONS = ("API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL",
                "API_VERSION_STATUS_RETURNING",
                "API_VERSION_STATUS_RETURNING_UNIFIED",
                "API_VERSION_TYPED_FFI")


def _fail(op: core.Operation, what: str) -> LegalizationError:
  return LegalizationError(f"failed to legalize operation '{op.name}': {what}")


# --- struct attributes --------------------------------------------------------


def _struct(attr, name: str, op, what: str) -> a.DialectAttr:
  if isinstance(attr, a.DialectAttr) and attr.name == name:
    return attr
  raise _fail(op, f"{what} must be #{name}, got {attr!r}")


# The VHLO attributes legalization makes from plain values (struct fields,
# defaults) are immutable: one object per value serves every op, which
# also spares the writer hashing and comparing copies.
_shared = functools.lru_cache(maxsize=1024)


@_shared
def _integer(value: int) -> tree.Attr:
  return ac.integer(value)


@_shared
def _i64_tensor(values: tuple) -> tree.Attr:
  return ac.i64_tensor(values)


def _int_field(attr: a.DialectAttr, field: str, op, default=None) -> tree.Attr:
  value = attr.get(field, default)
  if not isinstance(value, int) or isinstance(value, bool):
    raise _fail(op, f"#{attr.name} field {field} must be an integer")
  return _integer(int(value))


def _dims_field(attr: a.DialectAttr, field: str, op) -> tree.Attr:
  value = attr.get(field, ())
  if not isinstance(value, (tuple, list)) or not all(
      isinstance(v, int) and not isinstance(v, bool) for v in value):
    raise _fail(op, f"#{attr.name} field {field} must be a list of integers")
  return _i64_tensor(tuple(int(v) for v in value))


def _spread(attr: a.DialectAttr, fields, op, named: dict) -> None:
  """Dimension numbers: one VHLO attribute per field (an omitted
  index_vector_dim is 0, as StableHLO's parser reads it)."""
  for field in fields:
    if field.endswith(("_dims", "_dimensions", "_map")):
      named[field] = _dims_field(attr, field, op)
    else:
      named[field] = _int_field(attr, field, op,
                                0 if field == "index_vector_dim" else None)


def _channel_handle(attr, op) -> a.DialectAttr:
  return _struct(attr, "stablehlo.channel_handle", op, "channel_handle")


def _true_flag(attr, op, name) -> tree.Attr:
  if isinstance(attr, a.UnitAttr) or (isinstance(attr, a.BoolAttr) and
                                      attr.value):
    return ac.boolean(True)
  if isinstance(attr, a.BoolAttr):
    return ac.boolean(False)
  raise _fail(op, f"{name} must be a unit attribute")


def _symbol(attr, op, name) -> tree.Attr:
  if isinstance(attr, a.SymbolRefAttr) and not attr.nested:
    return ac.string(attr.root)
  raise _fail(op, f"{name} must be a flat symbol reference")


_SDY_PREFIX = sdy_conversion.DIALECT + "."

# Every op name _special below has a rule for; the others skip it.
_OPS_WITH_SPECIAL_ATTRS = frozenset((
    "stablehlo.convolution", "stablehlo.dynamic_conv",
    "stablehlo.custom_call", "stablehlo.dot_general", "stablehlo.gather",
    "stablehlo.dynamic_gather", "stablehlo.send", "stablehlo.recv",
    "stablehlo.scatter", "func.call") + _COLLECTIVES)


def _special(op: core.Operation, name: str, attr, named: dict) -> bool:
  """Op-specific attribute rules; True when `attr` was handled."""
  kind = op.name
  if kind in _COLLECTIVES:
    if name == "channel_handle":
      named["channel_id"] = _int_field(_channel_handle(attr, op), "handle", op)
      return True
    if name in ("use_global_device_ids", "has_dynamic_root") and (
        kind != "stablehlo.collective_broadcast" or
        name == "has_dynamic_root"):
      named[name] = _true_flag(attr, op, name)
      return True
  if kind in ("stablehlo.convolution", "stablehlo.dynamic_conv") and \
      name == "dimension_numbers":
    _spread(_struct(attr, "stablehlo.conv", op, name), CONV_FIELDS, op, named)
    return True
  if kind == "stablehlo.custom_call":
    if name == "api_version":
      if not isinstance(attr, a.IntegerAttr) or not 0 <= attr.value < len(
          API_VERSIONS):
        raise _fail(op, f"invalid api_version {attr!r}")
      named[name] = _enum("CustomCallApiVersionV1Attr",
                            API_VERSIONS[attr.value])
      return True
    if name == "called_computations":
      if not isinstance(attr, a.ArrayAttr):
        raise _fail(op, "called_computations must be an array")
      named[name] = ac.array(_symbol(x, op, name) for x in attr.elements)
      return True
  if kind == "stablehlo.dot_general":
    if name == "dot_dimension_numbers":
      _spread(_struct(attr, "stablehlo.dot", op, name), DOT_FIELDS, op, named)
      return True
    if name == "algorithm":
      alg = _struct(attr, "stablehlo.dot_algorithm", op, name)
      for field in ALGORITHM_FIELDS[:3]:
        ty = alg.get(field)
        if not isinstance(ty, t.Type):
          raise _fail(op, f"#stablehlo.dot_algorithm {field} must be a type")
        named[field] = ac.to_vhlo(a.TypeAttr(ty))
      for field in ALGORITHM_FIELDS[3:6]:
        named[field] = _int_field(alg, field, op)
      named[ALGORITHM_FIELDS[6]] = ac.boolean(bool(alg.get(ALGORITHM_FIELDS[6])))
      return True
  if kind in ("stablehlo.gather", "stablehlo.dynamic_gather") and \
      name == "dimension_numbers":
    _spread(_struct(attr, "stablehlo.gather", op, name), GATHER_FIELDS, op,
            named)
    return True
  if kind in ("stablehlo.send", "stablehlo.recv") and name == "channel_handle":
    handle = _channel_handle(attr, op)
    named["channel_id"] = _int_field(handle, "handle", op)
    named["channel_type"] = _int_field(handle, "type", op)
    return True
  if kind == "stablehlo.scatter" and name == "scatter_dimension_numbers":
    _spread(_struct(attr, "stablehlo.scatter", op, name), SCATTER_FIELDS, op,
            named)
    return True
  if kind == "func.call" and name == "callee":
    named[name] = _symbol(attr, op, name)
    return True
  return False


# --- defaults -------------------------------------------------------------------


@_shared
def _i64_ones(n: int) -> tree.Attr:
  return ac.i64_tensor([1] * n)


@_shared
def _zero_padding(n: int) -> tree.Attr:
  return ac.i64_tensor(np.zeros((n, 2), np.int64), shape=(n, 2))


@_shared
def _no_reversal(n: int) -> tree.Attr:
  return ac.dense_to_vhlo(t.RankedTensorType((n,), t.i1),
                          np.zeros(n, np.bool_))


@_shared
def _enum(kind: str, symbol: str) -> tree.Attr:
  return ac.enum(kind, symbol)


@_shared
def _default_precision() -> tree.Attr:
  return ac.array([ac.enum("PrecisionV1Attr", "DEFAULT")] * 2)


@_shared
def _empty_array() -> tree.Attr:
  return ac.array(())


@_shared
def _empty_dictionary() -> tree.Attr:
  return ac.va("DictionaryV1Attr", ())


@_shared
def _none_type_attr() -> tree.Attr:
  return ac.none_type_attr()


@_shared
def _default_result_accuracy() -> tree.Attr:
  return ac.default_result_accuracy()


def _num_spatial(op, attrs) -> int:
  dims = attrs.get("dimension_numbers")
  if not isinstance(dims, a.DialectAttr):
    raise _fail(op, "missing dimension_numbers")
  return len(dims.get("input_spatial_dimensions", ()))


def _num_window_dims(op, attrs) -> int:
  dims = attrs.get("window_dimensions")
  if not isinstance(dims, a.DenseArrayAttr):
    if isinstance(dims, a.DenseElementsAttr):
      return int(np.asarray(dims.array).size)
    raise _fail(op, "missing window_dimensions")
  return len(dims.values)


# Every op name _defaults below acts on; the others (most ops) skip its
# chain of tests.
_OPS_WITH_DEFAULTS = frozenset((
    "func.func", "stablehlo.cholesky", "stablehlo.compare",
    "stablehlo.composite", "stablehlo.convolution", "stablehlo.dynamic_conv",
    "stablehlo.custom_call", "stablehlo.dot_general", "stablehlo.dot",
    "stablehlo.dynamic_broadcast_in_dim", "stablehlo.gather",
    "stablehlo.dynamic_gather", "stablehlo.infeed", "stablehlo.outfeed",
    "stablehlo.send", "stablehlo.recv", "stablehlo.reduce_window",
    "stablehlo.scatter", "stablehlo.select_and_scatter", "stablehlo.sort") +
                               _COLLECTIVES + RESULT_ACCURACY_OPS)


def _defaults(op: core.Operation, attrs: dict) -> dict:
  """The VHLO attributes that stand for absent StableHLO attributes."""
  kind = op.name
  d = {}
  if kind not in _OPS_WITH_DEFAULTS:
    return d

  def missing(name):
    return name not in attrs

  if kind == "func.func":
    if missing("sym_visibility"):
      d["sym_visibility"] = ac.string("")
    if missing("arg_attrs"):
      d["arg_attrs"] = _empty_array()
    if missing("res_attrs"):
      d["res_attrs"] = _empty_array()
  if kind in _COLLECTIVES and missing("channel_handle"):
    d["channel_id"] = _integer(0)
  if kind in ("stablehlo.all_gather", "stablehlo.all_reduce",
              "stablehlo.reduce_scatter", "stablehlo.collective_reduce"):
    if missing("use_global_device_ids"):
      d["use_global_device_ids"] = ac.boolean(False)
  if kind in ("stablehlo.collective_broadcast", "stablehlo.collective_reduce"):
    if missing("has_dynamic_root"):
      d["has_dynamic_root"] = ac.boolean(False)
  if kind == "stablehlo.cholesky" and missing("lower"):
    d["lower"] = ac.boolean(False)
  if kind == "stablehlo.compare" and missing("compare_type"):
    d["compare_type"] = _enum("ComparisonTypeV1Attr", "NOTYPE")
  if kind == "stablehlo.composite":
    if missing("version"):
      d["version"] = _integer(0)
    if missing("composite_attributes"):
      d["composite_attributes"] = _empty_dictionary()
  if kind in ("stablehlo.convolution", "stablehlo.dynamic_conv"):
    n = _num_spatial(op, attrs)
    if missing("window_strides"):
      d["window_strides"] = _i64_ones(n)
    if kind == "stablehlo.convolution" and missing("padding"):
      d["padding"] = _zero_padding(n)
    if missing("lhs_dilation"):
      d["lhs_dilation"] = _i64_ones(n)
    if missing("rhs_dilation"):
      d["rhs_dilation"] = _i64_ones(n)
    if missing("window_reversal"):
      d["window_reversal"] = _no_reversal(n)
    if missing("precision_config"):
      d["precision_config"] = _default_precision()
  if kind == "stablehlo.custom_call":
    if missing("has_side_effect"):
      d["has_side_effect"] = ac.boolean(False)
    if missing("backend_config"):
      api = attrs.get("api_version")
      typed_ffi = isinstance(api, a.IntegerAttr) and api.value == 4
      d["backend_config"] = (_empty_dictionary() if typed_ffi
                             else ac.string(""))
    if missing("api_version"):
      d["api_version"] = _enum("CustomCallApiVersionV1Attr",
                                 "API_VERSION_ORIGINAL")
    for name in ("called_computations", "operand_layouts", "result_layouts",
                 "output_operand_aliases", "result_tilings"):
      if missing(name):
        d[name] = _empty_array()
  if kind in ("stablehlo.dot_general", "stablehlo.dot") and \
      missing("precision_config"):
    d["precision_config"] = _default_precision()
  if kind == "stablehlo.dot_general" and missing("algorithm"):
    for name in ALGORITHM_FIELDS:
      d[name] = _none_type_attr()
  if kind in RESULT_ACCURACY_OPS and missing("result_accuracy"):
    d["result_accuracy"] = _default_result_accuracy()
  if kind == "stablehlo.dynamic_broadcast_in_dim":
    for name in ("known_expanding_dimensions",
                 "known_nonexpanding_dimensions"):
      if missing(name):
        d[name] = _i64_tensor(())
  if kind in ("stablehlo.gather", "stablehlo.dynamic_gather") and \
      missing("indices_are_sorted"):
    d["indices_are_sorted"] = ac.boolean(False)
  if kind == "stablehlo.infeed":
    if missing("infeed_config"):
      d["infeed_config"] = ac.string("")
    if missing("layout"):
      d["layout"] = _empty_array()
  if kind == "stablehlo.outfeed" and missing("outfeed_config"):
    d["outfeed_config"] = ac.string("")
  if kind in ("stablehlo.send", "stablehlo.recv"):
    if missing("is_host_transfer"):
      d["is_host_transfer"] = ac.boolean(False)
    if missing("source_target_pairs"):
      d["source_target_pairs"] = _i64_tensor(())
  if kind == "stablehlo.reduce_window":
    n = _num_window_dims(op, attrs)
    for name in ("window_strides", "base_dilations", "window_dilations"):
      if missing(name):
        d[name] = _i64_ones(n)
    if missing("padding"):
      d["padding"] = _zero_padding(n)
  if kind == "stablehlo.scatter":
    for name in ("indices_are_sorted", "unique_indices"):
      if missing(name):
        d[name] = ac.boolean(False)
  if kind == "stablehlo.select_and_scatter":
    n = _num_window_dims(op, attrs)
    if missing("window_strides"):
      d["window_strides"] = _i64_ones(n)
    if missing("padding"):
      d["padding"] = _zero_padding(n)
  if kind == "stablehlo.sort":
    if missing("dimension"):
      d["dimension"] = _integer(-1)
    if missing("is_stable"):
      d["is_stable"] = ac.boolean(False)
  return d


# --- ops --------------------------------------------------------------------------


class _Casts:
  """The unrealized casts between VHLO and builtin (sdy) values.

  MLIR's conversion driver materializes a cast right after the definition
  of the value it converts (at the block start for a block argument), and
  keeps one per value and type:
    * into VHLO ("target"): for a VHLO op using an sdy value, created when
      that op is converted (pre-order), located at the user;
    * out of VHLO ("source"): for an sdy op using a VHLO value, created
      when the value's producer (or its block's signature) is converted,
      result by result, located at the producer.
  Each new cast goes right after the definition, so later ones precede
  earlier ones.
  """

  def __init__(self):
    # id(tree value) -> (ops list of its block, producer op or None, the
    # location and index a source cast of it takes).
    self.home: dict = {}
    self.cache: dict = {}  # (id(value), type) -> cast result
    # id(cast op) -> (id(producer) or id(block ops), index of the source).
    self.source_of: dict = {}

  def define(self, value: tree.Value, ops_list: list, producer, loc=None,
             index: int = 0) -> None:
    self.home[id(value)] = (ops_list, producer, loc, index)

  def cast(self, value: tree.Value, ty, loc, source: bool, index: int):
    key = (id(value), ty)
    hit = self.cache.get(key)
    if hit is not None:
      return hit
    ops_list, producer, _, _ = self.home[id(value)]
    new = vhlo_ir.VhloOp(name=sdy_conversion.CAST, location=loc,
                         operands=[value])
    new.results = [tree.Value(ty)]
    self.define(new.results[0], ops_list, new)
    at = 0 if producer is None else _index(ops_list, producer) + 1
    anchor = id(ops_list) if producer is None else id(producer)
    if source:
      # Casts made earlier for later results / arguments come first.
      while at < len(ops_list):
        seen = self.source_of.get(id(ops_list[at]))
        if seen is None or seen[0] != anchor or seen[1] < index:
          break
        at += 1
      self.source_of[id(new)] = (anchor, index)
    ops_list.insert(at, new)
    self.cache[key] = new.results[0]
    return new.results[0]


def _index(ops_list: list, op) -> int:
  for i, other in enumerate(ops_list):
    if other is op:
      return i
  raise support.InternalError(f"{op.name} is not in its block")


# StableHLO / func op name -> (its current VHLO definition, that
# definition's full name, its attribute names); see _latest.
_LATEST: dict = {}


def _latest(op: core.Operation) -> tuple:
  """(current VHLO definition, its full name, its attribute names) of a
  non-sdy op."""
  base = ops.vhlo_base(op.name)
  if base is None:
    if op.dialect == "chlo":
      raise _fail(op, "VHLO has no CHLO ops; legalize CHLO to StableHLO "
                  "before serializing (CHLO -> StableHLO decomposition)")
    raise _fail(op, f"'{op.dialect}' ops have no VHLO counterpart (only "
                "stablehlo, func and sdy ops can be serialized)")
  definition = ops.latest(base)
  hit = (definition, definition.full_name, frozenset(definition.attributes))
  if len(_LATEST) < 4096:
    _LATEST[op.name] = hit
  return hit


def _is_vhlo_type(ty) -> bool:
  return isinstance(ty, (tree.Type, tree.AsmType, tree.OpaqueType)) and \
      ty.dialect == "vhlo"


# id(our type) -> (the type, its VHLO type): types are immutable and the
# parser shares one object per type text, so the conversion is kept per
# object across modules (bounded: emptied when full).
_TYPE_IDS: dict = {}
_TYPE_IDS_LIMIT = 1 << 14


class _Legalizer:
  """Converts one module; keeps the value and block maps."""

  def __init__(self, module: core.Module):
    self.module = module
    self.values: dict = {}
    self.blocks: dict = {}
    self.type_cache: dict = {}
    self.type_ids = _TYPE_IDS  # id(type) -> (type, its conversion)
    self.casts = _Casts()
    self.aliases = module.location_aliases

  def type(self, ty: t.Type) -> tree.Type:
    # By identity first: the parser shares one object per type text, and
    # hashing a type walks its fields.
    hit = self.type_ids.get(id(ty))
    if hit is not None and hit[0] is ty:
      return hit[1]
    try:
      cached = self.type_cache.get(ty)
    except TypeError:
      cached = None
    if cached is None:
      cached = ac.type_to_vhlo(ty)
      try:
        self.type_cache[ty] = cached
      except TypeError:
        pass
    if len(_TYPE_IDS) >= _TYPE_IDS_LIMIT:
      _TYPE_IDS.clear()
    _TYPE_IDS[id(ty)] = (ty, cached)
    return cached

  def loc(self, loc) -> tree.Attr:
    return bc.location_to_builtin(loc, self.aliases)

  def value(self, v: core.Value, op, vhlo_user: bool = True) -> tree.Value:
    """The tree value for `v` as `op` uses it: cast into VHLO for a VHLO
    user of an sdy value, out of VHLO for an sdy user of a VHLO value."""
    mapped = self.values.get(id(v))
    if mapped is None:
      raise _fail(op, "uses a value that is not defined before it")
    if _is_vhlo_type(mapped.type) == vhlo_user:
      return mapped
    if vhlo_user:
      return self.casts.cast(mapped, self.type(v.type), self.loc(op.location),
                             source=False, index=0)
    _, _, loc, index = self.casts.home[id(mapped)]
    return self.casts.cast(mapped, self.builtin_type(v.type, op), loc,
                           source=True, index=index)

  def builtin_type(self, ty: t.Type, op) -> tree.Type:
    if isinstance(ty, t.TokenType):
      return bc.STABLEHLO_TOKEN
    try:
      return bc.type_to_builtin(ty)
    except support.XlaError as e:
      raise _fail(op, str(e)) from e

  def module_op(self) -> vhlo_ir.VhloOp:
    mod = self.module.op
    named = {}
    for name, attr in list(mod.attributes.items()) + list(
        mod.properties.items()):
      named[name] = bc.attr_to_builtin(attr)
    root = vhlo_ir.VhloOp(name=vhlo_ir.MODULE, location=self.loc(mod.location),
                          named=named)
    root.regions = [self.region(r, mod) for r in mod.regions]
    return root

  def region(self, region: core.Region, parent) -> tree.Region:
    out = tree.Region()
    foreign = parent.dialect == sdy_conversion.DIALECT
    for block in region.blocks:
      known = self.blocks.get(id(block))  # (made earlier as a successor)
      if known is None:
        known = self.blocks[id(block)] = tree.Block()
      out.blocks.append(known)
    for block, new in zip(region.blocks, out.blocks):
      locs = block.argument_locations
      for i, arg in enumerate(block.arguments):
        loc = locs[i] if i < len(locs) else None
        ty = (self.builtin_type(arg.type, parent) if foreign
              else self.type(arg.type))
        value = tree.Value(ty, loc=self.loc(loc))
        self.values[id(arg)] = value
        self.casts.define(value, new.ops, None, value.loc, i)
        new.args.append(value)
      convert, ops_list = self.op, new.ops
      for op in block.operations:
        convert(op, ops_list)
    return out

  def op(self, op: core.Operation, out: list) -> None:
    # Runs once per op: the by-identity lookups of types and values, and
    # the result bookkeeping, are inline.
    op_name = op.name
    hit = _LATEST.get(op_name)
    if hit is None:
      if op_name.startswith(_SDY_PREFIX) or op_name == sdy_conversion.DIALECT:
        self.sdy_op(op, out)
        return
      hit = _latest(op)
    definition, full_name, required = hit
    attrs = op.attributes
    if op.properties:
      attrs = dict(attrs)
      attrs.update(op.properties)
    try:
      named = _defaults(op, attrs) if op_name in _OPS_WITH_DEFAULTS else {}
      if attrs:
        special = op_name in _OPS_WITH_SPECIAL_ATTRS
        shared = ac.TO_VHLO_SHARED
        for name in sorted(attrs):
          attr = attrs[name]
          if special and _special(op, name, attr, named):
            continue
          h = shared.get(id(attr))
          named[name] = (h[1] if h is not None and h[0] is attr
                         else ac.to_vhlo_shared(attr))
    except tc.ConversionError as e:
      raise _fail(op, str(e)) from e
    result_types = []
    if op.results:
      type_ids = self.type_ids
      try:
        for r in op.results:
          ty = r.type
          h = type_ids.get(id(ty))
          result_types.append(h[1] if h is not None and h[0] is ty
                              else self.type(ty))
      except tc.ConversionError as e:
        raise _fail(op, str(e)) from e
    loc = op.location
    h = bc.FILE_LOCATIONS.get(id(loc))
    location = (h[1] if h is not None and h[0] is loc
                else bc.location_to_builtin(loc, self.aliases))
    operands = []
    if op.operands:
      values = self.values
      for v in op.operands:
        mapped = values.get(id(v))
        # A VHLO value (nearly always) is used as it is.
        if mapped is not None and mapped.type.__class__ is tree.Type and \
            mapped.type.dialect == "vhlo":
          operands.append(mapped)
        else:
          operands.append(self.value(v, op))
    new = vhlo_ir.VhloOp.make(full_name, location, operands, named)
    out.append(new)
    if result_types:
      new.results = results = list(map(tree.Value, result_types))
      values, home = self.values, self.casts.home
      for i, old in enumerate(op.results):
        value = results[i]
        values[id(old)] = value
        home[id(value)] = (out, new, location, i)
    if op.regions:
      new.regions = [self.region(r, op) for r in op.regions]
    if op.successors:
      new.successors = [self.blocks.setdefault(id(b), tree.Block())
                        for b in op.successors]
    if required and not named.keys() >= required:
      missing = [n for n in definition.attributes if n not in named]
      raise _fail(op, f"missing required attribute(s) {', '.join(missing)}")

  def _results(self, op, new, result_types, out) -> None:
    out.append(new)
    if not result_types:
      return
    new.results = results = [tree.Value(ty) for ty in result_types]
    values, home, loc = self.values, self.casts.home, new.location
    for i, old in enumerate(op.results):
      value = results[i]
      values[id(old)] = value
      home[id(value)] = (out, new, loc, i)

  def sdy_op(self, op: core.Operation, out: list) -> None:
    """An sdy op, kept with builtin types and attributes."""
    named = {}
    try:
      for name, attr in list(op.properties.items()) + list(
          op.attributes.items()):
        named[name] = bc.attr_to_builtin(attr)
    except (tc.ConversionError, support.UnimplementedError) as e:
      raise _fail(op, str(e)) from e
    result_types = [self.builtin_type(r.type, op) for r in op.results]
    new = vhlo_ir.VhloOp(
        name=op.name, location=self.loc(op.location),
        operands=[self.value(v, op, vhlo_user=False) for v in op.operands],
        named=named)
    self._results(op, new, result_types, out)
    new.regions = [self.region(r, op) for r in op.regions]


def module_to_vhlo(module: core.Module) -> vhlo_ir.VhloOp:
  """The `builtin.module` root of the VHLO form of `module` (current ops)."""
  return legalize_module(module)[0]


def legalize_module(module: core.Module) -> tuple:
  """(the root `module_to_vhlo` makes, whether it holds any unrealized
  cast). The ops and blocks of the tree are new, without use-list order
  records."""
  if not isinstance(module, core.Module):
    raise support.InvalidArgumentError(
        f"expected a stablehlo Module, got {type(module).__name__}")
  if module.op.name != "builtin.module":
    raise support.InvalidArgumentError("the root op must be builtin.module")
  legalizer = _Legalizer(module)
  root = legalizer.module_op()
  return root, bool(legalizer.casts.cache)
