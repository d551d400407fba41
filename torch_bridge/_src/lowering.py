"""Lowers an ATen fx graph (one cluster) to one StableHLO program.

Placeholders become the arguments of `@main` (in order), the graph's output
its results; every call_function node goes through its entry of the
lowering table (`registry`). Shapes and dtypes come from the `meta["val"]`
FakeTensors that Dynamo / AOTAutograd leave on every node.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

import support
from torch_bridge._src import helpers
from torch_bridge._src import mlir
from torch_bridge._src import ops
from torch_bridge._src import registry


def tensor_type(val: Any) -> mlir.TensorType:
  """The static TensorType of a FakeTensor (raises if it has none)."""
  if not isinstance(val, torch.Tensor):
    raise support.InvalidArgumentError(f"not a tensor: {type(val).__name__}")
  dtype = mlir.element_type(val.dtype)
  if dtype is None:
    raise support.UnimplementedError(f"dtype {val.dtype} is not supported")
  shape = []
  for d in val.shape:
    if not isinstance(d, int):
      raise support.UnimplementedError(f"dynamic dimension {d}")
    shape.append(d)
  return mlir.TensorType(tuple(shape), dtype)


def result_types(val: Any):
  if isinstance(val, (tuple, list)):
    return [None if v is None else tensor_type(v) for v in val]
  return tensor_type(val)


class Context:
  """What a lowering sees besides its arguments."""

  def __init__(self, builder: mlir.FunctionBuilder, node: torch.fx.Node,
               out: Any = None):
    self.b = builder
    self.node = node
    self.op = str(node.target)
    self.out = result_types(node.meta.get("val")) if out is None else out

  def fail(self, reason: str):
    raise registry.LoweringError(self.op, reason)


def _map_args(value: Any, env: dict[torch.fx.Node, Any]) -> Any:
  if isinstance(value, torch.fx.Node):
    return env[value]
  if isinstance(value, (list, tuple)):
    return type(value)(_map_args(v, env) for v in value)
  return value


def lower_graph(gm: torch.fx.GraphModule, name: str = "torch_cluster"
                ) -> tuple[str, list[mlir.TensorType], Any]:
  """Returns (MLIR text, argument types, output structure).

  The output structure mirrors the graph's output: an int (index into the
  program's results), None, or a tuple/list of them.

  Raises:
    registry.LoweringError: a node has no lowering (names the op).
  """
  ops.load()
  b = mlir.FunctionBuilder()
  env: dict[torch.fx.Node, Any] = {}
  arg_types = []
  results: list[mlir.Value] = []
  structure: Any = None
  for node in gm.graph.nodes:
    if node.op == "placeholder":
      ty = tensor_type(node.meta.get("val"))
      arg_types.append(ty)
      env[node] = b.argument(ty)
    elif node.op == "call_function":
      if node.target is operator.getitem:
        env[node] = env[node.args[0]][node.args[1]]
        continue
      entry = registry.lookup(str(node.target))
      if entry is None:
        raise registry.LoweringError(str(node.target), "no lowering")
      if entry.check is not None:
        reason = entry.check(node)
        if reason:
          raise registry.LoweringError(str(node.target), reason)
      args = _map_args(node.args, env)
      kwargs = {k: _map_args(v, env) for k, v in node.kwargs.items()}
      env[node] = _lower_node(b, node, entry, args, kwargs)
    elif node.op == "output":
      def collect(v):
        if isinstance(v, (list, tuple)):
          return type(v)(collect(x) for x in v)
        if v is None:  # e.g. the gradient of an input that needs none
          return None
        value = env[v]
        results.append(value)
        return len(results) - 1
      structure = collect(node.args[0])
    else:
      raise registry.LoweringError(node.op, f"fx node kind {node.op!r} "
                                   "cannot be lowered")
  return b.module(results, name), arg_types, structure


# Element types that torch's CPU kernels compute in f32: each op widens its
# operands, computes and accumulates in f32 and rounds its results once.
_COMPUTED_IN_F32 = frozenset({"bf16"})


def _values(x: Any):
  if isinstance(x, mlir.Value):
    yield x
  elif isinstance(x, (list, tuple)):
    for v in x:
      yield from _values(v)


def _lower_node(b: mlir.FunctionBuilder, node: torch.fx.Node,
                entry: registry.Lowering, args: Any, kwargs: dict) -> Any:
  ctx = Context(b, node)
  outs = ctx.out if isinstance(ctx.out, list) else [ctx.out]
  narrow = any(t is not None and t.dtype in _COMPUTED_IN_F32 for t in outs)
  narrow = narrow or any(v.dtype in _COMPUTED_IN_F32 for v in _values(
      (args, list(kwargs.values()))))
  if not narrow:
    out = entry.lower(ctx, *args, **kwargs)
    _check_types(ctx, out)
    return out
  # The op as its f32 version: bf16 operands widened, bf16 results rounded
  # (torch's semantics: a bf16 sum accumulates in f32, a bf16 matmul too).
  def wide(x):
    if isinstance(x, mlir.Value):
      return helpers.convert(b, x, "f32") if x.dtype in _COMPUTED_IN_F32 else x
    if isinstance(x, (list, tuple)):
      return type(x)(wide(v) for v in x)
    return x

  def wide_type(t):
    return (t.with_dtype("f32") if t is not None and t.dtype in
            _COMPUTED_IN_F32 else t)
  wide_out = ([wide_type(t) for t in ctx.out] if isinstance(ctx.out, list)
              else wide_type(ctx.out))
  wide_ctx = Context(b, node, wide_out)
  out = entry.lower(wide_ctx, *wide(args), **{k: wide(v) for k, v in
                                              kwargs.items()})
  _check_types(wide_ctx, out)
  if isinstance(out, (list, tuple)):
    return type(out)(None if o is None or t is None else
                     helpers.convert(b, o, t.dtype)
                     for o, t in zip(out, outs))
  return helpers.convert(b, out, outs[0].dtype)


def _check_types(ctx: Context, out: Any) -> None:
  """Internal invariant: a lowering produces the types torch inferred."""
  expected = ctx.out
  got = out if isinstance(out, (list, tuple)) else [out]
  want = expected if isinstance(expected, list) else [expected]
  for g, w in zip(got, want):
    if w is None or g is None:
      continue
    if g.type != w:
      raise support.InternalError(
          f"lowering of {ctx.op} produced {g.type}, torch expects {w}")


def signature(gm: torch.fx.GraphModule
              ) -> tuple[list[tuple[tuple[int, ...], torch.dtype]],
                         list[tuple[tuple[int, ...], torch.dtype]]]:
  """(shape, dtype) of the arguments and of the results of the program
  `lower_graph(gm)` makes, in its order."""
  def of(node: torch.fx.Node):
    val = node.meta.get("val")
    tensor_type(val)  # Raises for what lower_graph cannot lower.
    return tuple(int(d) for d in val.shape), val.dtype

  args, results = [], []
  for node in gm.graph.nodes:
    if node.op == "placeholder":
      args.append(of(node))
    elif node.op == "output":
      def collect(v):
        if isinstance(v, (list, tuple)):
          for x in v:
            collect(x)
        elif v is not None:
          results.append(of(v))
      collect(node.args[0])
  return args, results
