"""Kernel emitter for HLO `dot` (general dimension numbers).

A dot is described as a set of loop *dimensions*, each with a size and an
element stride into lhs, rhs and output (0 where it does not index that
array): batch dims (all three), lhs-free "M" dims (lhs, out), rhs-free "N"
dims (rhs, out) and contracting "K" dims (lhs, rhs). Size-1 dims are dropped
and neighbours that form one strided run in every array are merged, so any
layout of the operands is handled the same way.

BLAS path (F32/F64/C64/C128 operands and result, numpy's OpenBLAS found):
one M, one N and one K dimension are chosen as the matrix product of a
`cblas_?gemm` call (`blas.plan_gemm` decides transposes / leading dims from
the strides, swapping lhs and rhs when the output is column-major); the
choice maximizes M*N*K among those a gemm can express. The other dims become
loops: batch and leftover M/N dims index independent gemm calls, leftover K
dims accumulate into the same output with beta = 1. No scratch buffer is ever
needed; a layout no gemm can take (no operand dim with unit stride, e.g. a
batch dim innermost on both sides) goes to the loop kernel.

Loop path (integers, PRED, F16/BF16, mixed types, products below
BLAS_MIN_MNK, and the layouts above): generated loop nests accumulating in
the result's accumulation type (contraction_ir.Acc: f16/bf16 in f32, rounded
once at the end; integers wrap in the result width). Two shapes:
  * "axpy": the output dim with the smallest stride, J, is the inner loop.
    ROW_BLOCK rows of an M dim (when J is an N dim, or the reverse) are done
    together so the operand varying along J is loaded once per block. When
    that operand and the output are contiguous along J, full tiles of
    2 x (vector width) elements use explicit LLVM vectors whose
    ROW_BLOCK x 2 accumulators stay in registers across the K loops (a
    register-blocked micro-kernel: per K step one broadcast per row, two
    vector loads, 2 x ROW_BLOCK FMAs); the rest of J runs a scalar loop over
    an accumulator tile on the stack, which LLVM vectorizes where it can.
  * "reduce": when both operands are contiguous along a K dim but not along
    J (x . W^T, matrix-vector), each output is a reduction over K with that
    dim innermost (float adds marked reassoc so LLVM vectorizes them).

Measured with `python -m xla.service.cpu.dot_bench` (2-core AVX-512 VM shared
with other jobs, one thread, best of 5; GFLOP/s):
    f32 matmul n^3     n=256   n=512   n=1024
    BLAS kernel          96     120      140
    loop kernel          61      82       38
    numpy (OpenBLAS)     85      85      140
so every shape BLAS can take goes to BLAS. Batched n x n x n products
(batch 64), BLAS kernel vs loop kernel: n=4 2.7/7.3, n=8 16/19, n=12 39/7,
n=16 54/66, n=32 64/56, n=64 126/99: the call overhead wins below
M*N*K ~ 2k, hence BLAS_MIN_MNK.

Threads: the runtime's parallel extent carries all the parallelism. A BLAS
kernel's parts are (independent gemm call: batch and leftover M/N indices)
x (SPLIT_BLOCK-row blocks of the gemm's larger output dim); a part of
consecutive blocks makes one call, so a kernel run as a single part makes
the fewest, largest calls. The executable runs with OpenBLAS pinned to one
thread (`blas.pin_single_thread`): threaded OpenBLAS calls from several
workers queue on its process-wide lock while its own threads spin against
the runtime's workers (measured 2-10x slower matmul / mlp / transformer on
the 2-core bench machine). Loop kernels use the flattened rows (row
blocks) as the extent.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from llvmlite import ir

from xla import xla_data
from xla.service.cpu import blas
from xla.service.cpu import contraction_ir as cir
from xla.service.cpu import kernel_api
from xla.service.cpu import runtime_library

PrimitiveType = xla_data.PrimitiveType

# Kernels loaded from a compilation cache link against these.
blas.register_symbols()

# Below this many multiply-adds per gemm call the loop kernel is used: the
# bench's batched small matmuls cross over between n = 8 (M*N*K = 512, loops
# ~1.6x faster) and n = 12..16 (1728..4096, about even or BLAS ahead).
BLAS_MIN_MNK = 2048
# Rows (of the larger output dim of a gemm) per part of a BLAS kernel's
# parallel extent; a part spanning several blocks makes one call.
SPLIT_BLOCK = 64
# Accumulators per axpy tile (kept on the stack) without row blocking.
TILE = 128
# Rows computed together by the blocked axpy loop (sharing the loads of the
# operand that does not depend on the row). 6 rows x 2 vectors = 12 vector
# accumulators (plus loads) fit AVX2's 16 and AVX-512's 32 registers; 6-8
# measured up to ~2x faster than 4 on 256-512 f32 matmuls (noisy box).
ROW_BLOCK = 6


@dataclasses.dataclass
class Dim:
  kind: str  # "b", "m", "n", "k"
  size: int
  sl: int  # stride in lhs
  sr: int  # stride in rhs
  so: int  # stride in the output


def dot_dims(instr) -> list[Dim]:
  """The dot's dimensions in output order (b, m, n) then k in lhs order."""
  lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
  out = instr.shape
  dn = instr.dot_dimension_numbers
  lb, rb = list(dn.lhs_batch_dimensions), list(dn.rhs_batch_dimensions)
  lc, rc = list(dn.lhs_contracting_dimensions), list(
      dn.rhs_contracting_dimensions)
  sl, sr, so = cir.strides(lhs), cir.strides(rhs), cir.strides(out)
  lfree = [d for d in range(lhs.rank) if d not in lb and d not in lc]
  rfree = [d for d in range(rhs.rank) if d not in rb and d not in rc]
  dims = []
  o = 0
  for a, c in zip(lb, rb):
    dims.append(Dim("b", lhs.dimensions[a], sl[a], sr[c], so[o]))
    o += 1
  for a in lfree:
    dims.append(Dim("m", lhs.dimensions[a], sl[a], 0, so[o]))
    o += 1
  for c in rfree:
    dims.append(Dim("n", rhs.dimensions[c], 0, sr[c], so[o]))
    o += 1
  for a, c in zip(lc, rc):
    dims.append(Dim("k", lhs.dimensions[a], sl[a], sr[c], 0))
  return dims


def simplify(dims: list[Dim]) -> list[Dim]:
  """Drops size-1 dims and merges neighbours of one kind that form a single
  strided run in lhs, rhs and output."""
  dims = [dataclasses.replace(d) for d in dims if d.size != 1]
  out: list[Dim] = []
  for d in dims:
    if out:
      p = out[-1]
      if (p.kind == d.kind and p.sl == d.sl * d.size and
          p.sr == d.sr * d.size and p.so == d.so * d.size):
        out[-1] = Dim(d.kind, p.size * d.size, d.sl, d.sr, d.so)
        continue
    out.append(d)
  return out


def _prod(xs) -> int:
  n = 1
  for x in xs:
    n *= x
  return n


@dataclasses.dataclass
class BlasChoice:
  plan: blas.GemmPlan
  m: Optional[Dim]
  n: Optional[Dim]
  k: Optional[Dim]


def choose_gemm(dims: list[Dim]) -> Optional[BlasChoice]:
  """The (M, N, K) dims giving the largest gemm a BLAS call can express."""
  ms = [d for d in dims if d.kind == "m"] + [None]
  ns = [d for d in dims if d.kind == "n"] + [None]
  ks = [d for d in dims if d.kind == "k"] + [None]
  best = None
  for m in ms:
    for n in ns:
      for k in ks:
        mm = m.size if m else 1
        nn = n.size if n else 1
        kk = k.size if k else 1
        plan = blas.plan_gemm(
            mm, nn, kk, (m.sl if m else 0, k.sl if k else 0),
            (k.sr if k else 0, n.sr if n else 0),
            (m.so if m else 0, n.so if n else 0))
        if plan is None:
          continue
        if best is None or mm * nn * kk > best[0]:
          best = (mm * nn * kk, BlasChoice(plan, m, n, k))
  return best[1] if best else None


def _choose(instr):
  """("blas", dims, lib, choice) or ("loops", dims, None, None); dims are
  simplified unless some dim is empty."""
  out_t = instr.shape.element_type
  dims = dot_dims(instr)
  if cir.num_elements(instr.shape) == 0 or any(d.size == 0 for d in dims):
    return "loops", dims, None, None
  dims = simplify(dims)
  lib = blas.library()
  if (lib is None or out_t not in blas.GEMM_TYPES or
      instr.operand(0).shape.element_type != out_t or
      instr.operand(1).shape.element_type != out_t):
    return "loops", dims, None, None
  choice = choose_gemm(dims)
  if choice is None:
    return "loops", dims, None, None
  p = choice.plan
  if p.m * p.n * p.k < BLAS_MIN_MNK:
    return "loops", dims, None, None
  return "blas", dims, lib, choice


def describe(instr) -> str:
  """"blas" or "loops": which kernel `emit_dot` produces for `instr`."""
  return _choose(instr)[0]


@kernel_api.register_kernel_emitter("dot")
def emit_dot(ctx: kernel_api.KernelContext, instr) -> kernel_api.KernelSpec:
  lhs_t = instr.operand(0).shape.element_type
  rhs_t = instr.operand(1).shape.element_type
  out_t = instr.shape.element_type
  acc = cir.accumulator(out_t, (lhs_t, rhs_t), "dot")
  name = f"dot_{instr.name}"
  out_elems = cir.num_elements(instr.shape)
  if out_elems == 0:
    return _empty_kernel(ctx, name)
  kind, dims, lib, choice = _choose(instr)
  macs = out_elems * _prod(d.size for d in dims if d.kind == "k")
  if kind == "blas":
    return emit_blas(ctx, instr, lib, dims, choice, name, macs)
  return emit_loops(ctx, instr, acc, dims, name)


def _empty_kernel(ctx, name):
  fn, b = ctx.new_kernel(name)
  b.ret_void()
  return kernel_api.KernelSpec(fn.name, 1, 0)


# --- BLAS ---------------------------------------------------------------------


# The kernel's constants for the library routine (`_build_gemm_parts`), an
# i64 table: the part split, the gemm plan, then the leftover dims.
(_NB, _SPLIT_SIZE, _SPLIT_IS_M, _SP_SL, _SP_SR, _SP_SO, _TRANS_A, _TRANS_B,
 _M, _N, _K, _LDA, _LDB, _LDC, _SWAPPED, _N_PAR, _N_RED, _RED_COUNT,
 _DIMS) = range(19)
_PAR_WORDS, _RED_WORDS = 4, 3  # (size, sl, sr, so) / (size, sl, sr)


def _gemm_routine(lib: blas.BlasLibrary, et) -> str:
  """The name of the library routine running a BLAS dot kernel's parts for
  element type `et` (registered on first use: its body calls the gemm of
  the BLAS interface found, whose integer width it carries)."""
  letter = blas.GEMM_TYPES[et]
  name = f"{runtime_library.PREFIX}gemm_parts_{letter}_i{lib.int_bits}"
  if not runtime_library.is_routine(name):
    p = kernel_api.llvm_storage_type(et).as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [p, p, p, cir.I64, cir.I64,
                                           cir.I64.as_pointer()])

    def build(fn, lib=lib, et=et):
      _build_gemm_parts(fn, lib, et)

    runtime_library.routine(name, fnty)(build)
  return name


def _build_gemm_parts(fn: ir.Function, lib: blas.BlasLibrary, et) -> None:
  """f(lhs, rhs, out, begin, end, table): parts [begin, end) of a BLAS dot
  kernel (see `emit_blas`), everything else read from `table`. Compiled
  once per process (and disk cached) instead of once per dot: a kernel of
  its own cost each dot about 6 ms of LLVM time."""
  lhs, rhs, out, begin, end, table = fn.args
  b = ir.IRBuilder(fn.append_basic_block("entry"))

  def word(i):
    idx = i if isinstance(i, ir.Value) else cir.i64(i)
    return b.load(b.gep(table, [idx]))

  nb, split_size = word(_NB), word(_SPLIT_SIZE)
  split_is_m = b.icmp_signed("!=", word(_SPLIT_IS_M), cir.i64(0))
  sp = (word(_SP_SL), word(_SP_SR), word(_SP_SO))
  n_par, n_red, red_count = word(_N_PAR), word(_N_RED), word(_RED_COUNT)
  swapped = b.icmp_signed("!=", word(_SWAPPED), cir.i64(0))
  plan_m, plan_n = word(_M), word(_N)
  red_base = b.add(cir.i64(_DIMS), b.mul(n_par, cir.i64(_PAR_WORDS)))
  offsets = [cir.entry_alloca(b, cir.I64, name=n) for n in ("lo", "ro", "oo")]
  rest_slot = cir.entry_alloca(b, cir.I64, name="rest")

  def add_dims(linear, count, base, words):
    """offsets += the row-major index of `linear` over `count` dims of
    `words` words at table[base] (size first, then the strides)."""
    b.store(linear, rest_slot)
    with cir.for_range(b, 0, count, "d") as di:
      d = b.sub(b.sub(count, cir.i64(1)), di)  # innermost first
      at = b.add(base, b.mul(d, cir.i64(words)))
      size = word(at)
      rest = b.load(rest_slot)
      idx = b.urem(rest, size)
      b.store(b.udiv(rest, size), rest_slot)
      for j, slot in enumerate(offsets[:words - 1]):
        stride = word(b.add(at, cir.i64(j + 1)))
        b.store(b.add(b.load(slot), b.mul(idx, stride)), slot)

  first = b.udiv(begin, nb)
  last = b.udiv(b.add(end, b.sub(nb, cir.i64(1))), nb)
  with cir.for_range(b, first, last, "p") as pi:
    base = b.mul(pi, nb)
    b0 = b.sub(cir.imax(b, begin, base), base)
    b1 = b.sub(cir.imin(b, end, b.add(base, nb)), base)
    r0 = b.mul(b0, cir.i64(SPLIT_BLOCK))
    count = b.sub(cir.imin(b, b.mul(b1, cir.i64(SPLIT_BLOCK)), split_size),
                  r0)
    with b.if_then(b.icmp_signed(">", count, cir.i64(0))):
      for slot, stride in zip(offsets, sp):
        b.store(b.mul(r0, stride), slot)
      add_dims(pi, n_par, cir.i64(_DIMS), _PAR_WORDS)
      lo, ro, oo = (b.load(s) for s in offsets)
      cptr = b.gep(out, [oo])
      m = b.select(split_is_m, count, plan_m)
      n = b.select(split_is_m, plan_n, count)
      with cir.for_range(b, 0, red_count, "r") as ri:
        b.store(lo, offsets[0])
        b.store(ro, offsets[1])
        add_dims(ri, n_red, red_base, _RED_WORDS)
        a_ptr = b.gep(lhs, [b.load(offsets[0])])
        b_ptr = b.gep(rhs, [b.load(offsets[1])])
        blas.emit_runtime_gemm_call(
            b, lib, et, word, (_TRANS_A, _TRANS_B, _K, _LDA, _LDB, _LDC),
            b.select(swapped, b_ptr, a_ptr), b.select(swapped, a_ptr, b_ptr),
            cptr, b.icmp_signed("!=", ri, cir.i64(0)),
            b.select(swapped, n, m), b.select(swapped, m, n))
  b.ret_void()


def emit_blas(ctx, instr, lib, dims, choice: BlasChoice, name,
              macs) -> kernel_api.KernelSpec:
  """Parts are (independent gemm, block of SPLIT_BLOCK rows of its larger
  output dim); one call covers all the consecutive blocks of a part. The
  kernel calls a library routine with a table of this dot's sizes,
  strides and gemm plan."""
  blas.ensure_symbols(lib)
  et = instr.shape.element_type
  chosen = [d for d in (choice.m, choice.n, choice.k) if d is not None]
  rest = [d for d in dims if not any(d is c for c in chosen)]
  par = [d for d in rest if d.kind != "k"]
  red = [d for d in rest if d.kind == "k"]
  n_par = _prod(d.size for d in par)
  p = choice.plan
  m_size = choice.m.size if choice.m else 1
  n_size = choice.n.size if choice.n else 1
  split = choice.m if m_size >= n_size else choice.n
  split_size = max(m_size, n_size)
  nb = -(-split_size // SPLIT_BLOCK)
  extent = n_par * nb
  sp = split if split is not None else Dim("m", 1, 0, 0, 0)
  words = [0] * _DIMS
  words[_NB], words[_SPLIT_SIZE] = nb, split_size
  words[_SPLIT_IS_M] = int(split is choice.m)
  words[_SP_SL], words[_SP_SR], words[_SP_SO] = sp.sl, sp.sr, sp.so
  words[_TRANS_A], words[_TRANS_B] = p.trans_a, p.trans_b
  # M and N as our (unswapped) lhs rows and rhs columns, as the part
  # split clips them; the routine swaps them with the operands.
  words[_M], words[_N] = (p.n, p.m) if p.swapped else (p.m, p.n)
  words[_K] = p.k
  words[_LDA], words[_LDB], words[_LDC] = p.lda, p.ldb, p.ldc
  words[_SWAPPED] = int(p.swapped)
  words[_N_PAR], words[_N_RED] = len(par), len(red)
  words[_RED_COUNT] = _prod(d.size for d in red)
  for d in par:
    words += [d.size, d.sl, d.sr, d.so]
  for d in red:
    words += [d.size, d.sl, d.sr]

  fn, b = ctx.new_kernel(name)
  lhs, rhs, out = cir.load_args(b, fn, (et, et, et))
  ty = ir.ArrayType(cir.I64, len(words))
  table = ir.GlobalVariable(b.module, ty, f"{fn.name}.table")
  table.global_constant = True
  table.linkage = "internal"
  table.initializer = ir.Constant(ty, words)
  routine = runtime_library.declare(b.module, _gemm_routine(lib, et))
  b.call(routine, [lhs, rhs, out, fn.args[1], fn.args[2],
                   b.gep(table, [cir.i64(0), cir.i64(0)])])
  b.ret_void()
  return kernel_api.KernelSpec(fn.name, extent, 2 * macs)


# --- generated loops ----------------------------------------------------------


def emit_loops(ctx, instr, acc: cir.Acc, dims: list[Dim],
               name) -> kernel_api.KernelSpec:
  lhs_t = instr.operand(0).shape.element_type
  rhs_t = instr.operand(1).shape.element_type
  out_t = instr.shape.element_type
  par = [d for d in dims if d.kind != "k"]
  red = [d for d in dims if d.kind == "k"]
  macs = _prod(d.size for d in dims)
  j = min(par, key=lambda d: abs(d.so)) if par else None
  # "reduce" when both operands run contiguously along a K dim but neither
  # does along J (dot products over contiguous memory), or no J exists.
  kin = [d for d in red if d.sl == 1 and d.sr == 1]
  if j is None or j.size < 4 or (kin and j.sl != 1 and j.sr != 1):
    if kin:
      red = [d for d in red if d is not kin[0]] + [kin[0]]
    return _emit_reduce(ctx, acc, par, red, (lhs_t, rhs_t, out_t), name, macs)
  rows = [d for d in par if d is not j]
  # Innermost K loop: the one with the smallest operand strides.
  red = sorted(red, key=lambda d: -(abs(d.sl) + abs(d.sr)))
  return _emit_axpy(ctx, acc, rows, j, red, (lhs_t, rhs_t, out_t), name, macs)


def _emit_reduce(ctx, acc, par, red, types, name, macs):
  lhs_t, rhs_t, out_t = types
  fn, b = ctx.new_kernel(name)
  lhs, rhs, out = cir.load_args(b, fn, types)
  slot = cir.entry_alloca(b, cir.acc_slot_type(acc), name="acc")
  extent = _prod(d.size for d in par)
  with cir.for_range(b, fn.args[1], fn.args[2], "p") as pi:
    idx = cir.decompose(b, pi, [d.size for d in par])
    lo = cir.linear_offset(b, idx, [d.sl for d in par])
    ro = cir.linear_offset(b, idx, [d.sr for d in par])
    oo = cir.linear_offset(b, idx, [d.so for d in par])
    cir.slot_store(b, acc, cir.zero(acc), slot)
    _reduction_loops(b, acc, red, 0, lo, ro, lambda l, r: _mac(
        b, acc, slot, lhs, rhs, l, r, lhs_t, rhs_t, reassoc=True))
    cir.store_result(b, acc, cir.slot_load(b, acc, slot), b.gep(out, [oo]))
  b.ret_void()
  return kernel_api.KernelSpec(fn.name, max(extent, 1), 2 * macs)


def _mac(b, acc, slot, lhs, rhs, l, r, lhs_t, rhs_t, reassoc=False):
  x = cir.load_acc(b, b.gep(lhs, [l]), lhs_t, acc)
  y = cir.load_acc(b, b.gep(rhs, [r]), rhs_t, acc)
  cir.slot_store(b, acc, cir.mul_add(b, acc, cir.slot_load(b, acc, slot), x,
                                     y, reassoc), slot)


def _reduction_loops(b, acc, red, i, lo, ro, body):
  """Nested loops over the K dims `red[i:]`, calling body(lhs_off, rhs_off)."""
  if i == len(red):
    body(lo, ro)
    return
  d = red[i]
  with cir.for_range(b, 0, d.size, f"k{i}") as ki:
    l2 = cir.linear_offset(b, [ki], [d.sl], lo)
    r2 = cir.linear_offset(b, [ki], [d.sr], ro)
    _reduction_loops(b, acc, red, i + 1, l2, r2, body)


def _acc_bits(acc: cir.Acc) -> int:
  if isinstance(acc.ty, ir.IntType):
    return acc.ty.width
  return 32 if acc.ty == cir.F32 else 64


def _blocking(rows: list[Dim], j: Dim) -> Optional[Dim]:
  """The row dim computed ROW_BLOCK rows at a time: an M dim when J is an N
  dim or the reverse, so that the operand varying along J is loaded once
  for the whole block."""
  other = {"n": "m", "m": "n"}.get(j.kind)
  cands = [d for d in rows if d.kind == other and d.size >= 2]
  return max(cands, key=lambda d: d.size) if cands else None


def _simd_shape(ctx, acc: cir.Acc, j: Dim):
  """(lanes, vectors per row) of the explicit SIMD tile, or None unless the
  output and the operand varying along J are contiguous along it (and J has
  at least one vector's worth of elements)."""
  if acc.kind == "complex":
    return None
  if j.so != 1 or not ((j.kind == "n" and j.sr == 1 and j.sl == 0) or
                        (j.kind == "m" and j.sl == 1 and j.sr == 0)):
    return None
  lanes = max(2, ctx.target.vector_bits // _acc_bits(acc))
  if j.size < lanes:
    return None
  return lanes, (2 if j.size >= 2 * lanes else 1)


def _emit_axpy(ctx, acc, rows, j, red, types, name, macs):
  """out[rows, J] = sum over K of lhs * rhs, the inner loop running along J.

  R rows of `blk` (R = ROW_BLOCK, or 1 when there is no such dim) are done
  together. Full tiles of lanes x U elements of J use explicit vectors whose
  accumulators stay in registers across the K loops (R x U of them); the
  rest of J uses a scalar loop over an accumulator tile on the stack (which
  LLVM vectorizes where it can). Rows past the end of `blk` repeat its last
  row and are never stored."""
  blk = _blocking(rows, j)
  nr = ROW_BLOCK if blk is not None else 1
  rest = [d for d in rows if d is not blk]
  n_blk = -(-blk.size // nr) if blk is not None else 1
  simd = _simd_shape(ctx, acc, j)
  fn, b = ctx.new_kernel(name)
  lhs, rhs, out = cir.load_args(b, fn, types)
  extent = _prod(d.size for d in rest) * n_blk
  with cir.for_range(b, fn.args[1], fn.args[2], "p") as pi:
    idx = cir.decompose(b, pi, [d.size for d in rest] + [n_blk])
    lo = cir.linear_offset(b, idx[:-1], [d.sl for d in rest])
    ro = cir.linear_offset(b, idx[:-1], [d.sr for d in rest])
    oo = cir.linear_offset(b, idx[:-1], [d.so for d in rest])
    rws = _block_rows(b, blk, nr, idx[-1], lo, ro, oo)
    j_done = 0
    if simd is not None:
      lanes, nu = simd
      width = lanes * nu
      n_full = j.size // width
      with cir.for_range(b, 0, n_full, "vt") as ti:
        _simd_tile(b, acc, types, (lhs, rhs, out), j, red, rws,
                   b.mul(ti, cir.i64(width)), lanes, nu)
      j_done = n_full * width
    if j_done < j.size:
      _scalar_tiles(b, acc, types, (lhs, rhs, out), j, red, rws, j_done, nr)
  b.ret_void()
  return kernel_api.KernelSpec(fn.name, max(extent, 1), 2 * macs)


@dataclasses.dataclass
class _Rows:
  """Offsets of the rows of one block into lhs, rhs, out; `valid[r]` is an
  i1 (None: always valid)."""
  l: list
  r: list
  o: list
  valid: list
  shared_l: bool  # lhs does not depend on the block's row
  shared_r: bool


def _block_rows(b, blk, nr, bi, lo, ro, oo) -> _Rows:
  rows = _Rows([], [], [], [], blk is None or blk.sl == 0,
               blk is None or blk.sr == 0)
  for r in range(nr):
    if blk is None:
      at = cir.i64(0)
      rows.valid.append(None)
    else:
      at = b.add(b.mul(bi, cir.i64(nr)), cir.i64(r))
      rows.valid.append(b.icmp_signed("<", at, cir.i64(blk.size)))
      at = cir.imin(b, at, cir.i64(blk.size - 1))
    rows.l.append(cir.linear_offset(b, [at], [blk.sl if blk else 0], lo))
    rows.r.append(cir.linear_offset(b, [at], [blk.sr if blk else 0], ro))
    rows.o.append(cir.linear_offset(b, [at], [blk.so if blk else 0], oo))
  return rows


def _guarded(b, cond, emit):
  if cond is None:
    emit()
  else:
    with b.if_then(cond):
      emit()


def _vector_ptr(b, base, offset, lanes):
  p = b.gep(base, [offset])
  return b.bitcast(p, ir.VectorType(p.type.pointee, lanes).as_pointer())


def _splat(b, x, lanes):
  vt = ir.VectorType(x.type, lanes)
  v = b.insert_element(ir.Constant(vt, ir.Undefined), x, cir.i32(0))
  return b.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                          ir.Constant(ir.VectorType(cir.I32, lanes), 0))


def _simd_tile(b, acc, types, ptrs, j: Dim, red, rws: _Rows, j0, lanes, nu):
  lhs_t, rhs_t, _ = types
  lhs, rhs, out = ptrs
  nr = len(rws.l)
  vt = ir.VectorType(acc.ty, lanes)
  slots = [[cir.entry_alloca(b, vt, name=f"vacc{r}_{u}") for u in range(nu)]
           for r in range(nr)]
  for row in slots:
    for slot in row:
      b.store(ir.Constant(vt, 0), slot)
  j_is_n = j.kind == "n"
  # The operand varying along J (contiguous) and the one varying by row.
  vbase, vt_et = (rhs, rhs_t) if j_is_n else (lhs, lhs_t)
  sbase, st_et = (lhs, lhs_t) if j_is_n else (rhs, rhs_t)
  voffs = rws.r if j_is_n else rws.l
  soffs = rws.l if j_is_n else rws.r
  shared_v = rws.shared_r if j_is_n else rws.shared_l
  vstore = kernel_api.llvm_storage_type(vt_et)

  def body(lk, rk):
    vk, sk = (rk, lk) if j_is_n else (lk, rk)
    ys = {}
    for r in range(nr):
      vkey = 0 if shared_v else r
      if vkey not in ys:
        ys[vkey] = []
        for u in range(nu):
          off = b.add(b.add(voffs[r], vk), b.add(j0, cir.i64(u * lanes)))
          raw = b.load(_vector_ptr(b, vbase, off, lanes),
                       align=_align(vstore))
          ys[vkey].append(cir.convert_real(b, raw, vt_et, vt))
      x = cir.load_real(b, b.gep(sbase, [b.add(soffs[r], sk)]), st_et,
                        acc.ty)
      xv = _splat(b, x, lanes)
      for u in range(nu):
        slot = slots[r][u]
        b.store(cir.mul_add(b, acc, b.load(slot), xv, ys[vkey][u]), slot)

  _reduction_loops(b, acc, red, 0, cir.i64(0), cir.i64(0), body)
  out_store = kernel_api.llvm_storage_type(acc.result)
  for r in range(nr):
    def store(r=r):
      for u in range(nu):
        v = b.load(slots[r][u])
        off = b.add(rws.o[r], b.add(j0, cir.i64(u * lanes)))  # J.so == 1
        b.store(cir.to_storage(b, acc, v), _vector_ptr(b, out, off, lanes),
                align=_align(out_store))
    _guarded(b, rws.valid[r], store)


def _align(ty: ir.Type) -> int:
  if isinstance(ty, ir.IntType):
    return max(1, ty.width // 8)
  return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(ty)]


def _scalar_tiles(b, acc, types, ptrs, j: Dim, red, rws: _Rows, j_start, nr):
  """J in [j_start, j.size) in tiles of TILE with stack accumulators."""
  lhs_t, rhs_t, _ = types
  lhs, rhs, out = ptrs
  span = j.size - j_start
  tile = min(TILE, span)
  accs = cir.entry_alloca(b, cir.acc_slot_type(acc), nr * tile, name="acc")
  n_tiles = -(-span // tile)
  with cir.for_range(b, 0, n_tiles, "t") as ti:
    j0 = b.add(b.mul(ti, cir.i64(tile)), cir.i64(j_start))
    if span % tile == 0:
      count = cir.i64(tile)
    else:
      count = cir.imin(b, cir.i64(tile), b.sub(cir.i64(j.size), j0))
    with cir.for_range(b, 0, nr * tile, "z") as zi:
      cir.slot_store(b, acc, cir.zero(acc), b.gep(accs, [zi]))

    def body(lk, rk):
      with cir.for_range(b, 0, count, "j") as ji:
        jj = b.add(j0, ji)
        jl = cir.linear_offset(b, [jj], [j.sl], lk)
        jr = cir.linear_offset(b, [jj], [j.sr], rk)
        xs, ys = {}, {}
        for r in range(nr):
          lkey = 0 if rws.shared_l else r
          rkey = 0 if rws.shared_r else r
          if lkey not in xs:
            xs[lkey] = cir.load_acc(b, b.gep(lhs, [b.add(rws.l[r], jl)]),
                                    lhs_t, acc)
          if rkey not in ys:
            ys[rkey] = cir.load_acc(b, b.gep(rhs, [b.add(rws.r[r], jr)]),
                                    rhs_t, acc)
          slot = b.gep(accs, [b.add(ji, cir.i64(r * tile))])
          cir.slot_store(b, acc, cir.mul_add(
              b, acc, cir.slot_load(b, acc, slot), xs[lkey], ys[rkey]), slot)

    _reduction_loops(b, acc, red, 0, cir.i64(0), cir.i64(0), body)
    for r in range(nr):
      def store(r=r):
        with cir.for_range(b, 0, count, f"s{r}") as si:
          o2 = cir.linear_offset(b, [b.add(j0, si)], [j.so], rws.o[r])
          slot = b.gep(accs, [b.add(si, cir.i64(r * tile))])
          cir.store_result(b, acc, cir.slot_load(b, acc, slot),
                           b.gep(out, [o2]))
      _guarded(b, rws.valid[r], store)


def _register_gemm_routines() -> None:
  """Registers the gemm routines of the BLAS found when this module is
  imported, so that code loaded from a cache (which emits no dot in this
  process) finds them too."""
  lib = blas.library()
  if lib is not None:
    for et in blas.GEMM_TYPES:
      _gemm_routine(lib, et)


_register_gemm_routines()
