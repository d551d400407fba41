"""Tests for the Threefry / Philox bit generators: the published Random123
known-answer vectors, XLA's state layouts, and jax (XLA on CPU) as an
oracle when installed."""

import numpy as np
import pytest

from stablehlo._src.interpreter import prng
import support


def _u32(*vals):
  return [np.array([v], np.uint32) for v in vals]


@pytest.mark.parametrize("ctr,key,want", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344),
     (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry2x32_20_known_answers(ctr, key, want):
  out = prng.threefry2x32(*_u32(*ctr), *key)
  assert tuple(int(x[0]) for x in out) == want


@pytest.mark.parametrize("ctr,key,want", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
     (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_10_known_answers(ctr, key, want):
  out = prng.philox4x32(_u32(*ctr), *key)
  assert tuple(int(x[0]) for x in out) == want


def test_three_fry_state_advances_by_the_counters_used():
  st = np.array([5, 10], np.uint64)
  new, bits = prng.generate("THREE_FRY", st, (100, 100), 64)
  assert new.tolist() == [5, 10 + 10000] and bits.dtype == np.uint64
  # 32-bit outputs use both words of a counter: XLA halves the first even
  # dim, else the largest one (rounding up).
  new, bits = prng.generate("THREE_FRY", st, (4, 5), 32)
  assert new.tolist() == [5, 10 + 2 * 5] and bits.shape == (4, 5)
  new, bits = prng.generate("THREE_FRY", st, (3, 5), 32)
  assert new.tolist() == [5, 10 + 3 * 3] and bits.shape == (3, 5)
  # Each 64-bit draw is the two Threefry words of its counter.
  new, bits = prng.generate("THREE_FRY", st, (2,), 64)
  lo, hi = prng.threefry2x32(*_u32(10, 0), 5, 0)
  assert int(bits[0]) == int(lo[0]) | (int(hi[0]) << 32)


def test_philox_two_and_three_word_states_agree():
  # A 2-word state [key, c] is the 3-word state [key, c, key].
  key, ctr = 0x1234, 0xFFFFFFFFFFFFFFFF
  s2, b2 = prng.generate("PHILOX", np.array([key, ctr], np.uint64), (9,), 32)
  s3, b3 = prng.generate("PHILOX", np.array([key, ctr, key], np.uint64),
                         (9,), 32)
  assert b2.tolist() == b3.tolist()
  # 3 blocks of 4 words; the 128-bit counter carries into the high word.
  assert s3.tolist() == [key, 2, key + 1] and s2.tolist() == [key, 2]


def test_narrow_outputs_keep_the_low_bits():
  st = np.array([3, 4], np.uint64)
  _, wide = prng.generate("PHILOX", st, (6,), 32)
  _, narrow = prng.generate("PHILOX", st, (6,), 16)
  assert narrow.dtype == np.uint16
  assert narrow.tolist() == (wide & 0xFFFF).tolist()


def test_bad_state_sizes():
  with pytest.raises(support.InvalidArgumentError):
    prng.generate("THREE_FRY", np.array([1, 2, 3], np.uint64), (2,), 32)
  with pytest.raises(support.InvalidArgumentError):
    prng.generate("PHILOX", np.array([1], np.uint64), (2,), 32)
  with pytest.raises(support.UnimplementedError):
    prng.generate("MERSENNE", np.array([1, 2], np.uint64), (2,), 32)


@pytest.mark.parametrize("algorithm,shape,dtype", [
    ("THREE_FRY", (7, 1, 3), np.uint32),
    ("THREE_FRY", (5,), np.uint8),
    ("PHILOX", (3, 3), np.uint64),
    ("PHILOX", (), np.uint16),
])
def test_matches_jax(algorithm, shape, dtype):
  jax = pytest.importorskip("jax")
  jax.config.update("jax_enable_x64", True)
  alg = getattr(jax.lax.RandomAlgorithm, "RNG_" + algorithm)
  st = np.array([0xDEADBEEF12345678, 0xFFFFFFFFFFFFFFF0], np.uint64)
  want_state, want = jax.lax.rng_bit_generator(jax.numpy.asarray(st), shape,
                                               dtype, algorithm=alg)
  new, bits = prng.generate(algorithm, st, shape, np.dtype(dtype).itemsize * 8)
  assert new.tolist() == np.asarray(want_state).tolist()
  assert bits.dtype == dtype and bits.tolist() == np.asarray(want).tolist()
