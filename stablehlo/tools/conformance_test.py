"""Tests for the conformance runner and the translate tool."""

import pytest

from stablehlo.tools import conformance
from stablehlo.tools import translate


def test_modes_are_registered():
  assert {"parse", "roundtrip"} <= set(conformance.MODES)


def test_runner_reports_counts(tmp_path, capsys):
  good = tmp_path / "good.mlir"
  good.write_text("func.func @f() {\n  func.return\n}\n// -----\n"
                  "func.func @g() {\n  func.return\n}\n")
  bad = tmp_path / "bad.mlir"
  bad.write_text("func.func @f() {\n  %0 = \n}\n")
  rc = conformance.main(["--suite", "interpret", "--mode", "roundtrip",
                         str(good), str(bad)])
  out = capsys.readouterr().out
  assert rc == 1
  assert out.splitlines()[-1] == "2 passed, 1 failed"
  assert "bad.mlir:3:1: error:" in out


def test_help_exits_zero(capsys):
  for main in (conformance.main, translate.main):
    with pytest.raises(SystemExit) as e:
      main(["--help"])
    assert e.value.code == 0
  assert "usage" in capsys.readouterr().out


def test_translate_prints_and_reports_errors(tmp_path, capsys):
  f = tmp_path / "a.mlir"
  f.write_text('func.func @f(%a: tensor<f32>) -> tensor<f32> {\n'
               '  %0 = "stablehlo.abs"(%a) : (tensor<f32>) -> tensor<f32>\n'
               '  func.return %0 : tensor<f32>\n}\n// -----\n'
               'func.func @g() {\n  %0 = stablehlo.nope\n}\n')
  rc = translate.main([str(f), "--split-input-file"])
  captured = capsys.readouterr()
  assert rc == 1
  assert "%0 = stablehlo.abs %arg0 : tensor<f32>" in captured.out
  assert f"{f}:7:8: error: custom op 'stablehlo.nope' is unknown" in \
      captured.err
  assert "Traceback" not in captured.err
  rc = translate.main([str(f.parent / "missing.mlir")])
  assert rc == 1
