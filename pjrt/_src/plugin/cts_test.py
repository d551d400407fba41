"""Runs the PJRT conformance suite (pjrt/cts) against our plugin.

The suite runs in a child interpreter, as `python -m pjrt.cts --plugin
pjrt._src.plugin.api:get_api` would; our plugin has no known failures, so
any failure or xfail is a regression. The whole suite runs on the
interpreter backend (a few seconds); the compile and execute cases also run
on the CPU compiler when it can be imported.
"""

import os
import re
import subprocess
import sys

import pytest

from pjrt._src.plugin import backends

_PLUGIN = "pjrt._src.plugin.api:get_api"


def _run_cts(backend: str, *args: str) -> subprocess.CompletedProcess:
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
  env["OPENXLA_CPU_BACKEND"] = backend
  # The suite's multi-device cases need more than the default one device.
  env["OPENXLA_CPU_NUM_DEVICES"] = "4"
  return subprocess.run(
      [sys.executable, "-m", "pjrt.cts", "--plugin", _PLUGIN, "-q",
       "-p", "no:randomly", *args],
      env=env, capture_output=True, text=True, timeout=600, check=False)


def _check(proc: subprocess.CompletedProcess) -> str:
  lines = proc.stdout.strip().splitlines()
  summary = lines[-1] if lines else ""
  assert proc.returncode == 0, (
      f"the suite failed ({summary}):\n{proc.stdout[-6000:]}\n"
      f"{proc.stderr[-2000:]}")
  assert re.search(r"\d+ passed", summary), summary
  assert not re.search(r"failed|error|xfail|skipped", summary), summary
  return summary


def test_whole_suite_on_the_interpreter():
  summary = _check(_run_cts("interpreter"))
  assert int(re.search(r"(\d+) passed", summary).group(1)) >= 200


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="the CPU compiler cannot be imported")
def test_compile_and_execute_cases_on_the_cpu_compiler():
  _check(_run_cts("cpu", "-k", "execute or compile or concurrency"))
