"""Tests of the op coverage tool: its help, and rows of each kind."""

import io
import contextlib

import pytest

torch = pytest.importorskip(
    "torch", reason="torch (requirements-test.txt) is not installed")

from torch_bridge.tools import coverage  # pylint: disable=g-import-not-at-top


def test_help_exits_cleanly(capsys):
  with pytest.raises(SystemExit) as info:
    coverage.main(["--help"])
  assert info.value.code == 0
  assert "min_cluster_size" in capsys.readouterr().out


def test_rows_say_compiled_or_which_op_fell_back():
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    assert coverage.main(["--cases", "sort,median,one_hot"]) == 0
  rows = {line.split()[0]: line.split()[1:]
          for line in out.getvalue().splitlines()[1:-1]}
  assert rows["sort"][0] == "compiled"
  assert rows["median"][0] == "compiled"
  assert rows["one_hot"][0] == "eager"
  assert "aten._assert_async.msg" in rows["one_hot"]
  assert out.getvalue().splitlines()[-1] == "3 cases: 2 compiled, 1 eager"


def test_unknown_case_is_an_error_not_a_traceback(capsys):
  assert coverage.main(["--cases", "no_such_op"]) == 2
  assert "unknown case" in capsys.readouterr().err


def test_a_wrong_answer_is_reported_as_a_mismatch(monkeypatch):
  # A compiled result that differs from eager must show as MISMATCH (and
  # make the tool fail), whatever ran eagerly.
  def wrong_compile(fn, **unused):
    return lambda x: fn(x) + 1.0
  monkeypatch.setattr(coverage.torch, "compile", wrong_compile)
  row = coverage.run_case("flip")
  assert row["status"] == "MISMATCH"
  assert row["error"] > coverage.TOLERANCE
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    assert coverage.main(["--cases", "flip"]) == 1
