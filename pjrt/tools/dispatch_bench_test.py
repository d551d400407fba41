"""Smoke tests of the dispatch benchmark: 10 calls, no timing asserted."""

import pytest

from pjrt._src import test_util
from pjrt.tools import dispatch_bench
from pjrt.tools import plugin_choice


def _rows_by_path(rows):
  return {(r["path"], r["plugin"]): r for r in rows}


@test_util.requires_xla_cpu_pjrt
def test_client_paths_on_xla_cpu_pjrt():
  rows = dispatch_bench.run([test_util.xla_cpu_pjrt_path()], iterations=10,
                            repeats=1, with_jax=False)
  by_path = _rows_by_path(rows)
  assert set(by_path) == {("client (raw ctypes)", "xla_cpu_pjrt"),
                          ("client", "xla_cpu_pjrt")}
  client = by_path[("client", "xla_cpu_pjrt")]
  assert "error" not in client, client
  assert client["resident"] > 0 and client["transfer"] > 0
  assert by_path[("client (raw ctypes)", "xla_cpu_pjrt")]["resident"] > 0


@test_util.requires_xla_cpu_pjrt
def test_jax_paths_on_xla_cpu_pjrt_and_jaxlib_cpu():
  pytest.importorskip("jax")
  path = test_util.xla_cpu_pjrt_path()
  plugin_row = dispatch_bench.bench_jax("xla_cpu_pjrt", path, 10, 1)
  cpu_row = dispatch_bench.bench_jax("cpu", None, 10, 1)
  for row in (plugin_row, cpu_row):
    assert "error" not in row, row
    assert row["resident"] > 0 and row["transfer"] > 0
  assert cpu_row["platform"] == "cpu"


def test_a_plugin_that_cannot_load_is_reported():
  rows = dispatch_bench.run(["no_such_module_xyz:get_api"], 10, 1,
                            with_jax=False)
  assert len(rows) == 1
  assert rows[0]["plugin"] == "no_such_module_xyz"
  assert "cannot import" in rows[0]["error"]
  text = dispatch_bench.format_rows(rows, 10, 1)
  assert "not available" in text


def test_format_rows_ratios():
  rows = [
      {"path": "client", "plugin": "p", "resident": 30e-6,
       "transfer": 50e-6},
      {"path": "jax", "plugin": "cpu (jaxlib's own)", "resident": 10e-6,
       "transfer": 20e-6},
  ]
  text = dispatch_bench.format_rows(rows, 10, 1)
  lines = text.splitlines()
  assert lines[2].split()[-2:] == ["30.0", "50.0"]
  ratio_line = [l for l in lines if l.strip().startswith("client")][-1]
  assert ratio_line.split()[-2:] == ["3.0x", "2.5x"]


def test_time_calls_counts_calls():
  calls = []
  dispatch_bench.time_calls(lambda: calls.append(1), iterations=7,
                            repeats=3)
  assert len(calls) == 7 + 3 * 7  # warm-up, then the timed runs


@test_util.requires_xla_cpu_pjrt
def test_main_prints_a_table(capsys):
  assert dispatch_bench.main(["--plugin", test_util.xla_cpu_pjrt_path(),
                              "-n", "10", "--repeats", "1", "--no-jax"]) == 0
  out = capsys.readouterr().out
  assert "microseconds per call" in out
  assert "xla_cpu_pjrt" in out


def test_default_plugins_include_ours():
  assert plugin_choice.OUR_PLUGIN in dispatch_bench.default_plugins()
