"""torch.export -> portable artifact -> PJRT, against eager PyTorch, on our
plugin and on the real xla_cpu_pjrt plugin; the loader without torch."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import support
from pjrt.tools import plugin_choice
import torch_bridge
from torch_bridge.testing import models

TOLERANCE = 1e-4  # relative to max |ref|


_xla_cpu_pjrt_path = plugin_choice.xla_cpu_pjrt_path


def _export(name, tmp_path):
  torch.manual_seed(0)
  case = models.CASES[name]
  model = case.make().eval()
  inputs = case.inputs()
  directory = torch_bridge.export(model, inputs, tmp_path / name,
                                  externalize_threshold_bytes=256)
  with torch.no_grad():
    want = model(*inputs).numpy()
  return directory, [i.numpy() for i in inputs], want


def _rel(got, want):
  return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_round_trip_matches_eager(tmp_path, name):
  directory, inputs, want = _export(name, tmp_path)
  manifest = json.loads((directory / "manifest.json").read_text())
  # Weights above the threshold live in the sidecar, not the artifact.
  assert manifest["sidecar"] and (directory / manifest["sidecar"]).exists()
  assert manifest["inputs"] == [{"shape": list(x.shape),
                                 "dtype": str(x.dtype)} for x in inputs]
  loaded = torch_bridge.load_exported(directory)
  assert _rel(loaded(*inputs), want) <= TOLERANCE


@pytest.mark.skipif(_xla_cpu_pjrt_path() is None,
                    reason="xla-cpu-pjrt (requirements-test.txt) is not "
                    "installed")
def test_the_artifact_runs_on_the_real_xla_cpu_plugin(tmp_path):
  directory, inputs, want = _export("cnn", tmp_path)
  loaded = torch_bridge.load_exported(directory, _xla_cpu_pjrt_path())
  assert _rel(loaded(*inputs), want) <= TOLERANCE


def test_the_loader_needs_no_torch(tmp_path):
  """A child process where `import torch` fails runs the artifact."""
  directory, inputs, want = _export("mlp", tmp_path)
  np.save(tmp_path / "x.npy", inputs[0])
  code = (
      "import sys\n"
      "sys.modules['torch'] = None  # any import of torch now fails\n"
      "import numpy as np\n"
      "from torch_bridge import artifact\n"
      f"run = artifact.load({str(directory)!r})\n"
      f"np.save({str(tmp_path / 'y.npy')!r}, "
      f"run(np.load({str(tmp_path / 'x.npy')!r})))\n")
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
  proc = subprocess.run([sys.executable, "-c", code], env=env,
                        capture_output=True, text=True, timeout=600,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert _rel(np.load(tmp_path / "y.npy"), want) <= TOLERANCE


def test_bad_inputs_and_missing_artifacts_are_clear_errors(tmp_path):
  directory, inputs, _ = _export("mlp", tmp_path)
  loaded = torch_bridge.load_exported(directory)
  with pytest.raises(support.InvalidArgumentError, match="expected float32"):
    loaded(inputs[0][:1])
  with pytest.raises(support.InvalidArgumentError, match="takes 1 inputs"):
    loaded()
  with pytest.raises(support.NotFoundError, match="manifest.json"):
    torch_bridge.load_exported(tmp_path / "nothing_here")


def test_an_op_without_lowering_is_named(tmp_path):
  model = models.WithUnloweredOp().eval()
  with pytest.raises(torch_bridge.LoweringError, match="cummax"):
    torch_bridge.export(model, (torch.randn(8, 16),), tmp_path / "m")


def test_gpt2_round_trip(tmp_path):
  pytest.importorskip("transformers")
  directory, inputs, want = _export("gpt2", tmp_path)
  assert _rel(torch_bridge.load_exported(directory)(*inputs), want) <= 1e-4
  path = _xla_cpu_pjrt_path()
  if path is not None:
    got = torch_bridge.load_exported(directory, path)(*inputs)
    assert _rel(got, want) <= 1e-4
