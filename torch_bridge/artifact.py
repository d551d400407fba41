"""Exported models (`torch_bridge.export`) as portable StableHLO artifacts:
load and run one through any PJRT plugin, without torch.

    from torch_bridge import artifact
    run = artifact.load("exported/gpt2")          # our CPU plugin
    run = artifact.load("exported/gpt2", "/path/to/xla_cpu_pjrt.so")
    logits = run(ids)                              # numpy in, numpy out
"""

from torch_bridge._src.artifact import ARTIFACT as ARTIFACT
from torch_bridge._src.artifact import load as load
from torch_bridge._src.artifact import Loaded as Loaded
from torch_bridge._src.artifact import MANIFEST as MANIFEST
from torch_bridge._src.artifact import program_text as program_text
from torch_bridge._src.artifact import read_manifest as read_manifest
from torch_bridge._src.artifact import SIDECAR as SIDECAR
