"""Throughput of our portable-artifact (de)serializer vs jaxlib's.

    python -m stablehlo._src.vhlo.bench [--limit 200] [--repeat 3]

Over the corpus's `testdata/*.mlir` programs (a fixed sorted sample), each
is parsed once by both implementations (not timed); then serializing the
parsed module to an artifact at the current version, and deserializing
that artifact back to a module, are timed for each side. Files that either
side cannot parse or serialize are left out of both, so both sides time the
same set. Prints MB/s (of artifact bytes) and files/s and our/jaxlib ratio.
This is a measurement tool, not a test.
"""

from __future__ import annotations

import argparse
import sys
import time

from support import env


def _best(fn, repeat: int) -> float:
  best = float("inf")
  for _ in range(repeat):
    t0 = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t0)
  return best


def _load(limit: int):
  """[(name, our module, jaxlib module)] the two sides both handle."""
  from jaxlib.mlir.dialects import stablehlo as jstablehlo  # pylint: disable=g-import-not-at-top
  from stablehlo._src import text  # pylint: disable=g-import-not-at-top
  from stablehlo._src import vhlo  # pylint: disable=g-import-not-at-top
  from stablehlo._src.testing import jaxlib_oracle  # pylint: disable=g-import-not-at-top
  root = env.stablehlo_corpus("testdata")
  if root is None:
    raise SystemExit(env.missing_corpus_reason("testdata"))
  out, skipped = [], 0
  for path in sorted(root.glob("*.mlir"))[:limit]:
    src = path.read_text()
    theirs, err = jaxlib_oracle.parse(src)
    try:
      ours = text.parse_module(src)
      vhlo.serialize_portable_artifact(ours, "current")
      if err is not None:
        raise ValueError(err)
      jstablehlo.serialize_portable_artifact(
          theirs, jstablehlo.get_current_version())
    except Exception:  # pylint: disable=broad-except
      skipped += 1
      continue
    out.append((path.name, ours, theirs))
  return out, skipped


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--limit", type=int, default=200,
                 help="first N testdata files (sorted)")
  p.add_argument("--repeat", type=int, default=3,
                 help="passes per measurement; the best is kept")
  args = p.parse_args(argv)
  from jaxlib.mlir.dialects import stablehlo as jstablehlo  # pylint: disable=g-import-not-at-top
  from stablehlo._src import vhlo  # pylint: disable=g-import-not-at-top
  from stablehlo._src.testing import jaxlib_oracle  # pylint: disable=g-import-not-at-top

  files, skipped = _load(args.limit)
  if not files:
    print("no files both sides handle")
    return 1
  jtarget = jstablehlo.get_current_version()
  ctx = jaxlib_oracle.ir_context()
  our_blobs = [vhlo.serialize_portable_artifact(m, "current")
               for _, m, _ in files]
  their_blobs = [jstablehlo.serialize_portable_artifact(m, jtarget)
                 for _, _, m in files]

  def ours_ser():
    for _, m, _ in files:
      vhlo.serialize_portable_artifact(m, "current")

  def theirs_ser():
    for _, _, m in files:
      jstablehlo.serialize_portable_artifact(m, jtarget)

  def ours_de():
    for b in our_blobs:
      vhlo.deserialize_portable_artifact(b)

  def theirs_de():
    for b in their_blobs:
      jstablehlo.deserialize_portable_artifact(ctx, b)

  n = len(files)
  our_mb = sum(map(len, our_blobs)) / 1e6
  their_mb = sum(map(len, their_blobs)) / 1e6
  print(f"{n} files ({skipped} left out), artifacts: ours {our_mb:.3f} MB, "
        f"jaxlib {their_mb:.3f} MB; best of {args.repeat}")
  for what, a, b in (("serialize", ours_ser, theirs_ser),
                     ("deserialize", ours_de, theirs_de)):
    ta, tb = _best(a, args.repeat), _best(b, args.repeat)
    print(f"{what:12s} ours  : {n / ta:9.1f} files/s {our_mb / ta:8.3f} MB/s")
    print(f"{what:12s} jaxlib: {n / tb:9.1f} files/s {their_mb / tb:8.3f} "
          f"MB/s")
    print(f"{what:12s} ratio ours/jaxlib (files/s): {tb / ta:.4f} "
          f"(jaxlib {ta / tb:.1f}x faster)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
