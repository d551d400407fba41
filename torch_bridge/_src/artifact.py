"""Exported models as portable StableHLO artifacts, and their loader.

`torch_bridge.export(model, args, directory)` (export.py) writes:

  model.mlirbc      a portable artifact (VHLO bytecode, upstream-compatible)
                    of the model's inference program, weights as constants;
  model.shlo-ext    the sidecar holding every weight above the threshold
                    (stablehlo's extern-constants format), when there is one;
  manifest.json     what the artifact takes and returns (shapes, dtypes,
                    the output structure) and the StableHLO version.

`load(directory, plugin=...)` here runs it through a PJRT plugin with numpy
arrays in and out. This module imports neither torch nor anything that
does: an exported model runs where torch is not installed.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Sequence

import numpy as np

import pjrt
import support

MANIFEST = "manifest.json"
ARTIFACT = "model.mlirbc"
SIDECAR = "model.shlo-ext"
FORMAT = "torch_bridge.exported.v1"


# The name our CPU plugin has in pjrt's registry when the pjrt wheel is
# installed (entry point group "pjrt_plugins"); in a source tree, where no
# entry point exists, the same plugin is loaded as a Python plugin object.
DEFAULT_PLUGIN = "openxla_cpu"


def load_plugin(choice: str = DEFAULT_PLUGIN) -> pjrt.Plugin:
  """The PJRT plugin `choice` names (a registered name, a library path, or
  `module:attribute`); DEFAULT_PLUGIN falls back to our plugin's module."""
  from pjrt.tools import plugin_choice  # pylint: disable=g-import-not-at-top
  try:
    return plugin_choice.load(choice)
  except support.NotFoundError:
    if choice != DEFAULT_PLUGIN:
      raise
    return plugin_choice.load(plugin_choice.OUR_PLUGIN)


def write_manifest(directory: pathlib.Path, manifest: dict) -> None:
  (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def read_manifest(directory) -> dict:
  path = pathlib.Path(directory) / MANIFEST
  try:
    manifest = json.loads(path.read_text())
  except FileNotFoundError:
    raise support.NotFoundError(f"no exported model at {directory} "
                                f"({MANIFEST} is missing)") from None
  except ValueError as e:
    raise support.DataLossError(f"{path}: not valid JSON: {e}") from None
  if manifest.get("format") != FORMAT:
    raise support.InvalidArgumentError(
        f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
  return manifest


def program_text(directory) -> str:
  """The StableHLO text of an exported model, its extern weights inlined
  (a plugin is handed a self-contained program)."""
  from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
  from stablehlo import vhlo  # pylint: disable=g-import-not-at-top
  directory = pathlib.Path(directory)
  manifest = read_manifest(directory)
  data = (directory / manifest["artifact"]).read_bytes()
  sidecar = manifest.get("sidecar")
  module = vhlo.deserialize_portable_artifact(
      data, str(directory / sidecar) if sidecar else None)
  return mlir_text.print_module(module)


class Loaded:
  """An exported model compiled for one PJRT plugin; call it with numpy
  arrays (or anything numpy converts) in the exported order. It returns
  the model's outputs flattened (torch's pytree order): one array, or a
  tuple of them."""

  def __init__(self, directory, plugin: Any = DEFAULT_PLUGIN):
    self.manifest = read_manifest(directory)
    if isinstance(plugin, pjrt.Client):
      self.client = plugin
    else:
      self.client = pjrt.Client(load_plugin(plugin))
    self.executable = self.client.compile(program_text(directory))

  def __call__(self, *args) -> Any:
    specs = self.manifest["inputs"]
    if len(args) != len(specs):
      raise support.InvalidArgumentError(
          f"the exported model takes {len(specs)} inputs, got {len(args)}")
    buffers = []
    for i, (arg, spec) in enumerate(zip(args, specs)):
      array = np.ascontiguousarray(np.asarray(arg))
      if (list(array.shape) != spec["shape"] or
          str(array.dtype) != spec["dtype"]):
        raise support.InvalidArgumentError(
            f"input {i}: expected {spec['dtype']}{spec['shape']}, got "
            f"{array.dtype}{list(array.shape)}")
      buffers.append(self.client.buffer_from_numpy(array))
    outs = [b.to_numpy() for b in self.executable.execute(buffers)]
    flat = tuple(outs[i] for i in self.manifest["outputs"])
    return flat[0] if len(flat) == 1 else flat


def load(directory, plugin: Any = DEFAULT_PLUGIN) -> Loaded:
  """The exported model in `directory`, compiled for `plugin` (a registered
  plugin name, a library path, `module:attribute`, or a pjrt.Client)."""
  return Loaded(directory, plugin)


def input_specs(arrays: Sequence[np.ndarray]) -> list[dict]:
  return [{"shape": list(a.shape), "dtype": str(a.dtype)} for a in arrays]
