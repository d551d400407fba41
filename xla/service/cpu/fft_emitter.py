"""CPU kernel for `fft` (FFT, IFFT, RFFT, IRFFT over the trailing 1-3 dims).

XLA's CPU backend calls a precompiled FFT library from every program; here
the transform is two library routines (runtime_library.py) per work type,
`fft_rows` and `fft_block`, whose lengths, batch and kind are run-time
arguments. A program's fft kernel is one call of a routine, with the
constant twiddle and bit-reversal tables of its lengths; the routines'
LLVM time is paid once per process (or read from the disk cache), not in
every program: a kernel with its load, transpose and store loops of
constant trip counts took 15-20 ms of LLVM time each, most of a program
with a few FFTs (fft_transforms: 8 kernels, 0.29 s of CPU).

Per batch element (the parallel extent) a routine loads the transformed
block into a complex work buffer, transforms it along each fft axis in
place, and stores the result. Work is in the precision of the data (float
for f32 / c64, as XLA's FFT library computes single-precision transforms,
double for f64 / c128).

* Axes whose length is a power of two take an in-place radix-2 FFT that
  updates whole rows per butterfly (`_build_axis_transform`); a batch of
  1-d transforms (`fft_rows`, IRFFT's Hermitian extension included), and
  the last axis of a 2-d or 3-d block, go through groups of ROW_GROUP rows
  stored transposed, so these vectorise too.
* Other lengths (the CPU compiler sends only short ones here; long ones go
  to the host FFT library) take a direct DFT per line, O(n) per output.
* FFT / IFFT: X[j] = sum_t x[t] exp(-/+ 2 pi i j t / n), IFFT scaled 1/n.
* RFFT: the full complex transform of the real input; the last axis keeps
  its first n / 2 + 1 entries.
* IRFFT: inverse complex transforms along the leading axes, then the
  Hermitian (complex-to-real) inverse along the last axis:
  x[t] = (Re X[0] + 2 sum_{0<m<n/2} Re(X[m] e^{2 pi i m t / n})
  + [n even] Re X[n/2] (-1)^t) / n, ignoring the imaginary parts of the
  DC and Nyquist terms like numpy / pocketfft.

Twiddles exp(2 pi i m / n) are constant tables computed in Python (double
precision, rounded once to the work type), one per length in the program's
module; no sin/cos runs per call.
"""

from __future__ import annotations

import math

from llvmlite import ir

import support
from xla import primitive_util
from xla.service.cpu import kernel_api
from xla.service.cpu import op_emitter_util as u
from xla.service.cpu import runtime_library
from xla.xla_data import FftType
from xla.xla_data import PrimitiveType

P = PrimitiveType
F64 = ir.DoubleType()
F32 = ir.FloatType()
_TYPES = (("f32", F32), ("f64", F64))

# Rows of a batched 1-d transform taken together: a group of this many rows
# is stored transposed (element t of every row side by side), so each
# butterfly updates a contiguous run of ROW_GROUP elements, which LLVM
# vectorises, instead of one scalar per row.
ROW_GROUP = 8


def _twiddles(module: ir.Module, n: int,
              ft: ir.Type = F64) -> ir.GlobalVariable:
  """A constant table of n (cos, sin)(2 pi m / n) pairs of `ft`."""
  name = f"__fft_twiddles_{n}_{_tag(ft)}"
  g = module.globals.get(name)
  if g is not None:
    return g
  vals = []
  for m in range(n):
    # Exact values at multiples of pi / 2 (and symmetric rounding).
    if (4 * m) % n == 0:
      q = (4 * m) // n
      c, s = ((1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0))[q]
    else:
      c, s = math.cos(2 * math.pi * m / n), math.sin(2 * math.pi * m / n)
    vals += [c, s]
  ty = ir.ArrayType(ft, 2 * n)
  g = ir.GlobalVariable(module, ty, name)
  g.global_constant = True
  g.linkage = "internal"
  g.initializer = ir.Constant(ty, vals)
  return g


def _tag(ft: ir.Type) -> str:
  return "f64" if ft == F64 else "f32"


def _work_type(et) -> ir.Type:
  """The precision a transform of `et` data is computed in: that of the
  data (as XLA's FFT library: single-precision transforms in float32, so
  twice as many lanes per vector)."""
  return F32 if et in (P.F32, P.C64) else F64



class _Cplx:
  """(re, im) pairs in the work buffers (float* or double* at 2 * index)."""

  def __init__(self, b: ir.IRBuilder):
    self.b = b

  def load(self, buf, idx):
    b = self.b
    p = b.gep(buf, [b.mul(idx, u.i64(2))])
    return b.load(p), b.load(b.gep(p, [u.i64(1)]))

  def store(self, buf, idx, re, im):
    b = self.b
    p = b.gep(buf, [b.mul(idx, u.i64(2))])
    b.store(re, p)
    b.store(im, b.gep(p, [u.i64(1)]))


def radix2(n: int) -> bool:
  """Whether an axis of length `n` takes the radix-2 path (a power of
  two)."""
  return n >= 2 and n & (n - 1) == 0


def _bit_reversal(module: ir.Module, n: int) -> ir.GlobalVariable:
  """A constant table rev[t]: t with its log2(n) bits reversed."""
  name = f"__fft_bitrev_{n}"
  g = module.globals.get(name)
  if g is not None:
    return g
  bits = n.bit_length() - 1
  vals = [int(format(t, f"0{bits}b")[::-1], 2) for t in range(n)]
  ty = ir.ArrayType(u.I64, n)
  g = ir.GlobalVariable(module, ty, name)
  g.global_constant = True
  g.linkage = "internal"
  g.initializer = ir.Constant(ty, vals)
  return g


def _axis_type(ft: ir.Type) -> ir.FunctionType:
  p = ft.as_pointer()
  return ir.FunctionType(ir.VoidType(), [p, u.I64, u.I64, u.I64, u.I64,
                                         ir.IntType(1), p,
                                         u.I64.as_pointer()])


def _build_axis_transform(fn: ir.Function) -> None:
  """The radix-2 axis transform for one work type:
  f(work, outer, n, log2 n, inner, inverse, twiddles, bit reversal) on the
  `outer` x n x `inner` block in `work`, in place.

  The rows (n of them, each `inner` contiguous elements) are put in
  bit-reversed order by swaps, then each butterfly updates two whole rows,
  so for an axis other than the last the innermost loop runs over
  contiguous elements. Length, row width and direction are arguments, and
  the log2(n) stages one loop, so that one compiled function serves every
  transform: a function per length, width and direction, with a loop nest
  per stage, in every program, made these transforms most of an FFT
  program's LLVM time (fft_transforms: 1.56 s of CPU)."""
  module = fn.module
  work, outer, n, log2n, inner, inverse, tw, rev = fn.args
  ft = work.type.pointee
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  cx = _Cplx(b)
  rows = _row_butterfly(module, ft)
  block = b.mul(n, inner)
  one = ir.Constant(ft, 1.0)
  scale = b.fdiv(one, b.uitofp(n, ft))
  # exp(-/+ 2 pi i m / n): the sign of the twiddles' imaginary parts, as a
  # factor (a select on `inverse` in the loops would make LLVM unswitch
  # them, compiling every loop nest twice).
  sign = b.select(inverse, one, ir.Constant(ft, -1.0))

  def row(r):
    return b.gep(work, [b.mul(b.add(base, b.mul(r, inner)), u.i64(2))])

  with u.for_range(b, 0, outer, "fo") as o:
    base = b.mul(o, block)
    with u.for_range(b, 0, n, "br") as t:
      r = b.load(b.gep(rev, [t]))
      with b.if_then(b.icmp_signed("<", t, r)):
        rt, rr = row(t), row(r)
        with u.for_range(b, 0, inner, "col") as c:
          ar, ai = cx.load(rt, c)
          br, bi = cx.load(rr, c)
          cx.store(rt, c, br, bi)
          cx.store(rr, c, ar, ai)

    with u.for_range(b, 0, log2n, "stage") as st:
      # Stage st: butterflies of span 2 * half between rows half apart, in
      # `blocks` blocks; butterfly k of a block uses twiddle k * blocks.
      half = b.shl(u.i64(1), st)
      blocks = b.lshr(b.lshr(n, u.i64(1)), st)
      span = b.shl(half, u.i64(1))

      def butterflies(blk, k):
        m = b.mul(k, b.shl(blocks, u.i64(1)))
        wr = b.load(b.gep(tw, [m]))
        wi = b.fmul(b.load(b.gep(tw, [b.add(m, u.i64(1))])), sign)
        top = b.add(b.mul(blk, span), k)
        b.call(rows, [row(top), row(b.add(top, half)), wr, wi, inner])

      # The longer loop inside: early stages have many short blocks.
      with b.if_else(b.icmp_unsigned(">=", half, blocks)) as (few, many):
        with few:
          with u.for_range(b, 0, blocks, "blk") as blk:
            with u.for_range(b, 0, half, "bf") as k:
              butterflies(blk, k)
        with many:
          with u.for_range(b, 0, half, "bf") as k:
            with u.for_range(b, 0, blocks, "blk") as blk:
              butterflies(blk, k)

    with b.if_then(inverse):
      start = row(u.i64(0))
      with u.for_range(b, 0, block, "sc") as e:
        re, im = cx.load(start, e)
        cx.store(start, e, b.fmul(re, scale), b.fmul(im, scale))
  b.ret_void()



def _row_butterfly(module: ir.Module, ft: ir.Type) -> ir.Function:
  """(top, bottom) := (top + w * bottom, top - w * bottom) over two rows of
  `inner` complex elements. The rows are `noalias` arguments of a function
  that is always inlined, which tells LLVM's vectoriser that they do not
  overlap (their distance is only known at run time, so it would otherwise
  add an overlap check in front of every row loop)."""
  name = f"__fft_rows_{_tag(ft)}"
  fn = module.globals.get(name)
  if fn is not None:
    return fn
  p = ft.as_pointer()
  fn = ir.Function(module, ir.FunctionType(ir.VoidType(),
                                           [p, p, ft, ft, u.I64]), name)
  fn.linkage = "internal"
  fn.attributes.add("alwaysinline")
  for a in fn.args[:2]:
    a.add_attribute("noalias")
  top, bot, wr, wi, inner = fn.args
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  cx = _Cplx(b)
  with u.for_range(b, 0, inner, "col") as c:
    ur, ui = cx.load(top, c)
    xr, xi = cx.load(bot, c)
    vr = b.fsub(b.fmul(xr, wr), b.fmul(xi, wi))
    vi = b.fadd(b.fmul(xr, wi), b.fmul(xi, wr))
    cx.store(top, c, b.fadd(ur, vr), b.fadd(ui, vi))
    cx.store(bot, c, b.fsub(ur, vr), b.fsub(ui, vi))
  b.ret_void()
  return fn


def _axis_transform(module: ir.Module, ft: ir.Type) -> ir.Function:
  """The radix-2 axis transform of work type `ft` as an internal function
  of `module` (a routine's module): f(work, outer, n, log2 n, inner,
  inverse, twiddles, bit reversal); see `_build_axis_transform`."""
  name = f"__fft_axis_{_tag(ft)}"
  fn = module.globals.get(name)
  if fn is None:
    fn = ir.Function(module, _axis_type(ft), name)
    fn.linkage = "internal"
    _build_axis_transform(fn)
  return fn


# -- run-time helpers of the routines -------------------------------------------


def _alloc(b: ir.IRBuilder, count, ft: ir.Type) -> ir.Value:
  """malloc(count * sizeof(ft)) as an ft* (count an i64 value)."""
  size = 4 if ft == F32 else 8
  return b.bitcast(u.malloc(b, b.mul(count, u.i64(size))), ft.as_pointer())


def _is_radix2(b: ir.IRBuilder, n: ir.Value) -> ir.Value:
  """`radix2(n)` for a run-time length (i1)."""
  pow2 = b.icmp_unsigned("==", b.and_(n, b.sub(n, u.i64(1))), u.i64(0))
  return b.and_(pow2, b.icmp_signed(">=", n, u.i64(2)))


def _log2(b: ir.IRBuilder, n: ir.Value) -> ir.Value:
  """log2(n) of a power of two n (i64)."""
  return b.sub(u.i64(63), b.ctlz(n, ir.Constant(u.I1, 0)))


def _kind_is(b: ir.IRBuilder, kind: ir.Value, which: FftType) -> ir.Value:
  return b.icmp_signed("==", kind, u.i64(int(which)))


def _max(b: ir.IRBuilder, *vals):
  out = vals[0]
  for v in vals[1:]:
    out = b.select(b.icmp_signed(">", v, out), v, out)
  return out


# -- the routines -----------------------------------------------------------------


_ROWS = {t: f"{runtime_library.PREFIX}fft_rows_{t}" for t, _ in _TYPES}
_BLOCK = {t: f"{runtime_library.PREFIX}fft_block_{t}" for t, _ in _TYPES}


def _rows_type(ft: ir.Type) -> ir.FunctionType:
  p = ft.as_pointer()
  # (src, dst, begin, end, n, batch, kind, twiddles, bit reversal)
  return ir.FunctionType(ir.VoidType(), [p, p, u.I64, u.I64, u.I64, u.I64,
                                         u.I64, p, u.I64.as_pointer()])


def _build_rows(fn: ir.Function) -> None:
  """FFT / IFFT / RFFT / IRFFT of length n (a power of two) of `batch`
  rows, in groups of ROW_GROUP rows: groups [begin, end) (the parallel
  extent is the number of groups; the last group's missing rows compute on
  copies of the last row and are not stored). Complex data is (re, im)
  pairs of the work type; RFFT reads real rows and writes n / 2 + 1
  entries per row; IRFFT reads n / 2 + 1 entries per row, transforms their
  Hermitian extension X[n - m] = conj(X[m]) (the imaginary parts of X[0]
  and X[n / 2] taken as zero, as numpy does) and writes the n real
  parts."""
  src, dst, begin, end, n, batch, kind, tw, rev = fn.args
  ft = src.type.pointee
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  cx = _Cplx(b)
  axis = _axis_transform(fn.module, ft)
  g = ROW_GROUP
  rfft = _kind_is(b, kind, FftType.RFFT)
  irfft = _kind_is(b, kind, FftType.IRFFT)
  inverse = b.or_(_kind_is(b, kind, FftType.IFFT), irfft)
  half = b.add(b.lshr(n, u.i64(1)), u.i64(1))
  in_n = b.select(irfft, half, n)
  out_n = b.select(rfft, half, n)
  nh = b.lshr(n, u.i64(1))
  log2n = _log2(b, n)
  work = _alloc(b, b.mul(n, u.i64(2 * g)), ft)
  last = b.sub(batch, u.i64(1))
  zero = ir.Constant(ft, 0.0)

  def at(t, j):
    return b.add(b.mul(t, u.i64(g)), j)

  with u.for_range(b, begin, end, "group") as gi:
    r0 = b.mul(gi, u.i64(g))
    with u.for_range(b, 0, g, "gr") as j:
      row = b.add(r0, j)
      row = b.select(b.icmp_signed(">", row, last), last, row)
      base = b.mul(row, in_n)
      with b.if_else(rfft) as (real, other):
        with real:
          with u.for_range(b, 0, n, "gt") as t:
            re = b.load(b.gep(src, [b.add(base, t)]))
            cx.store(work, at(t, j), re, zero)
        with other:
          with b.if_else(irfft) as (hermitian, cplx):
            with hermitian:
              x0, _ = cx.load(src, base)
              cx.store(work, at(u.i64(0), j), x0, zero)
              xn, _ = cx.load(src, b.add(base, nh))
              cx.store(work, at(nh, j), xn, zero)
              with u.for_range(b, 1, nh, "gh") as m:
                re, im = cx.load(src, b.add(base, m))
                cx.store(work, at(m, j), re, im)
                cx.store(work, at(b.sub(n, m), j), re, b.fneg(im))
            with cplx:
              with u.for_range(b, 0, n, "gc") as t:
                re, im = cx.load(src, b.add(base, t))
                cx.store(work, at(t, j), re, im)
    b.call(axis, [work, u.i64(1), n, log2n, u.i64(g), inverse, tw, rev])
    with u.for_range(b, 0, g, "sr") as j:
      row = b.add(r0, j)
      with b.if_then(b.icmp_signed("<", row, batch)):
        base = b.mul(row, out_n)
        with b.if_else(irfft) as (real_out, cplx_out):
          with real_out:
            with u.for_range(b, 0, n, "sx") as t:
              re, _ = cx.load(work, at(t, j))
              b.store(re, b.gep(dst, [b.add(base, t)]))
          with cplx_out:
            with u.for_range(b, 0, out_n, "st") as t:
              re, im = cx.load(work, at(t, j))
              cx.store(dst, b.add(base, t), re, im)
  u.free(b, work)
  b.ret_void()


def _block_type(ft: ir.Type) -> ir.FunctionType:
  p = ft.as_pointer()
  ip = u.I64.as_pointer()
  # (src, dst, begin, end, kind, w0, w1, w2, n, twiddles of w0, w1, w2,
  #  bit reversals of w0, w1, w2, twiddles and bit reversal of n)
  return ir.FunctionType(ir.VoidType(), [p, p] + [u.I64] * 7 +
                         [p, p, p, ip, ip, ip, p, ip])


def _build_block(fn: ir.Function) -> None:
  """The transform of blocks [begin, end) of a batch. The work block is
  w0 x w1 x w2 complex elements (lengths of fewer than 3 axes padded in
  front with 1); n is the last fft length (for IRFFT, w2 = n / 2 + 1).
  Complex axes: all three, except the last for IRFFT, which takes the
  Hermitian inverse into the real output instead. A table pointer is only
  read for an axis that needs it (twiddles for a length above 1, a bit
  reversal for a power of two)."""
  (src, dst, begin, end, kind, w0, w1, w2, n_last, tw0, tw1, tw2, rev0, rev1,
   rev2, tw_n, rev_n) = fn.args
  ft = src.type.pointee
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  cx = _Cplx(b)
  axis = _axis_transform(fn.module, ft)
  dims, tws, revs = (w0, w1, w2), (tw0, tw1, tw2), (rev0, rev1, rev2)
  rfft = _kind_is(b, kind, FftType.RFFT)
  irfft = _kind_is(b, kind, FftType.IRFFT)
  inverse = b.or_(_kind_is(b, kind, FftType.IFFT), irfft)
  rows = b.mul(w0, w1)
  nwork = b.mul(rows, w2)
  half = b.add(b.lshr(n_last, u.i64(1)), u.i64(1))
  out_block = b.select(irfft, b.mul(rows, n_last),
                       b.select(rfft, b.mul(rows, half), nwork))
  nline = _max(b, w0, w1, w2, n_last)
  ntmp = b.mul(w2, u.i64(ROW_GROUP))
  work = _alloc(b, b.mul(b.add(b.add(nwork, nline), ntmp), u.i64(2)), ft)
  line = b.gep(work, [b.mul(nwork, u.i64(2))])
  tmp = b.gep(line, [b.mul(nline, u.i64(2))])
  accs = (u.entry_alloca(b, ft, name="acc_re"),
          u.entry_alloca(b, ft, name="acc_im"),
          u.entry_alloca(b, u.I64, name="twiddle_pos"))
  zero = ir.Constant(ft, 0.0)
  with u.for_range(b, begin, end, "batch") as bi:
    in_base = b.mul(bi, nwork)
    out_base = b.mul(bi, out_block)
    with b.if_else(rfft) as (real, cplx):
      with real:
        with u.for_range(b, 0, nwork, "lr") as e:
          re = b.load(b.gep(src, [b.add(in_base, e)]))
          cx.store(work, e, re, zero)
      with cplx:
        with u.for_range(b, 0, nwork, "lc") as e:
          re, im = cx.load(src, b.add(in_base, e))
          cx.store(work, e, re, im)
    for a in range(3):
      inner = u.i64(1)
      for d in dims[a + 1:]:
        inner = b.mul(inner, d)
      outer = u.i64(1)
      for d in dims[:a]:
        outer = b.mul(outer, d)
      todo = b.icmp_signed(">", dims[a], u.i64(1))
      if a == 2:
        todo = b.and_(todo, b.not_(irfft))
      with b.if_then(todo):
        _transform_axis(b, cx, axis, work, line, tmp, tws[a], revs[a],
                        dims[a], inner, outer, inverse, accs)
    with b.if_else(irfft) as (c2r, other):
      with c2r:
        _c2r_last_axis(b, cx, axis, work, dst, out_base, rows, w2, n_last,
                       tw_n, rev_n, accs, line)
      with other:
        with b.if_else(rfft) as (r2c, c2c):
          with r2c:
            with u.for_range(b, 0, rows, "row") as r:
              with u.for_range(b, 0, half, "col") as c:
                re, im = cx.load(work, b.add(b.mul(r, n_last), c))
                cx.store(dst, b.add(out_base, b.add(b.mul(r, half), c)),
                         re, im)
          with c2c:
            with u.for_range(b, 0, nwork, "store") as e:
              re, im = cx.load(work, e)
              cx.store(dst, b.add(out_base, e), re, im)
  u.free(b, work)
  b.ret_void()


for _t, _ft in _TYPES:
  runtime_library.routine(_ROWS[_t], _rows_type(_ft))(_build_rows)
  runtime_library.routine(_BLOCK[_t], _block_type(_ft))(_build_block)


def _transform_axis(b, cx, axis, work, line, tmp, tw, rev, n, inner, outer,
                    inverse, accs):
  """The transform along an axis of run-time length n > 1 of the
  outer x n x inner block in `work`, in place. A power of two takes the
  radix-2 transform; the last axis of a block of several rows does so
  ROW_GROUP rows at a time on their transpose in `tmp`, so butterflies
  run along contiguous runs (as `fft_rows`). Other lengths take a direct
  DFT per line, through the line buffer `line`."""
  with b.if_else(_is_radix2(b, n)) as (fast, direct):
    with fast:
      log2n = _log2(b, n)
      grouped = b.and_(b.icmp_signed("==", inner, u.i64(1)),
                       b.icmp_signed(">=", outer, u.i64(2)))
      with b.if_else(grouped) as (by_groups, whole):
        with by_groups:
          g = ROW_GROUP
          last = b.sub(outer, u.i64(1))
          groups = b.udiv(b.add(outer, u.i64(g - 1)), u.i64(g))
          with u.for_range(b, 0, groups, "tg") as gi:
            r0 = b.mul(gi, u.i64(g))
            with u.for_range(b, 0, g, "to") as j:
              o = b.add(r0, j)
              o = b.select(b.icmp_signed(">", o, last), last, o)
              with u.for_range(b, 0, n, "tt") as t:
                re, im = cx.load(work, b.add(b.mul(o, n), t))
                cx.store(tmp, b.add(b.mul(t, u.i64(g)), j), re, im)
            b.call(axis, [tmp, u.i64(1), n, log2n, u.i64(g), inverse, tw,
                          rev])
            with u.for_range(b, 0, g, "bo") as j:
              o = b.add(r0, j)
              with b.if_then(b.icmp_signed("<", o, outer)):
                with u.for_range(b, 0, n, "bt") as t:
                  re, im = cx.load(tmp, b.add(b.mul(t, u.i64(g)), j))
                  cx.store(work, b.add(b.mul(o, n), t), re, im)
        with whole:
          b.call(axis, [work, outer, n, log2n, inner, inverse, tw, rev])
    with direct:
      _line_dfts(b, cx, work, line, tw, n, inner, outer, inverse, accs)


def _line_dfts(b, cx, work, line, tw, n, inner, outer, inverse, accs):
  """The direct DFT of each of the outer x inner lines (stride `inner`) of
  length n in `work`, each copied to `line` first."""
  acc_re, acc_im, pos = accs
  ft = work.type.pointee
  one = ir.Constant(ft, 1.0)
  # exp(-/+ 2 pi i m / n): the sign of the twiddles' imaginary parts.
  sign = b.select(inverse, one, ir.Constant(ft, -1.0))
  scale = b.select(inverse, b.fdiv(one, b.uitofp(n, ft)), one)
  with u.for_range(b, 0, b.mul(outer, inner), "line") as li:
    o = b.udiv(li, inner)
    i = b.urem(li, inner)
    base = b.add(b.mul(b.mul(o, n), inner), i)
    with u.for_range(b, 0, n, "ld") as t:
      re, im = cx.load(work, b.add(base, b.mul(t, inner)))
      cx.store(line, t, re, im)
    with u.for_range(b, 0, n, "dj") as j:
      b.store(ir.Constant(ft, 0.0), acc_re)
      b.store(ir.Constant(ft, 0.0), acc_im)
      b.store(u.i64(0), pos)
      with u.for_range(b, 0, n, "dt") as t:
        xr, xi = cx.load(line, t)
        m = b.load(pos)
        wr, wi = cx.load(tw, m)
        wi = b.fmul(wi, sign)
        b.store(b.fadd(b.load(acc_re),
                       b.fsub(b.fmul(xr, wr), b.fmul(xi, wi))), acc_re)
        b.store(b.fadd(b.load(acc_im),
                       b.fadd(b.fmul(xr, wi), b.fmul(xi, wr))), acc_im)
        nxt = b.add(m, j)
        nxt = b.select(b.icmp_signed(">=", nxt, n), b.sub(nxt, n), nxt)
        b.store(nxt, pos)
      cx.store(work, b.add(base, b.mul(j, inner)),
               b.fmul(b.load(acc_re), scale), b.fmul(b.load(acc_im), scale))


def _c2r_last_axis(b, cx, axis, work, dst, out_base, rows, half, n, tw, rev,
                   accs, line):
  """The Hermitian inverse DFT along the last axis (`half` = n / 2 + 1
  entries per row of `work`) into the real output. For a power of two: a
  complex inverse FFT of each row's Hermitian extension
  X[n - m] = conj(X[m]), with the imaginary parts of X[0] and X[n / 2]
  taken as zero (numpy's convention), whose real part is the output.
  Otherwise the direct sum of the module docstring."""
  ft = work.type.pointee
  zero = ir.Constant(ft, 0.0)
  with b.if_else(_is_radix2(b, n)) as (fast, direct):
    with fast:
      log2n = _log2(b, n)
      nh = b.lshr(n, u.i64(1))
      with u.for_range(b, 0, rows, "crow") as r:
        rbase = b.mul(r, half)
        x0, _ = cx.load(work, rbase)
        cx.store(line, u.i64(0), x0, zero)
        xn, _ = cx.load(work, b.add(rbase, nh))
        cx.store(line, nh, xn, zero)
        with u.for_range(b, 1, nh, "cm") as m:
          xr, xi = cx.load(work, b.add(rbase, m))
          cx.store(line, m, xr, xi)
          cx.store(line, b.sub(n, m), xr, b.fneg(xi))
        # The inverse transform scales by 1 / n.
        b.call(axis, [line, u.i64(1), n, log2n, u.i64(1),
                      ir.Constant(u.I1, 1), tw, rev])
        with u.for_range(b, 0, n, "ct") as t:
          re, _ = cx.load(line, t)
          o = b.add(out_base, b.add(b.mul(r, n), t))
          b.store(re, b.gep(dst, [o]))
    with direct:
      acc, _, pos = accs
      scale = b.fdiv(ir.Constant(ft, 1.0), b.uitofp(n, ft))
      two = ir.Constant(ft, 2.0)
      upper = b.lshr(b.add(n, u.i64(1)), u.i64(1))  # m in [1, upper) twice
      even = b.icmp_unsigned("==", b.and_(n, u.i64(1)), u.i64(0))
      with u.for_range(b, 0, rows, "drow") as r:
        rbase = b.mul(r, half)
        with u.for_range(b, 0, n, "dt") as t:
          x0, _ = cx.load(work, rbase)
          b.store(x0, acc)
          b.store(t, pos)
          with u.for_range(b, 1, upper, "dm") as m:
            xr, xi = cx.load(work, b.add(rbase, m))
            p = b.load(pos)
            wr, wi = cx.load(tw, p)
            term = b.fsub(b.fmul(xr, wr), b.fmul(xi, wi))
            b.store(b.fadd(b.load(acc), b.fmul(two, term)), acc)
            nxt = b.add(p, t)
            nxt = b.select(b.icmp_signed(">=", nxt, n), b.sub(nxt, n), nxt)
            b.store(nxt, pos)
          with b.if_then(even):
            xn, _ = cx.load(work, b.add(rbase, b.lshr(n, u.i64(1))))
            odd = b.trunc(t, u.I1)
            b.store(b.fadd(b.load(acc), b.select(odd, b.fneg(xn), xn)), acc)
          o = b.add(out_base, b.add(b.mul(r, n), t))
          b.store(b.fmul(b.load(acc), scale), b.gep(dst, [o]))


# -- the kernel -------------------------------------------------------------------


_IN_TYPES = {FftType.FFT: (P.C64, P.C128), FftType.IFFT: (P.C64, P.C128),
             FftType.RFFT: (P.F32, P.F64), FftType.IRFFT: (P.C64, P.C128)}


def _first(b: ir.IRBuilder, table: ir.GlobalVariable) -> ir.Value:
  return b.gep(table, [u.i64(0), u.i64(0)])


@kernel_api.register_kernel_emitter("fft")
def emit_fft(ctx: kernel_api.KernelContext, instr) -> kernel_api.KernelSpec:
  kind = FftType(instr.attr("fft_type"))
  length = tuple(instr.attr("fft_length"))
  in_shape = instr.operand(0).shape
  in_et, out_et = in_shape.element_type, instr.shape.element_type
  if in_et not in _IN_TYPES[kind]:
    raise support.UnimplementedError(
        f"CPU codegen for fft ({instr.name}): {kind.name} on "
        f"{primitive_util.lowercase_name(in_et)}")
  in_dims = tuple(in_shape.dimensions)
  out_dims = tuple(instr.shape.dimensions)
  k = len(length)
  if not 1 <= k <= 3 or len(in_dims) < k:
    raise support.InvalidArgumentError(
        f"fft {instr.name}: fft_length {list(length)} for rank "
        f"{len(in_dims)}")
  batch = math.prod(in_dims[:-k])
  half = length[-1] // 2 + 1
  if kind == FftType.IRFFT:
    work_dims = length[:-1] + (half,)
  else:
    work_dims = length
  want_out = in_dims[:-k] + (length[:-1] + (half,) if kind == FftType.RFFT
                             else length)
  want_in = in_dims[:-k] + work_dims
  if out_dims != want_out or in_dims != want_in:
    raise support.InvalidArgumentError(
        f"fft {instr.name}: shapes {list(in_dims)} -> {list(out_dims)} do "
        f"not match {kind.name} of length {list(length)}")
  ka = u.KernelArgs(ctx, instr, f"fft_{instr.name}")
  b = ka.b
  out_count = math.prod(out_dims)
  if out_count == 0:
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, 0)
  if math.prod(length) == 0:  # nothing to transform: zeros (as RFFT of [])
    fn = b.module.declare_intrinsic("llvm.memset", [u.I8_PTR, u.I64])
    b.call(fn, [b.bitcast(ka.results[0], u.I8_PTR), ir.Constant(u.I8, 0),
                u.i64(out_count * u.byte_size(out_et)),
                ir.Constant(u.I1, 0)])
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, out_count)
  ft = _work_type(in_et)
  p = ft.as_pointer()
  module = b.module
  src = b.bitcast(ka.operands[0], p)
  dst = b.bitcast(ka.results[0], p)
  kind_arg = u.i64(int(kind))
  if k == 1 and radix2(length[0]) and batch >= 2:
    n = length[0]
    b.call(runtime_library.declare(module, _ROWS[_tag(ft)]),
           [src, dst, ka.begin, ka.end, u.i64(n), u.i64(batch), kind_arg,
            _first(b, _twiddles(module, n, ft)),
            _first(b, _bit_reversal(module, n))])
    b.ret_void()
    cost = batch * n * n.bit_length() * 8
    return kernel_api.KernelSpec(ka.fn.name, -(-batch // ROW_GROUP),
                                 cost=cost)
  null_f = ir.Constant(p, None)
  null_i = ir.Constant(u.I64.as_pointer(), None)
  dims = (1,) * (3 - k) + work_dims
  complex_axes = 3 if kind != FftType.IRFFT else 2
  tws, revs = [], []
  for a, n in enumerate(dims):
    used = a < complex_axes and n > 1
    tws.append(_first(b, _twiddles(module, n, ft)) if used else null_f)
    revs.append(_first(b, _bit_reversal(module, n))
                if used and radix2(n) else null_i)
  n_last = length[-1]
  if kind == FftType.IRFFT:
    tw_n = _first(b, _twiddles(module, n_last, ft))
    rev_n = (_first(b, _bit_reversal(module, n_last)) if radix2(n_last)
             else null_i)
  else:
    tw_n, rev_n = null_f, null_i
  b.call(runtime_library.declare(module, _BLOCK[_tag(ft)]),
         [src, dst, ka.begin, ka.end, kind_arg] +
         [u.i64(d) for d in dims] + [u.i64(n_last)] + tws + revs +
         [tw_n, rev_n])
  b.ret_void()
  cost = batch * math.prod(length) * sum(length) * 4
  return kernel_api.KernelSpec(ka.fn.name, max(1, batch), cost=cost)
