"""Smoke tests of the bench at the quick sizes: structure and verification
of the results, never their timings."""

import io
import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from xla.tools import bench
from xla.tools import bench_report
from xla.tools import fake_cpu_compiler
from xla.tools import hlo_runner


@pytest.fixture
def cpu_compiler(monkeypatch):
  """The real CPU compiler when it imports, else the evaluator-backed
  stand-in (so the 'ours' plumbing is tested either way)."""
  try:
    hlo_runner.load_cpu_compiler()
    return "real"
  except hlo_runner.PlatformUnavailable:
    fake_cpu_compiler.install(monkeypatch, {})
    return "fake"


def run(args):
  out, err = io.StringIO(), io.StringIO()
  code = bench.main([str(a) for a in args], out, err)
  return code, out.getvalue(), err.getvalue()


def _has_jax():
  try:
    import jax  # pylint: disable=g-import-not-at-top,unused-import
    return True
  except ImportError:
    return False


def test_quick_smoke(tmp_path, cpu_compiler):
  del cpu_compiler
  code, out, err = run(["--quick", "--repeat=1",
                        "--programs=elementwise,mlp_train",
                        f"--out={tmp_path}"])
  assert code == 0, out + err
  report = json.loads((tmp_path / "bench.json").read_text())
  assert report["preset"] == "quick" and report["repeat"] == 1
  assert list(report["programs"]) == ["elementwise", "mlp_train"]
  jax_ok = _has_jax()
  reference = "xla" if jax_ok else "numpy"
  for name, entry in report["programs"].items():
    ps = entry["platforms"]
    assert set(ps) == {"ours", "xla", "numpy", "interpreter"}
    assert entry["reference"] == reference
    for p in ("ours", "numpy", "interpreter") + (("xla",) if jax_ok else ()):
      m = ps[p]
      assert m["status"] == "ok", (name, p, m)
      assert len(m["runs"]) == (1 if p != "interpreter" else 1)
      assert m["run_s"] == min(m["runs"])
      if p == reference:
        assert m["verified"] is None
      else:
        assert m["verified"] is True, (name, p, m)
        assert isinstance(m["max_abs_err"], float)
        assert m["max_abs_err"] <= 1e-3 * (1 + 10)
    if not jax_ok:
      assert ps["xla"]["status"] == "unavailable"
    assert set(entry["ratios"]) >= {"ours/xla", "ours/numpy",
                                    "ours/interpreter", "compile ours/xla"}
    assert entry["ratios"]["ours/numpy"] > 0
  assert report["programs"]["elementwise"]["bytes_moved"] == 2 * 128 * 128 * 4
  assert "ours" in report["programs"]["elementwise"]["achieved_gbps"]
  assert report["bandwidth"]["copy_gbps"] > 0
  assert "ours/xla" in report["geomean"]
  # The printed tables.
  assert "run time (best of N" in out
  header = next(line for line in out.splitlines()
                if line.startswith("program") and "ours/numpy" in line)
  assert "ours/interp" in header
  for name in ("elementwise", "mlp_train", "geomean"):
    assert any(line.startswith(name) for line in out.splitlines()), name
  assert "yes (3 vs xla)" in out if jax_ok else "yes (2 vs numpy)" in out
  assert "effective bandwidth" in out
  # The page: a well-formed SVG chart with one bar per measured ratio.
  page = (tmp_path / "bench.html").read_text()
  svg = page[page.index("<svg"):page.index("</svg>") + len("</svg>")]
  root = ET.fromstring(svg)
  rects = [e for e in root.iter() if e.tag.endswith("rect")]
  bars = 2 * (3 if jax_ok else 2)  # programs x platforms other than base
  legend = 3 if jax_ok else 2
  assert len(rects) == bars + legend
  assert "<table>" in page and "mlp_train" in page


def test_a_wrong_output_fails_verification(tmp_path, monkeypatch):

  class Wrong(hlo_runner.InterpreterRunner):

    def run_once(self, args, recorder):
      return [o + np.float32(1) for o in super().run_once(args, recorder)]

  monkeypatch.setitem(hlo_runner.PLATFORMS, "interpreter", Wrong)
  code, out, err = run(["--quick", "--repeat=1", "--programs=softmax",
                        "--platforms=numpy,interpreter", "--no-bandwidth",
                        f"--out={tmp_path}"])
  assert code == 1
  assert "FAIL: interpreter" in out
  assert "softmax/interpreter" in err
  report = json.loads((tmp_path / "bench.json").read_text())
  m = report["programs"]["softmax"]["platforms"]["interpreter"]
  assert m["verified"] is False and m["max_abs_err"] >= 0.99
  assert "elements differ" in m["note"]


def test_platform_errors_are_recorded_not_raised(tmp_path, monkeypatch):

  def broken(*args, **kwargs):
    raise RuntimeError("kaput")

  monkeypatch.setattr(bench, "run_numpy", broken)
  code, out, _ = run(["--quick", "--repeat=1", "--programs=matmul",
                      "--platforms=numpy,interpreter", "--no-bandwidth",
                      f"--out={tmp_path}"])
  assert code == 0
  assert "ERROR" in out and "RuntimeError: kaput" in out
  report = json.loads((tmp_path / "bench.json").read_text())
  ps = report["programs"]["matmul"]["platforms"]
  assert ps["numpy"]["status"] == "error"
  assert ps["interpreter"]["status"] == "ok"
  assert ps["interpreter"]["verified"] is None  # nothing to compare with


def test_usage_errors(tmp_path):
  for args in (["--programs=nope"], ["--platforms=tpu"], ["--repeat=0"]):
    code, _, err = run(args + [f"--out={tmp_path}"])
    assert code == 2, args
    assert "error" in err


def test_summarize_ratios_and_geomean():
  def m(run_s, compile_s=None, status="ok"):
    return {"status": status, "run_s": run_s, "compile_s": compile_s,
            "verified": None, "note": "", "peak_bytes": None,
            "max_abs_err": None}
  report = {"programs": {
      "a": {"platforms": {"ours": m(2.0, 4.0), "xla": m(1.0, 1.0),
                          "numpy": m(8.0)}},
      "b": {"platforms": {"ours": m(1.0, 1.0), "xla": m(2.0, 4.0),
                          "numpy": m(None, status="error")},
            "bytes_moved": 4_000_000_000},
  }}
  bench.summarize(report)
  assert report["programs"]["a"]["ratios"]["ours/xla"] == 2.0
  assert report["programs"]["b"]["ratios"]["ours/numpy"] is None
  assert math.isclose(report["geomean"]["ours/xla"], 1.0)
  assert math.isclose(report["geomean"]["compile ours/xla"], 1.0)
  assert math.isclose(report["geomean"]["ours/numpy"], 0.25)
  assert report["programs"]["b"]["achieved_gbps"] == {"ours": 4.0,
                                                      "xla": 2.0}
  assert bench.geomean([]) is None


def test_formatting_helpers():
  assert bench_report.fmt_seconds(0.0123) == "12.30 ms"
  assert bench_report.fmt_seconds(2.5) == "2.50 s"
  assert bench_report.fmt_bytes(3 << 20) == "3.0 MiB"
  assert bench_report.fmt_ratio(0.5) == "0.50x"
  assert bench_report.fmt_ratio(None) == "-"
