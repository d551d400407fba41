"""Keras 3 workloads on the JAX backend (KERAS_BACKEND=jax): fit, evaluate
and predict of a small model on synthetic data (numpy, seeded).

Keras feeds batches differently by backend name. When
`jax.default_backend()` is "cpu" it passes each numpy batch straight to the
jitted step; on any other backend (ours is "openxla_cpu") it moves every
array of every batch with `jax.device_put`, one batch ahead, to overlap
transfers on an accelerator. That is JAX Python code, about 60-70 us per
array on either client, so these steps carry 8 batches x 2 arrays of it
(fit, evaluate; 8 x 1 for predict) that the JAX CPU run does not: about
2,300 more Python calls per fit step. The steady-step ratios of these
three workloads include that cost.

The `*_batch_ahead` workloads run the same models with keras's
one-batch-ahead feeding on both platforms (on "cpu" by replacing
`JAXEpochIterator._get_iterator` with a copy of keras's code without the
"cpu" case; on ours nothing changes), so that their ratios compare the two
stacks running the same Python."""

from __future__ import annotations

import os

import numpy as np

from pjrt.tools.workloads.registry import workload

_N, _FEATURES, _CLASSES, _BATCH = 256, 20, 5, 32


def _model_and_data(seed):
  os.environ.setdefault("KERAS_BACKEND", "jax")
  import keras  # pylint: disable=g-import-not-at-top
  if keras.backend.backend() != "jax":
    raise RuntimeError(f"keras backend is {keras.backend.backend()!r}, "
                       "not jax (set KERAS_BACKEND=jax)")
  keras.utils.set_random_seed(seed)
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((_N, _FEATURES)).astype(np.float32)
  w = rng.standard_normal((_FEATURES, _CLASSES)).astype(np.float32)
  y = np.argmax(x @ w, axis=1).astype(np.int32)
  model = keras.Sequential([
      keras.Input((_FEATURES,)),
      keras.layers.Dense(64, activation="relu"),
      keras.layers.LayerNormalization(),
      keras.layers.Dense(64, activation="relu"),
      keras.layers.Dense(_CLASSES),
  ])
  model.compile(
      optimizer=keras.optimizers.Adam(1e-3),
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"])
  return model, x, y


def _feed_one_batch_ahead():
  """Makes keras feed batches one ahead through `jax.device_put` on every
  backend, as it does on all but "cpu"."""
  from keras.src import distribution as distribution_lib  # pylint: disable=g-import-not-at-top
  from keras.src.backend.jax import trainer  # pylint: disable=g-import-not-at-top

  def get_iterator(self):
    distribution = distribution_lib.distribution()
    if distribution is not None:
      return self._get_distributed_iterator(distribution)  # pylint: disable=protected-access
    return self._one_batch_ahead_iterator(  # pylint: disable=protected-access
        self.data_adapter.get_jax_iterator())

  trainer.JAXEpochIterator._get_iterator = get_iterator  # pylint: disable=protected-access


def _weights(model):
  return {f"w{i}": np.asarray(w) for i, w in enumerate(model.get_weights())}


@workload("keras")
def keras_fit():
  """Keras Sequential MLP: model.fit, one epoch of 8 batches per step."""

  def init(seed):
    return _model_and_data(seed)

  def step(state):
    model, x, y = state
    hist = model.fit(x, y, batch_size=_BATCH, epochs=1, shuffle=False,
                     verbose=0)
    return state, {"loss": np.float32(hist.history["loss"][-1]),
                   "weights": _weights(model)}

  return init, step


@workload("keras")
def keras_evaluate():
  """Keras Sequential MLP: model.evaluate (loss and accuracy)."""

  def init(seed):
    return _model_and_data(seed)

  def step(state):
    model, x, y = state
    loss, acc = model.evaluate(x, y, batch_size=_BATCH, verbose=0)
    return state, {"loss": np.float32(loss), "accuracy": np.float32(acc)}

  return init, step


@workload("keras")
def keras_predict():
  """Keras Sequential MLP: model.predict over 8 batches."""

  def init(seed):
    return _model_and_data(seed)

  def step(state):
    model, x, _ = state
    return state, {"logits": model.predict(x, batch_size=_BATCH, verbose=0)}

  return init, step


def _batch_ahead(make):
  """The workload `make` with keras feeding one batch ahead everywhere."""

  def build():
    init, step = make()

    def init_ahead(seed):
      state = init(seed)
      _feed_one_batch_ahead()
      return state

    return init_ahead, step

  return build


@workload("keras")
def keras_fit_batch_ahead():
  """keras_fit with keras's one-batch-ahead feeding on both platforms."""
  return _batch_ahead(keras_fit)()


@workload("keras")
def keras_evaluate_batch_ahead():
  """keras_evaluate with keras's one-batch-ahead feeding on both
  platforms."""
  return _batch_ahead(keras_evaluate)()
