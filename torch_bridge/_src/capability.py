"""Which fx nodes a cluster may contain: an `OperatorSupport` built from the
lowering table, for torch.fx's `CapabilityBasedPartitioner`.

A node is supported when its op has a lowering, the generic checks pass
(static shapes, supported dtypes, tensor inputs), and the op's own check
accepts its attributes. Every refusal is kept with its reason, for
`explain` and for the fallback warning.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable

import torch
import torch.fx
from torch.fx.passes.operator_support import OperatorSupportBase

from torch_bridge._src import mlir
from torch_bridge._src import ops
from torch_bridge._src import registry

# Ops that move no data worth a compilation: a cluster's size counts the
# other ones (TF's autoclustering likewise does not count Identity / Const).
NON_COMPUTE_OPS = frozenset({
    "aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
    "aten.permute.default", "aten.t.default", "aten.transpose.int",
    "aten.expand.default", "aten.unsqueeze.default", "aten.squeeze.dim",
    "aten.squeeze.dims", "aten.squeeze.default", "aten.alias.default",
    "aten.clone.default", "aten.detach.default",
    "aten.lift_fresh_copy.default", "aten.slice.Tensor", "aten.select.int",
    "aten.full.default", "aten.scalar_tensor.default",
})


def op_name(node: torch.fx.Node) -> str:
  if node.op != "call_function":
    return node.op
  if node.target is operator.getitem:
    return "getitem"
  return str(node.target)


def is_compute(node: torch.fx.Node) -> bool:
  return (node.op == "call_function" and node.target is not operator.getitem
          and op_name(node) not in NON_COMPUTE_OPS)


def _tensor_problem(val: Any, what: str) -> str | None:
  if isinstance(val, (list, tuple)):
    for v in val:
      if v is not None:
        problem = _tensor_problem(v, what)
        if problem:
          return problem
    return None
  if not isinstance(val, torch.Tensor):
    return f"{what} is a {type(val).__name__}, not a tensor"
  if mlir.element_type(val.dtype) is None:
    return f"{what} has dtype {val.dtype}, which is not lowered"
  if any(not isinstance(d, int) for d in val.shape):
    return f"{what} has a dynamic shape {tuple(val.shape)}"
  if val.layout != torch.strided or val.device.type not in ("cpu", "meta"):
    return f"{what} is not a strided CPU tensor"
  return None


def _input_nodes(args: Iterable[Any]):
  for a in args:
    if isinstance(a, torch.fx.Node):
      yield a
    elif isinstance(a, (list, tuple)):
      yield from _input_nodes(a)


# Ops left to torch on purpose, with why.
EAGER_BY_DESIGN = {
    "aten.rand.default": (
        "draws from torch's random number generator (run eagerly; the "
        "cluster reads the numbers)"),
}


def unsupported_reason(node: torch.fx.Node,
                       forced_eager: frozenset[str] = frozenset()
                       ) -> str | None:
  """None if `node` can be lowered, else why not."""
  ops.load()
  if node.op != "call_function":
    return f"a {node.op} node"
  if node.target is operator.getitem:
    source = node.args[0]
    return (None if isinstance(source, torch.fx.Node) and
            unsupported_reason(source, forced_eager) is None
            else "getitem of an unsupported node")
  name = op_name(node)
  if name in forced_eager:
    return "forced to run eagerly by the backend options"
  # An ATen overload's class lives only in torch._ops (no public alias).
  if not isinstance(node.target, torch._ops.OpOverload):  # pylint: disable=protected-access
    return f"{name} is not an ATen op overload"
  if name in EAGER_BY_DESIGN:
    return EAGER_BY_DESIGN[name]
  entry = registry.lookup(name)
  if entry is None:
    return f"no lowering for {name}"
  if "val" not in node.meta:
    return "no shape information (meta['val'])"
  problem = _tensor_problem(node.meta["val"], "the result")
  if problem:
    return problem
  for i, arg in enumerate(_input_nodes(list(node.args) +
                                       list(node.kwargs.values()))):
    problem = _tensor_problem(arg.meta.get("val"), f"input {arg.name}")
    if problem:
      return problem
  if entry.check is not None:
    try:
      return entry.check(node)
    except Exception as e:  # pylint: disable=broad-except
      return f"the check of {name} failed ({type(e).__name__}: {e})"
  return None


class TableSupport(OperatorSupportBase):
  """`OperatorSupport` over the lowering table, remembering its refusals."""

  def __init__(self, forced_eager: Iterable[str] = ()):
    self.forced_eager = frozenset(forced_eager)
    self.reasons: dict[torch.fx.Node, str] = {}

  def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
    reason = unsupported_reason(node, self.forced_eager)
    if reason is not None:
      self.reasons[node] = reason
    return reason is None
