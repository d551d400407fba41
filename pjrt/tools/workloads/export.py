"""jax.export round trips: export a jitted function, serialize it to bytes,
deserialize and call it (the step calls the deserialized function)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pjrt.tools.workloads.registry import workload


def _mlp(params, x):
  h = jnp.tanh(x @ params["w1"] + params["b1"])
  return jax.nn.log_softmax(h @ params["w2"] + params["b2"])


def _params(key):
  k1, k2 = jax.random.split(key)
  return {"w1": jax.random.normal(k1, (32, 64)) / 6.0, "b1": jnp.zeros(64),
          "w2": jax.random.normal(k2, (64, 10)) / 8.0, "b2": jnp.zeros(10)}


@workload("export")
def export_roundtrip_mlp():
  """jax.export.export of an MLP forward (static shapes), serialize,
  deserialize, call; outputs also compare with the direct jitted call."""
  from jax import export  # pylint: disable=g-import-not-at-top

  def init(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    params = _params(k1)
    x = jax.random.normal(k2, (16, 32))
    exp = export.export(jax.jit(_mlp))(params, x)
    restored = export.deserialize(exp.serialize())
    return restored, params, x

  def step(state):
    restored, params, x = state
    return state, {"exported": restored.call(params, x),
                   "direct": jax.jit(_mlp)(params, x)}

  return init, step


@workload("export")
def export_roundtrip_polymorphic_grad():
  """jax.export with a symbolic batch dimension ("b, 32") of a loss and its
  gradient, serialized, deserialized and called at two batch sizes."""
  from jax import export  # pylint: disable=g-import-not-at-top

  def loss(params, x, y):
    return -jnp.mean(jnp.take_along_axis(_mlp(params, x), y[:, None], 1))

  value_and_grad = jax.jit(jax.value_and_grad(loss))

  def init(seed):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    params = _params(k1)
    (b,) = export.symbolic_shape("b")
    exp = export.export(value_and_grad)(
        params, jax.ShapeDtypeStruct((b, 32), jnp.float32),
        jax.ShapeDtypeStruct((b,), jnp.int32))
    restored = export.deserialize(exp.serialize())
    x = jax.random.normal(k2, (24, 32))
    y = jax.random.randint(k3, (24,), 0, 10)
    return restored, params, x, y

  def step(state):
    restored, params, x, y = state
    return state, {"batch24": restored.call(params, x, y),
                   "batch8": restored.call(params, x[:8], y[:8])}

  return init, step
