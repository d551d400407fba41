"""`explain(model, *inputs)`: what the bridge does with a model.

Runs the model once through the backend (and once through Dynamo's own
explain, for graph breaks) and prints how many graphs, clusters and eager
nodes there are, which ops fell back and why, and a picture of each
partitioned graph.
"""

from __future__ import annotations

import dataclasses
import io
import sys
from typing import Any

import torch

from torch_bridge._src import backend as backend_lib


@dataclasses.dataclass
class Explanation:
  graph_count: int
  graph_break_count: int
  break_reasons: list[str]
  reports: list[backend_lib.GraphReport]
  # Per training graph: which runtime its steps take ("lean", or
  # AOTAutograd's and why; see training_runtime).
  runtimes: list[str] = dataclasses.field(default_factory=list)

  @property
  def clusters(self) -> list[backend_lib.ClusterInfo]:
    return [c for r in self.reports for c in r.clusters]

  @property
  def eager_nodes(self) -> list[backend_lib.EagerNode]:
    return [e for r in self.reports for e in r.eager]

  def fallback_ops(self) -> dict[str, str]:
    """{op: reason} of the ops that ran eagerly for lack of support."""
    return {e.op: e.reason for e in self.eager_nodes
            if "min_cluster_size" not in e.reason}

  def __str__(self) -> str:
    out = io.StringIO()
    compiled = sum(1 for c in self.clusters if c.compiled)
    print(f"dynamo graphs: {self.graph_count}, graph breaks: "
          f"{self.graph_break_count}", file=out)
    for reason in self.break_reasons:
      print(f"  break: {reason}", file=out)
    print(f"aten graphs: {len(self.reports)}, clusters: "
          f"{len(self.clusters)} ({compiled} compiled), eager nodes: "
          f"{len(self.eager_nodes)}", file=out)
    for runtime in self.runtimes:
      print(f"training runtime: {runtime}", file=out)
    for r in self.reports:
      print(f"\n== {r.kind} graph: {r.num_nodes} ops, {len(r.clusters)} "
            f"cluster(s), {len(r.eager)} eager node(s)", file=out)
      for c in r.clusters:
        state = (f"compiled in {c.compile_seconds:.3f} s" +
                 (" (cached)" if c.cache_hit else "")
                 if c.compiled else f"EAGER: {c.fallback_reason}")
        print(f"  cluster {c.name}: {c.num_nodes} ops "
              f"({c.num_compute} compute), {state}", file=out)
      reasons: dict[tuple[str, str], int] = {}
      for e in r.eager:
        reasons[(e.op, e.reason)] = reasons.get((e.op, e.reason), 0) + 1
      for (op, reason), n in sorted(reasons.items()):
        print(f"  eager {op} x{n}: {reason}", file=out)
      print("  picture:", file=out)
      print(r.picture, file=out)
    return out.getvalue()


def _loss(out: Any) -> torch.Tensor:
  if isinstance(out, torch.Tensor):
    return out.float().sum() if out.is_floating_point() else None
  if isinstance(out, (list, tuple)):
    parts = [_loss(o) for o in out]
    parts = [p for p in parts if p is not None]
    return sum(parts) if parts else None
  return None


def _runtime(training) -> str:
  if training.lean:
    plan = training.direct
    if plan is None:
      return "lean (the bridge's autograd.Function)"
    return ("lean (the bridge's autograd.Function, calling the forward and "
            f"backward clusters directly; {len(plan.kept_results)} of "
            f"{len(plan.layout)} saved values kept as buffers)")
  if not training.decided:
    return "AOTAutograd's (no backward compiled yet)"
  return f"AOTAutograd's ({training.reason})"


def explain(model, *inputs, options=None, train: bool = False,
            file=None, quiet: bool = False) -> Explanation:
  """Compiles and runs `model(*inputs)` once with the bridge (with a
  backward pass when `train`), prints the explanation to `file` (stdout by
  default) unless `quiet`, and returns it."""
  import torch._dynamo  # pylint: disable=g-import-not-at-top
  # torch._dynamo.explain is torch's documented graph-break report; torch
  # has no public alias of the module.
  dyn = torch._dynamo.explain(model)(*inputs)  # pylint: disable=protected-access
  be = backend_lib.Backend(options)
  compiled = torch.compile(model, backend=be, dynamic=False)
  if train:
    loss = _loss(compiled(*inputs))
    if loss is not None and loss.requires_grad:
      loss.backward()
  else:
    with torch.no_grad():
      compiled(*inputs)
  result = Explanation(
      dyn.graph_count, dyn.graph_break_count,
      [str(getattr(b, "reason", b)) for b in dyn.break_reasons], be.reports,
      [_runtime(t) for t in be.training])
  if not quiet:
    print(result, file=file or sys.stdout)
  return result
