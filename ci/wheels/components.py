"""The five shippable components and what each wheel depends on.

Third-party requirements take the pinned version in requirements.txt as their
minimum and stop before the next release that may break it (the next major,
or the next minor of a 0.x project); one written with its own version
specifier ("torch>=2.13") is used as written. Our own components depend on
each other at the exact same version.
"""

import dataclasses

VERSION = "0.1.0"


@dataclasses.dataclass(frozen=True)
class Component:
  package: str            # the top-level Python package (and repo folder)
  distribution: str       # the wheel's project name
  summary: str
  ours: tuple[str, ...]   # our components it depends on
  third_party: tuple[str, ...]  # names from requirements.txt, or specs
  entry_points: tuple[tuple[str, str, str], ...] = ()  # (group, name, value)


COMPONENTS = (
    Component("support", "openxla-support",
              "Platform layer: status, errors, flags, logging, tracing.",
              (), ("absl-py",)),
    Component("stablehlo", "openxla-stablehlo",
              "StableHLO IR, verifier, text format, interpreter, artifacts.",
              ("support",), ("numpy", "ml_dtypes"),
              entry_points=(
                  ("console_scripts", "stablehlo-translate",
                   "stablehlo.tools.translate:main"),
                  ("console_scripts", "stablehlo-opt",
                   "stablehlo.tools.opt:main"),
              )),
    Component("xla", "openxla-xla",
              "XLA compiler: HLO IR, passes, fusion, CPU codegen.",
              ("support", "stablehlo"),
              ("numpy", "ml_dtypes", "llvmlite", "protobuf")),
    Component("pjrt", "openxla-pjrt",
              "PJRT plugin ABI, loader, client, and the CPU plugin.",
              ("support", "stablehlo", "xla"), ("numpy",),
              entry_points=(
                  # JAX imports this module and calls its initialize():
                  # JAX_PLATFORMS=openxla_cpu then runs on our CPU plugin.
                  ("jax_plugins", "openxla_cpu", "pjrt.jax_plugin"),
                  # pjrt's own registry: pjrt.Client("openxla_cpu").
                  ("pjrt_plugins", "openxla_cpu",
                   "pjrt._src.plugin.api:get_api"),
              )),
    Component("torch_bridge", "openxla-torch-bridge",
              "PyTorch bridge: torch.compile through StableHLO and PJRT.",
              ("support", "stablehlo", "pjrt"),
              # torch is no pin of the stack: the bridge is tested on 2.13.
              ("numpy", "torch>=2.13"),
              entry_points=(
                  # torch.compile(model, backend="openxla_stablehlo").
                  ("torch_dynamo_backends", "openxla_stablehlo",
                   "torch_bridge:backend"),
              )),
)

BY_PACKAGE = {c.package: c for c in COMPONENTS}
