"""`python -m pjrt.cts`: runs the conformance suite against one plugin."""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import sys
from typing import Iterator, Sequence

import pytest

import pjrt
from pjrt.cts import harness

_DESCRIPTION = """\
Runs the PJRT conformance suite (black-box tests of the PJRT C API) against
one plugin, with pytest, and exits with pytest's exit status.
"""

_EPILOG = """\
Every other argument goes to pytest (e.g. -q, -x, -k EXPR, -rA).

Negative cases run in a child process, so that a plugin that aborts on bad
input fails those cases instead of ending the run. Examples:
  python -m pjrt.cts --plugin cpu -q
  python -m pjrt.cts --plugin path/to/pjrt_plugin.so -k buffers
  python -m pjrt.cts --plugin pjrt._src.plugin.api:get_api
"""


def suite_modules() -> list[str]:
  """The suite's test modules (`*_cts.py`), as absolute paths."""
  here = os.path.dirname(os.path.abspath(__file__))
  return sorted(glob.glob(os.path.join(here, "*_cts.py")))


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="python -m pjrt.cts", description=_DESCRIPTION, epilog=_EPILOG,
      formatter_class=argparse.RawDescriptionHelpFormatter,
      allow_abbrev=False)
  parser.add_argument(
      "--plugin", required=True, metavar="NAME_OR_PATH",
      help="the plugin under test: a name pjrt knows (entry point group "
      "'pjrt_plugins', or PJRT_PLUGIN_LIBRARY_PATH='name:path,...'), a "
      "path to a shared library exporting GetPjrtApi, or a Python plugin "
      "object as module:attribute (e.g. pjrt._src.plugin.api:get_api)")
  parser.add_argument(
      "--xfail", action="append", default=[], metavar="TEST",
      help="a known failure of this plugin: a test name, or one "
      "parametrized case such as "
      "'test_default_device_assignment_impossible[zero_replicas]'; it is "
      "expected to fail (strict xfail); repeatable")
  return parser


def _check_choice(choice: str) -> str | None:
  """An error message when `choice` names no plugin, else None."""
  if harness.is_python_object(choice):
    try:
      harness.python_object(choice)
    except (ImportError, AttributeError) as e:
      return f"cannot import plugin object {choice}: {e}"
    return None
  if harness.is_path(choice):
    if not os.path.exists(choice):
      return f"plugin library {choice} does not exist"
    return None
  known = pjrt.registered_plugins()
  if choice not in known:
    names = ", ".join(sorted(known)) or "none"
    return (f"no plugin registered under {choice!r} (registered: {names}); "
            "pass a library path instead")
  return None


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
  old = {k: os.environ.get(k) for k in values}
  os.environ.update(values)
  try:
    yield
  finally:
    for key, value in old.items():
      if value is None:
        os.environ.pop(key, None)
      else:
        os.environ[key] = value


def _absolute(path: str) -> str:
  # Under `bazel run` the process runs in the runfiles tree; a relative path
  # means one relative to where the user typed the command.
  base = os.environ.get("BUILD_WORKING_DIRECTORY") or os.getcwd()
  return os.path.normpath(os.path.join(base, os.path.expanduser(path)))


def run(plugin: str, pytest_args: Sequence[str] = (),
        xfail: Sequence[str] = ()) -> int:
  """Runs the suite against `plugin`; returns pytest's exit status."""
  if harness.is_path(plugin):
    plugin = _absolute(plugin)
  with _environment(**{harness.PLUGIN_ENV: plugin,
                       harness.XFAIL_ENV: ",".join(xfail)}):
    return int(pytest.main(
        ["-p", "no:cacheprovider"] + suite_modules() + list(pytest_args)))


def main(argv: Sequence[str] | None = None) -> int:
  args, pytest_args = _parser().parse_known_args(argv)
  if harness.is_path(args.plugin):
    args.plugin = _absolute(args.plugin)
  problem = _check_choice(args.plugin)
  if problem:
    print(f"pjrt.cts: {problem}", file=sys.stderr)
    return int(pytest.ExitCode.USAGE_ERROR)
  return run(args.plugin, pytest_args, args.xfail)
