"""Peak memory with vs without reuse on HLO that jax emits for a small MLP.
Skipped when jax is not installed."""

import pytest

from xla.hlo.parser import hlo_parser
from xla.service import buffer_assignment as ba

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def _mlp_lowered():
  def mlp(x, w1, w2, w3):
    h = jnp.maximum(x @ w1, 0.0)  # jax.nn.relu shares one called
    # computation between call sites, which needs call-graph flattening.
    h = jnp.maximum(h @ w2, 0.0)
    return jnp.tanh(h @ w3)
  args = (jnp.ones((32, 64), jnp.float32), jnp.ones((64, 128), jnp.float32),
          jnp.ones((128, 128), jnp.float32), jnp.ones((128, 16), jnp.float32))
  return jax.jit(mlp).lower(*args)


def test_unoptimized_mlp_reuses_memory():
  text = _mlp_lowered().as_text(dialect="hlo")
  rep = ba.peak_memory_report(hlo_parser.parse_and_return_unverified_module(
      text))
  print("unoptimized MLP:", rep)
  params = 4 * (32 * 64 + 64 * 128 + 128 * 128 + 128 * 16)
  assert rep["parameter_bytes"] == params
  assert rep["output_bytes"] == 4 * 32 * 16
  assert rep["total_with_reuse"] < rep["total_without_reuse"]
  assert rep["temp_heap_bytes"] < rep["temp_without_reuse"]
  assert rep["peak_live_bytes"] <= rep["total_with_reuse"]


def test_optimized_mlp_report():
  text = _mlp_lowered().compile().as_text()
  module = hlo_parser.parse_and_return_unverified_module(text)
  rep = ba.peak_memory_report(module, use_module_order=True)
  print("optimized MLP:", rep)
  assert rep["total_with_reuse"] <= rep["total_without_reuse"]
  assert rep["output_bytes"] == 4 * 32 * 16
