"""optax workloads: a plain-JAX MLP classifier (32-128-128-10, batch 64)
trained with each optimizer; the step is one jitted update."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pjrt.tools.workloads.registry import workload

_SIZES = (32, 128, 128, 10)
_BATCH = 64


def _init_mlp(key):
  params = []
  for k, (n_in, n_out) in zip(jax.random.split(key, len(_SIZES) - 1),
                              zip(_SIZES[:-1], _SIZES[1:])):
    params.append({"w": jax.random.normal(k, (n_in, n_out)) / jnp.sqrt(n_in),
                   "b": jnp.zeros((n_out,))})
  return params


def _loss(params, x, labels):
  import optax  # pylint: disable=g-import-not-at-top
  h = x
  for layer in params[:-1]:
    h = jax.nn.gelu(h @ layer["w"] + layer["b"])
  logits = h @ params[-1]["w"] + params[-1]["b"]
  return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def _train(make_tx):
  """(init, step) training the MLP with the optax transformation made by
  make_tx(); outputs are the loss, the global gradient norm and the last
  layer's parameters."""
  import optax  # pylint: disable=g-import-not-at-top
  tx = make_tx()

  @jax.jit
  def train_step(params, opt_state, x, labels):
    loss, grads = jax.value_and_grad(_loss)(params, x, labels)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss, optax.global_norm(grads)

  def init(seed):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    params = _init_mlp(k1)
    x = jax.random.normal(k2, (_BATCH, _SIZES[0]))
    labels = jax.random.randint(k3, (_BATCH,), 0, _SIZES[-1])
    return params, tx.init(params), x, labels

  def step(state):
    params, opt_state, x, labels = state
    params, opt_state, loss, gnorm = train_step(params, opt_state, x, labels)
    return ((params, opt_state, x, labels),
            {"loss": loss, "grad_norm": gnorm, "last_layer": params[-1]})

  return init, step


@workload("optax")
def optax_adam_mlp():
  """MLP train step with optax.adam."""
  import optax  # pylint: disable=g-import-not-at-top
  return _train(lambda: optax.adam(1e-3))


@workload("optax")
def optax_adamw_mlp():
  """MLP train step with optax.adamw (weight decay 1e-2)."""
  import optax  # pylint: disable=g-import-not-at-top
  return _train(lambda: optax.adamw(1e-3, weight_decay=1e-2))


@workload("optax")
def optax_sgd_momentum_mlp():
  """MLP train step with optax.sgd, Nesterov momentum 0.9."""
  import optax  # pylint: disable=g-import-not-at-top
  return _train(lambda: optax.sgd(0.05, momentum=0.9, nesterov=True))


@workload("optax")
def optax_lamb_mlp():
  """MLP train step with optax.lamb."""
  import optax  # pylint: disable=g-import-not-at-top
  return _train(lambda: optax.lamb(1e-3))


@workload("optax")
def optax_clip_chain_mlp():
  """MLP train step with optax.chain(clip_by_global_norm(0.5),
  add_decayed_weights, scale_by_adam, scale)."""
  import optax  # pylint: disable=g-import-not-at-top
  return _train(lambda: optax.chain(
      optax.clip_by_global_norm(0.5), optax.add_decayed_weights(1e-4),
      optax.scale_by_adam(), optax.scale(-1e-3)))


@workload("optax")
def optax_warmup_cosine_mlp():
  """MLP train step with adamw under optax.warmup_cosine_decay_schedule
  (the step count lives in the optimizer state)."""
  import optax  # pylint: disable=g-import-not-at-top
  schedule = optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=3e-3, warmup_steps=5, decay_steps=50,
      end_value=1e-5)
  return _train(lambda: optax.chain(optax.clip_by_global_norm(1.0),
                                    optax.adamw(schedule)))
