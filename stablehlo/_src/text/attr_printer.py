"""Spelling of types and attributes as MLIR prints them."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import sdy
from stablehlo._src.ir import types as t
from stablehlo._src.text import dense
from stablehlo._src.text import dialect_attrs
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import op_defaults


def format_type(ty: t.Type) -> str:
  if isinstance(ty, t.RankedTensorType):
    dims = "".join(("?" if d is None else str(d)) + "x" for d in ty.shape)
    enc = f", {format_attr(ty.encoding)}" if ty.encoding is not None else ""
    return f"tensor<{dims}{format_type(ty.element_type)}{enc}>"
  if isinstance(ty, t.FloatType):
    return ty.name
  if isinstance(ty, t.IntegerType):
    prefix = "ui" if ty.unsigned else ("si" if ty.signed else "i")
    return f"{prefix}{ty.width}"
  if isinstance(ty, t.IndexType):
    return "index"
  if isinstance(ty, t.NoneType):
    return "none"
  if isinstance(ty, t.ComplexType):
    return f"complex<{format_type(ty.element_type)}>"
  if isinstance(ty, t.UnrankedTensorType):
    return f"tensor<*x{format_type(ty.element_type)}>"
  if isinstance(ty, t.TokenType):
    return "!stablehlo.token"
  if isinstance(ty, t.TupleType):
    return "tuple<" + ", ".join(format_type(x) for x in ty.types) + ">"
  if isinstance(ty, t.FunctionType):
    return format_function_type(ty.inputs, ty.results)
  if isinstance(ty, t.QuantizedType):
    return _format_quant(ty)
  if isinstance(ty, t.OpaqueType):
    if ty.dialect == "builtin":
      return ty.body
    return f"!{ty.dialect}.{ty.body}"
  raise TypeError(f"cannot print type {ty!r}")


def format_function_type(inputs, results) -> str:
  ins = ", ".join(format_type(x) for x in inputs)
  if len(results) == 1 and not isinstance(results[0], t.FunctionType):
    outs = format_type(results[0])
  else:
    outs = "(" + ", ".join(format_type(x) for x in results) + ")"
  return f"({ins}) -> {outs}"


def _format_quant(q: t.QuantizedType) -> str:
  storage = ("u" if q.storage_unsigned else "i") + str(q.storage_type.width)
  if q.storage_min is not None:
    storage += f"<{q.storage_min}:{q.storage_max}>"
  head = f"{storage}:{format_type(q.expressed_type)}"

  def param(s, zp):
    return dense.format_scale(s) + (f":{zp}" if zp else "")

  if q.quantized_dimension is not None:
    body = ",".join(param(s, z) for s, z in zip(q.scales, q.zero_points))
    return (f"!quant.uniform<{head}:{q.quantized_dimension}, {{{body}}}>")
  return f"!quant.uniform<{head}, {param(q.scales[0], q.zero_points[0])}>"


def format_string(value: str) -> str:
  return '"' + lx.escape_string(value) + '"'


def format_symbol(name: str) -> str:
  import re  # pylint: disable=g-import-not-at-top
  if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", name):
    return "@" + name
  return "@" + format_string(name)


def format_attr(attr: a.Attribute) -> str:
  if isinstance(attr, a.DenseElementsAttr):
    return format_dense(attr) + " : " + format_type(attr.type)
  if isinstance(attr, a.IntegerAttr):
    if isinstance(attr.type, t.IntegerType) and attr.type.width == 1:
      return "true" if attr.value else "false"
    return f"{attr.value} : {format_type(attr.type)}"
  if isinstance(attr, a.FloatAttr):
    return f"{format_float(attr.value, attr.type)} : {format_type(attr.type)}"
  if isinstance(attr, a.BoolAttr):
    return "true" if attr.value else "false"
  if isinstance(attr, a.StringAttr):
    if attr.type is not None:
      return f"{format_string(attr.value)} : {format_type(attr.type)}"
    return format_string(attr.value)
  if isinstance(attr, a.ArrayAttr):
    return "[" + ", ".join(format_attr(e) for e in attr.elements) + "]"
  if isinstance(attr, a.DictionaryAttr):
    return format_dict(attr.entries)
  if isinstance(attr, a.UnitAttr):
    return "unit"
  if isinstance(attr, a.TypeAttr):
    return format_type(attr.value)
  if isinstance(attr, a.SymbolRefAttr):
    return format_symbol(attr.root) + "".join(
        "::" + format_symbol(n) for n in attr.nested)
  if isinstance(attr, a.DenseArrayAttr):
    return _format_dense_array(attr)
  if isinstance(attr, sdy.SdyAttr):
    return str(attr)
  if isinstance(attr, a.DialectAttr):
    params = op_defaults.canonical_params(attr)
    if not params and attr.name in op_defaults.STRUCT_DIMS:
      return f"#{attr.name}<>"
    if params is not attr.params:
      attr = dataclasses.replace(attr, params=params)
    return dialect_attrs.format_dialect_attr(
        attr, format_type, format_attr, lambda v: format_float(v, t.f64))
  if isinstance(attr, a.DenseResourceAttr):
    return f"dense_resource<{attr.key}> : {format_type(attr.type)}"
  if isinstance(attr, a.OpaqueAttr):
    return _alias_for(attr.text)
  raise TypeError(f"cannot print attribute {attr!r}")


# Builtin attributes MLIR always prints through an alias (`#map`, `#map1`,
# ...), numbered in the order the printer meets them.
_ALIAS_PREFIXES = (("affine_map<", "map"), ("affine_set<", "set"))
_aliases: contextvars.ContextVar = contextvars.ContextVar("aliases",
                                                          default=None)


@contextlib.contextmanager
def collecting_aliases():
  """Within the block, affine maps / sets print as aliases; yields the list
  of (alias, text) definitions, filled in as they are first printed."""
  table: dict[str, str] = {}
  token = _aliases.set(table)
  defs: list[tuple[str, str]] = []
  try:
    yield defs
  finally:
    _aliases.reset(token)
    defs.extend((name, text) for text, name in table.items())


def _alias_for(text: str) -> str:
  table = _aliases.get()
  if table is None:
    return text
  for prefix, stem in _ALIAS_PREFIXES:
    if text.startswith(prefix):
      name = table.get(text)
      if name is None:
        n = sum(1 for v in table.values() if v.rstrip("0123456789") == stem)
        name = table[text] = f"{stem}{n or ''}"
      return "#" + name
  return text


def format_dict(entries) -> str:
  """MLIR keeps every attribute dictionary sorted by name."""
  if not entries:
    return "{}"
  return "{" + ", ".join(_format_entry(k, v) for k, v in sorted(
      entries, key=lambda kv: kv[0])) + "}"


def _format_entry(key, value) -> str:
  import re  # pylint: disable=g-import-not-at-top
  k = key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", key) else \
      format_string(key)
  if isinstance(value, a.UnitAttr):
    return k
  return f"{k} = {format_attr(value)}"


def _format_dense_array(attr: a.DenseArrayAttr) -> str:
  et = attr.element_type
  head = format_type(et)
  if not attr.values:
    return f"array<{head}>"
  if isinstance(et, t.IntegerType) and et.width == 1:
    vals = ["true" if v else "false" for v in attr.values]
  elif isinstance(et, t.FloatType):
    vals = [format_float(v, et) for v in attr.values]
  else:
    vals = [str(int(v)) for v in attr.values]
  return f"array<{head}: {', '.join(vals)}>"


def format_float(value, ft: t.Type) -> str:
  if not isinstance(ft, t.FloatType):
    ft = t.f64
  return dense.format_float(value, ft)


def format_dense(attr: a.DenseElementsAttr) -> str:
  """`dense<...>` without the trailing type."""
  arr = np.asarray(attr.array)
  et = dense.storage_type(attr.type.element_type)
  if arr.size == 0:
    return "dense<>"  # MLIR prints every empty tensor this way
  flat = arr.reshape(-1)
  first = flat[0]
  # MLIR stores (and prints) a one-element or all-equal tensor as a splat.
  if arr.size == 1 or _all_equal(flat):
    return f"dense<{_format_elem(first, et)}>"
  if arr.size > dense.HEX_THRESHOLD:
    return f'dense<"{dense.encode_hex_blob(arr)}">'
  return "dense<" + _nested(arr, et) + ">"


def _all_equal(flat) -> bool:
  if flat.dtype.kind in "fc" or flat.dtype.kind == "V" or \
      flat.dtype.itemsize == 1 and flat.dtype.kind not in "biu":
    raw = np.ascontiguousarray(flat).view(np.uint8).reshape(len(flat), -1)
    return bool((raw == raw[0]).all())
  return bool((flat == flat[0]).all())


def _nested(arr, et) -> str:
  if arr.ndim == 1:
    return "[" + ", ".join(_format_elem(x, et) for x in arr) + "]"
  return "[" + ", ".join(_nested(sub, et) for sub in arr) + "]"


def _format_elem(x, et) -> str:
  if isinstance(et, t.ComplexType):
    inner = et.element_type
    return (f"({format_float(np.real(x), inner)},"
            f"{format_float(np.imag(x), inner)})")
  if isinstance(et, t.FloatType):
    return dense.format_float(x, et)
  if isinstance(et, t.IntegerType) and et.width == 1:
    return "true" if bool(x) else "false"
  return str(int(x))
