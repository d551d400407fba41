"""Tests for the rng-bit-generator kernel: bit-exact against the HLO
evaluator (the interpreter's prng module) and against jax's
lax.rng_bit_generator run by XLA itself."""

import numpy as np
import pytest

import support
from xla.service.cpu import op_emitter_testing as t
from xla.service.cpu import rng_emitter  # pylint: disable=unused-import

_ALGS = {"THREE_FRY": "rng_three_fry", "PHILOX": "rng_philox",
         "DEFAULT": "rng_default"}


def _hlo(alg, nstate, ty, dims):
  d = ",".join(str(x) for x in dims)
  return f"""HloModule m
ENTRY e {{
  s = u64[{nstate}] parameter(0)
  ROOT r = (u64[{nstate}], {ty}[{d}]) rng-bit-generator(s), algorithm={_ALGS[alg]}
}}"""


def _check(alg, nstate, ty, dims, state):
  text = _hlo(alg, nstate, ty, dims)
  state = np.asarray(state, np.uint64)
  got = t.run_instruction(text, [state])
  want = t.evaluate(text, [state])
  t.assert_same(got, want)
  return got


@pytest.mark.parametrize("alg", ["THREE_FRY", "PHILOX"])
@pytest.mark.parametrize("ty,dims", [
    ("u32", (3, 5)), ("u32", (7,)), ("u32", ()), ("u32", (2, 3, 4)),
    ("u32", (3, 5, 7)), ("u64", (5, 3)), ("u64", ()), ("s32", (4, 1)),
    ("u8", (3, 3)), ("u16", (5,)), ("s64", (3,)), ("f32", (2, 2)),
    ("u32", (0, 3)), ("u32", (2500,)), ("u64", (1100,))])
def test_matches_evaluator(alg, ty, dims):
  _check(alg, 2, ty, dims, [0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFF0])


def test_philox_three_word_state_and_counter_carry():
  got = _check("PHILOX", 3, "u32", (9, 2), [42, 2**64 - 2, 7])
  assert got[0].tolist() == [42, 3, 8]  # 5 blocks: lo wraps, hi carries
  got = _check("PHILOX", 2, "u64", (4,), [5, 2**64 - 1])
  assert got[0].tolist() == [5, 1]


def test_threefry_counter_update():
  got = _check("THREE_FRY", 2, "u32", (3, 5), [1, 10])
  # (3, 5): no even dim, split the largest (5 -> 3): 9 blocks.
  assert got[0].tolist() == [1, 19]
  got = _check("THREE_FRY", 2, "u64", (3, 5), [1, 10])
  assert got[0].tolist() == [1, 25]


def test_default_is_philox():
  a = t.run_instruction(_hlo("DEFAULT", 2, "u32", (6,)), [np.uint64([3, 4])])
  b = t.run_instruction(_hlo("PHILOX", 2, "u32", (6,)), [np.uint64([3, 4])])
  t.assert_same(a, b)


def test_bad_state_and_type():
  with pytest.raises(support.InvalidArgumentError):
    t.compile_instruction(_hlo("THREE_FRY", 3, "u32", (2,)))
  with pytest.raises(support.UnimplementedError):
    t.compile_instruction(_hlo("PHILOX", 2, "pred", (2,)))


@pytest.mark.parametrize("alg", ["THREE_FRY", "PHILOX", "DEFAULT"])
@pytest.mark.parametrize("dtype,dims", [("uint32", (3, 5)), ("uint64", (4,)),
                                        ("uint8", (2, 3, 3))])
def test_matches_jax(alg, dtype, dims):
  jax = pytest.importorskip("jax")
  jnp = jax.numpy
  lax = jax.lax
  key = np.array([0x12345678, 0x9ABCDEF0, 77, 0xFFFFFFFE], np.uint32)
  algorithm = getattr(lax.RandomAlgorithm, f"RNG_{alg}")
  f = jax.jit(lambda k: lax.rng_bit_generator(
      k, dims, getattr(jnp, dtype), algorithm=algorithm))
  with jax.enable_x64(True):
    want_state, want_bits = (np.asarray(v) for v in f(key))
  ty = {"uint32": "u32", "uint64": "u64", "uint8": "u8"}[dtype]
  got_state, got_bits = t.run_instruction(_hlo(alg, 2, ty, dims),
                                          [key.view(np.uint64)])
  np.testing.assert_array_equal(got_state.view(np.uint32), want_state)
  np.testing.assert_array_equal(got_bits, want_bits)
