"""One training step, sharded three ways, against the same step on one device.

    python -m pjrt.jax_plugin.training_steps [--json] [NAME...]

runs, on openxla_cpu with four devices (set here unless JAX_PLATFORMS is
given), each step below twice: sharded over the four devices, and as the
plain jitted step on device 0 alone. It prints one figure per step: the
loss both ways and the largest difference of any updated parameter (also
relative to the largest parameter magnitude), so that a reader sees the
sharded step is the one-device step.

  transformer_dp_tp  a tiny flax (linen) transformer language model, one
                     SGD step of next-token cross entropy; batch split
                     over mesh axis "x" (data parallel), attention heads
                     and the MLP's hidden units over "y" (tensor parallel)
                     on a 2x2 mesh: jit with NamedShardings, partitioned
                     by the plugin;
  pipeline_ppermute  a four-stage pipeline (one tanh layer per device),
                     micro-batches passed stage to stage with ppermute
                     inside shard_map (GPipe's schedule), its gradient
                     included;
  pmap_mlp           a data-parallel MLP under pmap: each device's
                     gradient of its batch shard, averaged with pmean.

Each differs from the one-device step only by the order of floating-point
sums (a split reduction adds partial sums), so the figures are small but
not always zero. pjrt/jax_plugin/training_steps_test.py runs this module
in a child interpreter and checks them against a tolerance.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

NUM_DEVICES = 4
STEPS = {}


def _step(name):
  def deco(fn):
    STEPS[name] = fn
    return fn
  return deco


def _rng(seed):
  import numpy as np  # pylint: disable=g-import-not-at-top
  return np.random.default_rng(seed)


@_step("transformer_dp_tp")
def transformer_dp_tp(jax, devices):
  """(sharded result, one-device result, devices the sharded one used) of
  one step; a result is (loss, params)."""
  # pylint: disable=g-import-not-at-top
  import flax.linen as nn
  import jax.numpy as jnp
  import numpy as np
  from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
  # pylint: enable=g-import-not-at-top
  vocab, seq, dim, heads, hidden, batch = 32, 8, 16, 2, 32, 8

  class Block(nn.Module):

    @nn.compact
    def __call__(self, x):
      mask = nn.make_causal_mask(jnp.ones(x.shape[:2], jnp.int32))
      h = nn.LayerNorm(name="ln1")(x)
      x = x + nn.MultiHeadDotProductAttention(
          num_heads=heads, name="attn")(h, h, mask=mask)
      h = nn.LayerNorm(name="ln2")(x)
      h = nn.Dense(hidden, name="up")(h)
      return x + nn.Dense(dim, name="down")(nn.gelu(h))

  class LM(nn.Module):

    @nn.compact
    def __call__(self, tokens):
      x = nn.Embed(vocab, dim, name="embed")(tokens)
      x = x + self.param("pos", nn.initializers.normal(0.02), (seq, dim))
      x = Block(name="block")(x)
      return nn.Dense(vocab, name="head")(nn.LayerNorm(name="ln_f")(x))

  model = LM()
  tokens = _rng(1).integers(0, vocab, (batch, seq + 1)).astype(np.int32)
  params = model.init(jax.random.key(0), tokens[:, :-1])["params"]
  params = jax.tree.map(np.asarray, params)

  def step(params, tokens):
    def loss_fn(params):
      logits = model.apply({"params": params}, tokens[:, :-1])
      logp = jax.nn.log_softmax(logits)
      picked = jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)
      return -jnp.mean(picked)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree.map(lambda p, g: p - 0.5 * g, params, grads)

  mesh = Mesh(np.array(devices).reshape(2, 2), ("x", "y"))

  def spec(path, leaf):
    """Tensor parallel: heads and hidden units split over "y"."""
    names = [getattr(k, "key", str(k)) for k in path]
    if "attn" in names:
      if names[-2] in ("query", "key", "value"):
        return P(None, "y", None) if leaf.ndim == 3 else P("y", None)
      if names[-2] == "out" and leaf.ndim == 3:
        return P("y", None, None)
    if "up" in names:
      return P(None, "y") if leaf.ndim == 2 else P("y")
    if "down" in names and leaf.ndim == 2:
      return P("y", None)
    return P()

  param_shardings = jax.tree_util.tree_map_with_path(
      lambda path, leaf: NamedSharding(mesh, spec(path, leaf)), params)
  sharded = jax.jit(
      step, in_shardings=(param_shardings, NamedSharding(mesh, P("x"))),
      out_shardings=(NamedSharding(mesh, P()), param_shardings))
  single = jax.jit(step)
  new = sharded(params, tokens)
  return new, single(params, tokens), spread(new)


@_step("pipeline_ppermute")
def pipeline_ppermute(jax, devices):
  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp
  import numpy as np
  from jax.sharding import Mesh, PartitionSpec as P
  # pylint: enable=g-import-not-at-top
  stages, micro, mb, dim = len(devices), 4, 2, 8
  rng = _rng(2)
  ws = (rng.standard_normal((stages, dim, dim)) / np.sqrt(dim)).astype(
      np.float32)
  bs = (0.1 * rng.standard_normal((stages, dim))).astype(np.float32)
  xs = rng.standard_normal((micro, mb, dim)).astype(np.float32)
  ys = rng.standard_normal((micro, mb, dim)).astype(np.float32)
  mesh = Mesh(np.array(devices), ("stage",))
  forward = [(i, i + 1) for i in range(stages - 1)]

  def stage_body(w, b, xs):
    """One device: its stage, over GPipe's schedule of micro-batches."""
    me = jax.lax.axis_index("stage")
    w, b = w[0], b[0]
    carry = jnp.zeros((mb, dim), jnp.float32)
    outs = jnp.zeros((micro, mb, dim), jnp.float32)
    for t in range(micro + stages - 1):
      fresh = xs[t] if t < micro else jnp.zeros((mb, dim), jnp.float32)
      out = jnp.tanh(jnp.where(me == 0, fresh, carry) @ w + b)
      done = t - (stages - 1)
      if done >= 0:
        outs = outs.at[done].set(jnp.where(me == stages - 1, out, 0.0))
      carry = jax.lax.ppermute(out, "stage", forward)
    return jax.lax.psum(outs, "stage")  # the last stage's outputs

  piped = jax.shard_map(stage_body, mesh=mesh,
                        in_specs=(P("stage"), P("stage"), P()),
                        out_specs=P())

  def sequential(ws, bs, xs):
    h = xs
    for s in range(stages):
      h = jnp.tanh(h @ ws[s] + bs[s])
    return h

  def step_of(apply):
    def step(ws, bs, xs, ys):
      def loss_fn(ws, bs):
        return jnp.mean((apply(ws, bs, xs) - ys) ** 2)
      loss, (gw, gb) = jax.value_and_grad(loss_fn, argnums=(0, 1))(ws, bs)
      return loss, (ws - 0.5 * gw, bs - 0.5 * gb)
    return step

  new = jax.jit(step_of(piped))(ws, bs, xs, ys)
  return new, jax.jit(step_of(sequential))(ws, bs, xs, ys), spread(new)


@_step("pmap_mlp")
def pmap_mlp(jax, devices):
  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp
  import numpy as np
  # pylint: enable=g-import-not-at-top
  n, per, dim, hidden = len(devices), 4, 6, 16
  rng = _rng(3)
  params = {
      "w1": (rng.standard_normal((dim, hidden)) / np.sqrt(dim)).astype(
          np.float32),
      "b1": np.zeros(hidden, np.float32),
      "w2": (rng.standard_normal((hidden, 2)) / np.sqrt(hidden)).astype(
          np.float32),
  }
  x = rng.standard_normal((n * per, dim)).astype(np.float32)
  y = rng.standard_normal((n * per, 2)).astype(np.float32)

  def loss_fn(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)

  def update(params, grads):
    return jax.tree.map(lambda p, g: p - 0.5 * g, params, grads)

  def device_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    grads = jax.lax.pmean(grads, "i")
    return jax.lax.pmean(loss, "i"), update(params, grads)

  def full_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return loss, update(params, grads)

  replicated = jax.tree.map(lambda p: np.stack([p] * n), params)
  loss, new = jax.pmap(device_step, axis_name="i", devices=devices)(
      replicated, x.reshape(n, per, dim), y.reshape(n, per, 2))
  # Every device holds the same step: compare device 0's, and check the
  # others equal it.
  for leaf in jax.tree.leaves(new):
    leaf = np.asarray(leaf)
    if not all(np.array_equal(leaf[0], leaf[k]) for k in range(n)):
      raise AssertionError("pmap devices disagree after pmean")
  first = (loss[0], jax.tree.map(lambda p: p[0], new))
  return first, jax.jit(full_step)(params, x, y), spread(new)


def spread(tree) -> int:
  """On how many devices the arrays of `tree` live."""
  import jax  # pylint: disable=g-import-not-at-top
  return len({d for x in jax.tree.leaves(tree) if hasattr(x, "devices")
              for d in x.devices()})


def compare(sharded, single, devices: int) -> dict:
  """The figure of one step: losses and the largest parameter
  differences; `devices`: how many the sharded step ran on."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  (loss_a, params_a), (loss_b, params_b) = sharded, single
  leaves_a, leaves_b = jax.tree.leaves(params_a), jax.tree.leaves(params_b)
  if len(leaves_a) != len(leaves_b):
    raise AssertionError("the two steps return different parameters")
  abs_diff, largest = 0.0, 0.0
  for a, b in zip(leaves_a, leaves_b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
      raise AssertionError(f"parameter shapes {a.shape} and {b.shape}")
    if a.size:
      abs_diff = max(abs_diff, float(np.max(np.abs(a - b))))
      largest = max(largest, float(np.max(np.abs(b))))
  return {"loss_sharded": float(loss_a), "loss_one_device": float(loss_b),
          "max_abs_param_diff": abs_diff,
          # Relative to the largest parameter magnitude.
          "max_rel_param_diff": abs_diff / max(largest, 1e-30),
          "parameters": int(sum(np.size(x) for x in leaves_b)),
          "devices": devices,
          # Updated parameters left split over devices (not replicated).
          "split_parameters": sum(
              1 for x in leaves_a if hasattr(x, "sharding") and
              not x.sharding.is_fully_replicated),
          "bitwise_equal": bool(
              float(loss_a) == float(loss_b) and
              all(np.array_equal(np.asarray(a), np.asarray(b))
                  for a, b in zip(leaves_a, leaves_b)))}


def run(names=()) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  devices = jax.devices()[:NUM_DEVICES]
  if len(devices) < NUM_DEVICES:
    raise RuntimeError(f"{NUM_DEVICES} devices needed, JAX has "
                       f"{len(jax.devices())}")
  report = {}
  for name, fn in STEPS.items():
    if names and name not in names:
      continue
    start = time.perf_counter()
    try:
      entry = compare(*fn(jax, devices))
    except Exception as e:  # pylint: disable=broad-except
      entry = {"error": f"{type(e).__name__}: {e}"}
    entry["seconds"] = time.perf_counter() - start
    entry["platform"] = devices[0].platform
    report[name] = entry
  return report


def format_report(report: dict) -> str:
  lines = [f"{'step':20s} {'loss, 4 dev':>13s} {'loss, 1 dev':>13s} "
           f"{'max |dparam|':>13s} {'relative':>10s}  bitwise  seconds"]
  for name, e in report.items():
    if "error" in e:
      lines.append(f"{name:20s} error: {e['error'].splitlines()[0]}")
      continue
    lines.append(
        f"{name:20s} {e['loss_sharded']:13.7f} {e['loss_one_device']:13.7f} "
        f"{e['max_abs_param_diff']:13.3g} {e['max_rel_param_diff']:10.3g}  "
        f"{'yes' if e['bitwise_equal'] else 'no':7s}  {e['seconds']:7.1f}")
  return "\n".join(lines)


def main(argv) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m pjrt.jax_plugin.training_steps",
      description="One training step sharded three ways (flax transformer "
      "dp x tp, shard_map pipeline with ppermute, pmap MLP) against the "
      "same step on one device.")
  ap.add_argument("names", nargs="*", help=f"steps: {', '.join(STEPS)}")
  ap.add_argument("--json", action="store_true",
                  help="print one line 'REPORT <json>' instead of the table")
  args = ap.parse_args(argv)
  if "JAX_PLATFORMS" not in os.environ:
    os.environ["JAX_PLATFORMS"] = "openxla_cpu"
    os.environ["OPENXLA_CPU_NUM_DEVICES"] = str(NUM_DEVICES)
  if "openxla_cpu" in os.environ["JAX_PLATFORMS"]:
    import pjrt.jax_plugin  # pylint: disable=g-import-not-at-top
    pjrt.jax_plugin.register()
  report = run(args.names)
  if args.json:
    print("REPORT " + json.dumps(report), flush=True)
  else:
    print(format_report(report))
  return 0 if all("error" not in e for e in report.values()) else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
