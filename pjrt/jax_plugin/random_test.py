"""jax.random on openxla_cpu against JAX's own CPU backend, in a child
interpreter that finds the plugin through its "jax_plugins" entry point (as
jax_plugin_test does).

On openxla_cpu the plugin lowers the threefry2x32 hash with JAX's "cpu"
lowering, a rolled loop over the rounds (lowerings.FROM_CPU); the
platform-less lowering unrolls all rounds into straight-line code, which
our compiler must also handle. Both are checked: the hash's StableHLO has a
`stablehlo.while` only in the rolled form, and normal, uniform,
categorical, permutation, gamma and bernoulli give JAX CPU's values.

Integer and boolean results (raw bits, categorical, permutation, bernoulli)
must match exactly. Float results may differ by a few units of float32
spacing at max(|x|, 1): XLA's CPU compiler contracts a * b + c into a fused
multiply-add (uniform's scale-and-shift, the polynomial steps of erfinv and
log), ours rounds both steps.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pjrt.jax_plugin import testing

jax = pytest.importorskip("jax")

_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    if sys.argv[1] == "unrolled":
      from pjrt.jax_plugin import lowerings
      lowerings.FROM_CPU = tuple(n for n in lowerings.FROM_CPU
                                 if n != "threefry2x32")
    ours, ref = jax.devices("openxla_cpu")[0], jax.devices("cpu")[0]

    def spacings(got, want):
      g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
      unit = np.spacing(np.maximum(np.abs(w), 1.0).astype(np.float32))
      return float(np.max(np.abs(g - w) / unit)) if g.size else 0.0

    def f(k):
      ks = jax.random.split(k, 6)
      logits = jnp.linspace(-1.0, 1.0, 40).reshape(4, 10)
      alpha = jnp.array([0.3, 1.0, 2.5, 9.0])
      return {
          "bits": jax.random.bits(ks[0], (1000,)),
          "normal": jax.random.normal(ks[0], (1000,)),
          "uniform": jax.random.uniform(ks[1], (7, 13), minval=-2.0,
                                        maxval=3.0),
          "categorical": jax.random.categorical(ks[2], logits,
                                                shape=(25, 4)),
          "permutation": jax.random.permutation(ks[3], 257),
          "gamma": jax.random.gamma(ks[4], alpha, (50, 4)),
          "bernoulli": jax.random.bernoulli(ks[5], 0.3, (300,)),
      }

    data = np.array([0, 1234], np.uint32)
    g = lambda d: f(jax.random.wrap_key_data(d))
    bits = lambda d: jax.random.bits(jax.random.wrap_key_data(d), (8,))
    report = {"hash_while_ops": jax.jit(bits).trace(
        jax.device_put(data, ours)).lower().as_text().count(
            "stablehlo.while")}
    got = jax.jit(g)(jax.device_put(data, ours))
    want = jax.jit(g)(jax.device_put(data, ref))
    for name in sorted(got):
      a, b = np.asarray(got[name]), np.asarray(want[name])
      entry = {"dtype": str(a.dtype), "ref_dtype": str(b.dtype),
               "shape": list(a.shape), "ref_shape": list(b.shape),
               "platforms": sorted(d.platform for d in got[name].devices())}
      if a.shape == b.shape:
        if a.dtype.kind == "f":
          entry["spacings"] = spacings(a, b)
          entry["finite"] = bool(np.all(np.isfinite(a)))
        else:
          entry["mismatches"] = int(np.sum(a != b))
      report[name] = entry
    print("REPORT " + json.dumps(report))
""")

_NAMES = ["bernoulli", "bits", "categorical", "gamma", "normal",
          "permutation", "uniform"]
# Units of float32 spacing at max(|x|, 1) (see the module docstring).
_FLOAT_TOL = 8.0


def _run_child(tmp_path, variant):
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([str(testing.plugin_site(tmp_path))] +
                                      [p for p in sys.path if p])
  env["JAX_PLATFORMS"] = "openxla_cpu,cpu"
  env.pop("OPENXLA_CPU_BACKEND", None)
  env.pop("OPENXLA_CPU_JAX_REGISTER", None)
  proc = subprocess.run([sys.executable, "-c", _CHILD, variant], env=env,
                        capture_output=True, text=True, timeout=900,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("REPORT ")][-1]
  return json.loads(line[len("REPORT "):])


def _check_values(report):
  assert sorted(k for k in report if k != "hash_while_ops") == _NAMES
  failures = []
  for name in _NAMES:
    r = report[name]
    if r["platforms"] != ["openxla_cpu"]:
      failures.append(f"{name}: ran on {r['platforms']}")
    if (r["dtype"], r["shape"]) != (r["ref_dtype"], r["ref_shape"]):
      failures.append(f"{name}: {r['dtype']}{r['shape']} vs JAX CPU "
                      f"{r['ref_dtype']}{r['ref_shape']}")
      continue
    if "spacings" in r:
      if not r["finite"] or r["spacings"] > _FLOAT_TOL:
        failures.append(f"{name}: {r['spacings']} spacings from JAX CPU "
                        f"(finite: {r['finite']})")
    elif r["mismatches"]:
      failures.append(f"{name}: {r['mismatches']} elements differ")
  assert not failures, "\n".join(failures)


def test_rolled_hash_matches_jax_cpu(tmp_path):
  report = _run_child(tmp_path, "rolled")
  assert report["hash_while_ops"] >= 1, report
  _check_values(report)


def test_unrolled_hash_matches_jax_cpu(tmp_path):
  # JAX's platform-less lowering: the hash is straight-line code (one
  # diamond-shaped chain of adds, shifts and xors per round), which compiles
  # into one fusion that must neither duplicate shared values nor emit them
  # once per use.
  report = _run_child(tmp_path, "unrolled")
  assert report["hash_while_ops"] == 0, report
  _check_values(report)
