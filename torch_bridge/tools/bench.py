"""Benchmark of the PyTorch bridge on its test models.

    python -m torch_bridge.tools.bench [--models mlp,cnn] [--mode train]

For each model: whether the bridge matches eager PyTorch (forward error, or
outputs / gradients / parameters over the training steps), how many
clusters ran through PJRT and how many nodes stayed eager, the compile time
(the first call, which includes Dynamo and AOTAutograd) and the steady-state
step time, against eager and against inductor (torch.compile's default
backend) in the same process. It prints ratios; it asserts nothing.

Compiles are cold for both compilers: each model's programs are compiled
by the bridge before its correctness check compiles them again, and
inductor's caches are off (as for a model it has not seen). Step times
are measured in rounds that alternate eager, the bridge and inductor, so
that a machine shared with other work slows all three alike: per round
the median of --steps steps; the table shows the best round, and each
variant's range over the rounds.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time
import warnings

import torch

import torch_bridge
from torch_bridge._src import runtime
from torch_bridge.testing import models


def _step_fn(model, mode: str):
  if mode == "inference":
    def step(*inputs):
      with torch.no_grad():
        return model(*inputs)
    return step
  opt = torch.optim.SGD(model.parameters(), lr=0.01)

  def train_step(*inputs):
    opt.zero_grad()
    out = model(*inputs)
    out.float().pow(2).mean().backward()
    opt.step()
    return out
  return train_step


def _first_call(step, inputs) -> float:
  """Seconds of the first call (the compile), then two warm-up calls."""
  start = time.perf_counter()
  step(*inputs)
  first = time.perf_counter() - start
  for _ in range(2):
    step(*inputs)
  return first


def _median(step, inputs, steps: int) -> float:
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    step(*inputs)
    times.append(time.perf_counter() - start)
  times.sort()
  return times[len(times) // 2]


def _alternate(variant_steps: dict, inputs, steps: int, repeats: int
               ) -> dict[str, list[float]]:
  """{variant: its median step time of each round}; every round times each
  variant once, in turn."""
  medians: dict[str, list[float]] = {name: [] for name in variant_steps}
  for _ in range(max(1, repeats)):
    for name, step in variant_steps.items():
      medians[name].append(_median(step, inputs, steps))
  return medians


def warm_up(options: dict, inductor: bool) -> None:
  """Compiles and runs a small function of its own through each backend,
  forward and backward, so that what a process does once (imports, the
  plugin's client, the compilers' own start-up) is not charged to the first
  model's compile time."""
  def f(x):
    return torch.tanh(x * 2.0 + 1.0).sum(-1)

  backends = [torch_bridge.Backend(options)]
  if inductor:
    backends.append("inductor")
  # torch._dynamo.reset() is torch's documented way to drop compiled
  # graphs; torch has no public alias of the module.
  for backend in backends:
    torch._dynamo.reset()  # pylint: disable=protected-access
    x = torch.randn(3, 5, requires_grad=True)
    torch.compile(f, backend=backend, dynamic=False)(x).sum().backward()
  torch._dynamo.reset()  # pylint: disable=protected-access
  runtime.clear_cache()


def bench_model(name: str, mode: str, steps: int, inductor: bool,
                options: dict, repeats: int = 1, dump: str | None = None
                ) -> dict:
  case = models.CASES[name]
  torch.manual_seed(0)
  base = case.make()
  inputs = case.inputs()
  train = mode == "train"
  row = {"model": name}

  def prepare(backend):
    """(the step of a fresh copy of the model, seconds of its first call)."""
    torch._dynamo.reset()  # pylint: disable=protected-access
    runtime.clear_cache()
    model = copy.deepcopy(base).train(train)
    if backend is not None:
      model = torch.compile(model, backend=backend, dynamic=False)
    step = _step_fn(model, mode)
    return step, _first_call(step, inputs)

  variants = {}
  variants["eager"], _ = prepare(None)
  variants["ours"], row["compile_s"] = prepare(
      torch_bridge.Backend(options))
  if inductor:
    from torch._inductor import config as inductor_config  # pylint: disable=g-import-not-at-top
    with inductor_config.patch(force_disable_caches=True):
      variants["inductor"], row["inductor_compile_s"] = prepare("inductor")
  medians = _alternate(variants, inputs, steps, repeats)
  for variant, times in medians.items():
    row[f"{variant}_s"] = min(times)
    row[f"{variant}_range"] = (min(times), max(times))

  torch._dynamo.reset()  # pylint: disable=protected-access
  check = torch_bridge.Backend(options)
  if train:
    cmp = models.compare_training(base, inputs, check, steps=3)
    row["match"] = (cmp.outputs <= 1e-4 and cmp.grads <= 1e-3 and
                    cmp.params <= 1e-4)
    row["error"] = max(cmp.outputs, cmp.params)
    row["grad_error"] = cmp.grads
  else:
    err = models.compare_inference(base, inputs, check)
    row["match"] = err <= 1e-4
    row["error"] = err
  row["clusters"] = sum(c.compiled for r in check.reports for c in r.clusters)
  row["eager_nodes"] = sum(len(r.eager) for r in check.reports)
  row["graphs"] = len(check.reports)
  if dump:
    os.makedirs(dump, exist_ok=True)
    for report in check.reports:
      for cluster in report.clusters:
        if cluster.program:
          path = os.path.join(
              dump, f"{name}_{mode}_{report.kind}_{cluster.name}.mlir")
          with open(path, "w") as f:
            f.write(cluster.program)
  return row


def _fmt_ms(seconds) -> str:
  return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def print_table(rows: list[dict], out=None) -> None:
  out = out or sys.stdout
  head = (f"{'model':<11} {'match':<5} {'error':>8} {'graphs':>6} "
          f"{'clusters':>8} {'eager':>5} {'compile s':>9} {'ind. s':>7} "
          f"{'eager ms':>9} {'ours ms':>8} {'ind. ms':>8} {'/eager':>7} "
          f"{'/ind.':>6}")
  print(head, file=out)
  ratios_e, ratios_i = [], []
  for r in rows:
    ind = r.get("inductor_s")
    ratio_e = r["ours_s"] / r["eager_s"]
    ratio_i = r["ours_s"] / ind if ind else None
    ratios_e.append(ratio_e)
    if ratio_i:
      ratios_i.append(ratio_i)
    print(f"{r['model']:<11} {str(r['match']):<5} {r['error']:>8.1e} "
          f"{r['graphs']:>6} {r['clusters']:>8} {r['eager_nodes']:>5} "
          f"{r['compile_s']:>9.2f} "
          f"{r.get('inductor_compile_s', float('nan')):>7.2f} "
          f"{_fmt_ms(r['eager_s']):>9} {_fmt_ms(r['ours_s']):>8} "
          f"{_fmt_ms(ind):>8} {ratio_e:>7.2f} "
          f"{'-' if ratio_i is None else f'{ratio_i:.2f}':>6}", file=out)

  def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None

  ge, gi = geomean(ratios_e), geomean(ratios_i)
  print(f"geomean ours/eager: {ge:.2f}" +
        (f", ours/inductor: {gi:.2f}" if gi else ""), file=out)
  ranged = [r for r in rows if r.get("ours_range")]
  if ranged and any(r["ours_range"][0] != r["ours_range"][1]
                    for r in ranged):
    print("step ms over the rounds (best - worst median): " + "; ".join(
        f"{r['model']} " + ", ".join(
            f"{v} {_fmt_ms(r[f'{v}_range'][0])}-{_fmt_ms(r[f'{v}_range'][1])}"
            for v in ("eager", "ours", "inductor") if f"{v}_range" in r)
        for r in ranged), file=out)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      prog="python -m torch_bridge.tools.bench",
      description=__doc__.split("\n\n")[0] + " Prints, per model: match, "
      "clusters, eager nodes, compile time and step time vs eager and "
      "inductor.")
  parser.add_argument("--models", default="mlp,cnn,lstm,unlowered,gpt2,bert",
                      help="comma-separated, from: " +
                      ", ".join(models.CASES))
  parser.add_argument("--mode", choices=("inference", "train", "both"),
                      default="both")
  parser.add_argument("--steps", type=int, default=20,
                      help="timed steps after the first (default 20)")
  parser.add_argument("--repeat", type=int, default=1,
                      help="time the steps this many times and keep the "
                      "best median (default 1)")
  parser.add_argument("--no-inductor", action="store_true",
                      help="skip the inductor comparison")
  parser.add_argument("--plugin", default=None,
                      help="PJRT plugin: a registered name, a library path "
                      "or module:attribute (default: our CPU plugin)")
  parser.add_argument("--min-cluster-size", type=int, default=4,
                      help="smallest cluster compiled, in compute nodes "
                      "(default 4)")
  parser.add_argument("--threads", type=int, default=0,
                      help="torch intra-op threads (default: torch's own)")
  parser.add_argument("--dump-programs", metavar="DIR", default=None,
                      help="write each cluster's StableHLO program to "
                      "DIR/<model>_<mode>_<graph>_<cluster>.mlir (for the "
                      "compiler's tools: python -m xla.tools.run_hlo_module "
                      "--threads 1 --iterations 20 FILE)")
  parser.add_argument("--plugin-threads", type=int, default=None,
                      help="threads per execution of a compiled cluster "
                      "(the bridge's intra_op_parallelism_threads; default: "
                      "torch's intra-op threads; 0: the plugin's default)")
  args = parser.parse_args(argv)
  if args.threads:
    torch.set_num_threads(args.threads)
  os.environ.setdefault("HF_HUB_OFFLINE", "1")
  warnings.simplefilter("ignore", torch_bridge.FallbackWarning)
  options = {"min_cluster_size": args.min_cluster_size}
  if args.plugin_threads is not None:
    options["intra_op_parallelism_threads"] = args.plugin_threads
  if args.plugin:
    options["plugin"] = args.plugin
  names = [n.strip() for n in args.models.split(",") if n.strip()]
  unknown = [n for n in names if n not in models.CASES]
  if unknown:
    parser.error(f"unknown model(s) {unknown}")
  modes = ["inference", "train"] if args.mode == "both" else [args.mode]
  warm_up(options, not args.no_inductor)
  for mode in modes:
    rows = []
    for name in names:
      needs = models.CASES[name].needs
      if needs:
        try:
          __import__(needs)
        except ImportError:
          print(f"{name}: skipped ({needs} is not installed)")
          continue
      rows.append(bench_model(name, mode, args.steps, not args.no_inductor,
                              options, args.repeat, args.dump_programs))
    plugin_threads = torch_bridge.Options.make(options).threads
    load = (" load %.2f %.2f %.2f," % os.getloadavg()
            if hasattr(os, "getloadavg") else "")
    print(f"\n== {mode} (torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, plugin "
          f"{plugin_threads or 'default'} threads,{load} step time: "
          + (f"best of {args.repeat} alternating rounds, median of "
             f"{args.steps} each" if args.repeat > 1
             else f"median of {args.steps}") + ")")
    print_table(rows)
  return 0


if __name__ == "__main__":
  sys.exit(main())
