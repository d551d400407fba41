"""Equinox workloads: models are pytrees, steps are eqx.filter_jit'ed."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pjrt.tools.workloads.registry import workload


def _train(make_model, make_data, lr):
  import equinox as eqx  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  tx = optax.adam(lr)

  @eqx.filter_jit
  def train_step(model, opt_state, x, y):
    def loss_fn(model):
      logits = jax.vmap(model)(x)
      return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = tx.update(grads, opt_state,
                                   eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss

  def init(seed):
    k1, k2 = jax.random.split(jax.random.key(seed))
    model = make_model(k1)
    opt_state = tx.init(eqx.filter(model, eqx.is_array))
    return (model, opt_state) + make_data(k2)

  def step(state):
    model, opt_state, x, y = state
    model, opt_state, loss = train_step(model, opt_state, x, y)
    return (model, opt_state, x, y), {"loss": loss}

  return init, step


@workload("equinox")
def eqx_mlp_train():
  """eqx.nn.MLP (32-[64,64]-10) classifier train step, optax.adam."""
  import equinox as eqx  # pylint: disable=g-import-not-at-top

  def make_data(key):
    k1, k2 = jax.random.split(key)
    return (jax.random.normal(k1, (64, 32)),
            jax.random.randint(k2, (64,), 0, 10))

  return _train(lambda k: eqx.nn.MLP(32, 10, 64, 2, key=k), make_data, 1e-3)


@workload("equinox")
def eqx_cnn_train():
  """Equinox CNN (Conv2d, MaxPool2d, Linear on 1x16x16 images) train step,
  optax.adam."""
  import equinox as eqx  # pylint: disable=g-import-not-at-top

  class CNN(eqx.Module):
    layers: list

    def __init__(self, key):
      k1, k2, k3 = jax.random.split(key, 3)
      self.layers = [
          eqx.nn.Conv2d(1, 8, kernel_size=3, padding=1, key=k1), jax.nn.relu,
          eqx.nn.MaxPool2d(kernel_size=2, stride=2),
          eqx.nn.Conv2d(8, 16, kernel_size=3, padding=1, key=k2), jax.nn.relu,
          eqx.nn.MaxPool2d(kernel_size=2, stride=2), jnp.ravel,
          eqx.nn.Linear(16 * 4 * 4, 10, key=k3),
      ]

    def __call__(self, x):
      for layer in self.layers:
        x = layer(x)
      return x

  def make_data(key):
    k1, k2 = jax.random.split(key)
    return (jax.random.normal(k1, (32, 1, 16, 16)),
            jax.random.randint(k2, (32,), 0, 10))

  return _train(CNN, make_data, 1e-3)
