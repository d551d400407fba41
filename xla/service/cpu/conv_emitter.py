"""Kernel emitter for HLO `convolution`.

Handles general ConvolutionDimensionNumbers (any dim order, any layout), any
number of spatial dims, window strides, low/high (also negative) padding,
lhs (base) and rhs (window) dilation, window reversal, feature_group_count
and batch_group_count (not both > 1 at once).

Notation: for output spatial position o, kernel position k and spatial dim
j, the *dilated* input coordinate is c = o * stride + k * rhs_dil - pad_lo;
it reads input element c / lhs_dil when 0 <= c < (in - 1) * lhs_dil + 1 and
lhs_dil divides c (window reversal reads kernel element K-1-k). Group g of
G feature groups pairs input features [g*Cin/G, ...) with output features
[g*Cout/G, ...); with B batch groups, output features [g*Cout/B, ...) read
input batch g*N/B + n.

Three kernels, chosen per convolution (`describe` says which):

"shifted" gemm (F32/F64/C64/C128, numpy's OpenBLAS, no lhs dilation): for
one output row (batch n, all spatial dims but one, group g) and one kernel
position, the products form a plain matrix product
    out[x, co] += in[x*stride + shift, ci] * kernel[pos, ci, co]
over the output positions x of the remaining spatial dim (or over the batch
dim), ci and co of the group: one gemm whose A is a strided view of the
input (lda = stride * in_stride), so nothing is copied and no scratch is
needed. Padding clips x to the positions whose input is in bounds (the
gemm's M shrinks at the borders), out-of-bounds kernel rows are skipped; the
row is zeroed first and every gemm accumulates (beta = 1). `blas.plan_gemm`
picks transposes, so any layout where a feature dim of each operand (or
that spatial dim) is contiguous takes it (NHWC/HWIO, NCHW/HWIO, ...).

"im2col" tiles (conv_im2col; same types, any lhs dilation): MT output
positions' windows are copied into a patch matrix on the stack (at most
conv_im2col.PATCH_BYTES) and multiplied by the kernel, read in place, in one
gemm with K = window size x input features. Takes the kernel layouts the
shifted gemm cannot (OIHW) and lhs-dilated (transposed) convolutions.

"loops" (everything else: integer / F16 / BF16 / PRED / mixed types, gemms
below BLAS_MIN_MNK such as depthwise convolutions): generated loops. The
inner loop runs over a tile of output features of one group (or, when each
group has a single output feature, e.g. depthwise, over the groups) with
accumulators on the stack, for each valid kernel position (ranges computed
per row, so padding costs no per-element test) and input feature; LLVM
vectorizes it along the features. Accumulation follows
`contraction_ir.Acc` (f16/bf16 in f32; integers wrap in the result width).

Measured with `python -m xla.service.cpu.dot_bench` (2-core AVX-512 VM shared
with other jobs, one thread, best of 5; f32 NHWC 3x3 stride 1 "same",
batch 8; GFLOP/s):
    layer (hw, cin->cout)  im2col  shifted  loops  numpy im2col+mm  jax.jit
    32x32, 16->32             66      72      43         54           105
    16x16, 32->64             86     111      36         75           115
    8x8,   64->128            91     141      37         93           118
    32x32,  3->16             55      16      43         18            11
The shifted gemm (whose small calls hit OpenBLAS's small-matrix kernels)
wins from 16 input features per group on; with 3 its K is too thin and the
im2col tiles win: SHIFTED_MIN_CIN picks the order, the other strategy is the
fallback when the first does not apply. Both beat the direct loops 1.3-4x.

Threads: the parallel extent is the number of output rows (shifted: batch x
spatial dims but the gemm's; im2col: tiles x groups; loops: all output
positions x groups), each part making its own single-threaded-size calls;
see dot_emitter for how OpenBLAS's thread count should be set.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import support
from xla import primitive_util
from xla import xla_data
from xla.service.cpu import blas
from xla.service.cpu import contraction_ir as cir
from xla.service.cpu import conv_im2col
from xla.service.cpu import kernel_api

PrimitiveType = xla_data.PrimitiveType

# Kernels loaded from a compilation cache link against these.
blas.register_symbols()

# Below this many multiply-adds per gemm call the loop kernel is used.
BLAS_MIN_MNK = 2048
# BLAS strategies allowed (the bench and tests narrow it).
STRATEGIES = ("shifted", "im2col")
# The shifted gemm's K is the group's input features: from this many on it
# measured faster than im2col tiles (16/32/64: 1.1-1.5x); with 3 input
# features im2col tiles (K = 27) were 3x faster.
SHIFTED_MIN_CIN = 16
# Output-feature accumulators per tile (on the stack). Smaller tiles measured
# slower; LLVM's full unrolling of constant 16-32 trip loops can cost up to
# ~0.5 s of compile time for the loop kernel.
TILE = 64


@dataclasses.dataclass
class Spatial:
  out: int
  inp: int
  k: int
  stride: int
  pad_lo: int
  ldil: int
  rdil: int
  rev: bool
  s_in: int
  s_k: int
  s_out: int

  @property
  def dilated_in(self) -> int:
    return 0 if self.inp == 0 else (self.inp - 1) * self.ldil + 1


@dataclasses.dataclass
class Geometry:
  """Sizes and element strides of one convolution."""
  n_out: int
  cin_g: int  # input features per group (the kernel's input feature size)
  cout_g: int  # output features per group
  n_groups: int
  feature_groups: bool  # groups split input features (else batch groups)
  spatial: list
  s_in_b: int
  s_in_f: int
  s_k_i: int
  s_k_o: int
  s_out_b: int
  s_out_f: int

  def group_in_offset(self) -> int:
    """Input element offset between consecutive groups."""
    if self.n_groups == 1:
      return 0
    if self.feature_groups:
      return self.cin_g * self.s_in_f
    return self.n_out * self.s_in_b


def geometry(instr) -> Geometry:
  lhs, rhs, out = (instr.operand(0).shape, instr.operand(1).shape,
                   instr.shape)
  dn = instr.convolution_dimension_numbers
  fgc = instr.feature_group_count or 1
  bgc = instr.batch_group_count or 1
  if fgc > 1 and bgc > 1:
    raise support.UnimplementedError(
        "CPU convolution: feature_group_count > 1 together with "
        "batch_group_count > 1")
  wd = instr.window.dimensions or ()
  ns = len(dn.input_spatial_dimensions)
  if len(wd) != ns:
    raise support.InvalidArgumentError(
        f"convolution {instr.name}: window has {len(wd)} dims for {ns} "
        "spatial dims")
  si, sk, so = cir.strides(lhs), cir.strides(rhs), cir.strides(out)
  spatial = []
  for j in range(ns):
    a = dn.input_spatial_dimensions[j]
    b = dn.kernel_spatial_dimensions[j]
    c = dn.output_spatial_dimensions[j]
    w = wd[j]
    spatial.append(Spatial(
        out=out.dimensions[c], inp=lhs.dimensions[a], k=rhs.dimensions[b],
        stride=w.stride, pad_lo=w.padding_low, ldil=w.base_dilation or 1,
        rdil=w.window_dilation or 1, rev=bool(w.window_reversal),
        s_in=si[a], s_k=sk[b], s_out=so[c]))
  groups = max(fgc, bgc)
  cout = out.dimensions[dn.output_feature_dimension]
  return Geometry(
      n_out=out.dimensions[dn.output_batch_dimension],
      cin_g=rhs.dimensions[dn.kernel_input_feature_dimension],
      cout_g=cout // groups if groups else 0,
      n_groups=groups,
      feature_groups=fgc > 1,
      spatial=spatial,
      s_in_b=si[dn.input_batch_dimension],
      s_in_f=si[dn.input_feature_dimension],
      s_k_i=sk[dn.kernel_input_feature_dimension],
      s_k_o=sk[dn.kernel_output_feature_dimension],
      s_out_b=so[dn.output_batch_dimension],
      s_out_f=so[dn.output_feature_dimension])


def _prod(xs) -> int:
  n = 1
  for x in xs:
    n *= x
  return n


@dataclasses.dataclass
class BlasChoice:
  plan: blas.GemmPlan
  mdim: Optional[int]  # spatial index, or None for the batch dim


def choose_gemm(g: Geometry) -> Optional[BlasChoice]:
  """The output dim (batch or one spatial dim) that is the gemm's M."""
  if any(s.ldil != 1 for s in g.spatial):
    return None
  cands = [(None, g.n_out, g.s_in_b, g.s_out_b)]
  for j, s in enumerate(g.spatial):
    cands.append((j, s.out, s.stride * s.s_in, s.s_out))
  best = None
  for j, m, sa, sc in cands:
    plan = blas.plan_gemm(m, g.cout_g, g.cin_g, (sa, g.s_in_f),
                          (g.s_k_i, g.s_k_o), (sc, g.s_out_f))
    if plan is not None and (best is None or m > best[0]):
      best = (m, BlasChoice(plan, j))
  return best[1] if best else None


def describe(instr) -> str:
  """The kernel `emit_convolution` produces: "im2col", "shifted" (both call
  BLAS) or "loops"."""
  return _choose(instr)[0]


def _choose(instr):
  """(strategy, geometry, BLAS library, plan)."""
  out_t = instr.shape.element_type
  types = (instr.operand(0).shape.element_type,
           instr.operand(1).shape.element_type)
  g = geometry(instr)
  lib = blas.library()
  degenerate = (g.cin_g == 0 or g.cout_g == 0 or g.n_out == 0 or
                any(s.k == 0 or s.inp == 0 or s.out == 0 for s in g.spatial))
  if (lib is None or degenerate or out_t not in blas.GEMM_TYPES or
      any(t != out_t for t in types)):
    return "loops", g, None, None
  order = (("shifted", "im2col") if g.cin_g >= SHIFTED_MIN_CIN else
           ("im2col", "shifted"))
  for strategy in [x for x in order if x in STRATEGIES]:
    if strategy == "im2col":
      p = conv_im2col.plan(g, primitive_util.byte_width(out_t))
      if p is not None and g.cout_g * p.kpc * min(p.mt, 8) >= BLAS_MIN_MNK:
        return "im2col", g, lib, p
    elif strategy == "shifted":
      choice = choose_gemm(g)
      if (choice is not None and
          choice.plan.m * choice.plan.n * choice.plan.k >= BLAS_MIN_MNK):
        return "shifted", g, lib, choice
  return "loops", g, None, None


@kernel_api.register_kernel_emitter("convolution")
def emit_convolution(ctx: kernel_api.KernelContext,
                     instr) -> kernel_api.KernelSpec:
  lhs_t = instr.operand(0).shape.element_type
  rhs_t = instr.operand(1).shape.element_type
  out_t = instr.shape.element_type
  acc = cir.accumulator(out_t, (lhs_t, rhs_t), "convolution")
  name = f"convolution_{instr.name}"
  kind, g, lib, choice = _choose(instr)
  out_elems = cir.num_elements(instr.shape)
  macs = out_elems * g.cin_g * _prod(s.k for s in g.spatial)
  if out_elems == 0:
    fn, b = ctx.new_kernel(name)
    b.ret_void()
    return kernel_api.KernelSpec(fn.name, 1, 0)
  if kind == "im2col":
    return conv_im2col.emit(ctx, g, lib, choice, out_t, name, macs)
  if kind == "shifted":
    return _emit_shifted(ctx, g, lib, choice, out_t, name, macs)
  return _emit_loops(ctx, g, acc, (lhs_t, rhs_t, out_t), name, macs)


# --- shared pieces ------------------------------------------------------------


def _k_range(b, s: Spatial, o):
  """[lo, hi) of kernel positions whose dilated input coordinate is in
  bounds for output position `o` (i64)."""
  base = b.sub(b.mul(o, cir.i64(s.stride)), cir.i64(s.pad_lo))  # c at k=0
  # 0 <= base + k*rdil <= dilated_in - 1
  lo = b.neg(cir.floordiv(b, base, s.rdil))  # ceil(-base / rdil)
  hi = b.add(cir.floordiv(b, b.sub(cir.i64(s.dilated_in - 1), base), s.rdil),
             cir.i64(1))
  lo = cir.imax(b, lo, cir.i64(0))
  hi = cir.imin(b, hi, cir.i64(s.k))
  return lo, hi, base


def _kernel_offset(b, s: Spatial, k):
  if s.rev:
    return b.mul(b.sub(cir.i64(s.k - 1), k), cir.i64(s.s_k))
  return b.mul(k, cir.i64(s.s_k))


def _row_axes(g: Geometry, exclude_spatial: Optional[int], with_batch: bool,
              with_groups: bool):
  axes = []
  if with_batch:
    axes.append(("b", None, g.n_out))
  for j, s in enumerate(g.spatial):
    if j != exclude_spatial:
      axes.append(("s", j, s.out))
  if with_groups and g.n_groups > 1:
    axes.append(("g", None, g.n_groups))
  return axes


def _row_values(b, axes, idx):
  vals = {"b": cir.i64(0), "g": cir.i64(0)}
  spatial = {}
  for (kind, j, _), v in zip(axes, idx):
    if kind == "s":
      spatial[j] = v
    else:
      vals[kind] = v
  return vals["b"], vals["g"], spatial


# --- shifted gemm -------------------------------------------------------------


def _emit_shifted(ctx, g: Geometry, lib, choice: BlasChoice, et, name, macs):
  blas.ensure_symbols(lib)
  p = choice.plan
  mj = choice.mdim
  axes = _row_axes(g, mj, mj is not None, True)
  n_rows = _prod(a[2] for a in axes)
  extent = n_rows
  if mj is None:
    m_size, s_out_m = g.n_out, g.s_out_b
  else:
    m_size, s_out_m = g.spatial[mj].out, g.spatial[mj].s_out

  fn, b = ctx.new_kernel(name)
  inp, ker, out = cir.load_args(b, fn, (et, et, et))
  zero = cir.zero(cir.accumulator(et))
  with cir.for_range(b, fn.args[1], fn.args[2], "row") as ri:
    idx = cir.decompose(b, ri, [a[2] for a in axes])
    n, grp, opos = _row_values(b, axes, idx)
    in_base = cir.linear_offset(b, [n, grp],
                                [g.s_in_b, g.group_in_offset()])
    k_base = cir.linear_offset(b, [grp], [g.cout_g * g.s_k_o])
    out_base = cir.linear_offset(
        b, [n, grp] + [opos[j] for j in sorted(opos)],
        [g.s_out_b, g.cout_g * g.s_out_f] +
        [g.spatial[j].s_out for j in sorted(opos)])
    # Zero this row's output block; every gemm below accumulates.
    with cir.for_range(b, 0, m_size, "zx") as zx:
      zrow = cir.linear_offset(b, [zx], [s_out_m], out_base)
      with cir.for_range(b, 0, g.cout_g, "zc") as zc:
        cir.store_result(b, cir.accumulator(et), zero,
                         b.gep(out, [cir.linear_offset(b, [zc], [g.s_out_f],
                                                       zrow)]))

    def gemm(in_off, k_off):
      if mj is None:
        blas.emit_gemm_call(b, lib, et, p, b.gep(inp, [in_off]),
                            b.gep(ker, [k_off]), b.gep(out, [out_base]), True)
        return
      s = g.spatial[mj]
      with cir.for_range(b, 0, s.k, "km") as km:
        # x*stride + km*rdil - pad_lo in [0, in): the x range in bounds.
        shift = b.sub(b.mul(km, cir.i64(s.rdil)), cir.i64(s.pad_lo))
        x0 = b.neg(cir.floordiv(b, shift, s.stride))
        x1 = b.add(cir.floordiv(b, b.sub(cir.i64(s.inp - 1), shift),
                                s.stride), cir.i64(1))
        x0 = cir.imax(b, x0, cir.i64(0))
        x1 = cir.imin(b, x1, cir.i64(s.out))
        with b.if_then(b.icmp_signed("<", x0, x1)):
          first = b.add(b.mul(x0, cir.i64(s.stride)), shift)
          a_off = cir.linear_offset(b, [first], [s.s_in], in_off)
          c_off = cir.linear_offset(b, [x0], [s.s_out], out_base)
          kk = b.add(k_off, _kernel_offset(b, s, km))
          blas.emit_gemm_call(b, lib, et, p, b.gep(inp, [a_off]),
                              b.gep(ker, [kk]), b.gep(out, [c_off]), True,
                              m=b.sub(x1, x0))

    _spatial_loops(b, g, [j for j in range(len(g.spatial)) if j != mj], 0,
                   opos, in_base, k_base, gemm)
  b.ret_void()
  return kernel_api.KernelSpec(fn.name, extent, 2 * macs)


def _spatial_loops(b, g: Geometry, dims, i, opos, in_off, k_off, body):
  """Loops over the in-bounds kernel positions of spatial dims `dims[i:]`
  (lhs dilation: positions off the dilation grid are skipped), calling
  body(input offset, kernel offset)."""
  if i == len(dims):
    body(in_off, k_off)
    return
  j = dims[i]
  s = g.spatial[j]
  lo, hi, base = _k_range(b, s, opos[j])
  with cir.for_range(b, lo, hi, f"k{j}") as k:
    c = b.add(base, b.mul(k, cir.i64(s.rdil)))
    k2 = b.add(k_off, _kernel_offset(b, s, k))
    if s.ldil == 1:
      in2 = cir.linear_offset(b, [c], [s.s_in], in_off)
      _spatial_loops(b, g, dims, i + 1, opos, in2, k2, body)
    else:
      on_grid = b.icmp_signed("==", b.srem(c, cir.i64(s.ldil)), cir.i64(0))
      with b.if_then(on_grid):
        in2 = cir.linear_offset(b, [b.sdiv(c, cir.i64(s.ldil))], [s.s_in],
                                in_off)
        _spatial_loops(b, g, dims, i + 1, opos, in2, k2, body)


# --- generated loops ----------------------------------------------------------


def _emit_loops(ctx, g: Geometry, acc, types, name, macs):
  lhs_t, rhs_t, _ = types
  # J: output features of a group, or the groups themselves when each group
  # has one output feature (depthwise): then input and kernel move with j.
  span = g.n_groups > 1 and g.cout_g == 1
  if span:
    j_size = g.n_groups
    j_in, j_k, j_out = g.group_in_offset(), g.s_k_o, g.s_out_f
  else:
    j_size = g.cout_g
    j_in, j_k, j_out = 0, g.s_k_o, g.s_out_f
  axes = _row_axes(g, None, True, not span)
  n_rows = _prod(a[2] for a in axes)
  tile = max(1, min(TILE, j_size))
  n_tiles = -(-j_size // tile)

  fn, b = ctx.new_kernel(name)
  inp, ker, out = cir.load_args(b, fn, types)
  accs = cir.entry_alloca(b, cir.acc_slot_type(acc), tile, name="acc")
  with cir.for_range(b, fn.args[1], fn.args[2], "row") as ri:
    idx = cir.decompose(b, ri, [a[2] for a in axes])
    n, grp, opos = _row_values(b, axes, idx)
    in_base = cir.linear_offset(b, [n, grp],
                                [g.s_in_b, g.group_in_offset()])
    k_base = cir.linear_offset(b, [grp], [g.cout_g * g.s_k_o])
    out_base = cir.linear_offset(
        b, [n, grp] + [opos[j] for j in sorted(opos)],
        [g.s_out_b, g.cout_g * g.s_out_f] +
        [g.spatial[j].s_out for j in sorted(opos)])
    with cir.for_range(b, 0, n_tiles, "t") as ti:
      j0 = b.mul(ti, cir.i64(tile))
      if j_size % tile == 0:
        count = cir.i64(tile)
      else:
        count = cir.imin(b, cir.i64(tile), b.sub(cir.i64(j_size), j0))
      with cir.for_range(b, 0, count, "z") as zi:
        cir.slot_store(b, acc, cir.zero(acc), b.gep(accs, [zi]))
      in_t = cir.linear_offset(b, [j0], [j_in], in_base)
      k_t = cir.linear_offset(b, [j0], [j_k], k_base)
      out_t = cir.linear_offset(b, [j0], [j_out], out_base)

      def body(in_off, k_off):
        with cir.for_range(b, 0, g.cin_g, "ci") as ci:
          i2 = cir.linear_offset(b, [ci], [g.s_in_f], in_off)
          k2 = cir.linear_offset(b, [ci], [g.s_k_i], k_off)
          with cir.for_range(b, 0, count, "j") as ji:
            i3 = cir.linear_offset(b, [ji], [j_in], i2)
            k3 = cir.linear_offset(b, [ji], [j_k], k2)
            slot = b.gep(accs, [ji])
            x = cir.load_acc(b, b.gep(inp, [i3]), lhs_t, acc)
            y = cir.load_acc(b, b.gep(ker, [k3]), rhs_t, acc)
            cir.slot_store(b, acc, cir.mul_add(
                b, acc, cir.slot_load(b, acc, slot), x, y), slot)

      _spatial_loops(b, g, list(range(len(g.spatial))), 0, opos, in_t, k_t,
                     body)
      with cir.for_range(b, 0, count, "s") as si:
        o2 = cir.linear_offset(b, [si], [j_out], out_t)
        cir.store_result(b, acc, cir.slot_load(b, acc, b.gep(accs, [si])),
                         b.gep(out, [o2]))
  b.ret_void()
  return kernel_api.KernelSpec(fn.name, max(n_rows, 1), 2 * macs)
