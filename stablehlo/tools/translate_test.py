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
  assert "stablehlo.slice %arg0 [1:3]" in out


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


_INTERPRET = """func.func @main(%a: tensor<2xi32>) -> (tensor<2xi32>, tensor<i1>) {
  %0 = stablehlo.constant dense<true> : tensor<i1>
  check.expect_eq_const %a, dense<[1, 2]> : tensor<2xi32>
  return %a, %0 : tensor<2xi32>, tensor<i1>
}
"""


def test_interpret_prints_results(tmp_path, capsys):
  rc, out, err, _ = _run(tmp_path, capsys, _INTERPRET, extra=[
      "--interpret", "--args=[dense<[1, 2]> : tensor<2xi32>]"])
  assert (rc, err) == (0, "")
  assert out == "tensor<2xi32> {\n  [1, 2]\n}\ntensor<i1> {true}\n"


def test_interpret_print_dense(tmp_path, capsys):
  rc, out, _, _ = _run(tmp_path, capsys, _INTERPRET, extra=[
      "--interpret", "--interpreter-print-dense",
      "--args=[dense<[1, 2]> : tensor<2xi32>]"])
  assert rc == 0
  assert out.splitlines() == ["dense<[1, 2]> : tensor<2xi32>",
                              "dense<true> : tensor<i1>"]


def test_interpret_failing_check_exits_nonzero_with_location(tmp_path,
                                                             capsys):
  rc, out, err, paths = _run(tmp_path, capsys, _INTERPRET, extra=[
      "--interpret", "--args=[dense<[1, 3]> : tensor<2xi32>]"])
  assert rc == 1
  assert f"{paths[0]}:3:3: error: check.expect_eq_const failed" in err
  assert "check.expect_eq_const %a" in err  # the offending source line
  assert "Traceback" not in err


def test_interpret_bad_args_use_upstream_messages(tmp_path, capsys):
  rc, _, err, _ = _run(tmp_path, capsys, _INTERPRET,
                       extra=["--interpret", "--args=not_array"])
  assert rc == 1 and "expectected array attribute string for args" in err
  rc, _, err, _ = _run(tmp_path, capsys, _INTERPRET,
                       extra=["--interpret", "--args=[4.0 : f32]"])
  assert rc == 1 and "expected dense elements attribute for args" in err


def test_interpret_split_input_file_runs_each_module(tmp_path, capsys):
  two = ("func.func @a() -> tensor<i32> {\n"
         "  %0 = stablehlo.constant dense<1> : tensor<i32>\n"
         "  return %0 : tensor<i32>\n}\n// -----\n"
         "func.func @b() -> tensor<i32> {\n"
         "  %0 = stablehlo.constant dense<2> : tensor<i32>\n"
         "  return %0 : tensor<i32>\n}\n")
  rc, out, _, _ = _run(tmp_path, capsys, two,
                       extra=["--interpret", "-split-input-file"])
  assert rc == 0
  assert out == "tensor<i32> {1}\ntensor<i32> {2}\n"


def test_serialize_then_deserialize_roundtrips(tmp_path, capsys):
  src = tmp_path / "p.mlir"
  src.write_text(_GOOD)
  art = tmp_path / "p.bc"
  assert translate.main(["--serialize", "--target=1.0.0", str(src), "-o",
                         str(art)]) == 0
  data = art.read_bytes()
  assert data[:4] == b"ML\xefR"
  assert b"StableHLO_v1.0.0" in data
  capsys.readouterr()
  assert translate.main(["--deserialize", str(art)]) == 0
  out = capsys.readouterr().out
  assert "stablehlo.slice" in out and "[1:3]" in out


def test_deserialize_rejects_text_cleanly(tmp_path, capsys):
  src = tmp_path / "p.mlir"
  src.write_text(_GOOD)
  assert translate.main(["--deserialize", str(src)]) == 1
  err = capsys.readouterr().err
  assert "not a portable artifact" in err and "Traceback" not in err


def test_serialize_bad_target_is_an_error(tmp_path, capsys):
  src = tmp_path / "p.mlir"
  src.write_text(_GOOD)
  assert translate.main(["--serialize", "--target=banana", str(src)]) == 1
  assert "Traceback" not in capsys.readouterr().err


def test_serialize_with_external_constants(tmp_path, capsys):
  src = tmp_path / "big.mlir"
  values = ", ".join(str(i) for i in range(64))
  src.write_text("func.func @main() -> tensor<64xi32> {\n"
                 f"  %0 = stablehlo.constant dense<[{values}]> : "
                 "tensor<64xi32>\n  return %0 : tensor<64xi32>\n}\n")
  art, side = tmp_path / "big.bc", tmp_path / "big.consts"
  assert translate.main(["--serialize", str(src), "-o", str(art),
                         "--externalize-threshold=16",
                         f"--sidecar={side}"]) == 0
  assert side.stat().st_size >= 64 * 4
  capsys.readouterr()
  assert translate.main(["--deserialize", str(art),
                         f"--sidecar={side}"]) == 0
  assert "dense<[0, 1, 2" in capsys.readouterr().out
  # Without the sidecar the artifact cannot be read, and says why.
  assert translate.main(["--deserialize", str(art)]) == 1
  err = capsys.readouterr().err
  assert "sidecar" in err and "Traceback" not in err
