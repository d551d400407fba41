"""Programs lowered by JAX with GSPMD shardings, for the SPMD tests.

`programs()` runs this module in a subprocess with four host CPU devices
and `jax_use_shardy_partitioner` off, and returns, per program name:

  "text":     the global HLO (`jit(...).lower(...).as_text(dialect="hlo")`),
              with `sharding=` on parameters, results and constraints;
  "args":     the arguments (nested lists) and their dtypes;
  "expected": JAX's own results of the program on those arguments (XLA's
              partitioned run), an oracle independent of our evaluator;
  "compiled": XLA's partitioned program (`compile().as_text()`), for
              comparing collectives.

The subprocess keeps the device-count flag and the partitioner choice out
of the calling process (jax reads both once, at backend start).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

NUM_DEVICES = 4


def _build(add) -> None:
  """Calls `add(name, jitted_fn, *args)` for every program."""
  # pylint: disable=g-import-not-at-top
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.sharding import Mesh
  from jax.sharding import NamedSharding
  from jax.sharding import PartitionSpec as P
  # pylint: enable=g-import-not-at-top

  devices = np.array(jax.devices()[:NUM_DEVICES])
  mesh = Mesh(devices.reshape(2, 2), ("x", "y"))
  mesh4 = Mesh(devices, ("i",))

  def ns(*spec, m=mesh):
    return NamedSharding(m, P(*spec))

  rng = np.random.default_rng(0)

  def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)

  a84, b46 = normal(8, 4), normal(4, 6)
  add("matmul", jax.jit(lambda a, b: jnp.sin(a) @ b + 1.0,
                        in_shardings=(ns("x", "y"), ns("y", None)),
                        out_shardings=ns("x", None)), a84, b46)
  add("sum_axis1", jax.jit(lambda a: jnp.sum(a * 2.0, axis=1),
                           in_shardings=ns("x", "y"),
                           out_shardings=ns("x")), a84)
  add("constraint", jax.jit(
      lambda a: jnp.exp(jax.lax.with_sharding_constraint(
          a * 3.0, ns(None, "x"))) - 1.0,
      in_shardings=ns("x", "y"), out_shardings=ns("y", None)), a84)

  x8x6, w1, w2 = normal(8, 6), normal(6, 12), normal(12, 4)
  add("mlp", jax.jit(
      lambda x, w1, w2: jax.nn.relu(x @ w1) @ w2,
      in_shardings=(ns("x", None), ns(None, "y"), ns("y", None)),
      out_shardings=ns("x", None)), x8x6, w1, w2)

  def softmax(a):
    return jax.nn.softmax(a, axis=-1)

  add("softmax", jax.jit(softmax, in_shardings=ns(None, ("x", "y")),
                         out_shardings=ns(None, ("x", "y"))), normal(3, 8))
  add("argmax", jax.jit(lambda a: jnp.argmax(a, axis=1),
                        in_shardings=ns("x", "y"), out_shardings=ns()),
      normal(4, 8))
  add("transpose_reshape", jax.jit(
      lambda a: (a.T * 2.0).reshape(2, 2, 8),
      in_shardings=ns("x", "y"), out_shardings=ns("y", None, "x")), a84)
  add("slices_concat", jax.jit(
      lambda a: jnp.concatenate([a[:, :2] * 2.0, a[:, 2:] - 1.0], axis=1)[1:],
      in_shardings=ns("x", "y"), out_shardings=ns(None, "y")), a84)
  add("iota_broadcast", jax.jit(
      lambda a: a + jnp.arange(4, dtype=jnp.float32)[None, :],
      in_shardings=ns(("x", "y")), out_shardings=ns(("x", "y"))), a84)
  # JAX wants even shardings at the boundary; a constraint inside may be
  # uneven (6 rows on 4 devices).
  add("uneven", jax.jit(
      lambda a: jnp.sum(jnp.tanh(jax.lax.with_sharding_constraint(
          a[:6] * 2.0, ns(("x", "y"), None))), axis=0),
      in_shardings=ns(("x", "y")), out_shardings=ns()), normal(8, 5))

  def loop(a):
    def body(i, c):
      return c * 0.5 + jnp.sum(c, axis=0, keepdims=True) * 0.1
    return jax.lax.fori_loop(0, 3, body, a)

  add("fori_loop", jax.jit(loop, in_shardings=ns("x", "y"),
                           out_shardings=ns("x", "y")), a84)

  def shard_psum(a):
    return jax.shard_map(lambda x: jax.lax.psum(x, "x") * 2.0, mesh=mesh,
                         in_specs=P("x", "y"), out_specs=P(None, "y"))(a)

  add("shard_map_psum", jax.jit(shard_psum), a84)

  def shard_mixed(a, b):
    c = jax.shard_map(lambda x, y: x @ y, mesh=mesh4,
                      in_specs=(P("i", None), P(None, None)),
                      out_specs=P("i", None))(a, b)
    return jnp.sum(c, axis=0)

  add("shard_map_then_reduce", jax.jit(shard_mixed), a84, b46)


def _generate() -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  jax.config.update("jax_use_shardy_partitioner", False)
  out = {}

  def add(name, fn, *args):
    lowered = fn.lower(*args)
    expected = fn(*args)
    leaves = jax.tree_util.tree_leaves(expected)
    out[name] = {
        "text": lowered.as_text(dialect="hlo"),
        "args": [np.asarray(a).tolist() for a in args],
        "dtypes": [str(np.asarray(a).dtype) for a in args],
        "expected": [np.asarray(e).tolist() for e in leaves],
        "expected_dtypes": [str(np.asarray(e).dtype) for e in leaves],
        "compiled": lowered.compile().as_text(),
    }

  _build(add)
  return out


@functools.lru_cache(maxsize=None)
def programs() -> dict:
  """name -> {"text", "args", "dtypes", "expected", ...}; see the module
  docstring. Raises RuntimeError if the subprocess fails."""
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                      f" --xla_force_host_platform_device_count={NUM_DEVICES}")
  env["JAX_PLATFORMS"] = "cpu"
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))))
  proc = subprocess.run([sys.executable, "-m", __name__], env=env,
                        capture_output=True, text=True, check=False,
                        cwd=root)
  if proc.returncode != 0:
    raise RuntimeError(f"generating the JAX programs failed:\n{proc.stderr}")
  return json.loads(proc.stdout)


if __name__ == "__main__":
  json.dump(_generate(), sys.stdout)
