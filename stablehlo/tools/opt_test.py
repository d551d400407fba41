"""Tests for `python -m stablehlo.tools.opt`."""

import pytest

from stablehlo.tools import opt

_CALLS = """func.func @main() -> tensor<i32> {
  %0 = call @one() : () -> tensor<i32>
  return %0 : tensor<i32>
}
func.func private @one() -> tensor<i32> {
  %0 = stablehlo.constant dense<1> : tensor<i32>
  return %0 : tensor<i32>
}
"""


def _run(tmp_path, capsys, src, *flags):
  p = tmp_path / "in.mlir"
  p.write_text(src)
  rc = opt.main([str(p), *flags])
  out, err = capsys.readouterr()
  return rc, out, err


def test_inline(tmp_path, capsys):
  rc, out, err = _run(tmp_path, capsys, _CALLS, "--inline")
  assert (rc, err) == (0, "")
  assert "call" not in out and "@one" not in out
  assert "stablehlo.constant dense<1>" in out


def test_without_passes_prints_unchanged(tmp_path, capsys):
  rc, out, _ = _run(tmp_path, capsys, _CALLS)
  assert rc == 0 and "call @one()" in out


def test_unlegalizable_chlo_is_a_clean_error(tmp_path, capsys):
  src = ("func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
         '  %0 = "chlo.zeta"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> '
         "tensor<2xf32>\n"
         "  return %0 : tensor<2xf32>\n}\n")
  rc, out, err = _run(tmp_path, capsys, src, "--chlo-legalize-to-stablehlo")
  assert rc == 1 and out == ""
  assert "in.mlir:2:8: chlo.zeta has no legalization" in err
  assert "Traceback" not in err


def test_help(capsys):
  with pytest.raises(SystemExit) as e:
    opt.main(["--help"])
  assert e.value.code == 0
  assert "--inline" in capsys.readouterr().out
