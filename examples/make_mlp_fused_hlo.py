"""Writes examples/mlp_fused.hlo: jax's optimized (fused) CPU HLO of a
two-layer MLP with a softmax head, as a reference picture for hlo_opt.

  JAX_PLATFORMS=cpu python examples/make_mlp_fused_hlo.py > examples/mlp_fused.hlo
  python -m xla.tools.hlo_opt examples/mlp_fused.hlo --format=html -o /tmp/mlp_fused.html

Needs jax (a test-only dependency); the .hlo it writes is committed so the
picture can be drawn without jax. Source paths in the debug metadata are
made relative to the repository, so the output is machine independent.
"""

import os
import sys

import jax
import jax.numpy as jnp


def mlp(x, w1, b1, w2, b2):
  h = jnp.tanh(x @ w1 + b1)
  return jax.nn.softmax(h @ w2 + b2, axis=-1)


def main() -> int:
  shapes = [(4, 8), (8, 16), (16,), (16, 4), (4,)]
  args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
  text = jax.jit(mlp).lower(*args).compile().as_text()
  here = os.path.abspath(__file__)
  root = os.path.dirname(os.path.dirname(here))
  text = text.replace(here, os.path.relpath(here, root))
  sys.stdout.write(text)
  return 0


if __name__ == "__main__":
  sys.exit(main())
