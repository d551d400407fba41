"""Small builders for constructing ops in tests without the text parser.

  T("2x?xf32")                      -> tensor<2x?xf32>
  op("stablehlo.slice", [T("4xf32")], [T("2xf32")],
     start_indices=i64s(0), limit_indices=i64s(2), strides=i64s(1))
  op("stablehlo.reduce", ..., regions=[reducer("f32")])

Operands given as types become arguments of a scratch block; give `Value`s to
wire real data flow (e.g. inside `func`).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t

_ELEM = re.compile(r"^(ui|si|i)(\d+)$")


def elem(s: str) -> t.Type:
  """An element type from its MLIR spelling (no quantized types)."""
  m = _ELEM.match(s)
  if m:
    return t.IntegerType(int(m.group(2)), unsigned=m.group(1) == "ui",
                         signed=m.group(1) == "si")
  if s.startswith("complex<"):
    return t.ComplexType(elem(s[len("complex<"):-1]))
  if s == "index":
    return t.index
  if s in t.FLOAT_TYPES:
    return t.FloatType(s)
  raise ValueError(f"unknown element type {s!r}")


def T(spec: str, element: t.Type = None) -> t.Type:  # pylint: disable=invalid-name
  """`"2x?xf32"` -> RankedTensorType; `"f32"` -> rank 0; `"token"`.

  With `element`, `spec` is only the shape (`"2x3"`, `""` for a scalar).
  """
  if spec == "token":
    return t.token
  if element is not None:
    dims = [d for d in spec.split("x") if d]
  else:
    m = re.match(r"^((?:(?:\d+|\?)x)*)(.+)$", spec)
    dims = [d for d in m.group(1).split("x") if d]
    element = elem(m.group(2))
  shape = tuple(None if d == "?" else int(d) for d in dims)
  return t.RankedTensorType(shape, element)


def quant(storage: str = "i8", expressed: str = "f32", scales=(1.0,),
          zero_points=None, axis=None, storage_min=None, storage_max=None):
  """A `!quant.uniform` element type."""
  scales = tuple(scales)
  if zero_points is None:
    zero_points = (0,) * len(scales)
  return t.QuantizedType(elem(storage), elem(expressed), scales,
                         tuple(zero_points), axis, storage_min, storage_max)


def i64s(*vals) -> a.DenseArrayAttr:
  return a.DenseArrayAttr(t.i64, tuple(vals))


def bools(*vals) -> a.DenseArrayAttr:
  return a.DenseArrayAttr(t.i1, tuple(bool(v) for v in vals))


def i64(v: int) -> a.IntegerAttr:
  return a.IntegerAttr(v, t.i64)


def i32(v: int) -> a.IntegerAttr:
  return a.IntegerAttr(v, t.i32)


def dense(values, ty: t.Type = None) -> a.DenseElementsAttr:
  """A dense attribute; default type: i64 tensor of the array's shape."""
  arr = np.asarray(values)
  if ty is None:
    arr = arr.astype(np.int64)
    ty = t.RankedTensorType(arr.shape, t.i64)
  return a.DenseElementsAttr(ty, arr)


def enum(kind: str, value: str, dialect: str = "stablehlo") -> a.DialectAttr:
  """`#stablehlo<comparison_direction EQ>` as a DialectAttr."""
  return a.DialectAttr(f"{dialect}.{kind}", (("value", value),))


def dattr(name: str, **params) -> a.DialectAttr:
  """A structured attribute, e.g. dattr("stablehlo.dot", ...)."""
  return a.DialectAttr(name, tuple(params.items()))


def loc(filename="test.mlir", line=1, col=1) -> a.Location:
  return a.Location("file", filename, line, col)


def _values(items) -> list:
  scratch = core.Block()
  out = []
  for x in items:
    out.append(x if isinstance(x, core.Value) else scratch.add_argument(x))
  return out


def op(op_name: str, /, operands: Sequence = (), results: Sequence = (),
       *, regions: Sequence = (), location: a.Location = None,
       **attrs) -> core.Operation:
  """Builds an op; operands may be types (scratch block args) or Values."""
  kwargs = {}
  if location is not None:
    kwargs["location"] = location
  return core.Operation(op_name, _values(operands), list(results), attrs,
                        regions=list(regions), **kwargs)


def _materialize(block: core.Block, ty: t.Type) -> core.Value:
  for arg in block.arguments:
    if arg.type == ty:
      return arg
  if isinstance(ty, t.RankedTensorType) and ty.has_static_shape:
    const = op("stablehlo.constant", [], [ty],
               value=a.DenseElementsAttr(ty, np.zeros(ty.shape)))
    block.append(const)
    return const.result
  holder = op("test.value", [], [ty])
  block.append(holder)
  return holder.result


def region(arg_types: Sequence, ret_types: Sequence,
           terminator: str = "stablehlo.return") -> core.Region:
  """A one-block region with the given signature; returned values are block
  arguments of the same type where possible, else constants."""
  block = core.Block(list(arg_types))
  rets = [_materialize(block, ty) for ty in ret_types]
  block.append(op(terminator, rets, []))
  return core.Region([block])


def reducer(*elems, result_elems=None) -> core.Region:
  """`(tensor<E0>.., tensor<E0>..) -> (tensor<E0>..)` adding the pairs."""
  es = [elem(e) if isinstance(e, str) else e for e in elems]
  outs = es if result_elems is None else [
      elem(e) if isinstance(e, str) else e for e in result_elems]
  scalars = [t.RankedTensorType((), e) for e in es]
  block = core.Block(scalars + scalars)
  rets = []
  n = len(es)
  for i, e in enumerate(outs):
    ty = t.RankedTensorType((), e)
    if e == es[i]:
      add = op("stablehlo.add", [block.arguments[i], block.arguments[n + i]],
               [ty])
      block.append(add)
      rets.append(add.result)
    else:
      rets.append(_materialize(block, ty))
  block.append(op("stablehlo.return", rets, []))
  return core.Region([block])


def func(name: str, arg_types: Sequence, result_types: Sequence,
         body=None) -> core.Operation:
  """A func.func; `body(block) -> list of returned Values` fills it (the
  default returns arguments / constants of the result types)."""
  block = core.Block(list(arg_types))
  if body is None:
    rets = [_materialize(block, ty) for ty in result_types]
  else:
    rets = body(block)
  block.append(op("func.return", rets, []))
  return op("func.func", [], [], regions=[core.Region([block])],
            sym_name=a.StringAttr(name),
            function_type=a.TypeAttr(t.FunctionType(tuple(arg_types),
                                                    tuple(result_types))))


def module(*ops) -> core.Module:
  block = core.Block()
  for o in ops:
    block.append(o)
  return core.Module(op("builtin.module", [], [],
                        regions=[core.Region([block])]))


def error_of(operation: core.Operation, **kwargs):
  """The verification error message for `operation`, or None if it passes."""
  from stablehlo._src.ops import verify  # pylint: disable=g-import-not-at-top
  try:
    verify.verify_op(operation, **kwargs)
  except verify.VerificationError as e:
    return str(e)
  return None
