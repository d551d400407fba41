r"""Runs a StableHLO conformance corpus through the HLO path: CHLO
legalization, StableHLO -> HLO import, HLO evaluator.

  python -m xla.tools.hlo_conformance --suite testdata --sample 5 --jobs 8

Prints each failing file with its first error line, then exactly
`N passed, N failed`. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import pathlib
import sys

from support._src import env

SUITES = ("testdata",)


def suite_files(suite: str) -> list[pathlib.Path]:
  root = env.stablehlo_corpus(suite)
  if root is None:
    return []
  return sorted(p for p in pathlib.Path(root).rglob("*.mlir") if p.is_file())


def run_file(path: str) -> tuple[str, str | None]:
  """(path, None) when the file passes, else (path, first error line)."""
  from xla.translate import conformance_mode  # pylint: disable=g-import-not-at-top
  try:
    src = pathlib.Path(path).read_text(encoding="utf-8",
                                       errors="surrogateescape")
    conformance_mode.run_case(src, path, 0)
    return path, None
  except Exception as e:  # pylint: disable=broad-except
    lines = str(e).strip().splitlines()
    return path, f"{type(e).__name__}: {lines[0] if lines else ''}"


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m xla.tools.hlo_conformance")
  ap.add_argument("--suite", choices=SUITES, required=True)
  ap.add_argument("--sample", type=int, default=1,
                  help="take every Nth file (default: all)")
  ap.add_argument("--jobs", type=int, default=1)
  ap.add_argument("paths", nargs="*", help="files instead of the suite")
  args = ap.parse_args(argv)
  files = [str(p) for p in (args.paths or suite_files(args.suite))]
  if not files:
    print(env.missing_corpus_reason(args.suite))
    print("0 passed, 0 failed")
    return 0
  files = files[::max(1, args.sample)]
  if args.jobs > 1:
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
      results = list(pool.map(run_file, files, chunksize=4))
  else:
    results = [run_file(f) for f in files]
  failed = [(p, err) for p, err in results if err is not None]
  for p, err in failed:
    print(f"{p}: {err}")
  print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
