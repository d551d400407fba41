"""Transposes that move the contiguous dimension, as register-block kernels.

A kernel whose one output is `transpose(x)` of an array in memory, with the
output's second-to-last dimension the input's last (so the output's last
dimension runs across the input's rows), is pure data movement. The
elemental loop reads such an operand one element at a time across rows (a
gather per vector), and its tiles of 32 rows spaced by a power of two bytes
fall into the same cache sets: a f32[1024,1024] transpose ran at 1.8 ms
where negating the same array takes 0.1 ms, f32[128,512] at 70 us (XLA
CPU: 0.19 ms and 14 us, on two threads).

Here each BLOCK x BLOCK block is moved as BLOCK vector loads along the
input's rows, a transpose in registers (log2(BLOCK) rounds of two-input
shuffles, each swapping the off-diagonal sub-blocks of the round's size),
and BLOCK vector stores along the output's rows. A unit of the parallel
extent is a TILE x TILE tile of the last two output dimensions (as in
`loop_kernels.emit_tiled_loop`); blocks cut by the array's edge are moved
element by element. Measured on f32 (two threads): [1024,1024] 0.23 ms
(tiles of 32: 0.30 ms), [128,512] 13 us, [512,128] 14 us. Only whole
transposes of an array in memory take this path: a transpose fused with
other operations keeps the elemental loop.

Elements are moved as integers of their storage width (1, 2, 4 or 8
bytes): every value, NaN payloads included, keeps its bits.
"""

from __future__ import annotations

import math
from typing import Optional

from llvmlite import ir

from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter as le
from xla.service.cpu import loop_kernels

BLOCK = 8
TILE = 16


def _storage_bits(ty: ir.Type) -> Optional[int]:
  if isinstance(ty, ir.IntType):
    return ty.width if ty.width in (8, 16, 32, 64) else None
  return {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}.get(type(ty))


def block_transposable(instr, source_ptr) -> bool:
  """Whether `instr` is a transpose this module moves: of an array in
  memory (`source_ptr` is its storage pointer), moving the input's last
  dimension to the output's second-to-last, with both of the output's last
  two dimensions at least BLOCK long."""
  if instr.opcode != O.kTranspose or source_ptr is None:
    return False
  perm = list(instr.dimensions)
  rank = len(perm)
  if rank < 2 or perm[-2] != rank - 1:
    return False
  dims = instr.shape.dimensions
  if min(dims[-2:]) < BLOCK:
    return False
  return _storage_bits(source_ptr.type.pointee) is not None


def _transpose_registers(b: ir.IRBuilder, rows: list) -> list:
  """The BLOCK rows of the transpose of the BLOCK x BLOCK matrix whose rows
  are the vectors `rows`."""
  n = len(rows)
  mask_ty = ir.VectorType(ir.IntType(32), n)
  v = list(rows)
  s = n // 2
  while s >= 1:
    out = list(v)
    for i in range(n):
      if i & s:
        continue
      lo = [k if not k & s else n + k - s for k in range(n)]
      hi = [k + s if not k & s else n + k for k in range(n)]
      out[i] = b.shuffle_vector(v[i], v[i + s], ir.Constant(mask_ty, lo))
      out[i + s] = b.shuffle_vector(v[i], v[i + s], ir.Constant(mask_ty, hi))
    v = out
    s //= 2
  return v


def emit(args, instr, src_ptr, out_ptr) -> kernel_api.KernelSpec:
  """Finishes `args`' kernel as the block transpose `out = instr(src)`
  (`block_transposable(instr, src_ptr)` holds)."""
  b = args.b
  bits = _storage_bits(src_ptr.type.pointee)
  ety = ir.IntType(bits)
  vty = ir.VectorType(ety, BLOCK)
  align = bits // 8
  src = b.bitcast(src_ptr, ety.as_pointer())
  out = b.bitcast(out_ptr, ety.as_pointer())

  perm = list(instr.dimensions)
  dims = list(instr.shape.dimensions)
  in_strides = le.strides_of(list(instr.operand(0).shape.dimensions))
  out_strides = le.strides_of(dims)
  rows, cols = dims[-2], dims[-1]
  # Output [.., r, c] reads input element r + c * col_stride + (outer part).
  col_stride = in_strides[perm[-1]]
  extent = loop_kernels.tile_count(dims, TILE)

  with le.for_range(b, args.begin, args.end, "tile.unit") as u:
    multi, (r_lo, r_hi), (c_lo, c_hi) = loop_kernels.tile_of_unit(
        b, u, dims, TILE)
    in_base, out_base = le.i64(0), le.i64(0)
    for d, m in enumerate(multi):
      in_base = le.add(b, in_base, le.mul(b, m, in_strides[perm[d]]))
      out_base = le.add(b, out_base, le.mul(b, m, out_strides[d]))
    with le.for_range(b, r_lo, r_hi, "blk.r", step=BLOCK) as rb:
      with le.for_range(b, c_lo, c_hi, "blk.c", step=BLOCK) as cb:
        rb_next = b.add(rb, le.i64(BLOCK))
        cb_next = b.add(cb, le.i64(BLOCK))
        full = b.and_(b.icmp_signed("<=", rb_next, le.i64(rows)),
                      b.icmp_signed("<=", cb_next, le.i64(cols)))
        with b.if_else(full) as (then, otherwise):
          with then:
            vals = []
            for j in range(BLOCK):
              off = le.add(b, in_base, b.add(
                  le.mul(b, b.add(cb, le.i64(j)), col_stride), rb))
              p = b.bitcast(b.gep(src, [off]), vty.as_pointer())
              vals.append(b.load(p, align=align))
            for i, row in enumerate(_transpose_registers(b, vals)):
              off = le.add(b, out_base, b.add(
                  le.mul(b, b.add(rb, le.i64(i)), cols), cb))
              p = b.bitcast(b.gep(out, [off]), vty.as_pointer())
              b.store(row, p, align=align)
          with otherwise:
            with le.for_range(b, rb, le.min_i64(b, rb_next, rows),
                              "edge.r") as r:
              with le.for_range(b, cb, le.min_i64(b, cb_next, cols),
                                "edge.c") as c:
                src_off = le.add(b, in_base,
                                 b.add(le.mul(b, c, col_stride), r))
                out_off = le.add(b, out_base,
                                 b.add(le.mul(b, r, cols), c))
                b.store(b.load(b.gep(src, [src_off]), align=align),
                        b.gep(out, [out_off]), align=align)
  b.ret_void()
  return kernel_api.KernelSpec(args.name, extent, math.prod(dims))
