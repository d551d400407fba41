"""Tests for `python -m stablehlo.tools.translate` (parse, verify, print)."""

from stablehlo.tools import translate

_GOOD = """func.func @main(%a: tensor<4xf32>) -> tensor<2xf32> {
  %0 = stablehlo.slice %a [1:3] : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
"""
_BAD_SLICE = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.slice %a [1:5] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def _run(tmp_path, capsys, *texts, extra=()):
  paths = []
  for i, t in enumerate(texts):
    p = tmp_path / f"in{i}.mlir"
    p.write_text(t)
    paths.append(str(p))
  rc = translate.main(paths + list(extra))
  out, err = capsys.readouterr()
  return rc, out, err, paths


def test_parse_verify_print(tmp_path, capsys):
  rc, out, err, _ = _run(tmp_path, capsys, _GOOD)
  assert rc == 0 and err == ""
  assert "stablehlo.slice %a [1:3]" in out


def test_verifier_error_has_location_constraint_and_source(tmp_path, capsys):
  rc, _, err, paths = _run(tmp_path, capsys, _BAD_SLICE)
  assert rc == 1
  first, source, caret = err.splitlines()[:3]
  assert first.startswith(f"{paths[0]}:2:8: error: 'stablehlo.slice' op "
                          "slice_c3:")
  assert "stablehlo.slice %a [1:5]" in source
  assert caret == " " * 7 + "^"


def test_no_verify_skips_the_verifier(tmp_path, capsys):
  rc, out, err, _ = _run(tmp_path, capsys, _BAD_SLICE, extra=["--no-verify"])
  assert rc == 0 and err == "" and "[1:5]" in out


def test_parse_error_is_a_diagnostic_not_a_traceback(tmp_path, capsys):
  rc, _, err, paths = _run(tmp_path, capsys, "func.func @f( {\n")
  assert rc == 1
  assert err.startswith(f"{paths[0]}:1:")
  assert "Traceback" not in err


def test_several_files_and_missing_file(tmp_path, capsys):
  rc, out, err, _ = _run(tmp_path, capsys, _GOOD, _GOOD,
                         extra=[str(tmp_path / "missing.mlir")])
  assert rc == 1
  assert out.count("func.func") == 2
  assert "cannot read" in err
