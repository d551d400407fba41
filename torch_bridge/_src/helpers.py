"""Emission helpers shared by the lowering families (numpy-style broadcast,
dtype conversion, comparisons, reductions, dot_general)."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.fx

from torch_bridge._src import mlir
from torch_bridge._src.mlir import FunctionBuilder, TensorType, Value

_UNSIGNED = frozenset({"ui8", "i1"})


def is_value(x) -> bool:
  return isinstance(x, Value)


def arg_val(node: torch.fx.Node, i: int = 0):
  """The traced value (meta["val"]) of `node`'s i-th argument, or None
  when that argument is not a node or was not traced."""
  arg = node.args[i]
  return arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
  """torch's strides of a contiguous tensor of `shape` (a dim of size 0
  counts as 1)."""
  strides, step = [], 1
  for d in reversed(shape):
    strides.append(step)
    step *= max(int(d), 1)
  return tuple(reversed(strides))


def compare_type(dtype: str) -> str:
  if dtype in mlir.FLOAT_TYPES:
    return "FLOAT"
  return "UNSIGNED" if dtype in _UNSIGNED else "SIGNED"


def compare(b: FunctionBuilder, x: Value, y: Value, direction: str) -> Value:
  return b.op(
      "stablehlo.compare", [x, y], x.type.with_dtype("i1"),
      f"comparison_direction = #stablehlo<comparison_direction {direction}>, "
      f"compare_type = #stablehlo<comparison_type {compare_type(x.dtype)}>")


def convert(b: FunctionBuilder, v: Value, dtype: str) -> Value:
  if v.dtype == dtype:
    return v
  if dtype == "i1":  # Any-to-bool is x != 0, as in torch.
    return compare(b, v, b.constant(0, v.type), "NE")
  return b.op("stablehlo.convert", [v], v.type.with_dtype(dtype))


def broadcast(b: FunctionBuilder, v: Value, shape: Sequence[int]) -> Value:
  """Numpy-style broadcast of `v` to `shape` (trailing dims aligned)."""
  shape = tuple(int(d) for d in shape)
  if v.shape == shape:
    return v
  offset = len(shape) - v.rank
  assert offset >= 0, (v.shape, shape)
  # Size-1 dims that grow need a reshape away first (broadcast_in_dim
  # allows size-1 operand dims, so this is not needed: spec C5 allows
  # dim(operand, i) == 1).
  return b.op("stablehlo.broadcast_in_dim", [v], v.type.with_shape(shape),
              "broadcast_dimensions = " +
              mlir.i64_array(range(offset, offset + v.rank)))


def broadcast_in_dim(b: FunctionBuilder, v: Value, shape: Sequence[int],
                     dims: Sequence[int]) -> Value:
  return b.op("stablehlo.broadcast_in_dim", [v], v.type.with_shape(shape),
              "broadcast_dimensions = " + mlir.i64_array(dims))


def operand(b: FunctionBuilder, x, ty: TensorType) -> Value:
  """A Value or Python scalar as a tensor of exactly type `ty`."""
  if is_value(x):
    return broadcast(b, convert(b, x, ty.dtype), ty.shape)
  return b.constant(x, ty)


def reshape(b: FunctionBuilder, v: Value, shape: Sequence[int]) -> Value:
  shape = tuple(int(d) for d in shape)
  if v.shape == shape:
    return v
  return b.op("stablehlo.reshape", [v], v.type.with_shape(shape))


def slice_(b: FunctionBuilder, v: Value, starts: Sequence[int],
           limits: Sequence[int], strides: Sequence[int] | None = None
           ) -> Value:
  """v[starts:limits:strides] per dim (strides default to 1)."""
  strides = list(strides) if strides is not None else [1] * v.rank
  shape = [max(0, -(-(lim - s) // st)) for s, lim, st in
           zip(starts, limits, strides)]
  return b.op("stablehlo.slice", [v], v.type.with_shape(shape),
              f"start_indices = {mlir.i64_array(starts)}, "
              f"limit_indices = {mlir.i64_array(limits)}, "
              f"strides = {mlir.i64_array(strides)}")


def transpose(b: FunctionBuilder, v: Value, perm: Sequence[int]) -> Value:
  perm = [int(p) % max(v.rank, 1) for p in perm]
  if perm == list(range(v.rank)):
    return v
  shape = [v.shape[p] for p in perm]
  result = b.op("stablehlo.transpose", [v], v.type.with_shape(shape),
                "permutation = " + mlir.i64_array(perm))
  b.transposes[result.name] = (v, tuple(perm))
  return result


def reduce(b: FunctionBuilder, v: Value, dims: Sequence[int], op_name: str,
           init) -> Value:
  """Reduces `v` over `dims` (removed from the shape)."""
  dims = sorted({int(d) % v.rank for d in dims}) if v.rank else []
  if not dims:
    return v
  shape = [d for i, d in enumerate(v.shape) if i not in dims]
  init_value = b.constant(init, TensorType((), v.dtype))
  return b.op("stablehlo.reduce", [v, init_value], v.type.with_shape(shape),
              "dimensions = " + mlir.i64_array(dims),
              region=b.scalar_region(op_name, v.dtype))


def keep_dims(b: FunctionBuilder, v: Value, rank: int, dims: Sequence[int]
              ) -> Value:
  """Re-inserts the reduced `dims` as size-1 dims."""
  dims = {int(d) % rank for d in dims}
  shape, it = [], iter(v.shape)
  for i in range(rank):
    shape.append(1 if i in dims else next(it))
  return reshape(b, v, shape)


def _through_transpose(b: FunctionBuilder, v: Value, batch, contract):
  """(operand, batch dims, contracting dims) of a dot_general operand `v`,
  reading through `v = transpose(u)` where that keeps the result's layout
  (the free dims of `v` in the same order in `u`): the plugin then needs no
  transposed copy (a weight `t()` before a matmul, most of backward)."""
  source = b.transposes.get(v.name)
  if source is None:
    return v, list(batch), list(contract)
  u, perm = source
  free = [perm[i] for i in range(v.rank) if i not in batch and i not in contract]
  if free != sorted(free):
    return v, list(batch), list(contract)
  return u, [perm[i] for i in batch], [perm[i] for i in contract]


def dot_general(b: FunctionBuilder, lhs: Value, rhs: Value, out: TensorType,
                lhs_batch=(), rhs_batch=(), lhs_contract=(), rhs_contract=()
                ) -> Value:
  lhs, lhs_batch, lhs_contract = _through_transpose(b, lhs, lhs_batch,
                                                    lhs_contract)
  rhs, rhs_batch, rhs_contract = _through_transpose(b, rhs, rhs_batch,
                                                    rhs_contract)
  lists = (f"lhs_batching_dimensions = [{', '.join(map(str, lhs_batch))}], "
           f"rhs_batching_dimensions = [{', '.join(map(str, rhs_batch))}], "
           if lhs_batch else "")
  attr = (f"dot_dimension_numbers = #stablehlo.dot<{lists}"
          f"lhs_contracting_dimensions = [{', '.join(map(str, lhs_contract))}]"
          f", rhs_contracting_dimensions = "
          f"[{', '.join(map(str, rhs_contract))}]>")
  return b.op("stablehlo.dot_general", [lhs, rhs], out, attr)


def normalize_dim(dim: int, rank: int) -> int:
  return int(dim) % max(rank, 1)


def promote(*args) -> str:
  """The MLIR element type torch's type promotion gives `args` (Values and
  Python scalars), e.g. for the operands of a comparison."""
  samples = []
  for a in args:
    if is_value(a):
      dtype = _TORCH_DTYPES[a.dtype]
      samples.append(torch.empty((1,) if a.rank else (), dtype=dtype))
    elif isinstance(a, (bool, int, float)):
      samples.append(a)
  result = samples[0]
  if len(samples) == 1:
    dtype = result.dtype if isinstance(result, torch.Tensor) else (
        torch.tensor(result).dtype)
  else:
    dtype = torch.result_type(samples[0], samples[1])
    for s in samples[2:]:
      dtype = torch.promote_types(dtype, torch.result_type(s, s))
  return mlir.element_type(dtype)


_TORCH_DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64, "i32": torch.int32, "i16": torch.int16,
    "i8": torch.int8, "ui8": torch.uint8, "i1": torch.bool,
}


def torch_dtype(dtype: str) -> torch.dtype:
  return _TORCH_DTYPES[dtype]
