"""The PyTorch bridge: torch.compile through StableHLO and PJRT.

    import torch_bridge
    model = torch.compile(model, backend=torch_bridge.backend)
    # or, once the wheel is installed (entry point "torch_dynamo_backends"):
    model = torch.compile(model, backend="openxla_stablehlo")

Clusters of ATen ops that the lowering table supports run as StableHLO
programs through a PJRT plugin (our CPU plugin by default; any plugin via
the `plugin` option); everything else runs eagerly. `explain(model, *inputs)`
prints what ran where and why.

`export(model, args, directory)` writes a model's inference program as a
portable StableHLO artifact (weights in a sidecar); `load_exported` (or
`torch_bridge.artifact.load`) runs it through a PJRT plugin, without torch.

Depends only on `support`, `stablehlo` and `pjrt` (and torch, which the
names below load on first use: `torch_bridge.artifact` works without it).
"""

import importlib

from torch_bridge import artifact as artifact
from torch_bridge._src.artifact import load as load_exported

# Public name -> its module; imported on first use (they need torch).
_LAZY = {
    "Backend": "torch_bridge._src.backend",
    "backend": "torch_bridge._src.backend",
    "BACKEND_NAME": "torch_bridge._src.backend",
    "FallbackWarning": "torch_bridge._src.backend",
    "Options": "torch_bridge._src.backend",
    "register": "torch_bridge._src.backend",
    "Explanation": "torch_bridge._src.explain",
    "explain": "torch_bridge._src.explain",
    "export": "torch_bridge._src.export",
    "lower_graph": "torch_bridge._src.lowering",
    "LoweringError": "torch_bridge._src.registry",
    "lowered_ops": "torch_bridge._src.table",
}


def __getattr__(name):
  module = _LAZY.get(name)
  if module is None:
    raise AttributeError(f"module 'torch_bridge' has no attribute {name!r}")
  value = getattr(importlib.import_module(module), name)
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(_LAZY))
