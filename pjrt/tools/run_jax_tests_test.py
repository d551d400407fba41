"""Tests of run_jax_tests: parsing, grouping and a run of a synthetic file."""

import json
import os
import textwrap

import pytest

from pjrt.tools import run_jax_tests as rjt

_SYNTHETIC = textwrap.dedent('''\
    import time
    import pytest

    @pytest.fixture
    def broken():
      raise RuntimeError("fixture broke")

    def test_pass_a():
      assert 1 + 1 == 2

    def test_pass_b():
      pass

    def test_fail_value_1():
      raise ValueError("bad shape (3, 4)")

    def test_fail_value_2():
      raise ValueError("bad shape (5, 6)")

    def test_fail_other():
      assert [1] == [2]

    def test_skip():
      pytest.skip("not here")

    def test_setup_error(broken):
      del broken

    def test_slow():
      time.sleep(30)
''')


def _run(tmp_path, **kwargs):
  tests = tmp_path / "tests"
  tests.mkdir(exist_ok=True)
  (tests / "synthetic_test.py").write_text(_SYNTHETIC)
  cfg = rjt.RunConfig(jax_tests=str(tests), platform="cpu", timeout=1.0,
                      progress_every=2, work_dir=str(tmp_path / "work"),
                      **kwargs)
  return cfg, tests


def test_first_error_line_and_category():
  assert rjt.first_error_line("ValueError: bad\nmore") == "ValueError: bad"
  # numpy's assert_allclose message starts on the next line.
  msg = "AssertionError: \n\nNot equal to tolerance rtol=1e-06\n\nx"
  assert rjt.first_error_line(msg) == (
      "AssertionError: Not equal to tolerance rtol=1e-06")
  assert rjt.first_error_line("") == "(no message)"
  assert rjt.category("E: at 0xdeadbeef shape (3, 4) x1") == (
      "E: at ADDR shape (#, #) x1")
  assert rjt.category("a" * 300, width=10) == "a" * 10


def test_read_results_keeps_worst_and_skips_torn_line(tmp_path):
  path = tmp_path / "r.jsonl"
  lines = [
      {"nodeid": "f::a", "outcome": "passed", "message": ""},
      {"nodeid": "f::a", "outcome": "error", "message": "teardown: X"},
      {"nodeid": "f::b", "outcome": "skipped", "message": "why"},
  ]
  path.write_text("\n".join(json.dumps(x) for x in lines) +
                  '\n{"nodeid": "f::c", "outc')
  result = rjt.read_results(str(path), "f")
  assert result.outcomes == {"f::a": "error", "f::b": "skipped"}
  assert result.messages["f::a"] == "teardown: X"
  assert result.counts()["error"] == 1 and result.counts()["passed"] == 0


def test_group_failures_orders_by_count():
  r = rjt.FileResult("f")
  for i, msg in enumerate(["E: x 1", "E: x 2", "F: y", "E: x 3"]):
    r.add({"nodeid": f"f::t{i}", "outcome": "failed", "message": msg})
  r.add({"nodeid": "f::s", "outcome": "skipped", "message": "E: x 9"})
  assert rjt.group_failures([r]) == [("E: x #", 3, "f::t0"),
                                     ("F: y", 1, "f::t2")]


def test_run_synthetic_file(tmp_path, capsys):
  cfg, _ = _run(tmp_path)
  result = rjt.run_file(cfg, "synthetic_test.py")
  assert result.counts() == {"passed": 2, "failed": 4, "error": 1,
                             "skipped": 1, "xfailed": 0, "xpassed": 0}
  groups = {cat: n for cat, n, _ in rjt.group_failures([result])}
  assert groups["ValueError: bad shape (#, #)"] == 2
  assert any(cat.startswith("RuntimeError: fixture broke") for cat in groups)
  assert any("per-test limit" in cat for cat in groups)
  assert "[progress] 8/8" in capsys.readouterr().err
  report = rjt.format_report([result], "cpu")
  assert "synthetic_test.py" in report and "Top failure categories" in report


def test_sharded_run_covers_every_test_once(tmp_path):
  cfg, _ = _run(tmp_path, keyword="not slow")
  result = rjt.run_file(cfg, "synthetic_test.py", jobs=2)
  assert sum(result.counts().values()) == 7
  assert result.counts()["passed"] == 2
  logs = sorted(os.listdir(tmp_path / "work"))
  assert [x for x in logs if x.endswith(".jsonl")] == [
      "synthetic_test.py.cpu.0.jsonl", "synthetic_test.py.cpu.1.jsonl"]


def test_file_timeout_keeps_partial_results(tmp_path):
  cfg, _ = _run(tmp_path, file_timeout=4.0)
  cfg.timeout = 0  # no per-test limit: test_slow hangs the file
  result = rjt.run_file(cfg, "synthetic_test.py")
  assert result.timed_out
  assert result.counts()["passed"] == 2  # finished before test_slow


def test_main_help_and_missing_file(tmp_path, capsys):
  try:
    rjt.main(["--help"])
  except SystemExit as e:
    assert e.code == 0
  assert "--num-generated-cases" in capsys.readouterr().out
  assert rjt.main(["--jax-tests", str(tmp_path), "--files", "nope.py"]) == 2


def test_missing_file_stops_before_any_file_runs(tmp_path, monkeypatch,
                                                 capsys):
  (tmp_path / "present_test.py").write_text("def test_x():\n  pass\n")
  ran = []
  monkeypatch.setattr(rjt, "run_file", lambda cfg, name, jobs: ran.append(name))
  assert rjt.main(["--jax-tests", str(tmp_path), "--files",
                   "present_test.py,typo_test.py"]) == 2
  assert ran == []
  assert "typo_test.py" in capsys.readouterr().err


def test_subprocess_env_and_command(tmp_path):
  cfg = rjt.RunConfig(jax_tests=str(tmp_path), backend="interpreter",
                      num_generated_cases=2, test_dut="cpu", keyword="Add")
  env = rjt.subprocess_env(cfg, "r.jsonl", "1/3")
  assert env["JAX_PLATFORMS"] == "openxla_cpu"
  assert env["OPENXLA_CPU_BACKEND"] == "interpreter"
  assert env["JAX_NUM_GENERATED_CASES"] == "2"
  assert env["OPENXLA_JAX_TESTS_SHARD"] == "1/3"
  assert env["OPENXLA_JAX_TESTS_DUT"] == "cpu"
  cmd = rjt.pytest_command(cfg, str(tmp_path / "x_test.py"))
  assert cmd[cmd.index("-k") + 1] == "Add"
  assert "pjrt.tools.jax_tests_pytest_plugin" in cmd


def test_devices_set_for_both_platforms(tmp_path, monkeypatch):
  cfg = rjt.RunConfig(jax_tests=str(tmp_path), platform="cpu", devices=4)
  monkeypatch.setenv("XLA_FLAGS",
                     "--xla_force_host_platform_device_count=8 --x=1")
  env = rjt.subprocess_env(cfg, "r.jsonl", None)
  assert env["OPENXLA_CPU_NUM_DEVICES"] == "4"
  assert env["OPENXLA_JAX_TESTS_DEVICES"] == "4"
  assert env["XLA_FLAGS"] == (
      "--x=1 --xla_force_host_platform_device_count=4")
  assert rjt.parse_args(["--jax-tests", "t", "--devices", "4"]).devices == 4


def test_our_platform_next_to_jaxs_cpu(tmp_path):
  # "openxla_cpu,cpu": ours is the default backend and JAX's CPU backend
  # is there for tests that move data to jax.devices("cpu").
  pytest.importorskip("jax")
  tests = tmp_path / "tests"
  tests.mkdir()
  (tests / "platforms_test.py").write_text(textwrap.dedent("""\
      import jax

      def test_platforms():
        assert jax.devices()[0].platform == "openxla_cpu"
        assert jax.devices("cpu")[0].platform == "cpu"
  """))
  cfg = rjt.RunConfig(jax_tests=str(tests), platform="openxla_cpu,cpu",
                      timeout=0, work_dir=str(tmp_path / "work"))
  result = rjt.run_file(cfg, "platforms_test.py")
  assert result.counts()["passed"] == 1, result.messages


def test_capture_stdout_sees_prints_under_test_dut(tmp_path):
  # The plugin sets jtu's jax_test_dut flag, which imports jax's test_util.
  # Its capture_stdout binds the sys.stdout of that moment; it must be
  # pytest's capturing one (as under JAX's own conftest), else a test's
  # print lands in pytest's capture and capture_stdout() reads "".
  pytest.importorskip("jax")
  tests = tmp_path / "tests"
  tests.mkdir()
  (tests / "capture_test.py").write_text(textwrap.dedent("""\
      from jax._src import test_util as jtu

      def test_capture_stdout():
        assert jtu.device_under_test() == "tpu"  # the flag is set
        with jtu.capture_stdout() as output:
          print("hello from the test")
        assert "hello from the test" in output()
  """))
  cfg = rjt.RunConfig(jax_tests=str(tests), platform="cpu", test_dut="tpu",
                      timeout=0, work_dir=str(tmp_path / "work"))
  result = rjt.run_file(cfg, "capture_test.py")
  assert result.counts()["passed"] == 1, result.messages
