"""Smoke tests of the collective benchmark: tiny buffers, one repetition,
no timing asserted."""

import shutil

import pytest

from pjrt.tools import collective_bench

pytest.importorskip("jax")


def test_table_from_timings():
  results = {
      "mpi": {"processes": 2, "devices": 4,
              "times": {"ours": [0.05, 0.04, 0.06], "blocking": [0.05] * 3,
                        "polled": [0.02] * 3}},
      "local": {"processes": 1, "devices": 4,
                "times": {"ours": [0.04], "memcpy": [0.005],
                          "memcpy_all": [0.02]}},
  }
  table = collective_bench.rows(results, 64)
  ours_mpi, ours_local = table[0], table[3]
  assert ours_mpi["ratios"] == pytest.approx({"blocking": 1.0,
                                              "polled": 0.4})
  assert ours_local["ratios"] == pytest.approx({"memcpy": 0.125,
                                                "memcpy_all": 0.5})
  text = collective_bench.format_table(table, 64, 3)
  assert "vs Allreduce 1.00, vs polled 0.40" in text
  assert "vs 1 buffer 0.12, vs all buffers 0.50" in text
  assert "numpy copy (memcpy), 4 buffers" in text


def test_an_error_is_a_row():
  table = collective_bench.rows({"mpi": {"error": "mpirun is missing"}}, 1)
  text = collective_bench.format_table(table, 1, 1)
  assert "mpi: not measured: mpirun is missing" in text


def test_in_process_run(capsys):
  assert collective_bench.main(["--mib", "0.25", "--repeats", "1",
                                "--only", "local"]) == 0
  out, err = capsys.readouterr()
  assert "[1/1] 1 process x 4 devices" in err
  assert "jax psum (1 proc x 4 dev)" in out, out
  assert "not measured" not in out, out


def test_two_processes_under_mpirun(capsys):
  if shutil.which("mpirun") is None:
    pytest.skip("mpirun is not installed")
  pytest.importorskip("mpi4py")
  assert collective_bench.main(["--mib", "0.25", "--repeats", "1",
                                "--only", "mpi"]) == 0
  out, _ = capsys.readouterr()
  assert "jax psum (2 proc x 2 dev)" in out, out
  assert "not measured" not in out, out
