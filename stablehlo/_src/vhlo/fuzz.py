"""Mutation fuzzing of `deserialize_portable_artifact`.

    python -m stablehlo._src.vhlo.fuzz --cases 100000 --seed 1

Seeds are the corpus's `.bc` artifacts (written by StableHLO / jaxlib) and a
few artifacts our serializer writes. Each case mutates one seed (bit flips,
byte overwrites, truncation, a huge varint spliced in, a duplicated or
dropped section, a duplicated byte range) and deserializes it. A case
passes when the deserializer returns a module or raises a `support` error
other than `InternalError` (which `portable._guard` uses to wrap unexpected
exceptions, i.e. crashes) within the time limit. Everything else - other
exceptions, InternalError, timeouts, MemoryError - is a failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import resource
import signal
import sys
import time

import support
from stablehlo._src.bytecode import encoding
from stablehlo._src.vhlo import portable
from support import env

# Small programs serialized by our own writer as extra seeds.
_PROGRAMS = (
    "func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {\n"
    "  %0 = stablehlo.add %a, %b : tensor<2xf32>\n"
    "  %1 = stablehlo.exponential %0 : tensor<2xf32>\n"
    "  return %1 : tensor<2xf32>\n}",
    "func.func @main(%a: tensor<4xi32>) -> tensor<i32> {\n"
    "  %c = stablehlo.constant dense<0> : tensor<i32>\n"
    "  %0 = stablehlo.reduce(%a init: %c) across dimensions = [0] : "
    "(tensor<4xi32>, tensor<i32>) -> tensor<i32>\n"
    "    reducer(%x: tensor<i32>, %y: tensor<i32>) {\n"
    "      %s = stablehlo.add %x, %y : tensor<i32>\n"
    "      stablehlo.return %s : tensor<i32>\n"
    "    }\n"
    "  return %0 : tensor<i32>\n}",
)

_HUGE_VARINTS = (b"\x00\xff\xff\xff\xff\xff\xff\xff\xff",  # 2**64 - 1
                 b"\xfe\xff\xff\xff\x0f",  # 2**31 - 1 (prefix varint)
                 b"\x00\x00\x00\x00\x00\x00\x00\x00\x80",
                 b"\xff")


class _Timeout(BaseException):
  pass


@dataclasses.dataclass
class Failure:
  case: int
  seed_name: str
  mutation: str
  error: str
  data: bytes = dataclasses.field(repr=False, default=b"")


@dataclasses.dataclass
class Report:
  cases: int = 0
  ok: int = 0
  rejected: int = 0
  failures: list = dataclasses.field(default_factory=list)
  seconds: float = 0.0
  slowest: float = 0.0


def seeds(max_size: int | None = None) -> list:
  """(name, bytes) of the seed artifacts."""
  out = []
  root = env.stablehlo_corpus("vhlo")
  if root is not None:
    for path in sorted(root.glob("*.bc")):
      data = path.read_bytes()
      if max_size is None or len(data) <= max_size:
        out.append((path.name, data))
  from stablehlo._src import text  # pylint: disable=g-import-not-at-top
  for i, src in enumerate(_PROGRAMS):
    module = text.parse_module(src)
    for target in ("1.0.0", "current"):
      out.append((f"program{i}@{target}",
                  portable.serialize_portable_artifact(module, target)))
  return out


def _sections(data: bytes) -> list:
  """(start, end) of each top-level section, [] if the header is bad."""
  try:
    r = encoding.Reader(data)
    r.bytes(4, "magic")
    r.varint("version")
    r.nul_string("producer")
    spans = []
    while not r.at_end():
      start = r.pos
      _, body = r.section()
      spans.append((start, body.end))
      r.pos = body.end
    return spans
  except support.XlaError:
    return []


def mutate(data: bytes, rng: random.Random) -> tuple:
  """(mutated bytes, description)."""
  data = bytearray(data)
  kind = rng.choice(("flip", "flip", "byte", "truncate", "varint",
                     "dup_section", "drop_section", "dup_range", "multi"))
  if kind == "multi":
    descs = []
    for _ in range(rng.randint(2, 6)):
      data, d = mutate(bytes(data), rng)
      data = bytearray(data)
      descs.append(d)
    return bytes(data), "+".join(descs)
  n = len(data)
  if n == 0:
    return b"", "empty"
  if kind == "flip":
    i = rng.randrange(n)
    data[i] ^= 1 << rng.randrange(8)
    return bytes(data), f"flip@{i}"
  if kind == "byte":
    i = rng.randrange(n)
    data[i] = rng.choice((0, 0x7f, 0x80, 0xff, rng.randrange(256)))
    return bytes(data), f"byte@{i}"
  if kind == "truncate":
    i = rng.randrange(n)
    return bytes(data[:i]), f"truncate@{i}"
  if kind == "varint":
    i = rng.randrange(n)
    v = rng.choice(_HUGE_VARINTS)
    replace = rng.randint(0, 2)
    data[i:i + replace] = v
    return bytes(data), f"varint@{i}"
  spans = _sections(bytes(data))
  if kind in ("dup_section", "drop_section") and spans:
    s, e = rng.choice(spans)
    if kind == "dup_section":
      data[e:e] = data[s:e]
      return bytes(data), f"dup_section@{s}"
    del data[s:e]
    return bytes(data), f"drop_section@{s}"
  s = rng.randrange(n)
  e = min(n, s + rng.randint(1, 64))
  at = rng.randrange(n)
  data[at:at] = data[s:e]
  return bytes(data), f"dup_range@{s}:{e}->{at}"


def _on_alarm(signum, frame):
  raise _Timeout()


def run_case(data: bytes, time_limit: float) -> tuple:
  """('ok' | 'rejected' | 'failure', error text)."""
  use_alarm = time_limit > 0 and hasattr(signal, "setitimer")
  if use_alarm:
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit)
  try:
    portable.deserialize_portable_artifact(data)
    return "ok", ""
  except _Timeout:
    return "failure", f"timeout after {time_limit}s"
  except support.InternalError as e:
    return "failure", f"InternalError: {e}"
  except support.XlaError:
    return "rejected", ""
  except Exception as e:  # pylint: disable=broad-except
    return "failure", f"{type(e).__name__}: {e}"
  finally:
    if use_alarm:
      signal.setitimer(signal.ITIMER_REAL, 0)
      signal.signal(signal.SIGALRM, old)


def fuzz(cases: int, seed: int, seed_files=None, time_limit: float = 5.0,
         progress=None) -> Report:
  """Runs `cases` mutations; the same seed gives the same cases."""
  seed_files = seed_files if seed_files is not None else seeds()
  rng = random.Random(seed)
  report = Report()
  start = time.monotonic()
  for case in range(cases):
    name, base = seed_files[rng.randrange(len(seed_files))]
    data, desc = mutate(base, rng)
    t0 = time.monotonic()
    status, error = run_case(data, time_limit)
    report.slowest = max(report.slowest, time.monotonic() - t0)
    report.cases += 1
    if status == "ok":
      report.ok += 1
    elif status == "rejected":
      report.rejected += 1
    else:
      report.failures.append(Failure(case, name, desc, error, data))
    if progress and (case + 1) % progress == 0:
      print(f"  {case + 1} cases, {len(report.failures)} failures, "
            f"{time.monotonic() - start:.0f}s", file=sys.stderr, flush=True)
  report.seconds = time.monotonic() - start
  return report


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--cases", type=int, default=10000)
  p.add_argument("--seed", type=int, default=1)
  p.add_argument("--time-limit", type=float, default=5.0,
                 help="seconds per case before it counts as a hang")
  p.add_argument("--memory-limit-mb", type=int, default=4096,
                 help="address-space limit of this process (0: none)")
  p.add_argument("--max-seed-size", type=int, default=None)
  p.add_argument("--save-failures", default=None,
                 help="folder to write failing inputs to")
  args = p.parse_args(argv)
  if args.memory_limit_mb:
    limit = args.memory_limit_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
  seed_files = seeds(args.max_seed_size)
  print(f"{len(seed_files)} seeds, {args.cases} cases, seed {args.seed}")
  report = fuzz(args.cases, args.seed, seed_files, args.time_limit,
                progress=max(1, args.cases // 20))
  print(f"cases {report.cases}: ok {report.ok}, rejected {report.rejected}, "
        f"failures {len(report.failures)}; {report.seconds:.1f}s "
        f"({report.cases / max(report.seconds, 1e-9):.0f} cases/s), "
        f"slowest case {report.slowest:.2f}s")
  kinds = {}
  for f in report.failures:
    kinds.setdefault(f.error[:160], []).append(f)
  for error, fs in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
    print(f"  {len(fs)}x {error}  (e.g. case {fs[0].case}, "
          f"{fs[0].seed_name}, {fs[0].mutation})")
  if args.save_failures:
    import pathlib  # pylint: disable=g-import-not-at-top
    out = pathlib.Path(args.save_failures)
    out.mkdir(parents=True, exist_ok=True)
    for f in report.failures:
      (out / f"case{f.case}.bc").write_bytes(f.data)
  return 1 if report.failures else 0


if __name__ == "__main__":
  sys.exit(main())
