"""VHLO (current version) -> StableHLO (our IR).

The rules are those of StableHLO's `VhloLegalizeToStablehlo.cpp`: attributes
that hold their default value are dropped (StableHLO leaves them out),
the per-field VHLO attributes of dimension numbers and channel handles are
folded back into their StableHLO struct attributes, i64/i1 tensors become
dense arrays where StableHLO declares them so, and `vhlo.return_v1` becomes
`func.return` inside functions and `stablehlo.return` elsewhere.
"""

from __future__ import annotations

import numpy as np

import support
from stablehlo._src.bytecode import tree
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_printer
from stablehlo._src.text import dialect_attrs
from stablehlo._src.vhlo import attr_conversion as ac
from stablehlo._src.vhlo import builtin_conversion as bc
from stablehlo._src.vhlo import legalize
from stablehlo._src.vhlo import ops
from stablehlo._src.vhlo import type_conversion as tc
from stablehlo._src.vhlo import versioning
from stablehlo._src.vhlo import vhlo_ir


class DeserializationError(support.InvalidArgumentError):
  """The artifact holds VHLO that has no StableHLO meaning."""


def _fail(op, what: str) -> DeserializationError:
  return DeserializationError(
      f"failed to legalize operation '{op.name}' to StableHLO: {what}")


# --- default values ----------------------------------------------------------------


def _is_int(attr, value: int) -> bool:
  if not (isinstance(attr, tree.Attr) and attr.kind == "IntegerV1Attr"):
    return False
  return ac.from_vhlo(attr).value == value


def _is_bool(attr, value: bool) -> bool:
  return attr == ac.boolean(value)


def _is_string(attr, value: str) -> bool:
  return attr == ac.string(value)


def _is_empty_array(attr) -> bool:
  return isinstance(attr, tree.Attr) and attr.kind == "ArrayV1Attr" and \
      not attr.fields[0]


def _is_empty_dict(attr) -> bool:
  return isinstance(attr, tree.Attr) and attr.kind == "DictionaryV1Attr" and \
      not attr.fields[0]


def _is_empty_tensor(attr) -> bool:
  return isinstance(attr, tree.Attr) and attr.kind == "TensorV1Attr" and \
      not attr.fields[1]


def _is_splat_tensor(attr, value) -> bool:
  if not (isinstance(attr, tree.Attr) and attr.kind == "TensorV1Attr"):
    return False
  try:
    arr = np.asarray(ac.dense_from_vhlo(attr).array).reshape(-1)
  except support.XlaError:
    return False
  return arr.size >= 1 and bool((arr == arr[0]).all()) and arr[0] == value


def _is_all_default_precision(attr) -> bool:
  default = ac.enum("PrecisionV1Attr", "DEFAULT")
  return isinstance(attr, tree.Attr) and attr.kind == "ArrayV1Attr" and all(
      x == default for x in attr.fields[0])


_UNARY_V2 = frozenset(ops.latest(n.split(".", 1)[1]).name
                      for n in legalize.RESULT_ACCURACY_OPS)


# Every op name _remove_defaults below acts on; the others (most ops) skip
# its chain of tests.
_OPS_WITH_DEFAULTS = frozenset((
    "func_v1", "all_gather_v2", "all_reduce_v2", "reduce_scatter_v1",
    "all_to_all_v2", "collective_permute_v1", "collective_broadcast_v2",
    "collective_reduce_v1", "cholesky_v1", "compare_v1", "composite_v2",
    "convolution_v1", "dynamic_conv_v2", "custom_call_v2", "dot_general_v2",
    "dot_v1", "dynamic_broadcast_in_dim_v1", "dynamic_gather_v2",
    "gather_v2", "infeed_v1", "outfeed_v1", "recv_v2", "send_v2",
    "reduce_window_v1", "scatter_v2", "select_and_scatter_v1",
    "sort_v1")) | _UNARY_V2


def _remove_defaults(name: str, named: dict) -> None:
  """Drops attributes that hold the value StableHLO leaves implicit."""
  if name not in _OPS_WITH_DEFAULTS:
    return

  def drop_if(attr_name, check):
    if attr_name in named and check(named[attr_name]):
      del named[attr_name]

  if name == "func_v1":
    drop_if("sym_visibility", lambda x: _is_string(x, ""))
    drop_if("arg_attrs", _is_empty_array)
    drop_if("res_attrs", _is_empty_array)
  if name in ("all_gather_v2", "all_reduce_v2", "reduce_scatter_v1",
              "all_to_all_v2", "collective_permute_v1",
              "collective_broadcast_v2", "collective_reduce_v1"):
    drop_if("channel_id", lambda x: _is_int(x, 0))
  if name in ("all_gather_v2", "all_reduce_v2", "reduce_scatter_v1",
              "collective_reduce_v1"):
    drop_if("use_global_device_ids", lambda x: _is_bool(x, False))
  if name in ("collective_broadcast_v2", "collective_reduce_v1"):
    drop_if("has_dynamic_root", lambda x: _is_bool(x, False))
  if name == "cholesky_v1":
    drop_if("lower", lambda x: _is_bool(x, False))
  if name == "compare_v1":
    drop_if("compare_type",
            lambda x: x == ac.enum("ComparisonTypeV1Attr", "NOTYPE"))
  if name == "composite_v2":
    drop_if("version", lambda x: _is_int(x, 0))
    drop_if("composite_attributes", _is_empty_dict)
  if name in ("convolution_v1", "dynamic_conv_v2"):
    drop_if("window_strides", lambda x: _is_splat_tensor(x, 1))
    if name == "convolution_v1":
      drop_if("padding", lambda x: _is_splat_tensor(x, 0))
    drop_if("lhs_dilation", lambda x: _is_splat_tensor(x, 1))
    drop_if("rhs_dilation", lambda x: _is_splat_tensor(x, 1))
    drop_if("window_reversal", lambda x: _is_splat_tensor(x, False))
    drop_if("precision_config", _is_all_default_precision)
  if name == "custom_call_v2":
    drop_if("has_side_effect", lambda x: _is_bool(x, False))
    drop_if("backend_config",
            lambda x: _is_string(x, "") or _is_empty_dict(x))
    drop_if("api_version", lambda x: x == ac.enum(
        "CustomCallApiVersionV1Attr", "API_VERSION_ORIGINAL"))
    drop_if("called_computations", _is_empty_array)
    if _is_empty_array(named.get("operand_layouts")) and \
        _is_empty_array(named.get("result_layouts")):
      del named["operand_layouts"], named["result_layouts"]
    drop_if("output_operand_aliases", _is_empty_array)
    drop_if("result_tilings", _is_empty_array)
  if name in ("dot_general_v2", "dot_v1"):
    drop_if("precision_config", _is_all_default_precision)
  if name == "dynamic_broadcast_in_dim_v1":
    drop_if("known_expanding_dimensions", _is_empty_tensor)
    drop_if("known_nonexpanding_dimensions", _is_empty_tensor)
  if name in ("dynamic_gather_v2", "gather_v2"):
    drop_if("indices_are_sorted", lambda x: _is_bool(x, False))
  if name == "infeed_v1":
    drop_if("infeed_config", lambda x: _is_string(x, ""))
    drop_if("layout", _is_empty_array)
  if name == "outfeed_v1":
    drop_if("outfeed_config", lambda x: _is_string(x, ""))
  if name in ("recv_v2", "send_v2"):
    drop_if("is_host_transfer", lambda x: _is_bool(x, False))
    drop_if("source_target_pairs", _is_empty_tensor)
  if name == "reduce_window_v1":
    for attr_name in ("window_strides", "base_dilations", "window_dilations"):
      drop_if(attr_name, lambda x: _is_splat_tensor(x, 1))
    drop_if("padding", lambda x: _is_splat_tensor(x, 0))
  if name == "scatter_v2":
    drop_if("indices_are_sorted", lambda x: _is_bool(x, False))
    drop_if("unique_indices", lambda x: _is_bool(x, False))
  if name == "select_and_scatter_v1":
    drop_if("window_strides", lambda x: _is_splat_tensor(x, 1))
    drop_if("padding", lambda x: _is_splat_tensor(x, 0))
  if name == "sort_v1":
    drop_if("dimension", lambda x: _is_int(x, -1))
    drop_if("is_stable", lambda x: _is_bool(x, False))
  if name in _UNARY_V2:
    drop_if("result_accuracy", versioning.is_default_result_accuracy)


# --- struct attributes ------------------------------------------------------------------


def _int_of(op, named, field) -> int:
  attr = named.pop(field, None)
  if not (isinstance(attr, tree.Attr) and attr.kind == "IntegerV1Attr"):
    raise _fail(op, f"attribute {field} must be an integer")
  return ac.from_vhlo(attr).value


def _dims_of(op, named, field) -> tuple:
  attr = named.pop(field, None)
  if not (isinstance(attr, tree.Attr) and attr.kind == "TensorV1Attr"):
    raise _fail(op, f"attribute {field} must be a tensor")
  values = np.asarray(ac.dense_from_vhlo(attr).array).reshape(-1)
  return tuple(int(x) for x in values)


def _list(values) -> str:
  return "[" + ", ".join(str(v) for v in values) + "]"


def _struct_text(mnemonic: str, fields: list) -> str:
  """`#stablehlo.<mnemonic><k = v, ...>` leaving out empty lists and a zero
  index_vector_dim, as StableHLO prints it."""
  body = ", ".join(f"{k} = {_list(v) if isinstance(v, tuple) else v}"
                   for k, v in fields
                   if v != () and not (k == "index_vector_dim" and v == 0))
  return f"#stablehlo.{mnemonic}<{body}>"


# Every op name _implode below acts on.
_OPS_WITH_STRUCTS = frozenset((
    "convolution_v1", "dynamic_conv_v2", "dot_general_v2", "dynamic_gather_v2",
    "gather_v2", "scatter_v2", "recv_v2", "send_v2"))


def _implode(op, name: str, named: dict, out: dict) -> None:
  """Folds the per-field attributes back into StableHLO structs."""
  if name in ("convolution_v1", "dynamic_conv_v2"):
    fields = {}
    for field in legalize.CONV_FIELDS:
      fields[field] = (_dims_of(op, named, field) if field.endswith("s")
                       else _int_of(op, named, field))
    attr = a.DialectAttr("stablehlo.conv", tuple(fields.items()))
    compact = dialect_attrs.format_conv_dims(attr)
    if compact is not None:
      out["dimension_numbers"] = ac.parse_attr_text(
          f"#stablehlo.conv<{compact}>")
    else:
      out["dimension_numbers"] = attr
  if name == "dot_general_v2":
    fields = [(f, _dims_of(op, named, f)) for f in legalize.DOT_FIELDS]
    out["dot_dimension_numbers"] = ac.parse_attr_text(_struct_text("dot",
                                                                   fields))
    algorithm = [named.pop(f, None) for f in legalize.ALGORITHM_FIELDS]
    nones = [versioning.is_none_type(x) for x in algorithm]
    if all(nones):
      pass
    elif any(nones):
      raise _fail(op, "dot algorithm attributes are partly unset")
    else:
      types = [ac.from_vhlo(x) for x in algorithm[:3]]
      ints = [ac.from_vhlo(x) for x in algorithm[3:6]]
      flag = ac.from_vhlo(algorithm[6])
      if not all(isinstance(x, a.TypeAttr) for x in types) or not all(
          isinstance(x, a.IntegerAttr) for x in ints) or not isinstance(
              flag, a.BoolAttr):
        raise _fail(op, "malformed dot algorithm attributes")
      parts = [f"{n} = {attr_printer.format_type(x.value)}"
               for n, x in zip(legalize.ALGORITHM_FIELDS[:3], types)]
      parts += [f"{n} = {x.value}"
                for n, x in zip(legalize.ALGORITHM_FIELDS[3:6], ints)]
      parts.append(f"allow_imprecise_accumulation = "
                   f"{'true' if flag.value else 'false'}")
      out["algorithm"] = ac.parse_attr_text(
          "#stablehlo.dot_algorithm<" + ", ".join(parts) + ">")
  if name in ("dynamic_gather_v2", "gather_v2"):
    fields = [(f, _dims_of(op, named, f)) for f in legalize.GATHER_FIELDS[:-1]]
    fields.append(("index_vector_dim", _int_of(op, named, "index_vector_dim")))
    out["dimension_numbers"] = ac.parse_attr_text(_struct_text("gather",
                                                               fields))
  if name == "scatter_v2":
    fields = [(f, _dims_of(op, named, f))
              for f in legalize.SCATTER_FIELDS[:-1]]
    fields.append(("index_vector_dim", _int_of(op, named, "index_vector_dim")))
    out["scatter_dimension_numbers"] = ac.parse_attr_text(
        _struct_text("scatter", fields))
  if name in ("recv_v2", "send_v2"):
    handle = _int_of(op, named, "channel_id")
    kind = _int_of(op, named, "channel_type")
    out["channel_handle"] = _channel_handle(handle, kind)


def _channel_handle(handle: int, kind: int) -> a.Attribute:
  return ac.parse_attr_text(
      f"#stablehlo.channel_handle<handle = {handle}, type = {kind}>")


# (op, attribute) pairs StableHLO declares as dense i64 arrays.
_I64_ARRAYS = {
    "fft_v1": ("fft_length",),
    "broadcast_v1": ("broadcast_sizes",),
    "dynamic_slice_v1": ("slice_sizes",),
    "reverse_v1": ("dimensions",),
    "transpose_v1": ("permutation",),
    "pad_v1": ("edge_padding_low", "edge_padding_high", "interior_padding"),
    "slice_v1": ("start_indices", "limit_indices", "strides"),
    "broadcast_in_dim_v1": ("broadcast_dimensions",),
    "dynamic_broadcast_in_dim_v1": ("broadcast_dimensions",
                                    "known_expanding_dimensions",
                                    "known_nonexpanding_dimensions"),
    "select_and_scatter_v1": ("window_dimensions", "window_strides"),
    "reduce_window_v1": ("window_dimensions", "window_strides",
                         "base_dilations", "window_dilations"),
    "map_v1": ("dimensions",),
    "reduce_v1": ("dimensions",),
    "gather_v2": ("slice_sizes",),
    "convolution_v1": ("lhs_dilation", "rhs_dilation", "window_strides"),
    "dynamic_conv_v2": ("lhs_dilation", "rhs_dilation", "window_strides"),
}
_BOOL_ARRAYS = {"convolution_v1": ("window_reversal",),
                "dynamic_conv_v2": ("window_reversal",)}
_CHANNEL_ID_OPS = ("all_gather_v2", "all_reduce_v2", "all_to_all_v2",
                   "collective_permute_v1", "reduce_scatter_v1",
                   "collective_broadcast_v2", "collective_reduce_v1")
_FLAG_OPS = {
    "all_gather_v2": ("use_global_device_ids",),
    "all_reduce_v2": ("use_global_device_ids",),
    "all_to_all_v2": ("use_global_device_ids",),
    "collective_permute_v1": ("use_global_device_ids",),
    "reduce_scatter_v1": ("use_global_device_ids",),
    "collective_broadcast_v2": ("has_dynamic_root",),
    "collective_reduce_v1": ("use_global_device_ids", "has_dynamic_root"),
}
_SYMBOLS = {"custom_call_v2": "called_computations",
            "composite_v2": "decomposition", "call_v1": "callee"}


def _symbol(op, attr) -> a.SymbolRefAttr:
  if not (isinstance(attr, tree.Attr) and attr.kind == "StringV1Attr"):
    raise _fail(op, "symbol references must be strings")
  return a.SymbolRefAttr(attr.fields[0])


def _dense_array(op, attr, element: t.Type) -> a.DenseArrayAttr:
  if not (isinstance(attr, tree.Attr) and attr.kind == "TensorV1Attr"):
    raise _fail(op, "expected a tensor attribute")
  values = np.asarray(ac.dense_from_vhlo(attr).array).reshape(-1)
  if element.width == 1:
    return a.DenseArrayAttr(element, tuple(bool(x) for x in values))
  return a.DenseArrayAttr(element, tuple(int(x) for x in values))


_SPECIAL_ATTRS: dict = {}


def _special_attrs(name: str) -> frozenset:
  """The attribute names of op `name` that _convert_special handles."""
  names = _SPECIAL_ATTRS.get(name)
  if names is None:
    found = set(_FLAG_OPS.get(name, ())) | set(_I64_ARRAYS.get(name, ())) | \
        set(_BOOL_ARRAYS.get(name, ()))
    if name in _CHANNEL_ID_OPS:
      found.add("channel_id")
    if name in _SYMBOLS:
      found.add(_SYMBOLS[name])
    names = _SPECIAL_ATTRS[name] = frozenset(found)
  return names


def _convert_special(op, name: str, attr_name: str, attr, out: dict) -> bool:
  if name in _CHANNEL_ID_OPS and attr_name == "channel_id":
    if not (isinstance(attr, tree.Attr) and attr.kind == "IntegerV1Attr"):
      raise _fail(op, "channel_id must be an integer")
    out["channel_handle"] = _channel_handle(ac.from_vhlo(attr).value, 0)
    return True
  if attr_name in _FLAG_OPS.get(name, ()):
    if not (isinstance(attr, tree.Attr) and attr.kind == "BooleanV1Attr"):
      raise _fail(op, f"{attr_name} must be a boolean")
    if attr.fields[0]:
      out[attr_name] = a.UnitAttr()
    return True
  if _SYMBOLS.get(name) == attr_name:
    if attr.kind == "ArrayV1Attr":
      out[attr_name] = a.ArrayAttr(tuple(_symbol(op, x)
                                         for x in attr.fields[0]))
    else:
      out[attr_name] = _symbol(op, attr)
    return True
  if attr_name in _I64_ARRAYS.get(name, ()):
    out[attr_name] = _dense_array(op, attr, t.i64)
    return True
  if attr_name in _BOOL_ARRAYS.get(name, ()):
    out[attr_name] = _dense_array(op, attr, t.i1)
    return True
  return False


# --- ops ------------------------------------------------------------------------------


class _Unlegalizer:
  """Converts one VHLO module (current versions) to our IR."""

  def __init__(self):
    self.values: dict = {}
    self.blocks: dict = {}
    self.type_cache: dict = {}

  def type(self, ty) -> t.Type:
    cached = self.type_cache.get(ty)
    if cached is None:
      if getattr(ty, "dialect", None) == "builtin":  # around sdy ops
        cached = bc.type_from_builtin(ty)
      elif ty == bc.STABLEHLO_TOKEN:
        # A token crossing into an sdy region (an ordered callback in a
        # shard_map) is a `!stablehlo.token` there, in the stablehlo
        # dialect's own encoding.
        cached = t.TokenType()
      else:
        cached = ac.type_from_vhlo(ty)
      self.type_cache[ty] = cached
    return cached

  def module(self, root: vhlo_ir.VhloOp) -> core.Module:
    if root.name != vhlo_ir.MODULE:
      raise DeserializationError(
          f"the root op must be builtin.module, found {root.name}")
    attributes = {}
    for name in sorted(root.named):
      attributes[name] = bc.attr_from_builtin(root.named[name])
    op = core.Operation(vhlo_ir.MODULE, attributes=attributes,
                        location=bc.location_from_builtin(root.location))
    for region in root.regions:
      op.add_region(self.region(region, root))
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
      raise DeserializationError("builtin.module must have one block")
    return core.Module(op)

  def region(self, region: tree.Region, parent) -> core.Region:
    out = core.Region()
    for block in region.blocks:
      out.append(self.blocks.setdefault(id(block), core.Block()))
    for block, new in zip(region.blocks, out.blocks):
      for arg in block.args:
        value = new.add_argument(self.type(arg.type),
                                 loc=bc.location_from_builtin(arg.loc)
                                 if arg.loc is not None else None)
        self.values[id(arg)] = value
      for op in block.ops:
        converted = self.op(op, parent)
        if converted is not None:
          new.append(converted)
    return out

  def value(self, v: tree.Value, op) -> core.Value:
    mapped = self.values.get(id(v))
    if mapped is None:
      raise _fail(op, "uses a value that is not defined before it")
    return mapped

  def cast(self, op: vhlo_ir.VhloOp) -> None:
    """A cast between a VHLO and a builtin type: the same type in our IR,
    so its result is its operand."""
    if len(op.operands) != 1 or len(op.results) != 1 or op.regions:
      raise _fail(op, "expected one operand and one result")
    source = self.value(op.operands[0], op)
    try:
      ty = self.type(op.results[0].type)
    except tc.ConversionError as e:
      raise _fail(op, str(e)) from e
    if source.type != ty:
      raise _fail(op, f"casts {attr_printer.format_type(source.type)} to "
                  f"{attr_printer.format_type(ty)}")
    self.values[id(op.results[0])] = source

  def sdy_op(self, op: vhlo_ir.VhloOp) -> core.Operation:
    """An sdy op of a mixed artifact: builtin types and attributes."""
    declared = vhlo_ir.foreign_properties(op.name) or ()
    inherent = {n for n, _ in declared}
    props, attrs = {}, {}
    try:
      for name, attr in op.named.items():
        (props if name in inherent else attrs)[name] = \
            bc.attr_from_builtin(attr)
      result_types = [self.type(r.type) for r in op.results]
    except (tc.ConversionError, support.UnimplementedError) as e:
      raise _fail(op, str(e)) from e
    new = core.Operation(
        op.name, [self.value(v, op) for v in op.operands], result_types,
        attributes=attrs, properties={n: props[n] for n, _ in declared
                                      if n in props},
        location=bc.location_from_builtin(op.location))
    for old, value in zip(op.results, new.results):
      self.values[id(old)] = value
    for region in op.regions:
      new.add_region(self.region(region, op))
    return new

  def op(self, op: vhlo_ir.VhloOp, parent) -> core.Operation | None:
    found = _VHLO_OPS.get(op.name)
    if found is None:
      if op.name == vhlo_ir.CAST:
        self.cast(op)
        return None
      if op.dialect == "sdy":
        return self.sdy_op(op)
      found = _vhlo_op(op)
    definition, name, special = found
    if name is None:  # return: func.return in a function
      parent_def = getattr(parent, "definition", None)
      is_func = parent_def is not None and parent_def.base == "func"
      name = "func.return" if is_func else "stablehlo.return"
    named = dict(op.named)
    out: dict = {}
    try:
      if definition.name in _OPS_WITH_DEFAULTS:
        _remove_defaults(definition.name, named)
      if definition.name in _OPS_WITH_STRUCTS:
        _implode(op, definition.name, named, out)
      for attr_name, attr in named.items():
        if attr_name in special and _convert_special(
            op, definition.name, attr_name, attr, out):
          continue
        out[attr_name] = ac.from_vhlo_shared(attr)
      type_cache = self.type_cache
      result_types = []
      for r in op.results:
        ty = type_cache.get(r.type)
        result_types.append(self.type(r.type) if ty is None else ty)
    except tc.ConversionError as e:
      raise _fail(op, str(e)) from e
    operands = []
    if op.operands:
      values = self.values
      for v in op.operands:
        mapped = values.get(id(v))
        operands.append(self.value(v, op) if mapped is None else mapped)
    new = core.Operation(
        name, operands, result_types,
        attributes={k: out[k] for k in sorted(out)} if out else None,
        location=bc.location_from_builtin(op.location))
    for old, value in zip(op.results, new.results):
      self.values[id(old)] = value
    for region in op.regions:
      new.add_region(self.region(region, op))
    new.successors = [self.blocks.setdefault(id(b), core.Block())
                      for b in op.successors]
    return new


# VHLO op name -> (its definition, the StableHLO op name or None for
# return, the attribute names _convert_special handles); see _vhlo_op.
_VHLO_OPS: dict = {}


def _vhlo_op(op: vhlo_ir.VhloOp) -> tuple:
  definition = op.definition
  if definition is None:
    raise DeserializationError(
        f"unregistered operation '{op.name}' found in dialect "
        f"('{op.dialect}') that does not allow unknown operations")
  name = (None if definition.base == "return"
          else ops.stablehlo_name(definition.base))
  found = _VHLO_OPS[op.name] = (definition, name,
                                _special_attrs(definition.name))
  return found


def vhlo_to_module(root: vhlo_ir.VhloOp) -> core.Module:
  """Our IR for a VHLO module whose ops are at the current version."""
  return _Unlegalizer().module(root)
