"""Layering rules of the monorepo, and the checks that enforce them.

    support   <- stablehlo <- xla <- pjrt (the CPU plugin only)
    support, stablehlo, pjrt <- torch_bridge (compiles through any plugin)

Two independent checks, because Python imports can dodge declared Bazel deps:
  * `scan_imports(root)`: an AST scan of every .py file of each layer for
    imports of another layer it may not use; the same scan finds import
    cycles between our modules (`import_cycles`, none allowed) and imports
    of another component's private `_src` (`foreign_src_imports`, none
    allowed beyond the files listed in src_import_debt.txt, which may only
    shrink);
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

LAYERS = ("support", "stablehlo", "xla", "pjrt", "torch_bridge")

# layer -> the layers of ours it may import (itself included).
ALLOWED = {
    "support": {"support"},
    "stablehlo": {"support", "stablehlo"},
    "xla": {"support", "stablehlo", "xla"},
    "pjrt": {"support", "stablehlo", "pjrt"},
    # The PyTorch bridge reaches the compiler only through a PJRT plugin.
    "torch_bridge": {"support", "stablehlo", "pjrt", "torch_bridge"},
}

# Narrow exceptions: (glob on the repo-relative path, extra layers allowed).
# Only the CPU plugin puts our compiler behind the PJRT ABI: it lives in
# pjrt/_src/plugin/, and of it only the execution backends import //xla.
EXCEPTIONS = (
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


def _module_name(root: pathlib.Path, path: pathlib.Path) -> str:
  parts = list(path.relative_to(root).with_suffix("").parts)
  if parts[-1] == "__init__":
    parts = parts[:-1]
  return ".".join(parts)


def _is_test(root: pathlib.Path, path: pathlib.Path) -> bool:
  return (path.name.endswith("_test.py") or
          "testdata" in path.relative_to(root).parts)


def module_graph(root: pathlib.Path) -> dict[str, set[str]]:
  """Module -> the modules of ours it imports (at any scope), for the
  non-test modules of every layer. A package's `__init__` importing its own
  submodules is not an edge (that is how a package exports them)."""
  paths = {}
  for layer in LAYERS:
    base = root / layer
    if base.is_dir():
      for path in base.rglob("*.py"):
        paths[_module_name(root, path)] = path

  def resolve(name: str):
    while name and name not in paths:
      name = name.rpartition(".")[0]
    return name or None

  graph: dict[str, set[str]] = {}
  for name, path in paths.items():
    if _is_test(root, path):
      continue
    try:
      tree = ast.parse(path.read_text(encoding="utf-8"))
    except SyntaxError:
      continue  # reported by scan_imports
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deps = set()
    for node in ast.walk(tree):
      targets = []
      if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
          parts = package.split(".")
          if node.level > 1:
            parts = parts[:-(node.level - 1)]
          base = ".".join(parts + ([base] if base else []))
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths
                   else base for a in node.names]
      for target in targets:
        dep = resolve(target)
        if dep and dep != name and not (
            path.name == "__init__.py" and dep.startswith(name + ".")):
          deps.add(dep)
    graph[name] = deps
  return graph


def import_cycles(root: pathlib.Path) -> list[list[str]]:
  """The strongly connected components of more than one module."""
  graph = module_graph(root)
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  on_stack: set[str] = set()
  cycles = []
  counter = 0
  for start in sorted(graph):
    if start in index:
      continue
    # Iterative Tarjan: (node, iterator over its successors).
    work = [(start, iter(sorted(graph[start])))]
    index[start] = low[start] = counter
    counter += 1
    stack.append(start)
    on_stack.add(start)
    while work:
      node, successors = work[-1]
      advanced = False
      for nxt in successors:
        if nxt not in graph:
          continue
        if nxt not in index:
          index[nxt] = low[nxt] = counter
          counter += 1
          stack.append(nxt)
          on_stack.add(nxt)
          work.append((nxt, iter(sorted(graph[nxt]))))
          advanced = True
          break
        if nxt in on_stack:
          low[node] = min(low[node], index[nxt])
      if advanced:
        continue
      work.pop()
      if work:
        parent = work[-1][0]
        low[parent] = min(low[parent], low[node])
      if low[node] == index[node]:
        component = []
        while True:
          member = stack.pop()
          on_stack.discard(member)
          component.append(member)
          if member == node:
            break
        if len(component) > 1:
          cycles.append(sorted(component))
  return sorted(cycles)


DEBT_FILE = pathlib.Path(__file__).resolve().parent / "src_import_debt.txt"


def src_import_debt() -> set[str]:
  """The files still allowed to import another component's `_src`."""
  if not DEBT_FILE.exists():
    return set()
  lines = DEBT_FILE.read_text(encoding="utf-8").splitlines()
  return {l.strip() for l in lines if l.strip() and not l.startswith("#")}


def foreign_src_imports(root: pathlib.Path) -> list[Violation]:
  """Imports of another layer's `_src` package (tests included)."""
  found = []
  for layer in LAYERS:
    base = root / layer
    if not base.is_dir():
      continue
    for path in sorted(base.rglob("*.py")):
      if "testdata" in path.relative_to(root).parts:
        continue
      rel = path.relative_to(root).as_posix()
      try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
      except SyntaxError:
        continue
      for line, module in _imported_modules(tree):
        parts = module.split(".")
        if (parts[0] in LAYERS and parts[0] != layer and len(parts) > 1 and
            parts[1] == "_src"):
          found.append(Violation(rel, line, module, layer))
  return found


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


# Layers whose libraries are queried without their tests and binaries: the
# bridge's tests and tools run on our CPU plugin (and so reach //xla at run
# time, as any PJRT user does through a plugin), but no library of the
# bridge may depend on //xla.
LIBRARIES_ONLY = frozenset({"torch_bridge"})


def query_expression(layer: str) -> str:
  """The `bazel query` expression whose deps must respect the layering."""
  if layer in LIBRARIES_ONLY:
    return f"deps(kind(py_library, //{layer}/...))"
  return f"deps(//{layer}/...)"


def bazel_query_deps(root: pathlib.Path, layer: str,
                     output_base: str | None = None) -> list[str]:
  """Runs `bazel query` of `query_expression(layer)` in `root`; returns its
  labels."""
  cmd = ["bazel"]
  if output_base:
    cmd += ["--batch", f"--output_base={output_base}"]
  cmd += ["query", query_expression(layer), "--noshow_progress"]
  proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                        check=False)
  if proc.returncode != 0:
    raise RuntimeError(f"bazel query failed for {query_expression(layer)}:\n"
                       f"{proc.stderr[-2000:]}")
  return proc.stdout.splitlines()


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m ci.layering.layering",
      description="Check the layering rules: support <- stablehlo <- xla "
                  "<- pjrt, and support, stablehlo, pjrt <- torch_bridge, by "
                  "import scan and (with --bazel) bazel query.")
  parser.add_argument("--root", default=".", help="repository root")
  parser.add_argument("--bazel", action="store_true",
                      help="also check bazel query deps(//<layer>/...)")
  args = parser.parse_args(argv)
  root = pathlib.Path(args.root).resolve()
  problems = [str(v) for v in scan_imports(root)]
  cycles = import_cycles(root)
  problems += [f"import cycle: {' -> '.join(c)}" for c in cycles]
  debt = src_import_debt()
  src = foreign_src_imports(root)
  problems += [f"{v.path}:{v.line}: imports '{v.imported}', the private "
               f"_src of another component; import its public API"
               for v in src if v.path not in debt]
  offenders = {v.path for v in src}
  problems += [f"{DEBT_FILE.name}: {p} no longer imports another "
               "component's _src; remove it from the list"
               for p in sorted(debt - offenders)]
  if args.bazel:
    for layer in LAYERS:
      problems += [f"{query_expression(layer)} contains {label}"
                   for label in check_query(layer,
                                            bazel_query_deps(root, layer))]
  for p in problems:
    print(p)
  print(f"layering: {len(problems)} violation(s); {len(cycles)} import "
        f"cycle(s); {len(offenders)} file(s) import another component's "
        f"_src ({len(debt)} listed as debt)")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main())
