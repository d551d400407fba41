"""One workload on one platform, in its own process (started by the runner).

  python -m pjrt.tools.workloads.child --name N --platform P --steps K \
      --seed S --out DIR

The platform is chosen through JAX_PLATFORMS (set here before JAX is
imported); for our platform the plugin is registered explicitly, so the run
does not depend on the installed entry point. Writes DIR/result.json (the
phase timings, peak RSS, the backend JAX really used, and the first error if
any) and DIR/outputs.npz (the outputs of the first and of the last step).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import traceback

OUR_PLATFORM = "openxla_cpu"


def _first_line(exc: BaseException) -> str:
  text = str(exc).strip()
  for line in text.splitlines():
    if line.strip():
      return f"{type(exc).__name__}: {line.strip()}"
  return type(exc).__name__


def _peak_rss_mb() -> float:
  # Linux reports ru_maxrss in KiB.
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _block(tree) -> None:
  import jax  # pylint: disable=g-import-not-at-top
  leaves = [x for x in jax.tree_util.tree_leaves(tree)
            if isinstance(x, jax.Array)]
  jax.block_until_ready(leaves)


def _flatten_outputs(prefix: str, outputs) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  flat = {}
  leaves, _ = jax.tree_util.tree_flatten_with_path(outputs)
  for path, leaf in leaves:
    key = prefix + (jax.tree_util.keystr(path) or "")
    flat[key] = np.asarray(leaf)
  return flat


def run(name: str, platform: str, steps: int, seed: int, out: str) -> dict:
  """Runs the workload; returns (and writes) the result record."""
  os.makedirs(out, exist_ok=True)
  result = {"name": name, "platform": platform, "steps": steps,
            "error": None, "phase": None}
  outputs = {}
  phase = "setup"
  try:
    from pjrt.tools.workloads import registry  # pylint: disable=g-import-not-at-top
    wl = registry.get(name)
    import jax  # pylint: disable=g-import-not-at-top
    if wl.dtype == "f64":
      jax.config.update("jax_enable_x64", True)
    if platform == OUR_PLATFORM:
      from pjrt import jax_plugin  # pylint: disable=g-import-not-at-top
      jax_plugin.register()
    result["backend"] = jax.default_backend()
    phase = "build"
    init, step = wl.build()
    phase = "init"
    t0 = time.perf_counter()
    state = init(seed)
    _block(state)
    result["init_s"] = time.perf_counter() - t0
    phase = "first step"
    t0 = time.perf_counter()
    state, out_first = step(state)
    _block((state, out_first))
    result["first_s"] = time.perf_counter() - t0
    outputs.update(_flatten_outputs("first", out_first))
    phase = "steady steps"
    times = []
    out_last = out_first
    for _ in range(steps):
      t0 = time.perf_counter()
      state, out_last = step(state)
      _block((state, out_last))
      times.append(time.perf_counter() - t0)
    result["step_times_s"] = times
    if times:
      ordered = sorted(times)
      result["steady_median_s"] = ordered[len(ordered) // 2]
      result["steady_best_s"] = ordered[0]
      outputs.update(_flatten_outputs("last", out_last))
    phase = None
  except BaseException as e:  # pylint: disable=broad-except
    result["error"] = _first_line(e)
    result["traceback"] = traceback.format_exc()[-4000:]
  result["phase"] = phase
  result["peak_rss_mb"] = _peak_rss_mb()
  if outputs:
    import numpy as np  # pylint: disable=g-import-not-at-top
    np.savez(os.path.join(out, "outputs.npz"), **outputs)
  with open(os.path.join(out, "result.json"), "w") as f:
    json.dump(result, f, indent=1)
  return result


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--name", required=True)
  ap.add_argument("--platform", required=True)
  ap.add_argument("--steps", type=int, default=10)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--out", required=True)
  args = ap.parse_args(argv)
  os.environ["JAX_PLATFORMS"] = args.platform
  os.environ.setdefault("KERAS_BACKEND", "jax")
  result = run(args.name, args.platform, args.steps, args.seed, args.out)
  if result["error"]:
    print(result.get("traceback", result["error"]), file=sys.stderr)
  sys.stdout.flush()
  sys.stderr.flush()
  # Skip interpreter teardown (JAX / plugin atexit work is not measured and
  # cannot change the result already written).
  os._exit(0)


if __name__ == "__main__":
  main()
