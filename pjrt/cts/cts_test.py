"""Runs the conformance suite against the real xla_cpu_pjrt plugin.

The suite runs in a child interpreter (`python -m pjrt.cts`), as a user
would run it; the plugin's known deviations are passed as `--xfail`, so the
run fails when the plugin (or the suite) changes either way.
"""

import os
import re
import subprocess
import sys

import pytest

from pjrt._src import test_util

# Known failures of xla-cpu-pjrt 0.0.1 (PJRT C API 0.81), found by the suite.
_XLA_CPU_PJRT_KNOWN_FAILURES = (
    # Returns ids of devices that do not exist instead of an error.
    "test_default_device_assignment_impossible[more_replicas_than_devices]",
    "test_default_device_assignment_impossible[more_partitions_than_devices]",
    # Aborts the process: CHECK(replica_count > 0) in DeviceAssignment.
    "test_default_device_assignment_impossible[zero_replicas]",
    "test_default_device_assignment_impossible[zero_partitions]",
    "test_invalid_options_are_an_error[zero_replicas]",
    # Execute checks only the byte size of an argument: an s32[4] runs as
    # f32[4] and an f32[2,2] as f32[4], with garbage results.
    "test_wrong_arguments_are_an_error[wrong_rank]",
    "test_wrong_arguments_are_an_error[wrong_dtype]",
)


def _run_cts(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
  return subprocess.run([sys.executable, "-m", "pjrt.cts", *args], env=env,
                        capture_output=True, text=True, timeout=timeout,
                        check=False)


def _summary(proc: subprocess.CompletedProcess) -> str:
  lines = proc.stdout.strip().splitlines()
  return lines[-1] if lines else ""


@test_util.requires_xla_cpu_pjrt
def test_suite_passes_on_xla_cpu_pjrt():
  xfails = []
  for name in _XLA_CPU_PJRT_KNOWN_FAILURES:
    xfails += ["--xfail", name]
  proc = _run_cts("--plugin", test_util.xla_cpu_pjrt_path(), "-q", *xfails)
  summary = _summary(proc)
  assert proc.returncode == 0, (
      f"the suite failed ({summary}):\n{proc.stdout[-6000:]}\n"
      f"{proc.stderr[-2000:]}")
  assert re.search(r"\d+ passed", summary), summary
  assert not re.search(r"\d+ (failed|errors?)\b", summary), summary
  assert f"{len(_XLA_CPU_PJRT_KNOWN_FAILURES)} xfailed" in summary, summary


def test_help():
  proc = _run_cts("--help", timeout=60)
  assert proc.returncode == 0, proc.stderr
  assert "--plugin" in proc.stdout and "pytest" in proc.stdout


def test_unknown_plugin_is_a_usage_error():
  proc = _run_cts("--plugin", "no_such_pjrt_plugin", timeout=60)
  assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout
  assert "no_such_pjrt_plugin" in proc.stderr


def test_unimportable_plugin_object_is_a_usage_error():
  proc = _run_cts("--plugin", "no_such_pjrt_module:get_api", timeout=60)
  assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout
  assert "cannot import plugin object" in proc.stderr
