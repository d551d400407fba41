"""pytest plugin loaded (`-p`) into the subprocess that runs JAX's own tests.

Used by `pjrt.tools.run_jax_tests`; configured through the environment so
that the runner needs no conftest next to the (foreign) test files:

  OPENXLA_JAX_TESTS_PLATFORM   "openxla_cpu" (or a list naming it, such as
                               "openxla_cpu,cpu") registers our plugin with
                               JAX before any test module imports jax.
  OPENXLA_JAX_TESTS_TIMEOUT    per-test limit in seconds (SIGALRM; 0 = none).
  OPENXLA_JAX_TESTS_SHARD      "k/n": keep every n-th collected test from k.
  OPENXLA_JAX_TESTS_RESULTS    path of a JSON-lines file that gets one record
                               per test as soon as it finishes (so a run killed
                               by the overall timeout still has its results).
  OPENXLA_JAX_TESTS_PROGRESS   emit a progress line on stderr every this many
                               tests (0 = never).
  OPENXLA_JAX_TESTS_DUT        sets jtu's jax_test_dut flag (e.g. "cpu", so
                               tests take their CPU branches on our platform).
  OPENXLA_JAX_TESTS_DEVICES    on JAX's "cpu" platform: start the backend
                               with this many devices before the test modules
                               load, so their jtu.request_cpu_devices(8)
                               cannot raise the count.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

_ENV_PLATFORM = "OPENXLA_JAX_TESTS_PLATFORM"
_ENV_TIMEOUT = "OPENXLA_JAX_TESTS_TIMEOUT"
_ENV_SHARD = "OPENXLA_JAX_TESTS_SHARD"
_ENV_RESULTS = "OPENXLA_JAX_TESTS_RESULTS"
_ENV_PROGRESS = "OPENXLA_JAX_TESTS_PROGRESS"
_ENV_DUT = "OPENXLA_JAX_TESTS_DUT"
_ENV_DEVICES = "OPENXLA_JAX_TESTS_DEVICES"


class TestTimeoutError(Exception):
  """Raised inside a test that ran past the per-test limit."""


def _register_platform() -> None:
  # "openxla_cpu,cpu": ours is the default backend, JAX's CPU one is there
  # too (tests that move data to jax.devices("cpu") need it).
  if "openxla_cpu" in os.environ.get(_ENV_PLATFORM, "").split(","):
    from pjrt import jax_plugin  # pylint: disable=g-import-not-at-top
    jax_plugin.register()
  devices = os.environ.get(_ENV_DEVICES, "")
  if devices and os.environ.get(_ENV_PLATFORM, "") == "cpu":
    import jax  # pylint: disable=g-import-not-at-top
    jax.config.update("jax_num_cpu_devices", int(devices))
    jax.devices()  # initialised: later updates of the count are refused


_register_platform()


def pytest_load_initial_conftests(early_config, parser, args):
  """Sets jtu's jax_test_dut flag, which imports jax's test_util.

  Done here, inside pytest's global output capture, like a conftest would:
  test_util's capture_stdout binds the sys.stdout of its import, and it has
  to be pytest's capturing one for the tests' prints to reach it.
  """
  del early_config, parser, args
  dut = os.environ.get(_ENV_DUT, "")
  if dut:
    import jax  # pylint: disable=g-import-not-at-top
    from jax._src import test_util  # pylint: disable=g-import-not-at-top,unused-import
    jax.config.update("jax_test_dut", dut)


class _State:
  """Counts and the results file of this process."""

  def __init__(self):
    self.path = os.environ.get(_ENV_RESULTS, "")
    self.out = open(self.path, "a", encoding="utf-8") if self.path else None
    self.every = int(os.environ.get(_ENV_PROGRESS, "0") or 0)
    self.counts: dict[str, int] = {}
    self.total = 0
    self.done = 0
    self.start = time.monotonic()
    self.setup_outcome: dict[str, str] = {}

  def write(self, record: dict) -> None:
    if self.out is not None:
      self.out.write(json.dumps(record) + "\n")
      self.out.flush()

  def finish(self, record: dict) -> None:
    self.write(record)
    self.done += 1
    outcome = record["outcome"]
    self.counts[outcome] = self.counts.get(outcome, 0) + 1
    if self.every and (self.done % self.every == 0 or self.done == self.total):
      shown = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
      sys.stderr.write(
          f"[progress] {self.done}/{self.total} {shown} "
          f"({time.monotonic() - self.start:.0f}s)\n")
      sys.stderr.flush()


_STATE = _State()


def _parse_shard(text: str) -> tuple[int, int] | None:
  if not text:
    return None
  k, n = text.split("/")
  return int(k), int(n)


def pytest_collection_modifyitems(config, items):
  shard = _parse_shard(os.environ.get(_ENV_SHARD, ""))
  if shard is not None:
    k, n = shard
    keep = [it for i, it in enumerate(items) if i % n == k]
    dropped = [it for i, it in enumerate(items) if i % n != k]
    items[:] = keep
    config.hook.pytest_deselected(items=dropped)
  _STATE.total = len(items)


def pytest_collectreport(report):
  if report.failed:
    _STATE.write({
        "nodeid": report.nodeid, "outcome": "error", "when": "collect",
        "message": _message(report), "duration": 0.0,
    })


def _on_alarm(signum, frame):
  del signum, frame
  raise TestTimeoutError(
      f"test exceeded the per-test limit of "
      f"{os.environ.get(_ENV_TIMEOUT)} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
  del item
  limit = float(os.environ.get(_ENV_TIMEOUT, "0") or 0)
  if limit > 0 and hasattr(signal, "SIGALRM"):
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
      yield
    finally:
      signal.setitimer(signal.ITIMER_REAL, 0)
      signal.signal(signal.SIGALRM, old)
  else:
    yield


def _message(report) -> str:
  """The exception lines of a failed report ("E   ..." lines, else repr)."""
  longrepr = report.longrepr
  if longrepr is None:
    return ""
  if isinstance(longrepr, tuple):  # skip: (path, lineno, reason)
    return str(longrepr[2])
  crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
  if crash:
    return str(crash)
  return str(longrepr)


def pytest_runtest_logreport(report):
  nodeid = report.nodeid
  if report.when == "setup":
    if report.passed:
      return
    outcome = "skipped" if report.skipped else "error"
    _STATE.setup_outcome[nodeid] = outcome
    _STATE.finish({"nodeid": nodeid, "outcome": outcome, "when": "setup",
                   "message": _message(report),
                   "duration": report.duration})
  elif report.when == "call":
    if hasattr(report, "wasxfail"):
      outcome = "xfailed" if report.skipped else "xpassed"
    else:
      outcome = report.outcome  # passed / failed / skipped
    _STATE.finish({"nodeid": nodeid, "outcome": outcome, "when": "call",
                   "message": "" if report.passed else _message(report),
                   "duration": report.duration})
  elif report.when == "teardown" and report.failed:
    _STATE.write({"nodeid": nodeid, "outcome": "error", "when": "teardown",
                  "message": _message(report), "duration": report.duration})
