"""Convolution as im2col tiles on the stack + one gemm per tile.

A part of the kernel takes MT consecutive output positions (batch and
spatial dims flattened in output order, as far as they form one strided
run in the output) of one group, copies their input windows into a patch
matrix P[MT, KP*Cin_g] in a stack buffer of at most PATCH_BYTES (zeros where
a window reads padding or falls between lhs-dilated elements), and calls
    out[pos, co] = P[pos, :] . kernel[(window pos, ci), co]
once (beta = 0: every output element is written by exactly one call). The
patch columns follow the kernel's own layout (e.g. (kh, kw, ci) for HWIO,
(ci, kh, kw) for OIHW), so the kernel is read in place as a matrix with one
row stride; layouts where the window dims and the input feature dim do not
form one strided run in the kernel are left to the other strategies.

Compared with the shifted gemm (conv_emitter), K is the whole window
(KP*Cin_g instead of Cin_g) and M spans several output rows, so each gemm is
larger and OpenBLAS runs closer to its peak; the copy costs KP reads per
input element, from cache. See conv_emitter for the measurements.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from llvmlite import ir

from xla.service.cpu import blas
from xla.service.cpu import contraction_ir as cir
from xla.service.cpu import kernel_api

# Stack bytes for one patch tile.
PATCH_BYTES = 128 * 1024
# Fewer rows per tile than this and the gemm is too thin to be worth it.
MIN_ROWS = 4


@dataclasses.dataclass
class Plan:
  cols: list  # patch column elements, outer first: ("s", j) or ("c", None)
  col_sizes: list
  kpc: int  # patch columns
  pos: list  # flattened position dims, outer first: ("b", None) / ("s", j)
  pos_sizes: list
  loops: list  # the other position dims (outer loops), same form
  loop_sizes: list
  pos_stride: int  # output stride of the flattened position
  mt: int  # rows per tile
  gemm: blas.GemmPlan


def _out_stride(g, d):
  return g.s_out_b if d[0] == "b" else g.spatial[d[1]].s_out


def plan(g, elem_bytes: int) -> Optional[Plan]:
  """An im2col plan for geometry `g` (conv_emitter.Geometry), or None."""
  # Patch columns: window dims and the group's input features, in the
  # kernel's stride order; they must form one strided run.
  elems = [(("s", j), s.k, s.s_k) for j, s in enumerate(g.spatial)]
  elems.append((("c", None), g.cin_g, g.s_k_i))
  chain = sorted([e for e in elems if e[1] > 1], key=lambda e: -e[2])
  for (_, _, s0), (_, n1, s1) in zip(chain, chain[1:]):
    if s0 != s1 * n1:
      return None
  row_stride = chain[-1][2] if chain else 1
  kpc = 1
  for e in chain:
    kpc *= e[1]
  # Output positions: the longest run of (batch, spatial) dims, ordered by
  # output stride, that is one strided dim of the output.
  dims = [("b", None)] + [("s", j) for j in range(len(g.spatial))]
  sizes = {d: (g.n_out if d[0] == "b" else g.spatial[d[1]].out) for d in dims}
  big = sorted([d for d in dims if sizes[d] > 1],
               key=lambda d: -_out_stride(g, d))
  run = big[-1:]
  for d in reversed(big[:-1]):
    inner = run[0]
    if _out_stride(g, d) != _out_stride(g, inner) * sizes[inner]:
      break
    run.insert(0, d)
  loops = [d for d in big if d not in run]
  n_pos = 1
  for d in run:
    n_pos *= sizes[d]
  pos_stride = _out_stride(g, run[-1]) if run else 1
  mt = min(n_pos, max(1, PATCH_BYTES // (kpc * elem_bytes)))
  if mt < min(MIN_ROWS, n_pos):
    return None
  gemm = blas.plan_gemm(mt, g.cout_g, kpc, (kpc, 1), (row_stride, g.s_k_o),
                        (pos_stride, g.s_out_f))
  if gemm is None:
    return None
  return Plan(cols=[e[0] for e in chain], col_sizes=[e[1] for e in chain],
              kpc=kpc, pos=run, pos_sizes=[sizes[d] for d in run],
              loops=loops, loop_sizes=[sizes[d] for d in loops],
              pos_stride=pos_stride, mt=mt, gemm=gemm)


def emit(ctx, g, lib, p: Plan, et, name, macs) -> kernel_api.KernelSpec:
  """The kernel: parts are (outer position loops, tile, group)."""
  blas.ensure_symbols(lib)
  n_pos = 1
  for s in p.pos_sizes:
    n_pos *= s
  n_tiles = -(-n_pos // p.mt)
  axes = list(p.loop_sizes) + [n_tiles, g.n_groups]
  n_parts = 1
  for a in axes:
    n_parts *= a
  gm = p.gemm
  extent = n_parts
  storage = kernel_api.llvm_storage_type(et)
  zero = ir.Constant(storage, None)

  fn, b = ctx.new_kernel(name)
  inp, ker, out = cir.load_args(b, fn, (et, et, et))
  patch = cir.entry_alloca(b, storage, p.mt * p.kpc, name="patch")
  with cir.for_range(b, fn.args[1], fn.args[2], "part") as pi:
    idx = cir.decompose(b, pi, axes)
    fixed = dict(zip(p.loops, idx[:len(p.loops)]))
    tile, grp = idx[len(p.loops)], idx[len(p.loops) + 1]
    first = b.mul(tile, cir.i64(p.mt))
    rows = cir.imin(b, cir.i64(p.mt), b.sub(cir.i64(n_pos), first))
    grp_in = cir.linear_offset(b, [grp], [g.group_in_offset()])
    out_off = cir.linear_offset(
        b, [fixed[d] for d in p.loops] + [grp, first],
        [_out_stride(g, d) for d in p.loops] +
        [g.cout_g * g.s_out_f, p.pos_stride])
    with cir.for_range(b, 0, rows, "r") as r:
      pos_idx = cir.decompose(b, b.add(first, r), p.pos_sizes)
      at = dict(fixed)
      at.update(zip(p.pos, pos_idx))
      _fill_row(b, g, p, inp, at, grp_in,
                b.gep(patch, [b.mul(r, cir.i64(p.kpc))]), zero)
    k_off = cir.linear_offset(b, [grp], [g.cout_g * g.s_k_o])
    blas.emit_gemm_call(b, lib, et, gm, patch, b.gep(ker, [k_off]),
                        b.gep(out, [out_off]), False, m=rows)
  b.ret_void()
  return kernel_api.KernelSpec(fn.name, extent, 2 * macs)


def _fill_row(b, g, p: Plan, inp, at: dict, in_base, row_ptr, zero):
  """Writes one patch row: the window of output position `at` (dim ->
  index; dims missing are 0).

  Bounds tests are left out for spatial dims whose windows never reach
  padding (`_always_in`), and when the innermost window dim and the input
  features are one run in the input (e.g. kw x ci of an unpadded NHWC
  patch embedding), that run is copied by one loop: without this a small
  kernel (ViT's 4x4x3 patches) had a nest of bounds tests that LLVM
  unrolled and took tens of milliseconds to compile."""
  n = at.get(("b", None), cir.i64(0))
  base = b.add(in_base, b.mul(n, cir.i64(g.s_in_b)))
  valid = None  # None: in bounds for every row.
  # Window dims that are not patch columns (size 1) use kernel position 0.
  in_cols = {c for c in p.cols}
  for j, s in enumerate(g.spatial):
    if ("s", j) not in in_cols:
      ok, off = _coord(b, s, at.get(("s", j), cir.i64(0)), cir.i64(0))
      valid = _and(b, valid, ok)
      base = b.add(base, off)

  def copy_run(start, off, size, ok):
    """Patch columns [start, start + size) from input elements off,
    off + s_in_f, ...; zeros where `ok` is false."""
    def copy():
      with cir.for_range(b, 0, size, "cc") as k:
        v = b.load(b.gep(inp, [b.add(off, b.mul(k, cir.i64(g.s_in_f)))]))
        b.store(v, b.gep(row_ptr, [b.add(start, k)]))
    if ok is None:
      copy()
      return
    with b.if_else(ok) as (then, otherwise):
      with then:
        copy()
      with otherwise:
        with cir.for_range(b, 0, size, "cz") as k:
          b.store(zero, b.gep(row_ptr, [b.add(start, k)]))

  def loops(i, col, off, ok):
    if i == len(p.cols):
      if ok is None:
        b.store(b.load(b.gep(inp, [off])), b.gep(row_ptr, [col]))
        return
      safe = b.select(ok, off, cir.i64(0))
      v = b.load(b.gep(inp, [safe]))
      b.store(b.select(ok, v, zero), b.gep(row_ptr, [col]))
      return
    kind, j = p.cols[i]
    size = p.col_sizes[i]
    if kind == "c" and i == len(p.cols) - 1:
      # Innermost input features: one test for the whole run, then a plain
      # (vectorizable) copy or zero fill.
      copy_run(b.mul(col, cir.i64(size)), off, size, ok)
      return
    if kind == "s" and i == len(p.cols) - 2 and p.cols[-1][0] == "c":
      s = g.spatial[j]
      cin = p.col_sizes[-1]
      if (_always_in(s) and not s.rev and
          s.s_in * s.rdil == cin * g.s_in_f):
        # The window positions of this dim and the input features are one
        # strided run of the input.
        _, d = _coord(b, s, at.get(("s", j), cir.i64(0)), cir.i64(0))
        copy_run(b.mul(col, cir.i64(size * cin)), b.add(off, d),
                 size * cin, ok)
        return
    with cir.for_range(b, 0, size, f"c{i}") as k:
      col2 = b.add(b.mul(col, cir.i64(size)), k)
      if kind == "c":
        loops(i + 1, col2, b.add(off, b.mul(k, cir.i64(g.s_in_f))), ok)
      else:
        s = g.spatial[j]
        kl = b.sub(cir.i64(s.k - 1), k) if s.rev else k
        good, d = _coord(b, s, at.get(("s", j), cir.i64(0)), kl)
        loops(i + 1, col2, b.add(off, d), _and(b, ok, good))

  loops(0, cir.i64(0), base, valid)


def _and(b, x, y):
  """x and y, where None stands for true."""
  if x is None:
    return y
  if y is None:
    return x
  return b.and_(x, y)


def _always_in(s) -> bool:
  """Whether every output position and kernel position of spatial dim `s`
  read an input element (no padding reached, no lhs dilation)."""
  return (s.ldil == 1 and s.pad_lo <= 0 and s.out > 0 and s.k > 0 and
          (s.out - 1) * s.stride + (s.k - 1) * s.rdil - s.pad_lo < s.inp)


def _coord(b, s, o, k):
  """(in bounds?, input offset) of output position o, kernel position k;
  None for "in bounds" when it always is."""
  c = b.add(b.sub(b.mul(o, cir.i64(s.stride)), cir.i64(s.pad_lo)),
            b.mul(k, cir.i64(s.rdil)))
  if _always_in(s):
    return None, b.mul(c, cir.i64(s.s_in))
  ok = b.and_(b.icmp_signed(">=", c, cir.i64(0)),
              b.icmp_signed("<", c, cir.i64(s.dilated_in)))
  if s.ldil != 1:
    ok = b.and_(ok, b.icmp_signed("==", b.srem(c, cir.i64(s.ldil)),
                                  cir.i64(0)))
    c = b.sdiv(c, cir.i64(s.ldil))
  return ok, b.mul(c, cir.i64(s.s_in))
