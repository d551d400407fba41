"""`python -m pjrt.tools.dispatch_bench`: per-call cost of a tiny op.

Times `x + 1` on an f32[4] (compiled once, run N times) along three paths:
  client   our Pythonic client (pjrt.Client) on a plugin: with the input
           already on the device, and with the host->device transfer and the
           read-back included; plus the same call through a reused ctypes
           args struct ("raw"), which is what the C API itself costs;
  jax      jax.jit on that plugin (registered with JAX under its name and
           selected with JAX_PLATFORMS, in a child process per plugin);
  jax-cpu  jax.jit on jaxlib's own CPU client (a child process).
and prints microseconds per call (the best of --repeats runs of N calls)
and ratios to jax-cpu. Timings are printed, never asserted.

Plugins: --plugin (repeatable; a .so path, module:attribute for a Python
plugin, or a name pjrt knows); by default the installed xla-cpu-pjrt and
our own plugin (pjrt._src.plugin), each reported as not available when it
cannot be loaded.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from pjrt._src import abi
from pjrt.tools import plugin_choice

PROGRAM = """
module @dispatch_bench {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %one = stablehlo.constant dense<1.0> : tensor<4xf32>
    %0 = stablehlo.add %x, %one : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

_CHILD_TIMEOUT_S = 300


def default_plugins() -> list[str]:
  plugins = []
  path = plugin_choice.xla_cpu_pjrt_path()
  if path:
    plugins.append(path)
  plugins.append(plugin_choice.OUR_PLUGIN)
  return plugins


def time_calls(fn: Callable[[], Any], iterations: int,
               repeats: int) -> float:
  """Best-of-`repeats` mean seconds per call of `fn` (after a warm-up)."""
  for _ in range(min(iterations, 100)):
    fn()
  best = float("inf")
  gc_was_enabled = gc.isenabled()
  gc.disable()
  try:
    for _ in range(repeats):
      start = time.perf_counter()
      for _ in range(iterations):
        fn()
      best = min(best, (time.perf_counter() - start) / iterations)
  finally:
    if gc_was_enabled:
      gc.enable()
  return best


# --------------------------------------------------------------------------
# (a) Our client.


def _raw_execute(client, exe, x) -> Callable[[], None]:
  """One Execute through a prebuilt args struct, awaiting and freeing the
  output: the C API's own per-call cost, with minimal Python around it."""
  plugin = client.plugin
  execute = plugin.function("LoadedExecutable_Execute")
  await_event = plugin.function("Event_Await")
  destroy_event = plugin.function("Event_Destroy")
  destroy_buffer = plugin.function("Buffer_Destroy")
  inner = (ctypes.c_void_p * 1)(x.handle)
  outer = (ctypes.c_void_p * 1)(ctypes.addressof(inner))
  outs = (ctypes.c_void_p * 1)()
  out_outer = (ctypes.c_void_p * 1)(ctypes.addressof(outs))
  events = (ctypes.c_void_p * 1)()
  args = abi.make_args(
      abi.PJRT_LoadedExecutable_Execute_Args, executable=exe.handle,
      options=abi.make_args(abi.PJRT_ExecuteOptions), argument_lists=outer,
      num_devices=1, num_args=1, output_lists=out_outer,
      device_complete_events=events)
  event_args = abi.make_args(abi.PJRT_Event_Await_Args)
  destroy_event_args = abi.make_args(abi.PJRT_Event_Destroy_Args)
  destroy_args = abi.make_args(abi.PJRT_Buffer_Destroy_Args)
  args_p = ctypes.byref(args)
  event_p, destroy_event_p = (ctypes.byref(event_args),
                              ctypes.byref(destroy_event_args))
  destroy_p = ctypes.byref(destroy_args)

  def call():
    error = execute(args_p)
    if error:
      raise plugin.take_error(error)
    if events[0]:
      event_args.event = destroy_event_args.event = events[0]
      error = await_event(event_p)
      if error:
        raise plugin.take_error(error)
      destroy_event(destroy_event_p)
    destroy_args.buffer = outs[0]
    destroy_buffer(destroy_p)

  # The C arrays must live as long as `call` does.
  call.keep = (inner, outer, outs, out_outer, events, args, event_args,
               destroy_event_args, destroy_args)
  return call


def bench_client(choice: str, iterations: int, repeats: int) -> dict:
  """{"resident", "transfer", "raw"} seconds per call through pjrt.Client."""
  # pylint: disable-next=g-import-not-at-top
  import pjrt
  plugin = plugin_choice.load(choice)
  result: dict[str, Any] = {}
  with pjrt.Client(plugin) as client:
    result["platform"] = client.platform_name
    exe = client.compile(PROGRAM)
    host = np.arange(4, dtype=np.float32)
    x = client.buffer_from_numpy(host)
    (check,) = exe.execute([x])
    got = check.to_numpy()
    if not np.array_equal(got, host + 1):
      raise AssertionError(f"x + 1 gave {got} on {choice}")
    check.close()

    def resident():
      (y,) = exe.execute([x])
      y.close()

    def transfer():
      xb = client.buffer_from_numpy(host)
      (y,) = exe.execute([xb])
      y.to_numpy()
      y.close()
      xb.close()

    result["resident"] = time_calls(resident, iterations, repeats)
    result["transfer"] = time_calls(transfer, iterations, repeats)
    result["raw"] = time_calls(_raw_execute(client, exe, x), iterations,
                               repeats)
    x.close()
    exe.close()
  return result


# --------------------------------------------------------------------------
# (b), (c) JAX, in a child process per platform.

_CAPSULE_NAME = b"pjrt_c_api"


def _capsule(address: int) -> Any:
  new = ctypes.pythonapi.PyCapsule_New
  new.restype = ctypes.py_object
  new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
  return new(address, _CAPSULE_NAME, None)


def _jax_child(platform: str, choice: str | None, iterations: int,
               repeats: int) -> dict:
  """Runs in the child: registers `choice` as `platform` (unless it is
  jaxlib's own "cpu"), times jax.jit(x + 1)."""
  os.environ["JAX_PLATFORMS"] = platform
  # pylint: disable=g-import-not-at-top
  from jax._src import xla_bridge
  if choice is not None:
    if plugin_choice.is_path(choice):
      xla_bridge.register_plugin(platform, library_path=choice)
    else:
      plugin = plugin_choice.load(choice)
      _jax_child.plugin = plugin  # Keep it alive with the process.
      xla_bridge.register_plugin(platform, c_api=_capsule(plugin.api_address))
  import jax
  devices = jax.devices()
  f = jax.jit(lambda v: v + 1)
  host = np.arange(4, dtype=np.float32)
  x = jax.device_put(host, devices[0])
  got = np.asarray(f(x))
  if not np.array_equal(got, host + 1):
    raise AssertionError(f"x + 1 gave {got} on {platform}")

  def resident():
    f(x).block_until_ready()

  def transfer():
    np.asarray(f(host))

  return {"platform": devices[0].platform,
          "resident": time_calls(resident, iterations, repeats),
          "transfer": time_calls(transfer, iterations, repeats)}


def bench_jax(platform: str, choice: str | None, iterations: int,
              repeats: int) -> dict:
  """Times JAX in a child process; {"error": ...} when it fails."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  request = json.dumps({"platform": platform, "choice": choice,
                        "iterations": iterations, "repeats": repeats})
  try:
    proc = subprocess.run(
        [sys.executable, "-m", "pjrt.tools.dispatch_bench", "--_jax-child",
         request], env=env, capture_output=True, text=True,
        timeout=_CHILD_TIMEOUT_S, check=False)
  except subprocess.TimeoutExpired:
    return {"error": f"no result within {_CHILD_TIMEOUT_S} s"}
  for line in reversed(proc.stdout.splitlines()):
    if line.startswith("{"):
      return json.loads(line)
  lines = proc.stderr.strip().splitlines() or ["(no output)"]
  # The exception line of a traceback says more than JAX's footer.
  raised = [l for l in lines if not l.startswith(" ") and
            ("Error" in l.split(":", 1)[0] or "Exception" in l)]
  return {"error": f"exit status {proc.returncode}: "
                   f"{(raised or lines)[-1].strip()}"}


def _jax_platform_name(choice: str) -> str:
  """The name the plugin gets in JAX (JAX_PLATFORMS)."""
  name = plugin_choice.short_name(choice)
  return "".join(c if c.isalnum() else "_" for c in name).lower() or "plugin"


# --------------------------------------------------------------------------
# Report.


def run(plugins: Sequence[str], iterations: int, repeats: int, *,
        with_jax: bool = True) -> list[dict]:
  """One row per path: {"path", "plugin", "resident", "transfer", ...}."""
  rows = []
  for choice in plugins:
    name = plugin_choice.short_name(choice)
    try:
      client = bench_client(choice, iterations, repeats)
    except Exception as e:  # pylint: disable=broad-except
      rows.append({"path": "client", "plugin": name,
                   "error": f"{type(e).__name__}: {e}"})
      continue
    rows.append({"path": "client (raw ctypes)", "plugin": name,
                 "resident": client["raw"]})
    rows.append({"path": "client", "plugin": name,
                 "resident": client["resident"],
                 "transfer": client["transfer"]})
    if with_jax:
      row = bench_jax(_jax_platform_name(choice), choice, iterations,
                      repeats)
      rows.append({"path": "jax", "plugin": name, **row})
  if with_jax:
    rows.append({"path": "jax", "plugin": "cpu (jaxlib's own)",
                 **bench_jax("cpu", None, iterations, repeats)})
  return rows


def format_rows(rows: Sequence[dict], iterations: int, repeats: int) -> str:
  lines = [f"f32[4] x + 1: best of {repeats} x {iterations} calls, "
           "microseconds per call",
           f"{'path':22} {'plugin':22} {'resident':>10} {'transfer':>10}"]
  base = next((r for r in rows if r.get("plugin", "").startswith("cpu (")
               and "resident" in r), None)
  for r in rows:
    if "error" in r:
      lines.append(f"{r['path']:22} {r['plugin']:22} not available: "
                   f"{r['error'][:200]}")
      continue
    cells = [f"{1e6 * r[k]:10.1f}" if k in r else f"{'-':>10}"
             for k in ("resident", "transfer")]
    lines.append(f"{r['path']:22} {r['plugin']:22} {' '.join(cells)}")
  if base is not None:
    lines.append("ratio to jax on jaxlib's cpu (resident / transfer):")
    for r in rows:
      if "error" in r or r is base:
        continue
      ratios = [f"{r[k] / base[k]:.1f}x" if k in r and k in base else "-"
                for k in ("resident", "transfer")]
      lines.append(f"  {r['path']:20} {r['plugin']:22} {ratios[0]:>8} "
                   f"{ratios[1]:>8}")
  return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="python -m pjrt.tools.dispatch_bench",
      description=__doc__.split("\n\n", 1)[1],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      allow_abbrev=False)
  parser.add_argument("--plugin", action="append", default=[],
                      metavar="PLUGIN", help="a .so path, module:attribute "
                      "or a name pjrt knows; repeatable (default: "
                      "xla-cpu-pjrt if installed, and ours)")
  parser.add_argument("-n", "--iterations", type=int, default=1000,
                      help="calls per timed run (default 1000)")
  parser.add_argument("--repeats", type=int, default=5,
                      help="timed runs; the best counts (default 5)")
  parser.add_argument("--no-jax", action="store_true",
                      help="time only our client")
  parser.add_argument("--json", action="store_true",
                      help="print the rows as JSON")
  parser.add_argument("--_jax-child", dest="jax_child",
                      help=argparse.SUPPRESS)
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  args = _parser().parse_args(argv)
  if args.jax_child:
    request = json.loads(args.jax_child)
    print(json.dumps(_jax_child(request["platform"], request["choice"],
                                request["iterations"], request["repeats"])))
    return 0
  if args.iterations < 1 or args.repeats < 1:
    print("error: --iterations and --repeats must be positive",
          file=sys.stderr)
    return 2
  plugins = [plugin_choice.absolute(p) for p in args.plugin] or (
      default_plugins())
  rows = run(plugins, args.iterations, args.repeats,
             with_jax=not args.no_jax)
  if args.json:
    print(json.dumps(rows, indent=1))
  else:
    print(format_rows(rows, args.iterations, args.repeats))
  return 0


if __name__ == "__main__":
  sys.exit(main())
