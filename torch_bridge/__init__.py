"""The PyTorch bridge: torch.compile through StableHLO and PJRT.

    import torch_bridge
    model = torch.compile(model, backend=torch_bridge.backend)
    # or, once the wheel is installed (entry point "torch_dynamo_backends"):
    model = torch.compile(model, backend="openxla_stablehlo")

Clusters of ATen ops that the lowering table supports run as StableHLO
programs through a PJRT plugin (our CPU plugin by default; any plugin via
the `plugin` option); everything else runs eagerly. `explain(model, *inputs)`
prints what ran where and why.

Depends only on `support`, `stablehlo` and `pjrt` (and torch).
"""

from torch_bridge._src.backend import Backend as Backend
from torch_bridge._src.backend import backend as backend
from torch_bridge._src.backend import BACKEND_NAME as BACKEND_NAME
from torch_bridge._src.backend import FallbackWarning as FallbackWarning
from torch_bridge._src.backend import Options as Options
from torch_bridge._src.backend import register as register
from torch_bridge._src.explain import Explanation as Explanation
from torch_bridge._src.explain import explain as explain
from torch_bridge._src.lowering import lower_graph as lower_graph
from torch_bridge._src.registry import LoweringError as LoweringError
from torch_bridge._src.table import lowered_ops as lowered_ops
