"""How the interpreter prints runtime values (`--interpret` results and
`interpreter.print`), in upstream's layout:

    tensor<2x2xi8> {
      [
        [1, 2],
        [3, 4]
      ]
    }

scalars print on one line (`tensor<ui8> {1}`), floats as `%e` with six
digits, booleans as true/false, complex values as `[re, im]`. With
`dense=True` a value prints as a `dense<...> : type` attribute instead.
"""

from __future__ import annotations

import math

import numpy as np

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_printer


def _scalar(x, et) -> str:
  if isinstance(et, t.ComplexType):
    return f"[{_float(x.real)}, {_float(x.imag)}]"
  if isinstance(et, t.FloatType):
    return _float(x)
  if isinstance(x, (np.bool_, bool)):
    return "true" if x else "false"
  return str(int(x))


def _float(x) -> str:
  v = float(x)
  if math.isnan(v):
    return "nan" if math.copysign(1.0, v) > 0 else "-nan"
  if math.isinf(v):
    return "inf" if v > 0 else "-inf"
  return f"{v:e}"


def format_value(value, ty: t.Type, dense: bool = False) -> str:
  if isinstance(ty, t.TokenType):
    return "!stablehlo.token"
  if isinstance(ty, t.TupleType):
    parts = [format_value(v, ety, dense) for v, ety in zip(value, ty.types)]
    return "(" + ", ".join(parts) + ")"
  if dense:
    return attr_printer.format_attr(runtime.to_attr(value, ty))
  et = t.element_type_of(ty)
  head = attr_printer.format_type(ty)
  arr = np.asarray(value)
  if arr.ndim == 0:
    return f"{head} {{{_scalar(arr[()], et)}}}"
  lines = [head + " {"]
  _nested(arr, et, 1, lines, last=True)
  lines.append("}")
  return "\n".join(lines)


def _nested(arr, et, depth, lines, last):
  pad = "  " * depth
  comma = "" if last else ","
  if arr.ndim == 1:
    lines.append(pad + "[" + ", ".join(_scalar(x, et) for x in arr) + "]" +
                 comma)
    return
  if arr.shape[0] == 0:
    lines.append(pad + "[]" + comma)
    return
  lines.append(pad + "[")
  for i in range(arr.shape[0]):
    _nested(arr[i], et, depth + 1, lines, last=(i == arr.shape[0] - 1))
  lines.append(pad + "]" + comma)
