"""CPU kernels for `rng-bit-generator` (THREE_FRY, PHILOX; DEFAULT = PHILOX).

The bits are exactly those of the HLO evaluator / StableHLO interpreter
(`stablehlo/_src/interpreter/prng.py`), which match XLA's expanders and
hence `jax.random`:

* THREE_FRY (state [key, counter]): Threefry-2x32, 20 rounds, on counters
  counter + c. 64-bit outputs: element i = hi:lo of block c = i. Outputs of
  32 bits or fewer: the shape is split into two halves along one dimension
  (the first even-sized one, else the largest); block c (a linear index into
  the half shape) yields words o0, o1 for positions 2h and 2h + 1 along that
  dimension (h = c's coordinate there), the second dropped past the end;
  narrower widths keep the low bits. The new counter is counter + blocks.
* PHILOX (state [key, lo] with hi = key, or [key, lo, hi]): Philox-4x32, 10
  rounds, on the 128-bit counter hi:lo + c. 32-bit (and narrower) outputs:
  element i = word i % 4 of block i / 4; 64-bit: element i = the i % 2-th
  word pair of block i / 2.

The kernel's parallel extent counts blocks of generator calls; each call
writes only its own outputs, and the part that starts at 0 also writes the
new state. The counters are pure arithmetic in the loop index, so LLVM's
loop vectorizer turns the rounds into vector code.
"""

from __future__ import annotations

import math

from llvmlite import ir

import support
from stablehlo.interpreter import prng
from xla import primitive_util
from xla.service.cpu import kernel_api
from xla.service.cpu import op_emitter_util as u
from xla.xla_data import PrimitiveType

I32 = u.I32
I64 = u.I64

# Generator calls per unit of parallel extent.
_BLOCK = 1024

_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_THREEFRY_PARITY = 0x1BD11BDA
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)


def _c32(v: int) -> ir.Constant:
  return ir.Constant(I32, v & 0xFFFFFFFF)


def _rotl(b: ir.IRBuilder, v, r: int):
  return b.or_(b.shl(v, _c32(r)), b.lshr(v, _c32(32 - r)))


def _threefry(b: ir.IRBuilder, x0, x1, k0, k1):
  """Threefry-2x32 (20 rounds) of (x0, x1) with key words (k0, k1), i32."""
  k2 = b.xor(b.xor(k0, k1), _c32(_THREEFRY_PARITY))
  ks = (k0, k1, k2)
  x0 = b.add(x0, k0)
  x1 = b.add(x1, k1)
  for block in range(5):
    rots = _THREEFRY_ROTATIONS[:4] if block % 2 == 0 else \
        _THREEFRY_ROTATIONS[4:]
    for r in rots:
      x0 = b.add(x0, x1)
      x1 = b.xor(_rotl(b, x1, r), x0)
    x0 = b.add(x0, ks[(block + 1) % 3])
    x1 = b.add(b.add(x1, ks[(block + 2) % 3]), _c32(block + 1))
  return x0, x1


def _mul_hi_lo(b: ir.IRBuilder, x, m: int):
  p = b.mul(b.zext(x, I64), ir.Constant(I64, m))
  return b.trunc(b.lshr(p, u.i64(32)), I32), b.trunc(p, I32)


def _philox(b: ir.IRBuilder, x, k0, k1):
  """Philox-4x32 (10 rounds) of the four i32 words `x`, key (k0, k1)."""
  x0, x1, x2, x3 = x
  for _ in range(10):
    hi0, lo0 = _mul_hi_lo(b, x0, _PHILOX_M[0])
    hi1, lo1 = _mul_hi_lo(b, x2, _PHILOX_M[1])
    x0, x1, x2, x3 = (b.xor(b.xor(hi1, x1), k0), lo1,
                      b.xor(b.xor(hi0, x3), k1), lo0)
    k0 = b.add(k0, _c32(_PHILOX_W[0]))
    k1 = b.add(k1, _c32(_PHILOX_W[1]))
  return x0, x1, x2, x3


def _lo_hi(b: ir.IRBuilder, v64):
  return b.trunc(v64, I32), b.trunc(b.lshr(v64, u.i64(32)), I32)


def _join(b: ir.IRBuilder, lo, hi):
  return b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), u.i64(32)))


class _Output:
  """Writes raw generator words into the bits array (any 8/16/32/64-bit
  integer or floating storage: the low bits, reinterpreted)."""

  def __init__(self, ptr, element_type):
    self.ptr = ptr
    self.ty = kernel_api.llvm_storage_type(element_type)
    self.bits = primitive_util.bit_width(element_type)

  def store(self, b: ir.IRBuilder, word, lin) -> None:
    w = word.type.width
    if self.bits < w:
      word = b.trunc(word, ir.IntType(self.bits))
    elif self.bits > w:
      word = b.zext(word, ir.IntType(self.bits))
    if not isinstance(self.ty, ir.IntType):
      word = b.bitcast(word, self.ty)
    b.store(word, u.element_ptr(b, self.ptr, lin))


def _check_types(instr):
  shapes = instr.shape.tuple_shapes if instr.shape.is_tuple() else ()
  if len(shapes) != 2:
    raise support.InvalidArgumentError(
        f"rng-bit-generator {instr.name}: result must be (state, bits)")
  state_in = instr.operand(0).shape
  if (state_in.element_type != PrimitiveType.U64 or
      shapes[0].element_type != PrimitiveType.U64 or
      len(state_in.dimensions) != 1 or
      shapes[0].dimensions != state_in.dimensions):
    raise support.UnimplementedError(
        f"rng-bit-generator {instr.name}: the state must be u64[n], got "
        f"{state_in} -> {shapes[0]}")
  et = shapes[1].element_type
  if (et == PrimitiveType.PRED or
      not (primitive_util.is_integral(et) or
           primitive_util.is_floating_point(et)) or
      primitive_util.bit_width(et) not in (8, 16, 32, 64)):
    raise support.UnimplementedError(
        f"rng-bit-generator {instr.name}: output element type "
        f"{primitive_util.lowercase_name(et)} is not supported")
  return state_in.dimensions[0], shapes[1]


def _block_loop(ka: u.KernelArgs, nblocks: int):
  """The loop over this call's share of `nblocks` generator calls."""
  b = ka.b
  lo = b.mul(ka.begin, u.i64(_BLOCK))
  hi = b.mul(ka.end, u.i64(_BLOCK))
  hi = b.select(b.icmp_signed(">", hi, u.i64(nblocks)), u.i64(nblocks), hi)
  return u.for_range(b, lo, hi, "blk")


def _write_state(ka: u.KernelArgs, words) -> None:
  b = ka.b
  with b.if_then(b.icmp_signed("==", ka.begin, u.i64(0))):
    for i, w in enumerate(words):
      b.store(w, u.element_ptr(b, ka.results[0], i))


def _emit_threefry(ka: u.KernelArgs, nstate: int, out_shape) -> int:
  b = ka.b
  if nstate != 2:
    raise support.InvalidArgumentError(
        f"THREE_FRY needs a state of 2 u64 words, got {nstate}")
  key = b.load(ka.operands[0])
  counter = b.load(u.element_ptr(b, ka.operands[0], 1))
  k0, k1 = _lo_hi(b, key)
  shape = tuple(out_shape.dimensions)
  out = _Output(ka.results[1], out_shape.element_type)
  bits = primitive_util.bit_width(out_shape.element_type)
  if bits == 64:
    nblocks = math.prod(shape)
    split = None
  else:
    split = prng.split_halves(shape)
    nblocks = 1 if split is None else math.prod(split[1])
  _write_state(ka, [key, b.add(counter, u.i64(nblocks))])
  with _block_loop(ka, nblocks) as c:
    x0, x1 = _lo_hi(b, b.add(counter, c))
    o0, o1 = _threefry(b, x0, x1, k0, k1)
    if bits == 64:
      out.store(b, _join(b, o0, o1), c)
    elif split is None:
      out.store(b, o0, 0)
    else:
      dim, half = split
      inner = math.prod(shape[dim + 1:])
      outer_idx = b.udiv(c, u.i64(half[dim] * inner))
      h = b.urem(b.udiv(c, u.i64(inner)), u.i64(half[dim])) if inner > 1 \
          else b.urem(c, u.i64(half[dim]))
      r = b.urem(c, u.i64(inner)) if inner > 1 else u.i64(0)
      j0 = b.mul(h, u.i64(2))
      base = b.add(b.mul(outer_idx, u.i64(shape[dim] * inner)), r)
      out.store(b, o0, b.add(base, b.mul(j0, u.i64(inner))))
      j1 = b.add(j0, u.i64(1))
      if shape[dim] % 2 == 0:
        out.store(b, o1, b.add(base, b.mul(j1, u.i64(inner))))
      else:
        with b.if_then(b.icmp_signed("<", j1, u.i64(shape[dim]))):
          out.store(b, o1, b.add(base, b.mul(j1, u.i64(inner))))
  return nblocks


def _emit_philox(ka: u.KernelArgs, nstate: int, out_shape) -> int:
  b = ka.b
  if nstate not in (2, 3):
    raise support.InvalidArgumentError(
        f"PHILOX needs a state of 2 or 3 u64 words, got {nstate}")
  key = b.load(ka.operands[0])
  lo = b.load(u.element_ptr(b, ka.operands[0], 1))
  hi = key if nstate == 2 else b.load(u.element_ptr(b, ka.operands[0], 2))
  k0, k1 = _lo_hi(b, key)
  n = math.prod(out_shape.dimensions)
  bits = primitive_util.bit_width(out_shape.element_type)
  words_per_block = 2 if bits == 64 else 4
  nblocks = (n + words_per_block - 1) // words_per_block
  new_lo = b.add(lo, u.i64(nblocks))
  carry = b.zext(b.icmp_unsigned("<", new_lo, lo), I64)
  state = [key, new_lo]
  if nstate == 3:
    state.append(b.add(hi, carry))
  _write_state(ka, state)
  out = _Output(ka.results[1], out_shape.element_type)
  with _block_loop(ka, nblocks) as c:
    c_lo = b.add(lo, c)
    c_hi = b.add(hi, b.zext(b.icmp_unsigned("<", c_lo, lo), I64))
    w = _philox(b, (*_lo_hi(b, c_lo), *_lo_hi(b, c_hi)), k0, k1)
    vals = w if bits != 64 else (_join(b, w[0], w[1]), _join(b, w[2], w[3]))
    first = b.mul(c, u.i64(words_per_block))
    for k, v in enumerate(vals):
      pos = b.add(first, u.i64(k))
      if n % words_per_block == 0:
        out.store(b, v, pos)
      else:
        with b.if_then(b.icmp_signed("<", pos, u.i64(n))):
          out.store(b, v, pos)
  return nblocks


@kernel_api.register_kernel_emitter("rng-bit-generator")
def emit_rng_bit_generator(ctx: kernel_api.KernelContext,
                           instr) -> kernel_api.KernelSpec:
  nstate, out_shape = _check_types(instr)
  alg = instr.attr("algorithm").name
  if alg.startswith("RNG_"):
    alg = alg[len("RNG_"):]
  if alg == "DEFAULT":
    alg = "PHILOX"  # as XLA's CPU pipeline expands the default algorithm
  if alg not in ("THREE_FRY", "PHILOX"):
    raise support.UnimplementedError(
        f"rng-bit-generator {instr.name}: algorithm {alg}")
  ka = u.KernelArgs(ctx, instr, f"rng_bit_generator_{instr.name}")
  emit = _emit_threefry if alg == "THREE_FRY" else _emit_philox
  nblocks = emit(ka, nstate, out_shape)
  ka.b.ret_void()
  extent = max(1, (nblocks + _BLOCK - 1) // _BLOCK)
  return kernel_api.KernelSpec(ka.fn.name, extent, cost=nblocks * 40)

