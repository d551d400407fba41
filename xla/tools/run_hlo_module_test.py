"""Tests for run_hlo_module (the CLI) and hlo_runner (its library)."""

import io
import pathlib
import sys
import time
import types

import numpy as np
import pytest

from support import env
from xla.tools import fake_cpu_compiler
from xla.tools import hlo_runner
from xla.tools import run_hlo_module

ROOT = pathlib.Path(__file__).resolve().parents[2]

ADD_MLIR = """\
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  %1 = stablehlo.tanh %0 : tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}
"""

ADD_HLO = """\
HloModule add

ENTRY main {
  p0 = f32[4] parameter(0)
  p1 = s32[4] parameter(1)
  c = f32[4] convert(p1)
  ROOT r = f32[4] multiply(p0, c)
}
"""

CHECK_MLIR = """\
func.func @main() -> tensor<3xi32> {
  %a = stablehlo.constant dense<[1, 2, 3]> : tensor<3xi32>
  %b = stablehlo.add %a, %a : tensor<3xi32>
  %want = stablehlo.constant dense<[2, 4, WANT]> : tensor<3xi32>
  stablehlo.custom_call @check.expect_eq(%b, %want) {has_side_effect = true} : (tensor<3xi32>, tensor<3xi32>) -> ()
  return %b : tensor<3xi32>
}
"""


def run(args):
  out, err = io.StringIO(), io.StringIO()
  code = run_hlo_module.main([str(a) for a in args], out, err)
  return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _no_progress(monkeypatch):
  monkeypatch.setenv("RUN_HLO_MODULE_NO_PROGRESS", "1")


def write(tmp_path, name, text):
  p = tmp_path / name
  p.write_text(text)
  return p


# -- the CLI ------------------------------------------------------------------


def test_evaluator_vs_interpreter_passes(tmp_path):
  f = write(tmp_path, "add.mlir", ADD_MLIR)
  code, out, err = run([f, "--platform=evaluator",
                        "--compare-to=interpreter"])
  assert code == 0, err
  assert "2 parameters" in out
  assert "inputs: random (seed 0): f32[2,3], f32[2,3]" in out
  assert "compare evaluator to interpreter:" in out
  assert "output 0 f32[2,3]: max abs error" in out
  assert out.rstrip().endswith("PASS")


def test_saved_inputs_and_outputs_are_consistent(tmp_path):
  f = write(tmp_path, "add.mlir", ADD_MLIR)
  ins, outs = tmp_path / "in.npz", tmp_path / "out.npz"
  code, _, err = run([f, "--platform=evaluator", "--seed=7",
                      f"--save-inputs={ins}", f"--save-outputs={outs}"])
  assert code == 0, err
  with np.load(ins) as i, np.load(outs) as o:
    a, b = i["arg0"], i["arg1"]
    assert a.dtype == np.float32 and a.shape == (2, 3)
    assert not np.array_equal(a, b)
    np.testing.assert_allclose(o["out0"], np.tanh(a + b), rtol=1e-6)


def test_npz_inputs_are_used(tmp_path):
  f = write(tmp_path, "mul.hlo", ADD_HLO)
  ins, outs = tmp_path / "in.npz", tmp_path / "out.npz"
  # float64 / int64 arrays are converted to the parameters' f32 / s32.
  np.savez(ins, np.array([1.5, 2.0, -1.0, 0.0]), np.array([2, 3, 4, 5]))
  code, out, err = run([f, "--platform=evaluator", f"--inputs={ins}",
                        f"--save-outputs={outs}", "--print-results"])
  assert code == 0, err
  assert "HLO module, entry main" in out
  assert "result 0: f32[4]" in out
  with np.load(outs) as o:
    np.testing.assert_array_equal(o["out0"], [3.0, 6.0, -4.0, 0.0])


def test_npz_errors(tmp_path):
  f = write(tmp_path, "mul.hlo", ADD_HLO)
  cases = {
      "short.npz": ([np.zeros(4)], "has 1 arrays"),
      "shape.npz": ([np.zeros(3), np.zeros(4, np.int32)],
                    "has shape (3,); parameter 0 is f32[4]"),
      "kind.npz": ([np.zeros(4), np.zeros(4)],
                   "has dtype float64; parameter 1 is s32[4]"),
  }
  for name, (arrays, message) in cases.items():
    np.savez(tmp_path / name, *arrays)
    code, _, err = run([f, "--platform=evaluator",
                        f"--inputs={tmp_path / name}"])
    assert code == 1 and message in err, (name, err)
    assert "Traceback" not in err
  (tmp_path / "junk.npz").write_text("not a zip")
  code, _, err = run([f, "--platform=evaluator",
                      f"--inputs={tmp_path / 'junk.npz'}"])
  assert code == 1 and "not an .npz file" in err


def test_npz_floats_convert_to_bf16(tmp_path):
  f = write(tmp_path, "bf.hlo", """HloModule bf
ENTRY main {
  p0 = bf16[3] parameter(0)
  ROOT r = bf16[3] add(p0, p0)
}
""")
  np.savez(tmp_path / "x.npz", np.array([1.5, -2.0, 0.25]))
  outs = tmp_path / "o.npz"
  code, _, err = run([f, "--platform=evaluator",
                      f"--inputs={tmp_path / 'x.npz'}",
                      f"--save-outputs={outs}"])
  assert code == 0, err
  with np.load(outs) as o:
    assert o["out0"].dtype == np.float32  # bf16 saved portably
    np.testing.assert_array_equal(o["out0"], [3.0, -4.0, 0.5])
  np.savez(tmp_path / "c.npz", np.array([1j, 2j, 3j]))
  code, _, err = run([f, "--platform=evaluator",
                      f"--inputs={tmp_path / 'c.npz'}"])
  assert code == 1 and "has dtype complex128" in err


def test_npz_key_order_follows_the_numbers(tmp_path):
  p = tmp_path / "o.npz"
  np.savez(p, arg10=np.zeros(1), arg2=np.ones(1), arg1=np.full(1, 2.0))
  f32 = types.SimpleNamespace(
      is_array=lambda: True, element_type=hlo_runner.primitive_util
      .from_numpy_dtype(np.float32), dimensions=(1,),
      to_string=lambda: "f32[1]")
  params = [hlo_runner.ParamSpec(f"p{i}", f32) for i in range(3)]
  arrays = hlo_runner.npz_inputs(str(p), params)
  assert [float(a[0]) for a in arrays] == [2.0, 1.0, 0.0]


def test_checks_pass_and_fail(tmp_path):
  good = write(tmp_path, "good.mlir", CHECK_MLIR.replace("WANT", "6"))
  bad = write(tmp_path, "bad.mlir", CHECK_MLIR.replace("WANT", "7"))
  for platform in ("evaluator", "interpreter"):
    code, out, err = run([good, f"--platform={platform}"])
    assert code == 0, err
    assert "1 check" in out and f"{platform}: checks passed" in out
    assert out.rstrip().endswith("PASS")
    code, out, err = run([bad, f"--platform={platform}"])
    assert code == 1, (platform, out, err)
    assert f"{platform}: checks FAILED" in out and "FAIL" in out
    assert "expect_eq" in err, err
    assert "Traceback" not in err


def test_bad_input_reports_a_location(tmp_path):
  f = write(tmp_path, "bad.mlir",
            "func.func @main() -> tensor<f32> {\n  %0 = stablehlo.bogus\n}\n")
  code, _, err = run([f, "--platform=evaluator"])
  assert code == 1
  assert err.startswith(f"{f}:2:8: error: ")
  assert "Traceback" not in err
  f = write(tmp_path, "bad.hlo", ADD_HLO.replace("p1)", "p9)"))
  code, _, err = run([f, "--platform=evaluator"])
  assert code == 1 and err.startswith(f"{f}:6:") and "p9" in err
  code, _, err = run([tmp_path / "missing.mlir", "--platform=evaluator"])
  assert code == 1 and "cannot read" in err
  f = write(tmp_path, "empty.hlo", "\n")
  code, _, err = run([f, "--platform=evaluator"])
  assert code == 1 and "empty" in err


def test_usage_errors():
  mlir = ROOT / "examples" / "softmax.mlir"
  hlo = ROOT / "examples" / "mlp_fused.hlo"
  for args in ([mlir, "--platform=nope"], [mlir, "--iterations=0"],
               [mlir, "--platform=evaluator", "--compare-to=evaluator"],
               [mlir, "--inputs=data.csv"], [hlo, "--platform=interpreter"],
               []):
    code, _, err = run(args)
    assert code == 2, (args, err)
    assert "Traceback" not in err


def test_help(capsys):
  assert run_hlo_module.main(["--help"]) == 0
  assert "--compare-to" in capsys.readouterr().out


def test_cpu_unavailable_is_a_clear_usage_error(monkeypatch):
  monkeypatch.setitem(sys.modules, "xla.service.cpu.cpu_compiler", None)
  code, _, err = run([ROOT / "examples" / "softmax.mlir", "--platform=cpu"])
  assert code == 2
  assert "platform 'cpu' is not available" in err
  assert "cpu_compiler" in err and "Traceback" not in err


def test_cpu_platform_through_the_compiler_api(monkeypatch, tmp_path):
  calls = {}
  fake_cpu_compiler.install(monkeypatch, calls)
  f = write(tmp_path, "add.mlir", ADD_MLIR)
  code, out, err = run([f, "--compare-to=interpreter", "--iterations=3",
                        "--threads=2"])
  assert code == 0, err
  assert calls["options"] == {"threads": 2}
  assert calls["executions"] == 3
  assert "cpu: import" in out and "compile" in out
  assert "(best of 3)" in out and "peak memory 3.0 MiB" in out
  assert "compile phases: passes 250.00 ms, emit 500.00 ms" in out
  assert out.rstrip().endswith("PASS")
  # Checks reach the compiled code as custom calls, and failures are
  # recorded (not raised through it).
  bad = write(tmp_path, "bad.mlir", CHECK_MLIR.replace("WANT", "0"))
  code, out, err = run([bad])
  assert code == 1 and "cpu: checks FAILED" in out and "expect_eq" in err


def test_mismatch_fails(monkeypatch, tmp_path):

  class OffByOne(hlo_runner.EvaluatorRunner):
    platform = "offbyone"

    def run_once(self, args, recorder):
      return [o + np.float32(1) for o in super().run_once(args, recorder)]

  monkeypatch.setitem(hlo_runner.PLATFORMS, "offbyone", OffByOne)
  f = write(tmp_path, "add.mlir", ADD_MLIR)
  code, out, _ = run([f, "--platform=offbyone", "--compare-to=evaluator"])
  assert code == 1
  assert "MISMATCH" in out and "6 of 6 elements differ" in out
  assert "max abs error 1," in out
  assert out.rstrip().endswith("FAIL")
  # A tolerance wider than the error passes.
  code, out, _ = run([f, "--platform=offbyone", "--compare-to=evaluator",
                      "--atol=1.5"])
  assert code == 0 and out.rstrip().endswith("PASS")


def test_internal_error_is_one_line(monkeypatch, tmp_path):

  class Broken(hlo_runner.EvaluatorRunner):
    def run_once(self, args, recorder):
      raise RuntimeError("boom")

  monkeypatch.setitem(hlo_runner.PLATFORMS, "broken", Broken)
  f = write(tmp_path, "add.mlir", ADD_MLIR)
  code, _, err = run([f, "--platform=broken"])
  assert code == 3
  assert "internal error: RuntimeError: boom" in err
  assert "Traceback" not in err


def test_unimplemented_op_is_bad_input(monkeypatch, tmp_path):
  import support  # pylint: disable=g-import-not-at-top

  class Unsupported(hlo_runner.EvaluatorRunner):
    def run_once(self, args, recorder):
      raise support.UnimplementedError("no kernel for 'fft'")

  monkeypatch.setitem(hlo_runner.PLATFORMS, "unsupported", Unsupported)
  f = write(tmp_path, "add.mlir", ADD_MLIR)
  code, _, err = run([f, "--platform=unsupported"])
  assert code == 1 and err.startswith(f"{f}: error: no kernel for 'fft'")


def test_entry_selects_a_function(tmp_path):
  text = ADD_MLIR.replace("@main", "@other") + (
      "func.func @main() -> tensor<i32> {\n"
      "  %0 = stablehlo.constant dense<5> : tensor<i32>\n"
      "  return %0 : tensor<i32>\n}\n")
  f = write(tmp_path, "two.mlir", text)
  code, out, _ = run([f, "--platform=interpreter"])
  assert code == 0 and "0 parameters" in out and "\n5\n" in out
  code, out, _ = run([f, "--platform=evaluator", "--entry=other",
                      "--compare-to=interpreter"])
  assert code == 0 and "entry @other, 2 parameters" in out
  code, _, err = run([f, "--platform=evaluator", "--entry=missing"])
  assert code == 1 and "@missing not found" in err


def test_globals_start_at_their_initial_value(tmp_path, monkeypatch):
  text = """module {
  ml_program.global private mutable @counter(dense<3> : tensor<i32>) : tensor<i32>
  func.func @main(%x: tensor<i32>) -> tensor<i32> {
    %0 = ml_program.global_load @counter : tensor<i32>
    %1 = stablehlo.add %0, %x : tensor<i32>
    ml_program.global_store @counter = %1 : tensor<i32>
    return %1 : tensor<i32>
  }
}
"""
  f = write(tmp_path, "g.mlir", text)
  np.savez(tmp_path / "x.npz", np.array(4, np.int32))
  outs = tmp_path / "o.npz"
  fake_cpu_compiler.install(monkeypatch, {})
  for platform in ("evaluator", "cpu"):
    code, out, err = run([f, f"--platform={platform}",
                          "--compare-to=interpreter",
                          f"--inputs={tmp_path / 'x.npz'}",
                          f"--save-outputs={outs}"])
    assert code == 0, out + err
    with np.load(outs) as o:
      assert list(o.files) == ["out0"] and int(o["out0"]) == 7


def test_bundled_example_on_cpu_when_available():
  try:
    hlo_runner.load_cpu_compiler()
  except hlo_runner.PlatformUnavailable as e:
    pytest.skip(str(e))
  code, out, err = run([ROOT / "examples" / "softmax.mlir",
                        "--compare-to=interpreter"])
  assert code == 0, out + err
  assert out.rstrip().endswith("PASS")


def test_corpus_file_when_present():
  root = env.stablehlo_corpus("testdata")
  if root is None:
    pytest.skip(env.missing_corpus_reason("testdata"))
  f = pathlib.Path(root) / "add_any_float32_2_float32_2.mlir"
  if not f.is_file():
    pytest.skip(f"{f} not in the corpus")
  code, out, err = run([f, "--platform=evaluator",
                        "--compare-to=interpreter"])
  assert code == 0, err
  assert "checks passed" in out


# -- the library --------------------------------------------------------------


def test_compare_one_rules():
  f = np.float32
  same = hlo_runner.compare_one(0, np.array([np.nan, np.inf, 1.0], f),
                                np.array([np.nan, np.inf, 1.0], f), None,
                                None)
  assert same.ok and same.max_abs == 0
  nan_vs_num = hlo_runner.compare_one(0, np.array([np.nan], f),
                                      np.array([1.0], f), None, None)
  assert not nan_vs_num.ok
  inf_sign = hlo_runner.compare_one(0, np.array([np.inf], f),
                                    np.array([-np.inf], f), None, None)
  assert not inf_sign.ok
  # |got - want| <= atol + rtol * |want|
  edge = hlo_runner.compare_one(0, np.array([10.5], f), np.array([10.0], f),
                                0.04, 0.1)
  assert edge.ok
  edge = hlo_runner.compare_one(0, np.array([10.6], f), np.array([10.0], f),
                                0.04, 0.1)
  assert not edge.ok
  assert abs(edge.max_rel - 0.06) < 1e-5
  ints = hlo_runner.compare_one(0, np.array([1, 2], np.int32),
                                np.array([1, 3], np.int32), None, None)
  assert not ints.ok and "1 of 2 elements differ" in ints.message
  shape = hlo_runner.compare_one(0, np.zeros(2), np.zeros(3), None, None)
  assert not shape.ok and "shape" in shape.message
  count = hlo_runner.compare([np.zeros(1)], [], None, None)
  assert len(count) == 1 and not count[0].ok


def test_random_values_by_type():
  from xla.shape import Shape  # pylint: disable=g-import-not-at-top
  from xla import primitive_util as pu  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)

  def value(name, dims=(1000,)):
    return hlo_runner.random_value(Shape.array(pu.from_name(name), dims), rng)

  f = value("f32")
  assert f.dtype == np.float32 and 0.8 < f.std() < 1.2
  s = value("s8")
  assert s.dtype == np.int8 and s.min() == -5 and s.max() == 5
  u = value("u32")
  assert u.dtype == np.uint32 and u.min() == 0 and u.max() == 10
  p = value("pred")
  assert p.dtype == np.bool_ and 300 < p.sum() < 700
  c = value("c64")
  assert c.dtype == np.complex64 and np.abs(c.imag).max() > 0
  assert value("bf16").dtype.name == "bfloat16"
  t = hlo_runner.random_value(Shape.tuple_of(
      [Shape.array(pu.from_name("f32"), (2,)), Shape.token()]), rng)
  assert isinstance(t, tuple) and t[0].shape == (2,) and t[1] is None


def test_progress_line_only_for_slow_work(monkeypatch):
  monkeypatch.delenv("RUN_HLO_MODULE_NO_PROGRESS")
  stream = io.StringIO()
  with hlo_runner.progress("working", stream, delay=0.0):
    time.sleep(0.05)
  assert stream.getvalue().startswith("working...\nworking: done in")
  stream = io.StringIO()
  with hlo_runner.progress("quick", stream, delay=30):
    pass
  assert stream.getvalue() == ""
