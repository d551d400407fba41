"""Test helpers shared by the elementwise kernel tests: run one op on numpy
arrays through the parser, verifier and interpreter."""

import ml_dtypes
import numpy as np

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.ops import verify

# numpy dtypes of MLIR element type spellings.
NP = {
    "i1": np.bool_, "i2": ml_dtypes.int2, "i4": ml_dtypes.int4,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "ui2": ml_dtypes.uint2, "ui4": ml_dtypes.uint4, "ui8": np.uint8,
    "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
    "bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32,
    "f64": np.float64, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E5M2": ml_dtypes.float8_e5m2, "f4E2M1FN": ml_dtypes.float4_e2m1fn,
    "complex<f32>": np.complex64, "complex<f64>": np.complex128,
}


def tensor_type(shape, ty: str) -> str:
  dims = "x".join(str(d) for d in shape)
  return f"tensor<{dims}x{ty}>" if dims else f"tensor<{ty}>"


def run_op(name, args, in_types, out_type, attrs="", out_shape=None):
  """Runs op `name` in generic form on numpy `args` (element types
  `in_types`, result element type `out_type`, result shape `out_shape` or
  the broadcast of the argument shapes); returns its result."""
  args = [np.asarray(x) for x in args]
  tins = [tensor_type(x.shape, ty) for x, ty in zip(args, in_types)]
  shape = out_shape if out_shape is not None else np.broadcast_shapes(
      *[x.shape for x in args])
  tout = tensor_type(shape, out_type)
  params = ", ".join(f"%a{i}: {ty}" for i, ty in enumerate(tins))
  operands = ", ".join(f"%a{i}" for i in range(len(args)))
  src = f"""
  func.func @main({params}) -> {tout} {{
    %0 = "{name}"({operands}) {attrs} : ({", ".join(tins)}) -> {tout}
    return %0 : {tout}
  }}"""
  module = text.parse_module(src, "t.mlir")
  verify.verify_module(module)
  (out,) = interpreter.Interpreter(module).run("main", args)
  return out


def wrap(v: int, bits: int, signed: bool) -> int:
  """`v` modulo 2^bits, read as two's complement when `signed`."""
  v &= (1 << bits) - 1
  if signed and v >= 1 << (bits - 1):
    v -= 1 << bits
  return v
