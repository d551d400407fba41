"""torch.export -> StableHLO -> a portable artifact (see artifact.py).

The model is exported with `torch.export.export` and decomposed to core
ATen (the decompositions the torch.compile backend uses); the whole graph
is lowered with the same ATen -> StableHLO table. Parameters, buffers and
constant tensors become constants of the program (`@main` takes the user
inputs only and calls the lowered graph with the weights first); weights
larger than `externalize_threshold_bytes` go to the sidecar file. The
whole graph must lower: export has no eager fallback, and an op without a
lowering is a `LoweringError` naming it.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any, Sequence

import numpy as np
import torch

import support
from torch_bridge._src import artifact
from torch_bridge._src import lowering
from torch_bridge._src import mlir

_USER_KINDS = ("USER_INPUT",)
_WEIGHT_KINDS = ("PARAMETER", "BUFFER", "CONSTANT_TENSOR")


def _numpy(t: torch.Tensor) -> np.ndarray:
  return t.detach().cpu().contiguous().numpy()


def _weight(ep, spec) -> np.ndarray:
  target = spec.target
  if target in ep.state_dict:
    return _numpy(ep.state_dict[target])
  if target in ep.constants:
    return _numpy(ep.constants[target])
  raise support.InternalError(f"exported weight {target!r} has no value")


def _dense_hex(array: np.ndarray, ty: mlir.TensorType) -> str:
  """A constant op for `array` in MLIR's hex dense form (raw little-endian
  element bytes; booleans one byte each)."""
  raw = np.ascontiguousarray(array)
  if raw.dtype == np.bool_:
    raw = raw.astype(np.uint8)
  data = raw.astype(raw.dtype.newbyteorder("<"), copy=False).tobytes()
  return f'dense<"0x{data.hex().upper()}"> : {ty}'


def _flat_outputs(value: Any) -> list[int]:
  """The program results in the order of the model's flattened outputs."""
  if isinstance(value, (list, tuple)):
    return [i for v in value for i in _flat_outputs(v)]
  if value is None:
    raise support.UnimplementedError("an exported model returning None")
  return [value]


def program(model: torch.nn.Module, args: Sequence[torch.Tensor]
            ) -> tuple[str, list[np.ndarray], Any]:
  """(StableHLO text with the weights inlined, example user inputs as numpy,
  output structure) of `model` exported for `args`."""
  from torch._decomp import core_aten_decompositions  # pylint: disable=g-import-not-at-top
  ep = torch.export.export(model, tuple(args))
  ep = ep.run_decompositions(core_aten_decompositions())
  sig = ep.graph_signature
  for spec in sig.output_specs:
    if spec.kind.name != "USER_OUTPUT":
      raise support.UnimplementedError(
          f"exporting a model whose forward also returns {spec.kind.name} "
          f"({spec.target}); export it in eval mode (model.eval()) so "
          "buffers are not updated")
  gm = ep.graph_module
  # torch.export leaves runtime checks of metadata torch already verified
  # (aten._assert_tensor_metadata, ...): nothing to compute.
  for node in list(gm.graph.nodes):
    if (node.op == "call_function" and not node.users and
        str(node.target).startswith(("aten._assert", "aten.sym_constrain"))):
      gm.graph.erase_node(node)
  text, arg_types, structure = lowering.lower_graph(gm, "exported")
  specs = sig.input_specs
  if len(specs) != len(arg_types):
    raise support.InternalError(
        f"{len(specs)} exported inputs but {len(arg_types)} placeholders")
  lines, call_args, user_types = [], [], []
  for i, (spec, ty) in enumerate(zip(specs, arg_types)):
    kind = spec.kind.name
    if kind in _USER_KINDS:
      call_args.append(f"%u{len(user_types)}")
      user_types.append(ty)
    elif kind in _WEIGHT_KINDS:
      value = _weight(ep, spec).reshape(ty.shape)
      lines.append(f'    %w{i} = "stablehlo.constant"() {{value = '
                   f"{_dense_hex(value, ty)}}} : () -> {ty}")
      call_args.append(f"%w{i}")
    else:
      raise support.UnimplementedError(
          f"exported input {spec.target or spec.arg} of kind {kind}")
  # The lowered graph becomes a private function of the exported module.
  match = re.search(r"func\.func @main\((.*?)\) -> \((.*?)\) \{", text)
  if match is None:
    raise support.InternalError("unexpected lowered module text")
  out_types = match.group(2)
  inner = text[text.index("  func.func @main"):text.rindex("}")]
  inner = inner.replace("func.func @main(", "func.func private @forward(", 1)
  n_out = len([t for t in re.split(r",\s*(?![^<]*>)", out_types) if t])
  results = ", ".join(f"%r#{k}" for k in range(n_out)) if n_out > 1 else "%r"
  lhs = f"%r:{n_out}" if n_out > 1 else "%r"
  in_types = ", ".join(str(t) for t in arg_types)
  user_args = ", ".join(f"%u{k}: {t}" for k, t in enumerate(user_types))
  main = (f"  func.func @main({user_args}) -> ({out_types}) {{\n" +
          "\n".join(lines) + ("\n" if lines else "") +
          f"    {lhs} = func.call @forward({', '.join(call_args)}) : "
          f"({in_types}) -> ({out_types})\n"
          f"    return {results} : {out_types}\n  }}\n")
  module = f"module @exported {{\n{main}{inner}}}\n"
  examples = [_numpy(a) for a in args]
  return module, examples, structure


def export(model: torch.nn.Module, args: Sequence[torch.Tensor], directory,
           *, target: str = "current",
           externalize_threshold_bytes: int = 1024) -> pathlib.Path:
  """Writes `model`'s inference program for inputs shaped like `args` as a
  portable artifact in `directory` (see artifact.py); returns it."""
  from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
  from stablehlo import vhlo  # pylint: disable=g-import-not-at-top
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  text, examples, structure = program(model, args)
  module = mlir_text.parse_module(text)
  # VHLO carries no CHLO (gelu's erf, ...): decompose it, as upstream's
  # serialization pipeline does.
  from stablehlo.transforms import chlo_legalize  # pylint: disable=g-import-not-at-top
  chlo_legalize.run(module)
  sidecar = directory / artifact.SIDECAR
  data = vhlo.serialize_portable_artifact(
      module, target, externalize_threshold_bytes=externalize_threshold_bytes,
      sidecar_path=str(sidecar))
  (directory / artifact.ARTIFACT).write_bytes(data)
  manifest = {
      "format": artifact.FORMAT,
      "artifact": artifact.ARTIFACT,
      "sidecar": artifact.SIDECAR if sidecar.exists() else None,
      "stablehlo_version": vhlo.get_portable_artifact_version(data),
      "inputs": artifact.input_specs(examples),
      "outputs": _flat_outputs(structure),
      "torch": torch.__version__,
  }
  artifact.write_manifest(directory, manifest)
  return directory
