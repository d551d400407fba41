#!/usr/bin/env python3
"""Counts test cases from Bazel's JUnit results and prints the closing line.

Usage: ci/summarize_tests.py WORKSPACE_DIR [WORKSPACE_DIR ...]

For every test target of each workspace (`bazel query 'tests(//...)'`) it
reads bazel-testlogs/<package>/<name>/test.xml. A target with no XML (it
failed to build, crashed or timed out) counts as one failed case. Prints
failing cases, then `N passed, N failed[, N skipped]`; exits 1 on failure.
"""

import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET


def test_targets(workspace: pathlib.Path) -> list[str]:
  out = subprocess.run(["bazel", "query", "tests(//...)", "--noshow_progress"],
                       cwd=workspace, capture_output=True, text=True,
                       check=True).stdout
  return [l.strip() for l in out.splitlines() if l.startswith("//")]


def count(xml_path: pathlib.Path, label: str, failures: list[str]):
  passed = failed = skipped = 0
  root = ET.parse(xml_path).getroot()
  for case in root.iter("testcase"):
    name = f"{label} {case.get('classname', '')}.{case.get('name', '')}"
    if case.find("failure") is not None or case.find("error") is not None:
      failed += 1
      failures.append(name)
    elif case.find("skipped") is not None:
      skipped += 1
    else:
      passed += 1
  return passed, failed, skipped


def main(argv: list[str]) -> int:
  if not argv or argv[0] in ("-h", "--help"):
    print(__doc__)
    return 0 if argv else 2
  totals = [0, 0, 0]
  failures: list[str] = []
  for ws in map(pathlib.Path, argv):
    logs = (ws / "bazel-testlogs").resolve()
    for label in test_targets(ws):
      package, name = label[2:].split(":")
      xml_path = logs / package / name / "test.xml"
      if not xml_path.is_file():
        totals[1] += 1
        failures.append(f"{label} (no test result: failed to build or run)")
        continue
      for i, n in enumerate(count(xml_path, label, failures)):
        totals[i] += n
  for f in failures:
    print(f"FAILED: {f}")
  passed, failed, skipped = totals
  line = f"{passed} passed, {failed} failed"
  if skipped:
    line += f", {skipped} skipped"
  print(line)
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
