"""Shared machinery of the conformance suite: choosing the plugin under test,
running crash-prone probes in a child process, and checking errors.

The plugin under test is named by the environment variable `PJRT_CTS_PLUGIN`
(set by `python -m pjrt.cts --plugin ...`): a plugin name known to the
`pjrt` registry (entry points, `PJRT_PLUGIN_LIBRARY_PATH`), a path to a
shared library exporting `GetPjrtApi`, or a Python object given as
"module:attribute" (anything `pjrt.load_plugin` accepts, e.g. our own
plugin, `pjrt._src.plugin.api:get_api`).

Negative cases (bad ids, bad programs, use after delete, ...) are where C++
plugins tend to abort the process (a failed CHECK), and an abort would end
the whole pytest run without a summary. Those cases are written as probes
(`pjrt.cts.probes`) and run in one child interpreter; when the child dies,
the probe it was running is reported as crashed (with the signal and the
end of its stderr) and a fresh child goes on with the remaining probes.
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib
import json
import os
import re
import signal
import subprocess
import sys
from typing import Any, Iterable

import pjrt
import support

PLUGIN_ENV = "PJRT_CTS_PLUGIN"
XFAIL_ENV = "PJRT_CTS_XFAIL"

# Marks the child's result lines on stdout (a plugin may print there too).
PROBE_MARKER = "PJRT_CTS_PROBE "

# Words of the stderr line that says why a native library aborted.
_CRASH_CAUSES = ("Check failed", "FATAL", "terminate called", "what():",
                 "Assertion", "Segmentation fault")

# Wall-clock limit of one child run (every remaining probe).
_CHILD_TIMEOUT_S = 120

# Codes an error may carry when it says "you passed something invalid".
BAD_INPUT_CODES = frozenset({
    support.StatusCode.INVALID_ARGUMENT,
    support.StatusCode.NOT_FOUND,
    support.StatusCode.OUT_OF_RANGE,
    support.StatusCode.FAILED_PRECONDITION,
})


def plugin_choice() -> str | None:
  """The plugin under test, as given (a name or a path), or None."""
  return os.environ.get(PLUGIN_ENV) or None


_PYTHON_OBJECT = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def is_python_object(choice: str) -> bool:
  """Whether `choice` is "module:attribute" (a plugin object in Python)."""
  return bool(_PYTHON_OBJECT.fullmatch(choice)) and not os.path.exists(choice)


def is_path(choice: str) -> bool:
  """Whether `choice` names a library file rather than a registered plugin."""
  if is_python_object(choice):
    return False
  return (os.sep in choice or "/" in choice or os.path.exists(choice) or
          any(choice.endswith(ext) for ext in (".so", ".dylib", ".dll")))


def python_object(choice: str):
  """The object "module:attribute" names (ImportError/AttributeError)."""
  module, _, attribute = choice.partition(":")
  value = importlib.import_module(module)
  for part in attribute.split("."):
    value = getattr(value, part)
  return value


def load(choice: str) -> pjrt.Plugin:
  """The loaded plugin for `choice` (a registered name, a library path or
  "module:attribute")."""
  if is_python_object(choice):
    return pjrt.load_plugin(python_object(choice), name=choice)
  if is_path(choice):
    return pjrt.load_plugin(os.path.abspath(choice))
  return pjrt.get_plugin(choice)


def raw_api(choice: str) -> Any:
  """The plugin's `PJRT_Api` struct, read without the loader's checks.

  For a library path the table comes straight from `GetPjrtApi`, so that the
  version checks of the suite see a plugin the loader would refuse.
  """
  if not is_path(choice):
    return load(choice).api
  library = ctypes.CDLL(os.path.abspath(choice))
  get_api = library.GetPjrtApi
  get_api.restype = ctypes.c_void_p
  get_api.argtypes = []
  address = get_api()
  if not address:
    raise AssertionError(f"GetPjrtApi() of {choice} returned NULL")
  api = pjrt.abi.PJRT_Api.from_address(address)
  pjrt.abi.keep_alive(api, library)  # The table lives in the library.
  return api


# --------------------------------------------------------------------------
# Probes in a child process.


@dataclasses.dataclass
class ProbeResult:
  """What one probe did: returned a value, raised an error, or crashed.

  Attributes:
    name: the probe's name.
    outcome: "ok", "error" (a support.XlaError), "exception" (any other
      Python exception, a bug of the plugin or the client) or "crashed".
    value: the probe's return value (JSON), for "ok".
    code: the StatusCode of the error, for "error".
    error_type: the exception's class name.
    message: the error message, or for "crashed" how the child ended.
  """

  name: str
  outcome: str
  value: Any = None
  code: int | None = None
  error_type: str = ""
  message: str = ""

  def describe(self) -> str:
    if self.outcome == "ok":
      return f"probe {self.name!r} succeeded and returned {self.value!r}"
    if self.outcome == "crashed":
      return f"probe {self.name!r} crashed the process: {self.message}"
    code = (support.StatusCode(self.code).name
            if self.code is not None else "-")
    return (f"probe {self.name!r} raised {self.error_type} ({code}): "
            f"{self.message}")


def _child_env(choice: str) -> dict[str, str]:
  env = dict(os.environ)
  env[PLUGIN_ENV] = os.path.abspath(choice) if is_path(choice) else choice
  # The child must import what this process imports (Bazel runfiles, a
  # source tree): hand it this interpreter's module search path.
  env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
  return env


def _how_it_ended(returncode: int, stderr: str) -> str:
  if returncode < 0:
    try:
      how = f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
      how = f"killed by signal {-returncode}"
  else:
    how = f"exited with status {returncode}"
  lines = stderr.strip().splitlines()
  # A failed CHECK or a C++ terminate names the cause above the stack trace.
  causes = [l for l in lines if any(k in l for k in _CRASH_CAUSES)][:3]
  tail = [l for l in lines[-6:] if l not in causes]
  text = "\n".join(causes + (["..."] if causes and tail else []) + tail)
  return f"{how}; stderr:\n{text}" if text else how


def run_probes(choice: str, names: Iterable[str]) -> dict[str, ProbeResult]:
  """Runs probes `names` against plugin `choice` in child processes."""
  pending = list(names)
  results: dict[str, ProbeResult] = {}
  while pending:
    command = [sys.executable, "-m", "pjrt.cts.probes"] + pending
    try:
      proc = subprocess.run(command, env=_child_env(choice),
                            capture_output=True, text=True,
                            timeout=_CHILD_TIMEOUT_S, check=False)
      stdout, stderr, returncode = proc.stdout, proc.stderr, proc.returncode
      ended = _how_it_ended(returncode, stderr)
    except subprocess.TimeoutExpired as e:
      stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (
          e.stdout or "")
      ended = f"did not finish within {_CHILD_TIMEOUT_S} s (hung)"
    started = None
    for line in stdout.splitlines():
      if not line.startswith(PROBE_MARKER):
        continue
      record = json.loads(line[len(PROBE_MARKER):])
      if "start" in record:
        started = record["start"]
      else:
        results[record["name"]] = ProbeResult(**record)
        started = None
    pending = [n for n in pending if n not in results]
    if not pending:
      break
    if started is None or started not in pending:
      # The child died outside any probe (e.g. while loading the plugin):
      # a retry would die the same way, so report it for every probe left.
      for name in pending:
        results[name] = ProbeResult(name, "crashed", message=ended)
      break
    # The child died (or hung) in probe `started`; go on without it.
    results[started] = ProbeResult(started, "crashed", message=ended)
    pending.remove(started)
  return results


def expect_error(result: ProbeResult,
                 codes: Iterable[support.StatusCode] | None = None) -> None:
  """Asserts that a probe failed cleanly: a support error, maybe of `codes`.

  A clean error has a valid, non-OK PJRT error code and a message; the
  loader marks codes outside absl's range and errors with code OK in the
  message, and those do not count as clean.
  """
  assert result.outcome == "error", (
      f"expected an error, but {result.describe()}")
  assert result.code not in (None, support.StatusCode.OK), result.describe()
  assert "unknown PJRT error code" not in result.message, result.describe()
  assert "error with code OK" not in result.message, result.describe()
  assert result.message.strip(), (
      f"probe {result.name!r}: the error has an empty message")
  if codes is not None:
    codes = frozenset(codes)
    allowed = ", ".join(sorted(c.name for c in codes))
    assert result.code in codes, (
        f"expected an error with code in {{{allowed}}}, but "
        f"{result.describe()}")


def expect_no_crash(result: ProbeResult) -> None:
  """Asserts that a probe returned or raised a clean error."""
  assert result.outcome in ("ok", "error"), result.describe()
  if result.outcome == "error":
    expect_error(result)


def error_code(error: support.XlaError) -> support.StatusCode:
  return support.StatusCode(error.code)


def probe_id(name: str) -> str:
  """A test id for probe `name`: its name without the group prefix."""
  return name.split(".", 1)[-1]
