"""Tests of the memory_report tool."""

import pytest

from xla.tools import memory_report

_CHAIN = """HloModule chain

ENTRY main {
  p = f32[256] parameter(0)
  a = f32[256] exponential(p)
  b = f32[256] log(a)
  c = f32[256] exponential(b)
  ROOT d = f32[256] log(c)
}
"""


def test_table_row_for_a_chain_without_passes(tmp_path, capsys):
  path = tmp_path / "chain.hlo"
  path.write_text(_CHAIN)
  assert memory_report.main([str(path), "--pipeline", ""]) == 0
  lines = capsys.readouterr().out.splitlines()
  # Hand-computed (1 KiB per value): a / c share heap bytes, b does not.
  assert lines[1].split()[1:] == ["4096", "5120", "0.800", "3072"]
  assert lines[-1] == "1 programs, geometric mean ratio 0.800"


def test_bundled_examples_report_consistent_numbers():
  files = {f.name: f for f in memory_report.default_files()}
  names = ("softmax.mlir", "mlp_fused.hlo", "transformer.quick.mlir")
  if not all(n in files for n in names):
    pytest.skip("bundled examples not found")
  reports = {n: memory_report.program_report(str(files[n])) for n in names}
  for r in reports.values():
    assert 0 < r["total_with_reuse"] <= r["total_without_reuse"]
    assert r["ratio"] == pytest.approx(
        r["total_with_reuse"] / r["total_without_reuse"])
    # Reuse never goes below what is live at the peak.
    assert r["peak_live_bytes"] <= r["total_with_reuse"]
    assert r["total_with_reuse"] == (
        r["parameter_bytes"] + r["constant_bytes"] + r["output_bytes"] +
        r["temp_heap_bytes"])
  # The transformer block's temporaries do not all live at once.
  assert reports["transformer.quick.mlir"]["ratio"] < 0.9


def test_unreadable_program_is_reported(tmp_path, capsys):
  bad = tmp_path / "bad.hlo"
  bad.write_text("HloModule broken\nENTRY {")
  assert memory_report.main([str(bad)]) == 1
  assert "error:" in capsys.readouterr().out
