"""Counter-based bit generators for `stablehlo.rng_bit_generator`.

The spec leaves the exact bits implementation-defined; we reproduce the
ones XLA produces (and therefore what JAX programs expect), so programs that
check their random streams against recorded values pass:

* THREE_FRY: Threefry-2x32 with 20 rounds (Salmon et al., SC 2011). The
  state is `[key, counter]`; the output state is `[key, counter + n]`.
* PHILOX: Philox-4x32 with 10 rounds. The state is `[key, counter_lo]` (the
  u128 counter is `counter_lo` + 2^64 * key) or `[key, counter_lo,
  counter_hi]`.
* DEFAULT is PHILOX, as on XLA's CPU and GPU backends.

Outputs narrower than 32 bits keep the low bits of 32-bit draws; 64-bit
outputs combine two 32-bit words. Everything is vectorized over the output
with numpy's wrapping uint32 / uint64 arithmetic.
"""

from __future__ import annotations

import math

import numpy as np

import support

_M32 = np.uint64(0xFFFFFFFF)
_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)


def _lo32(x: np.ndarray) -> np.ndarray:
  return (x & _M32).astype(np.uint32)


def _hi32(x: np.ndarray) -> np.ndarray:
  return (x >> np.uint64(32)).astype(np.uint32)


def _join64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
  return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


def _rotl32(v: np.ndarray, r: int) -> np.ndarray:
  return (v << np.uint32(r)) | (v >> np.uint32(32 - r))


def threefry2x32(x0, x1, k0, k1):
  """Threefry-2x32, 20 rounds, on uint32 arrays `x0`, `x1` with the uint32
  scalar key (k0, k1)."""
  ks = (int(k0), int(k1), 0x1BD11BDA ^ int(k0) ^ int(k1))
  x0 = x0 + np.uint32(ks[0])
  x1 = x1 + np.uint32(ks[1])
  for block in range(5):
    rots = _ROTATIONS[:4] if block % 2 == 0 else _ROTATIONS[4:]
    for r in rots:
      x0 = x0 + x1
      x1 = _rotl32(x1, r) ^ x0
    x0 = x0 + np.uint32(ks[(block + 1) % 3])
    x1 = x1 + np.uint32((ks[(block + 2) % 3] + block + 1) & 0xFFFFFFFF)
  return x0, x1


def split_halves(shape: tuple):
  """XLA's split of a shape into two halves for 2-word generators: returns
  (split_dim, half_shape) where half_shape has the split dim halved (rounded
  up); None for a scalar."""
  if not shape:
    return None
  dim = next((i for i, d in enumerate(shape) if d % 2 == 0), None)
  if dim is None:
    dim = max(range(len(shape)), key=lambda i: (shape[i], -i))
  half = list(shape)
  half[dim] = (shape[dim] + 1) // 2
  return dim, tuple(half)


def _threefry_bits32(key: int, counter: int, shape: tuple):
  split = split_halves(shape)
  half = (1,) if split is None else split[1]
  n = math.prod(half)
  ctr = np.uint64(counter) + np.arange(n, dtype=np.uint64)
  o0, o1 = threefry2x32(_lo32(ctr), _hi32(ctr), key & 0xFFFFFFFF, key >> 32)
  new_counter = (counter + n) & 0xFFFFFFFFFFFFFFFF
  if split is None:
    return o0.reshape(()), new_counter
  dim, half = split
  o0 = o0.reshape(half)
  o1 = o1.reshape(half)
  both = np.stack([o0, o1], axis=dim + 1)  # (..., half_d, 2, ...)
  full = list(shape)
  full[dim] = half[dim] * 2
  both = both.reshape(full)
  if full[dim] != shape[dim]:
    both = np.take(both, np.arange(shape[dim]), axis=dim)
  return both, new_counter


def _threefry_bits64(key: int, counter: int, shape: tuple):
  n = math.prod(shape)
  ctr = np.uint64(counter) + np.arange(n, dtype=np.uint64)
  o0, o1 = threefry2x32(_lo32(ctr), _hi32(ctr), key & 0xFFFFFFFF, key >> 32)
  return _join64(o0, o1).reshape(shape), (counter + n) & 0xFFFFFFFFFFFFFFFF


_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))


def philox4x32(x, k0, k1):
  """Philox-4x32, 10 rounds, on four uint32 arrays `x` with the uint32
  scalar key (k0, k1)."""
  x0, x1, x2, x3 = x
  k0 = int(k0)
  k1 = int(k1)
  for _ in range(10):
    p0 = x0.astype(np.uint64) * _PHILOX_M[0]
    p1 = x2.astype(np.uint64) * _PHILOX_M[1]
    x0, x1, x2, x3 = (_hi32(p1) ^ x1 ^ np.uint32(k0), _lo32(p1),
                      _hi32(p0) ^ x3 ^ np.uint32(k1), _lo32(p0))
    k0 = (k0 + _PHILOX_W[0]) & 0xFFFFFFFF
    k1 = (k1 + _PHILOX_W[1]) & 0xFFFFFFFF
  return x0, x1, x2, x3


def _philox_blocks(key: int, lo: int, hi: int, nblocks: int):
  """`nblocks` 128-bit Philox outputs for counters (lo, hi) + i; returns the
  four uint32 words and the advanced counter."""
  i = np.arange(nblocks, dtype=np.uint64)
  c_lo = np.uint64(lo) + i
  c_hi = np.where(c_lo < np.uint64(lo), np.uint64((hi + 1) & (2**64 - 1)),
                  np.uint64(hi)).astype(np.uint64)
  words = philox4x32((_lo32(c_lo), _hi32(c_lo), _lo32(c_hi), _hi32(c_hi)),
                     key & 0xFFFFFFFF, key >> 32)
  new = lo + hi * 2**64 + nblocks
  return words, (new & (2**64 - 1), (new >> 64) & (2**64 - 1))


def _philox_bits32(key, lo, hi, shape):
  n = math.prod(shape)
  nblocks = (n + 3) // 4
  words, new = _philox_blocks(key, lo, hi, nblocks)
  out = np.stack(words, axis=1).reshape(-1)[:n]
  return out.reshape(shape), new


def _philox_bits64(key, lo, hi, shape):
  n = math.prod(shape)
  nblocks = (2 * n + 3) // 4
  w, new = _philox_blocks(key, lo, hi, nblocks)
  pairs = np.stack([_join64(w[0], w[1]), _join64(w[2], w[3])], axis=1)
  return pairs.reshape(-1)[:n].reshape(shape), new


def generate(algorithm: str, state: np.ndarray, shape: tuple,
             bits: int) -> tuple[np.ndarray, np.ndarray]:
  """Returns (new_state, raw) where `raw` holds `bits`-wide unsigned random
  words of `shape` (uint8/16/32/64) and `new_state` is a uint64 array like
  `state`."""
  st = [int(v) for v in np.asarray(state, dtype=np.uint64).reshape(-1)]
  if algorithm == "DEFAULT":
    algorithm = "PHILOX"
  shape = tuple(int(d) for d in shape)
  if algorithm == "THREE_FRY":
    if len(st) != 2:
      raise support.InvalidArgumentError(
          f"THREE_FRY needs a state of 2 u64 words, got {len(st)}")
    key, counter = st
    if bits == 64:
      raw, counter = _threefry_bits64(key, counter, shape)
    else:
      raw, counter = _threefry_bits32(key, counter, shape)
    new_state = [key, counter]
  elif algorithm == "PHILOX":
    if len(st) not in (2, 3):
      raise support.InvalidArgumentError(
          f"PHILOX needs a state of 2 or 3 u64 words, got {len(st)}")
    key = st[0]
    lo, hi = (st[1], st[0]) if len(st) == 2 else (st[1], st[2])
    if bits == 64:
      raw, (lo, hi) = _philox_bits64(key, lo, hi, shape)
    else:
      raw, (lo, hi) = _philox_bits32(key, lo, hi, shape)
    new_state = [key, lo] if len(st) == 2 else [key, lo, hi]
  else:
    raise support.UnimplementedError(
        f"rng_bit_generator: unknown rng_algorithm {algorithm}")
  if bits < 32:
    raw = raw.astype(np.dtype(f"uint{bits}"))
  return np.array(new_state, dtype=np.uint64), raw
