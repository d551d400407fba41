"""Entry point of every `py_pytest` test: runs pytest on the files in argv.

It writes JUnit XML to $XML_OUTPUT_FILE when Bazel sets it, keeps pytest's
cache out of the (read-only) runfiles tree, and maps pytest's "no tests
collected" exit status to failure, because a test file that collects nothing
is a defect, not a pass.
"""

import os
import sys

import pytest


def main(argv: list[str]) -> int:
  args = ["-q", "-p", "no:cacheprovider", "-o", "console_output_style=classic"]
  xml = os.environ.get("XML_OUTPUT_FILE")
  if xml:
    args += [f"--junitxml={xml}", "-o", "junit_family=xunit2"]
  rc = pytest.main(args + argv)
  if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
    print("pytest_main: no tests were collected", file=sys.stderr)
    return 1
  return int(rc)


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
