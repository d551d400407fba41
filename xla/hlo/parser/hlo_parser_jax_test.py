"""The parser against XLA itself: HLO text that jax's XLA (CPU) prints.

For each program, both the optimized module (`compile().as_text()`, the
long form with `%` names, fusions, schedules and stack frames) and the
unoptimized one (`lower().as_text(dialect="hlo")`) must parse, pass the
verifier, and print back byte for byte. Skipped when jax is not installed.
"""

import pytest

from xla.hlo.ir import hlo_printer
from xla.hlo.parser import hlo_parser
from xla.service import hlo_verifier

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = jax.lax


def _programs():
  x = jnp.arange(32, dtype=jnp.float32).reshape(4, 8) / 7
  img = jnp.ones((1, 3, 8, 8), jnp.float32)
  kernel = jnp.ones((4, 3, 3, 3), jnp.float32)

  def loop(n):
    return lax.while_loop(lambda c: c[0] < n,
                          lambda c: (c[0] + 1, c[1] * 2.0), (0, 1.0))

  return {
      "elementwise": (lambda a, b: jnp.tanh(a) * b + jnp.exp(a), (x, x)),
      "reduce": (lambda a: (jnp.sum(a, axis=1), jnp.argmax(a, axis=0)),
                 (x,)),
      "dot": (lambda a, b: a @ b.T, (x, x)),
      "conv": (lambda a, w: lax.conv_general_dilated(a, w, (2, 2), "SAME"),
               (img, kernel)),
      "while": (loop, (jnp.int32(5),)),
      "cond": (lambda p, a: lax.cond(p > 0, jnp.sin, jnp.cos, a),
               (jnp.float32(1), x)),
      "gather_scatter": (lambda a, i: a.at[i].add(a[i] * 2),
                         (x, jnp.array([0, 2], jnp.int32))),
      "sort": (lambda a: jnp.argsort(a, axis=1), (x,)),
      "constants": (lambda a: a + jnp.array([1.5, -2, 3e10, 0.1, jnp.inf,
                                             -jnp.inf, jnp.nan, 7],
                                            jnp.float32), (x,)),
      "mixed_types": (lambda a: (a.astype(jnp.bfloat16) * 3).astype(
          jnp.int8), (x,)),
      "custom_calls": (jnp.linalg.eigh, (jnp.eye(4) * 2 + 0.5,)),
      "fft_topk_switch": (lambda i, a: (
          jnp.fft.irfft(jnp.fft.rfft(a)), lax.top_k(a, 3),
          lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], a)),
                          (jnp.int32(1), x)),
      "scan_negative_zero": (lambda a: lax.scan(
          lambda c, r: (c * r - 0.0, jnp.sin(c)), jnp.full(8, -0.0), a),
                             (x,)),
  }


PROGRAMS = _programs()


def _check(text, options):
  module = hlo_parser.parse_and_return_unverified_module(text)
  hlo_verifier.verify(module)
  printed = module.to_string(options)
  assert printed == text
  return module


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_optimized_hlo_from_xla(name):
  fn, args = PROGRAMS[name]
  text = jax.jit(fn).lower(*args).compile().as_text()
  module = _check(text, hlo_printer.HloPrintOptions.long_form())
  assert module.is_scheduled
  assert module.entry_computation.root_instruction is not None


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_unoptimized_hlo_from_xla(name):
  fn, args = PROGRAMS[name]
  text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
  _check(text, hlo_printer.HloPrintOptions())


def test_donated_buffers_give_input_output_aliases():
  jitted = jax.jit(lambda a, b: (a + b, a * b), donate_argnums=(0, 1))
  x = jnp.ones((4, 8), jnp.float32)
  text = jitted.lower(x, x).compile().as_text()
  module = _check(text, hlo_printer.HloPrintOptions.long_form())
  assert "input_output_alias=" in text
  assert {a.parameter_number for a in module.input_output_aliases} == {0, 1}


def test_fusions_and_control_flow_are_recognized():
  fn, args = PROGRAMS["while"]
  module = hlo_parser.parse_and_return_unverified_module(
      jax.jit(fn).lower(*args).compile().as_text())
  opcodes = {i.opcode.value for i in module.instructions()}
  assert {"while", "fusion", "tuple", "get-tuple-element"} <= opcodes
  fused = [c for c in module.computations if c.is_fusion_computation()]
  assert fused and all(
      c.fusion_instruction.fused_computation is c for c in fused)
