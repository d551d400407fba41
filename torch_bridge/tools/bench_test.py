"""Tests of the benchmark tool: its help, and one small run."""

import io
import contextlib

import pytest

torch = pytest.importorskip(
    "torch", reason="torch (requirements-test.txt) is not installed")

from torch_bridge.tools import bench  # pylint: disable=g-import-not-at-top


def test_help_exits_cleanly(capsys):
  with pytest.raises(SystemExit) as info:
    bench.main(["--help"])
  assert info.value.code == 0
  assert "inductor" in capsys.readouterr().out


def test_small_run_prints_a_matching_row(tmp_path):
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    assert bench.main(["--models", "mlp", "--mode", "inference", "--steps",
                       "2", "--repeat", "2", "--no-inductor",
                       "--dump-programs", str(tmp_path)]) == 0
  (program,) = tmp_path.iterdir()
  assert program.name == "mlp_inference_inference_fused_0.mlir"
  assert "func.func" in program.read_text()
  lines = out.getvalue().splitlines()
  (row,) = [l for l in lines if l.startswith("mlp ")]
  fields = row.split()
  assert fields[1] == "True"          # match
  assert int(fields[4]) == 1          # clusters
  assert int(fields[5]) == 0          # eager nodes
  assert any(l.startswith("geomean ours/eager") for l in lines)
  assert any("best of 2 alternating rounds, median of 2" in l
             for l in lines)


def test_unknown_model_is_a_usage_error():
  with pytest.raises(SystemExit) as info:
    bench.main(["--models", "no_such_model"])
  assert info.value.code == 2
