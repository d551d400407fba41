"""One training step sharded three ways on openxla_cpu (4 devices) matches
the same step on one device (training_steps.py, in a child interpreter):
a flax transformer LM data x tensor parallel on a 2x2 mesh, a shard_map
pipeline passing micro-batches with ppermute, and a pmap data-parallel MLP.
The sharded steps sum in another order, hence a tolerance."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")
pytest.importorskip("flax")

# Largest parameter difference allowed, relative to the largest parameter
# (measured: about 6e-8, one or two f32 roundings).
RTOL = 1e-5


@pytest.fixture(name="report", scope="module")
def _report():
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(JAX_PLATFORMS="openxla_cpu", OPENXLA_CPU_NUM_DEVICES="4",
             PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  proc = subprocess.run(
      [sys.executable, "-m", "pjrt.jax_plugin.training_steps", "--json"],
      env=env, capture_output=True, text=True, timeout=600, check=False)
  for line in proc.stdout.splitlines():
    if line.startswith("REPORT "):
      return json.loads(line[len("REPORT "):])
  raise AssertionError(f"child failed (rc {proc.returncode}):\n"
                       f"{proc.stderr[-4000:]}")


@pytest.mark.parametrize("name", ["transformer_dp_tp", "pipeline_ppermute",
                                  "pmap_mlp"])
def test_sharded_step_matches_one_device(report, name):
  entry = report[name]
  assert "error" not in entry, entry["error"]
  assert entry["platform"] == "openxla_cpu"
  assert entry["devices"] == 4, entry
  assert entry["loss_sharded"] == pytest.approx(entry["loss_one_device"],
                                                rel=RTOL)
  assert entry["max_rel_param_diff"] <= RTOL, entry


def test_tensor_parallel_parameters_stay_split(report):
  # Attention heads and MLP units were split over "y": the updated
  # parameters come back split, not gathered.
  assert report["transformer_dp_tp"]["split_parameters"] >= 6, report
