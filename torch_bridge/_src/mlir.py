"""A small emitter of StableHLO MLIR text (generic op syntax).

The lowering table writes programs through `FunctionBuilder`; the text it
produces is what `stablehlo.text.parse_module` reads and what every PJRT
plugin compiles. Every op is printed in MLIR's generic form
(`"stablehlo.add"(%a, %b) : (...) -> ...`), which needs no per-op pretty
syntax and is accepted by every StableHLO parser.

Why not build `stablehlo.ir` objects: the lowering only needs to print a
program once, and text keeps the bridge independent of the IR classes'
constructors; the result is still parsed and verified by `stablehlo` (see
`lowering.verify_module`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

# torch dtype name -> MLIR element type.
_ELEMENT_TYPES = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "ui8",
    "bool": "i1",
}

FLOAT_TYPES = frozenset({"f32", "f64", "f16", "bf16"})
INT_TYPES = frozenset({"i64", "i32", "i16", "i8", "ui8"})


def element_type(torch_dtype) -> str | None:
  """The MLIR element type of a torch dtype, or None if unsupported."""
  return _ELEMENT_TYPES.get(str(torch_dtype).replace("torch.", ""))


@dataclasses.dataclass(frozen=True)
class TensorType:
  shape: tuple[int, ...]
  dtype: str  # MLIR element type, e.g. "f32"

  def __str__(self) -> str:
    dims = "".join(f"{d}x" for d in self.shape)
    return f"tensor<{dims}{self.dtype}>"

  @property
  def rank(self) -> int:
    return len(self.shape)

  @property
  def is_float(self) -> bool:
    return self.dtype in FLOAT_TYPES

  def with_shape(self, shape: Sequence[int]) -> "TensorType":
    return TensorType(tuple(int(d) for d in shape), self.dtype)

  def with_dtype(self, dtype: str) -> "TensorType":
    return TensorType(self.shape, dtype)


@dataclasses.dataclass(frozen=True)
class Value:
  name: str
  type: TensorType

  @property
  def shape(self) -> tuple[int, ...]:
    return self.type.shape

  @property
  def dtype(self) -> str:
    return self.type.dtype

  @property
  def rank(self) -> int:
    return self.type.rank


def i64_array(values: Sequence[int]) -> str:
  return "array<i64" + "".join(
      (": " if i == 0 else ", ") + str(int(v))
      for i, v in enumerate(values)) + ">"


def _scalar_literal(value, dtype: str) -> str:
  if dtype == "i1":
    return "true" if value else "false"
  if dtype in FLOAT_TYPES:
    value = float(value)
    if math.isnan(value):
      return {"f32": "0x7FC00000", "f64": "0x7FF8000000000000",
              "f16": "0x7E00", "bf16": "0x7FC0"}[dtype]
    if math.isinf(value):
      pos = value > 0
      return {"f32": ("0x7F800000", "0xFF800000"),
              "f64": ("0x7FF0000000000000", "0xFFF0000000000000"),
              "f16": ("0x7C00", "0xFC00"),
              "bf16": ("0x7F80", "0xFF80")}[dtype][0 if pos else 1]
    text = repr(value)
    if "e" in text and "." not in text:  # MLIR wants a '.' in "1.0e-05".
      mantissa, exponent = text.split("e")
      text = f"{mantissa}.0e{exponent}"
    return text
  return str(int(value))


class FunctionBuilder:
  """Collects the ops of one `func.func @main`, numbering SSA values."""

  def __init__(self):
    self._lines: list[str] = []
    self._args: list[Value] = []
    self._count = 0
    self._constants: dict[tuple, Value] = {}
    # Result name of each stablehlo.transpose -> (operand, permutation):
    # a dot_general reads through a transpose instead of materializing it.
    self.transposes: dict[str, tuple[Value, tuple[int, ...]]] = {}

  def _fresh(self, prefix: str = "v") -> str:
    self._count += 1
    return f"%{prefix}{self._count}"

  def argument(self, ty: TensorType) -> Value:
    value = Value(f"%arg{len(self._args)}", ty)
    self._args.append(value)
    return value

  def op(self, name: str, operands: Sequence[Value], result: TensorType,
         attrs: str = "", region: str = "") -> Value:
    """Emits one single-result op; returns its result."""
    results = self.op_multi(name, operands, [result], attrs, region)
    return results[0]

  def op_multi(self, name: str, operands: Sequence[Value],
               results: Sequence[TensorType], attrs: str = "",
               region: str = "") -> list[Value]:
    for v in operands:
      assert isinstance(v, Value), (name, v)
    outs = [Value(self._fresh(), ty) for ty in results]
    lhs = ", ".join(o.name for o in outs)
    if len(outs) > 1:
      base = self._fresh("m")
      outs = [Value(f"{base}#{i}", o.type) for i, o in enumerate(outs)]
      lhs = f"{base}:{len(outs)}"
    text = f'{lhs} = "{name}"({", ".join(v.name for v in operands)})'
    if region:
      text += f" ({{\n{region}\n    }})"
    if attrs:
      text += f" {{{attrs}}}"
    in_types = ", ".join(str(v.type) for v in operands)
    out_types = ", ".join(str(t) for t in results)
    if len(results) != 1:
      out_types = f"({out_types})"
    text += f" : ({in_types}) -> {out_types}"
    self._lines.append(text)
    return outs

  def constant(self, value, ty: TensorType) -> Value:
    """A splat constant of type `ty` (cached per value and type)."""
    key = (repr(value), ty)
    if key not in self._constants:
      literal = _scalar_literal(value, ty.dtype)
      self._constants[key] = self.op(
          "stablehlo.constant", [], ty, f"value = dense<{literal}> : {ty}")
    return self._constants[key]

  def dense_constant(self, array: np.ndarray, ty: TensorType) -> Value:
    """A (small) constant with explicit elements."""
    flat = [_scalar_literal(v, ty.dtype) for v in np.asarray(array).ravel()]
    if ty.rank == 0:
      body = flat[0]
    else:
      body = "[" + ", ".join(flat) + "]"
    if ty.rank > 1:
      return self.op("stablehlo.reshape",
                     [self.dense_constant(np.asarray(array).ravel(),
                                          ty.with_shape((len(flat),)))], ty)
    return self.op("stablehlo.constant", [], ty,
                   f"value = dense<{body}> : {ty}")

  def scalar_region(self, op_name: str, dtype: str) -> str:
    """The body of a reduction region combining two scalars with `op_name`."""
    t = f"tensor<{dtype}>"
    a, b, r = self._fresh("ra"), self._fresh("rb"), self._fresh("rr")
    return (f"    ^bb0({a}: {t}, {b}: {t}):\n"
            f'      {r} = "{op_name}"({a}, {b}) : ({t}, {t}) -> {t}\n'
            f'      "stablehlo.return"({r}) : ({t}) -> ()')

  def module(self, results: Sequence[Value], name: str = "torch_cluster"
             ) -> str:
    args = ", ".join(f"{a.name}: {a.type}" for a in self._args)
    out_types = ", ".join(str(r.type) for r in results)
    body = "\n".join("    " + line for line in self._lines)
    ret = (f"    return {', '.join(r.name for r in results)} : {out_types}"
           if results else "    return")
    return (f"module @{name} {{\n"
            f"  func.func @main({args}) -> ({out_types}) {{\n"
            f"{body}\n{ret}\n  }}\n}}\n")
