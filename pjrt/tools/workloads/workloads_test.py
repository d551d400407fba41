"""Tests of the workload runner: the comparison and table code on synthetic
records, the registry, and a fast subset of real workloads run on our
platform beside JAX's CPU client (outputs must agree)."""

import importlib.util
import json
import math
import os

import numpy as np
import pytest

from pjrt.tools.workloads import registry
from pjrt.tools.workloads import report
from pjrt.tools.workloads import runner


# -- Comparison ---------------------------------------------------------------


def test_equal_outputs_compare_ok():
  a = {"first['loss']": np.float32(1.25), "w": np.ones((3, 4), np.float32)}
  c = report.compare_outputs(a, dict(a), "f32")
  assert c["ok"] and c["max_rel_err"] == 0.0


def test_small_f32_difference_within_tolerance():
  ref = {"w": np.linspace(-2, 2, 50, dtype=np.float32)}
  ours = {"w": ref["w"] + np.float32(1e-3)}  # 5e-4 of max|ref| = 2
  c = report.compare_outputs(ours, ref, "f32")
  assert c["ok"], c
  assert math.isclose(c["max_rel_err"], 5e-4, rel_tol=1e-2)


def test_f32_mismatch_is_flagged():
  ref = {"w": np.linspace(-2, 2, 50, dtype=np.float32)}
  ours = {"w": ref["w"].copy()}
  ours["w"][7] += 0.01  # 5e-3 of max|ref|
  c = report.compare_outputs(ours, ref, "f32")
  assert not c["ok"]
  assert c["worst"] == "w" and "rel err" in c["detail"]


def test_f64_tolerance_is_tighter():
  ref = {"x": np.array([1.0, 2.0, 4.0])}
  ours = {"x": ref["x"] + 1e-7}
  assert report.compare_outputs(ours, ref, "f32")["ok"]
  assert not report.compare_outputs(ours, ref, "f64")["ok"]


def test_integer_outputs_must_be_equal():
  ref = {"perm": np.arange(10)}
  ours = {"perm": np.arange(10)[::-1].copy()}
  c = report.compare_outputs(ours, ref, "f32")
  assert not c["ok"] and "elements differ" in c["detail"]
  assert report.compare_outputs({"b": np.array([True, False])},
                                {"b": np.array([True, False])}, "f32")["ok"]


def test_nan_placement_and_shapes_and_missing_outputs():
  ref = {"x": np.array([1.0, np.nan, 3.0], np.float32)}
  assert report.compare_outputs(dict(ref), ref, "f32")["ok"]
  assert not report.compare_outputs(
      {"x": np.array([1.0, 2.0, 3.0], np.float32)}, ref, "f32")["ok"]
  assert not report.compare_outputs({"x": np.zeros(4, np.float32)}, ref,
                                    "f32")["ok"]
  c = report.compare_outputs({}, ref, "f32")
  assert not c["ok"] and "missing" in c["detail"]


def test_complex_outputs_compare_by_magnitude_of_difference():
  ref = {"z": np.array([1 + 1j, 2 - 1j], np.complex64)}
  ok = report.compare_outputs({"z": ref["z"] + 1e-5j}, ref, "f32")
  bad = report.compare_outputs({"z": ref["z"] + 0.1j}, ref, "f32")
  assert ok["ok"] and not bad["ok"]


# -- Rows, table, reports -----------------------------------------------------


def _rec(first, steady, error=None, **extra):
  r = {"init_s": 0.5, "first_s": first, "steady_median_s": steady,
       "peak_rss_mb": 300.0, "error": error}
  r.update(extra)
  return r


def _rows():
  good = report.compare_outputs({"a": np.ones(3)}, {"a": np.ones(3)}, "f32")
  bad = report.compare_outputs({"a": np.ones(3)}, {"a": np.zeros(3) + 2},
                               "f32")
  return [
      report.make_row("fast", "flax", "f32", _rec(2.0, 0.004),
                      _rec(1.0, 0.002), good),
      report.make_row("slow", "optax", "f32", _rec(4.0, 0.008),
                      _rec(1.0, 0.001), good),
      report.make_row("wrong", "optax", "f32", _rec(1.0, 0.001),
                      _rec(1.0, 0.001), bad),
      report.make_row("broken", "linalg", "f64",
                      _rec(None, None, "JaxRuntimeError: eig unsupported"),
                      _rec(1.0, 0.001), None),
      report.make_row("hung", "random", "f32",
                      {"timeout": True, "error": "timed out after 5s"},
                      _rec(1.0, 0.001), None),
  ]


def test_row_statuses():
  assert [r["status"] for r in _rows()] == [
      "ok", "ok", "MISMATCH", "ERROR", "TIMEOUT"]
  assert _rows()[0]["steady_ratio"] == pytest.approx(2.0)


def test_summary_geomeans_cover_ok_rows_only():
  s = report.summary(_rows())
  assert s["n_ok"] == 2
  assert s["geomean_steady_ratio"] == pytest.approx(math.sqrt(2.0 * 8.0))
  assert s["geomean_first_ratio"] == pytest.approx(math.sqrt(2.0 * 4.0))
  assert s["counts"] == {"ok": 2, "MISMATCH": 1, "ERROR": 1, "TIMEOUT": 1}


def test_table_lists_every_row_and_first_error_lines():
  text = report.format_table(_rows(), "openxla_cpu", "cpu")
  lines = text.splitlines()
  fast = next(l for l in lines if l.startswith("fast "))
  assert "2.00x" in fast and "4.0 / 2.0" in fast
  assert any(l.startswith("broken: ERROR: JaxRuntimeError: eig unsupported")
             for l in lines)
  assert any(l.startswith("hung: TIMEOUT") for l in lines)
  assert any(l.startswith("wrong: MISMATCH") for l in lines)
  assert "steady step 4.00x" in lines[-1]


def test_html_and_json_reports(tmp_path):
  rows = _rows()
  json_path, html_path = runner.write_reports(
      rows, ["openxla_cpu", "cpu"], str(tmp_path), "cmd")
  data = json.loads(open(json_path).read())
  assert [r["status"] for r in data["rows"]] == [r["status"] for r in rows]
  page = open(html_path).read()
  assert "<svg" in page and page.count("<rect") == 4  # 2 charts x the 2 ok rows
  assert "eig unsupported" in page


# -- Registry -----------------------------------------------------------------


def _have(*modules):
  return all(importlib.util.find_spec(m) for m in modules)


needs_libs = pytest.mark.skipif(
    not _have("jax", "flax", "optax", "equinox", "keras"),
    reason="needs the test oracles (jax, flax, optax, equinox, keras)")


@needs_libs
def test_registry_has_the_suite():
  workloads = registry.load_all()
  assert len(workloads) >= 30
  families = {w.family for w in workloads.values()}
  assert {"flax", "optax", "equinox", "keras", "scientific", "random",
          "linalg", "fft", "scipy", "export"} <= families
  assert all(w.description for w in workloads.values())
  with pytest.raises(KeyError):
    registry.select(["no_such_workload"])


# -- Real runs ----------------------------------------------------------------

FAST_SUBSET = ("optax_adam_mlp", "flax_nnx_vae_train", "random_sampling_pipeline",
               "fft_transforms", "export_roundtrip_mlp")


@needs_libs
@pytest.mark.parametrize("name", FAST_SUBSET)
def test_fast_workload_agrees_with_xla_cpu(name, tmp_path):
  wl = registry.get(name)
  row = runner.run_workload(wl, ["openxla_cpu", "cpu"], steps=2, seed=0,
                            out_dir=str(tmp_path), timeout=600)
  assert row["ref"]["backend"] == "cpu"
  assert row["ours"].get("backend") == "openxla_cpu", row["ours"]
  assert row["status"] == "ok", (row["status"], row["error"])
  assert row["max_rel_err"] <= report.TOLERANCE[wl.dtype]
  for side in ("ours", "ref"):
    assert row[side]["first_s"] > 0 and len(row[side]["step_times_s"]) == 2
    assert row[side]["peak_rss_mb"] > 0


@needs_libs
def test_a_perturbed_output_is_reported_as_mismatch(tmp_path, monkeypatch):
  """The real pipeline, with our side's saved outputs perturbed: the row
  must say MISMATCH."""
  real = runner.run_child

  def perturbed(name, platform, *args):
    record, outputs = real(name, platform, *args)
    if platform == "openxla_cpu":
      outputs = {k: (v * 1.01 if np.issubdtype(v.dtype, np.floating) else v)
                 for k, v in outputs.items()}
    return record, outputs

  monkeypatch.setattr(runner, "run_child", perturbed)
  row = runner.run_workload(registry.get("optax_adam_mlp"),
                            ["openxla_cpu", "cpu"], 1, 0, str(tmp_path), 600)
  assert row["status"] == "MISMATCH", row["error"]


@needs_libs
def test_a_crashing_child_is_reported(tmp_path):
  record, outputs = runner.run_child("no_such_workload", "cpu", 1, 0,
                                     str(tmp_path), 120)
  assert outputs == {}
  assert "no workload named" in record["error"]


@needs_libs
def test_a_hung_child_times_out(tmp_path):
  record, _ = runner.run_child("random_continuous", "cpu", 1, 0,
                               str(tmp_path), 0.5)
  assert record["timeout"] and "timed out" in record["error"]
  assert os.path.exists(os.path.join(str(tmp_path), "log.txt"))


def test_rounds_merge_to_medians():
  recs = [{"init_s": 3.0, "first_s": 1.0, "steady_median_s": 0.5,
           "backend": "cpu"},
          {"init_s": 1.0, "first_s": 2.0, "steady_median_s": 0.7},
          {"init_s": 2.0, "first_s": 9.0, "steady_median_s": 0.1}]
  m = runner.merge_rounds(recs)
  assert (m["init_s"], m["first_s"], m["steady_median_s"]) == (2.0, 2.0, 0.5)
  assert m["backend"] == "cpu"
  assert m["rounds"]["first_s"] == [1.0, 2.0, 9.0]
  # An even count takes the lower middle; a failed round wins.
  assert runner.merge_rounds(recs[:2])["steady_median_s"] == 0.5
  failed = {"error": "boom"}
  assert runner.merge_rounds(recs[:1] + [failed]) is failed
  assert "rounds" not in runner.merge_rounds(recs[:1])


@needs_libs
def test_rounds_alternate_platforms(tmp_path, monkeypatch):
  order = []

  def fake(name, platform, steps, seed, out, timeout):
    order.append((platform, out))
    return ({"name": name, "platform": platform, "backend": platform,
             "init_s": 1.0, "first_s": 1.0,
             "steady_median_s": 2.0 if platform == "cpu" else 1.0},
            {"last.x": np.ones(3, np.float32)})

  monkeypatch.setattr(runner, "run_child", fake)
  row = runner.run_workload(registry.get("optax_adam_mlp"),
                            ["openxla_cpu", "cpu"], 1, 0, str(tmp_path), 60,
                            rounds=2)
  assert [p for p, _ in order] == ["cpu", "openxla_cpu"] * 2
  assert len({o for _, o in order}) == 4
  assert row["status"] == "ok" and row["steady_ratio"] == 0.5
