"""What a user of the installed openxla-torch-bridge wheel does first.

Run with the venv's python from a directory outside the source tree (the
check fails if torch_bridge is imported from anywhere but site-packages):

  python ci/wheels/torch_bridge_smoke.py

1. torch.compile(mlp, backend="openxla_stablehlo"), found through the
   wheel's torch_dynamo_backends entry point, with require_full_compilation
   so that a silent eager fallback fails: inference and a training step,
   compared with eager.
2. torch_bridge.export of the same model, then artifact.load in a child
   process in which importing torch fails, run, compared with eager.
Prints one JSON line and exits 0 when all of it holds.
"""

import json
import pathlib
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from importlib import metadata

import numpy as np
import torch

import torch_bridge

_LOADER = textwrap.dedent("""
    import importlib.abc, json, sys
    class _NoTorch(importlib.abc.MetaPathFinder):
      def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
          raise ImportError("torch is blocked in the artifact check")
    sys.meta_path.insert(0, _NoTorch())
    import numpy as np
    from torch_bridge import artifact
    directory = sys.argv[1]
    out = artifact.load(directory)(np.load(directory + "/x.npy"))
    out = out[0] if isinstance(out, (list, tuple)) else out
    err = float(np.abs(np.asarray(out) - np.load(directory + "/ref.npy")).max())
    print(json.dumps({"artifact_err": err,
                      "torch_loaded": "torch" in sys.modules}))
""")


def main() -> int:
  site = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
  where = pathlib.Path(torch_bridge.__file__).resolve()
  if not where.is_relative_to(site):
    raise SystemExit(f"torch_bridge imported from {where}, not from {site}")
  backends = {e.name: e.value
              for e in metadata.entry_points(group="torch_dynamo_backends")}
  assert backends.get("openxla_stablehlo") == "torch_bridge:backend", backends

  torch.manual_seed(0)
  model = torch.nn.Sequential(
      torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
      torch.nn.GELU(), torch.nn.Linear(32, 4))
  x = torch.randn(8, 16)
  options = {"require_full_compilation": True}

  compiled = torch.compile(model, backend="openxla_stablehlo", dynamic=False,
                           options=options)
  with torch.no_grad():
    ref, got = model(x), compiled(x)
  infer_err = (ref - got).abs().max().item()
  assert infer_err < 1e-5, infer_err

  compiled(x).square().mean().backward()
  ours = [p.grad.clone() for p in model.parameters()]
  model.zero_grad()
  model(x).square().mean().backward()
  grad_err = max((a - p.grad).abs().max().item()
                 for a, p in zip(ours, model.parameters()))
  assert grad_err < 1e-5, grad_err

  with tempfile.TemporaryDirectory() as d:
    torch_bridge.export(model.eval(), (x,), d)
    files = sorted(p.name for p in pathlib.Path(d).iterdir())
    np.save(d + "/x.npy", x.numpy())
    with torch.no_grad():
      np.save(d + "/ref.npy", model(x).numpy())
    proc = subprocess.run([sys.executable, "-I", "-c", _LOADER, d],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
      raise SystemExit("artifact.load without torch failed:\n" + proc.stderr)
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
  assert loaded["artifact_err"] < 1e-5 and not loaded["torch_loaded"], loaded

  print(json.dumps({
      "torch": torch.__version__, "torch_bridge": str(where.parent),
      "inference_err": infer_err, "grad_err": grad_err,
      "exported": files, **loaded}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
