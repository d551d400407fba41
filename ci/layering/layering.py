"""Layering rules of the monorepo, and the checks that enforce them.

    support   <- stablehlo <- xla <- pjrt (the CPU plugin only)

Two independent checks, because Python imports can dodge declared Bazel deps:
  * `scan_imports(root)`: an AST scan of every .py file of each layer for
    imports of another layer it may not use;
  * `check_query(layer, labels)`: the labels of `bazel query 'deps(//L/...)'`
    must not name a package of a layer above L.
Bazel `visibility` (the `users` package groups in each layer's BUILD) is the
third line of defence, at build time.

Usage: python -m ci.layering.layering [--root DIR] [--bazel]
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import fnmatch
import pathlib
import subprocess
import sys

LAYERS = ("support", "stablehlo", "xla", "pjrt")

# layer -> the layers of ours it may import (itself included).
ALLOWED = {
    "support": {"support"},
    "stablehlo": {"support", "stablehlo"},
    "xla": {"support", "stablehlo", "xla"},
    "pjrt": {"support", "stablehlo", "pjrt"},
}

# Narrow exceptions: (glob on the repo-relative path, extra layers allowed).
# Only the CPU plugin puts our compiler behind the PJRT ABI.
EXCEPTIONS = (
    ("pjrt/plugins/cpu/*", {"xla"}),
    # The CPU plugin's execution backends (the plugin lives in
    # pjrt/_src/plugin/; only this module of it imports //xla).
    ("pjrt/_src/plugin/backends.py", {"xla"}),
)


@dataclasses.dataclass(frozen=True)
class Violation:
  path: str
  line: int
  imported: str
  layer: str

  def __str__(self) -> str:
    return (f"{self.path}:{self.line}: layer '{self.layer}' imports "
            f"'{self.imported}', which it may not use")


def _allowed(layer: str, rel_path: str) -> set[str]:
  allowed = set(ALLOWED[layer])
  for pattern, extra in EXCEPTIONS:
    if fnmatch.fnmatch(rel_path, pattern):
      allowed |= extra
  return allowed


def _imported_modules(tree: ast.AST):
  """Yields (line, dotted module) for every import in `tree`, including
  importlib.import_module("x") / __import__("x") with a constant name."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield node.lineno, alias.name
    elif isinstance(node, ast.ImportFrom):
      if node.level == 0 and node.module:
        yield node.lineno, node.module
    elif isinstance(node, ast.Call) and node.args:
      func = node.func
      name = (func.attr if isinstance(func, ast.Attribute)
              else func.id if isinstance(func, ast.Name) else None)
      arg = node.args[0]
      if (name in ("import_module", "__import__")
          and isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        yield node.lineno, arg.value


def scan_imports(root: pathlib.Path) -> list[Violation]:
  """Scans the layers under `root` and returns every forbidden import."""
  violations = []
  for layer in LAYERS:
    base = root / layer
    if not base.is_dir():
      continue
    for path in sorted(base.rglob("*.py")):
      rel = path.relative_to(root).as_posix()
      try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
      except SyntaxError as e:
        violations.append(Violation(rel, e.lineno or 0, "<syntax error>",
                                    layer))
        continue
      allowed = _allowed(layer, rel)
      for line, module in _imported_modules(tree):
        top = module.split(".", 1)[0]
        if top in LAYERS and top not in allowed:
          violations.append(Violation(rel, line, module, layer))
  return violations


def check_query(layer: str, labels: list[str]) -> list[str]:
  """Returns the labels in deps(//layer/...) that belong to a layer above."""
  forbidden = set(LAYERS) - ALLOWED[layer]
  if layer == "pjrt":
    forbidden.discard("xla")  # the CPU plugin; the import scan narrows it
  bad = []
  for label in labels:
    label = label.strip()
    if not label.startswith("//"):
      continue
    top = label[2:].split("/", 1)[0].split(":", 1)[0]
    if top in forbidden:
      bad.append(label)
  return bad


def bazel_query_deps(root: pathlib.Path, layer: str,
                     output_base: str | None = None) -> list[str]:
  """Runs `bazel query 'deps(//layer/...)'` in `root`; returns its labels."""
  cmd = ["bazel"]
  if output_base:
    cmd += ["--batch", f"--output_base={output_base}"]
  cmd += ["query", f"deps(//{layer}/...)", "--noshow_progress"]
  proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                        check=False)
  if proc.returncode != 0:
    raise RuntimeError(f"bazel query failed for //{layer}/...:\n"
                       f"{proc.stderr[-2000:]}")
  return proc.stdout.splitlines()


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m ci.layering.layering",
      description="Check the layering rules: support <- stablehlo <- xla "
                  "<- pjrt, by import scan and (with --bazel) bazel query.")
  parser.add_argument("--root", default=".", help="repository root")
  parser.add_argument("--bazel", action="store_true",
                      help="also check bazel query deps(//<layer>/...)")
  args = parser.parse_args(argv)
  root = pathlib.Path(args.root).resolve()
  problems = [str(v) for v in scan_imports(root)]
  if args.bazel:
    for layer in LAYERS:
      problems += [f"deps(//{layer}/...) contains {label}"
                   for label in check_query(layer,
                                            bazel_query_deps(root, layer))]
  for p in problems:
    print(p)
  print(f"layering: {len(problems)} violation(s)")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main())
