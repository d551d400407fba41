"""Sharded JAX programs on openxla_cpu (4 devices) against JAX's own CPU
backend (4 host devices), with Shardy (JAX's default) and with GSPMD:
jit with NamedSharding inputs and outputs on 1-D and 2-D meshes, sharding
constraints, reductions over sharded axes, uneven shards inside a
program, convolutions and pooling split along the image height (halos),
shard_map with each collective, pmap and data-parallel training
(spmd_programs.py, each platform in a child interpreter).

For every program: the same values, the same per-device shard shapes
(each device ran its partition of the program), and the same input and
output shardings as XLA's (which JAX reads through the plugin's Shardings
extension; a parameter sharding other than the user's would fail the
call).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pjrt.jax_plugin import spmd_programs

pytest.importorskip("jax")

PARTITIONERS = ("shardy", "gspmd")
# Outputs left to propagation that ours places otherwise than XLA (the
# same values): a shard_map manual on "x" only, of an input split over "y"
# too, runs manual on every axis here (as its operands and results are not
# split over "y"), so its result is replicated, where XLA's partitioning of
# the body over "y" leaves it split over "y".
OUTPUTS_PLACED_OTHERWISE = {"shard_map_partially_manual_split_input"}


def _run(platform: str, partitioner: str) -> dict:
  env = {k: v for k, v in os.environ.items()
         if k not in ("XLA_FLAGS", "JAX_PLATFORMS", "OPENXLA_CPU_NUM_DEVICES",
                      "OPENXLA_CPU_BACKEND", "OPENXLA_CPU_JAX_REGISTER")}
  env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
  proc = subprocess.run(
      [sys.executable, "-m", "pjrt.jax_plugin.spmd_programs", platform,
       partitioner], env=env, capture_output=True, text=True, timeout=1200,
      check=False)
  for line in proc.stdout.splitlines():
    if line.startswith("REPORT "):
      return json.loads(line[len("REPORT "):])
  raise AssertionError(
      f"{platform}/{partitioner} child failed (rc {proc.returncode}):\n"
      f"{proc.stderr[-4000:]}")


_REPORTS = {}


def _report(platform, partitioner):
  key = (platform, partitioner)
  if key not in _REPORTS:
    _REPORTS[key] = _run(platform, partitioner)
  return _REPORTS[key]


@pytest.mark.parametrize("partitioner", PARTITIONERS)
def test_every_program_matches_jax_cpu(partitioner):
  ours = _report("openxla_cpu", partitioner)
  theirs = _report("cpu", partitioner)
  assert sorted(ours) == sorted(theirs)
  failures = []
  for name, want in theirs.items():
    assert "error" not in want, (name, want["error"])
    got = ours[name]
    if "error" in got:
      failures.append(f"{name}: {got['error']}")
      continue
    assert got["platforms"] == ["openxla_cpu"], name
    assert got["dtypes"] == want["dtypes"], name
    for g, w, dtype in zip(got["values"], want["values"], want["dtypes"]):
      g, w = np.asarray(g, dtype=dtype), np.asarray(w, dtype=dtype)
      if np.issubdtype(g.dtype, np.floating):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
      else:
        np.testing.assert_array_equal(g, w, err_msg=name)
    assert got.get("in") == want.get("in"), name
    if name not in OUTPUTS_PLACED_OTHERWISE:
      assert got["shards"] == want["shards"], name
      assert got.get("out") == want.get("out"), name
  assert not failures, "\n".join(failures)


def test_programs_are_sharded():
  """The programs do split their values: each has an output of several
  shards or a split input, so that matching JAX is not trivial."""
  ours = _report("openxla_cpu", "shardy")
  assert len(ours) == len(spmd_programs_names())
  for name, entry in ours.items():
    assert "error" not in entry, (name, entry.get("error"))
    split = any(any(s != list(np.shape(v)) for s in shards)
                for shards, v in zip(entry["shards"], entry["values"]))
    split |= any(s != "{replicated}" for s in entry.get("in", []))
    assert split, name


def spmd_programs_names():
  """The program names, read from the module's source (defining them needs
  JAX with four devices, which this process does not have)."""
  import re  # pylint: disable=g-import-not-at-top
  with open(spmd_programs.__file__) as f:
    return re.findall(r'@_program\("(\w+)"', f.read())
