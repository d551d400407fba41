"""CPU kernel for `fft` (FFT, IFFT, RFFT, IRFFT over the trailing 1-3 dims).

Per batch element (the parallel extent) the kernel loads the transformed
block into a complex work buffer, transforms it along each fft axis in
place, and stores the result. Work is in the precision of the data (float
for f32 / c64, as XLA's FFT library computes single-precision transforms,
double for f64 / c128).

* Axes whose length is a power of two take an in-place radix-2 FFT that
  updates whole rows per butterfly (a library routine, `_build_axis_routine`); a batch of 1-d
  transforms, and the last axis of a 2-d or 3-d block, go through groups
  of ROW_GROUP rows stored transposed, so these vectorise too.
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
precision, rounded once to the work type); no sin/cos runs per call.
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


def _convert(b, v, ty):
  if v.type == ty:
    return v
  return b.fpext(v, ty) if ty == F64 else b.fptrunc(v, ty)


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


def _emit_axis_fft(b, cx, work, tw, n, inner, outer, inverse):
  """The radix-2 FFT along an axis of length `n` (a power of two) of the
  `outer` x n x `inner` block in `work`, in place, as a call of the library
  routine for the work type (`_build_axis_routine`)."""
  del cx
  ft = work.type.pointee
  fn = runtime_library.declare(b.module, _AXIS_ROUTINE[_tag(ft)])
  rev = _bit_reversal(b.module, n)
  outer = u.i64(outer) if isinstance(outer, int) else outer
  b.call(fn, [work, outer, u.i64(n), u.i64(n.bit_length() - 1), u.i64(inner),
              ir.Constant(ir.IntType(1), int(bool(inverse))),
              b.gep(tw, [u.i64(0), u.i64(0)]),
              b.gep(rev, [u.i64(0), u.i64(0)])])


_AXIS_ROUTINE = {t: f"{runtime_library.PREFIX}fft_axis_{t}"
                 for t in ("f32", "f64")}


def _axis_type(ft: ir.Type) -> ir.FunctionType:
  p = ft.as_pointer()
  return ir.FunctionType(ir.VoidType(), [p, u.I64, u.I64, u.I64, u.I64,
                                         ir.IntType(1), p,
                                         u.I64.as_pointer()])


def _build_axis_routine(fn: ir.Function) -> None:
  """The radix-2 axis transform for one work type:
  f(work, outer, n, log2 n, inner, inverse, twiddles, bit reversal) on the
  `outer` x n x `inner` block in `work`, in place.

  The rows (n of them, each `inner` contiguous elements) are put in
  bit-reversed order by swaps, then each butterfly updates two whole rows,
  so for an axis other than the last the innermost loop runs over
  contiguous elements. Length, row width and direction are arguments, and
  the log2(n) stages one loop, so that one compiled routine serves every
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


for _t, _ft in (("f32", F32), ("f64", F64)):
  runtime_library.routine(_AXIS_ROUTINE[_t], _axis_type(_ft))(
      _build_axis_routine)


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


def _emit_line_dft(b, cx, work, line, tw, n, stride, base, inverse,
                   acc_re, acc_im, pos):
  """Transforms one line of `n` elements (stride `stride`) of `work` at
  `base`, through the line buffer `line`."""
  with u.for_range(b, 0, n, "ld") as t:
    re, im = cx.load(work, b.add(base, b.mul(t, u.i64(stride))))
    cx.store(line, t, re, im)
  ft = work.type.pointee
  scale = ir.Constant(ft, 1.0 / n)
  with u.for_range(b, 0, n, "dj") as j:
    b.store(ir.Constant(ft, 0.0), acc_re)
    b.store(ir.Constant(ft, 0.0), acc_im)
    b.store(u.i64(0), pos)
    with u.for_range(b, 0, n, "dt") as t:
      xr, xi = cx.load(line, t)
      m = b.load(pos)
      wr = b.load(b.gep(tw, [u.i64(0), b.mul(m, u.i64(2))]))
      wi = b.load(b.gep(tw, [u.i64(0), b.add(b.mul(m, u.i64(2)),
                                               u.i64(1))]))
      if not inverse:
        wi = b.fneg(wi)
      b.store(b.fadd(b.load(acc_re), b.fsub(b.fmul(xr, wr), b.fmul(xi, wi))),
              acc_re)
      b.store(b.fadd(b.load(acc_im), b.fadd(b.fmul(xr, wi), b.fmul(xi, wr))),
              acc_im)
      nxt = b.add(m, j)
      nxt = b.select(b.icmp_signed(">=", nxt, u.i64(n)),
                     b.sub(nxt, u.i64(n)), nxt)
      b.store(nxt, pos)
    re, im = b.load(acc_re), b.load(acc_im)
    if inverse:
      re, im = b.fmul(re, scale), b.fmul(im, scale)
    cx.store(work, b.add(base, b.mul(j, u.i64(stride))), re, im)


def _transform_axis(b, cx, work, line, tw, dims, axis, inverse, scratch,
                    tmp=None):
  """DFT along `axis` of the row-major block `dims` held in `work`. With
  `tmp` (room for ROW_GROUP rows), the last axis of a block of several rows
  is transformed ROW_GROUP rows at a time on their transpose, so
  butterflies run along contiguous runs (as `_emit_row_groups`)."""
  n = dims[axis]
  if n <= 1:
    return
  inner = math.prod(dims[axis + 1:])
  outer = math.prod(dims[:axis])
  if radix2(n) and inner == 1 and outer >= 2 and tmp is not None:
    g = ROW_GROUP
    last = u.i64(outer - 1)
    with u.for_range(b, 0, -(-outer // g), "tg") as gi:
      r0 = b.mul(gi, u.i64(g))
      with u.for_range(b, 0, g, "to") as j:
        o = b.add(r0, j)
        o = b.select(b.icmp_signed(">", o, last), last, o)
        with u.for_range(b, 0, n, "tt") as t:
          re, im = cx.load(work, b.add(b.mul(o, u.i64(n)), t))
          cx.store(tmp, b.add(b.mul(t, u.i64(g)), j), re, im)
      _emit_axis_fft(b, cx, tmp, tw, n, g, 1, inverse)
      with u.for_range(b, 0, g, "bo") as j:
        o = b.add(r0, j)
        with b.if_then(b.icmp_signed("<", o, u.i64(outer))):
          with u.for_range(b, 0, n, "bt") as t:
            re, im = cx.load(tmp, b.add(b.mul(t, u.i64(g)), j))
            cx.store(work, b.add(b.mul(o, u.i64(n)), t), re, im)
    return
  if radix2(n):
    _emit_axis_fft(b, cx, work, tw, n, inner, outer, inverse)
    return
  acc_re, acc_im, pos = scratch
  with u.for_range(b, 0, outer * inner, "line") as li:
    o = b.udiv(li, u.i64(inner)) if inner > 1 else li
    i = b.urem(li, u.i64(inner)) if inner > 1 else u.i64(0)
    base = b.add(b.mul(o, u.i64(n * inner)), i)
    _emit_line_dft(b, cx, work, line, tw, n, inner, base, inverse, acc_re,
                   acc_im, pos)


def _load_value(b, ptr, et, ft):
  """An element of `et` (f32/f64/c64/c128) as a (re, im) pair of `ft`."""
  v = b.load(ptr)
  if primitive_util.is_complex(et):
    return (_convert(b, b.extract_value(v, 0), ft),
            _convert(b, b.extract_value(v, 1), ft))
  return _convert(b, v, ft), ir.Constant(ft, 0.0)


def _store_value(b, ptr, et, re, im):
  if et in (P.C64, P.C128):
    ft = F32 if et == P.C64 else F64
    re, im = _convert(b, re, ft), _convert(b, im, ft)
    z = ir.Constant(ir.LiteralStructType([ft, ft]), ir.Undefined)
    b.store(b.insert_value(b.insert_value(z, re, 0), im, 1), ptr)
  else:
    b.store(_convert(b, re, F32 if et == P.F32 else F64), ptr)


_IN_TYPES = {FftType.FFT: (P.C64, P.C128), FftType.IFFT: (P.C64, P.C128),
             FftType.RFFT: (P.F32, P.F64), FftType.IRFFT: (P.C64, P.C128)}


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
  block_in = in_dims[-k:]
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
  src, dst = ka.operands[0], ka.results[0]
  if math.prod(length) == 0:  # nothing to transform: zeros (as RFFT of [])
    fn = b.module.declare_intrinsic("llvm.memset", [u.I8_PTR, u.I64])
    b.call(fn, [b.bitcast(dst, u.I8_PTR), ir.Constant(u.I8, 0),
                u.i64(out_count * u.byte_size(out_et)),
                ir.Constant(u.I1, 0)])
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, out_count)
  if (k == 1 and kind != FftType.IRFFT and radix2(length[0]) and
      batch >= 2):
    return _emit_row_groups(ka, kind, length[0], batch, in_et, out_et)
  nwork = math.prod(work_dims)
  nline = max(length)
  ntmp = ROW_GROUP * length[-1] if k >= 2 else 0
  ft = _work_type(in_et)
  cb = 2 * (4 if ft == F32 else 8)  # bytes per complex work element
  scratch = u.Scratch(b, cb * (nwork + nline + ntmp))
  work = scratch.at(b, 0, ft)
  line = scratch.at(b, cb * nwork, ft)
  tmp = scratch.at(b, cb * (nwork + nline), ft) if ntmp else None
  accs = (u.entry_alloca(b, ft, name="acc_re"),
          u.entry_alloca(b, ft, name="acc_im"),
          u.entry_alloca(b, u.I64, name="twiddle_pos"))
  cx = _Cplx(b)
  inverse = kind in (FftType.IFFT, FftType.IRFFT)
  complex_axes = range(k) if kind != FftType.IRFFT else range(k - 1)
  in_block = math.prod(block_in)
  out_block = math.prod(out_dims[-k:])
  with u.for_range(b, ka.begin, ka.end, "batch") as bi:
    in_base = b.mul(bi, u.i64(in_block))
    out_base = b.mul(bi, u.i64(out_block))
    with u.for_range(b, 0, nwork, "load") as e:
      re, im = _load_value(b, b.gep(src, [b.add(in_base, e)]), in_et, ft)
      cx.store(work, e, re, im)
    for axis in complex_axes:
      _transform_axis(b, cx, work, line,
                      _twiddles(b.module, work_dims[axis], ft),
                      work_dims, axis, inverse, accs, tmp)
    if kind == FftType.IRFFT:
      _emit_c2r_last_axis(b, cx, work, dst, out_base, work_dims, length[-1],
                          out_et, accs, line)
    elif kind == FftType.RFFT:
      rows = nwork // length[-1]
      with u.for_range(b, 0, rows, "row") as r:
        with u.for_range(b, 0, half, "col") as c:
          re, im = cx.load(work, b.add(b.mul(r, u.i64(length[-1])), c))
          o = b.add(out_base, b.add(b.mul(r, u.i64(half)), c))
          _store_value(b, b.gep(dst, [o]), out_et, re, im)
    else:
      with u.for_range(b, 0, nwork, "store") as e:
        re, im = cx.load(work, e)
        _store_value(b, b.gep(dst, [b.add(out_base, e)]), out_et, re, im)
  scratch.release(b)
  b.ret_void()
  cost = batch * math.prod(length) * sum(length) * 4
  return kernel_api.KernelSpec(ka.fn.name, max(1, batch), cost=cost)


# Rows of a batched 1-d transform taken together: a group of this many rows
# is stored transposed (element t of every row side by side), so each
# butterfly updates a contiguous run of ROW_GROUP elements, which LLVM
# vectorises, instead of one scalar per row.
ROW_GROUP = 8


def _emit_row_groups(ka, kind, n, batch, in_et, out_et):
  """FFT / IFFT / RFFT of length n (a power of two) of `batch` rows, in
  groups of ROW_GROUP rows (the parallel extent is the number of groups;
  the last group's missing rows compute on copies of the last row and are
  not stored)."""
  b = ka.b
  g = ROW_GROUP
  groups = -(-batch // g)
  out_n = n // 2 + 1 if kind == FftType.RFFT else n
  src, dst = ka.operands[0], ka.results[0]
  ft = _work_type(in_et)
  scratch = u.Scratch(b, 2 * (4 if ft == F32 else 8) * n * g)
  work = scratch.at(b, 0, ft)
  cx = _Cplx(b)
  inverse = kind == FftType.IFFT
  tw = _twiddles(b.module, n, ft)
  last = u.i64(batch - 1)
  with u.for_range(b, ka.begin, ka.end, "group") as gi:
    r0 = b.mul(gi, u.i64(g))
    with u.for_range(b, 0, g, "gr") as j:
      row = b.add(r0, j)
      row = b.select(b.icmp_signed(">", row, last), last, row)
      base = b.mul(row, u.i64(n))
      with u.for_range(b, 0, n, "gt") as t:
        re, im = _load_value(b, b.gep(src, [b.add(base, t)]), in_et, ft)
        cx.store(work, b.add(b.mul(t, u.i64(g)), j), re, im)
    _emit_axis_fft(b, cx, work, tw, n, g, 1, inverse)
    with u.for_range(b, 0, g, "sr") as j:
      row = b.add(r0, j)
      with b.if_then(b.icmp_signed("<", row, u.i64(batch))):
        base = b.mul(row, u.i64(out_n))
        with u.for_range(b, 0, out_n, "st") as t:
          re, im = cx.load(work, b.add(b.mul(t, u.i64(g)), j))
          _store_value(b, b.gep(dst, [b.add(base, t)]), out_et, re, im)
  scratch.release(b)
  b.ret_void()
  cost = batch * n * n.bit_length() * 8
  return kernel_api.KernelSpec(ka.fn.name, groups, cost=cost)


def _emit_c2r_fft(b, cx, work, dst, out_base, rows, half, n, out_et, tw,
                  line):
  """The c2r transform of each row by a complex inverse FFT of its
  Hermitian extension X[n - m] = conj(X[m]), with the imaginary parts of
  X[0] and X[n / 2] taken as zero (numpy's convention): the result is real
  and its real part is the output."""
  zero = ir.Constant(work.type.pointee, 0.0)
  with u.for_range(b, 0, rows, "crow") as r:
    rbase = b.mul(r, u.i64(half))
    x0, _ = cx.load(work, rbase)
    cx.store(line, u.i64(0), x0, zero)
    xn, _ = cx.load(work, b.add(rbase, u.i64(n // 2)))
    cx.store(line, u.i64(n // 2), xn, zero)
    with u.for_range(b, 1, n // 2, "cm") as m:
      xr, xi = cx.load(work, b.add(rbase, m))
      cx.store(line, m, xr, xi)
      cx.store(line, b.sub(u.i64(n), m), xr, b.fneg(xi))
    _emit_axis_fft(b, cx, line, tw, n, 1, 1, inverse=True)  # scales 1/n
    with u.for_range(b, 0, n, "ct") as t:
      re, _ = cx.load(line, t)
      o = b.add(out_base, b.add(b.mul(r, u.i64(n)), t))
      _store_value(b, b.gep(dst, [o]), out_et, re, None)


def _emit_c2r_last_axis(b, cx, work, dst, out_base, work_dims, n, out_et,
                        accs, line):
  """The Hermitian inverse DFT along the last axis, into the real output."""
  half = work_dims[-1]
  rows = math.prod(work_dims[:-1])
  ft = work.type.pointee
  tw = _twiddles(b.module, n, ft)
  if radix2(n):
    _emit_c2r_fft(b, cx, work, dst, out_base, rows, half, n, out_et, tw,
                  line)
    return
  acc, _, pos = accs
  scale = ir.Constant(ft, 1.0 / n)
  two = ir.Constant(ft, 2.0)
  upper = (n + 1) // 2  # m in [1, upper) count twice
  with u.for_range(b, 0, rows, "crow") as r:
    rbase = b.mul(r, u.i64(half))
    with u.for_range(b, 0, n, "ct") as t:
      x0, _ = cx.load(work, rbase)
      b.store(x0, acc)
      b.store(t, pos)
      with u.for_range(b, 1, upper, "cm") as m:
        xr, xi = cx.load(work, b.add(rbase, m))
        p = b.load(pos)
        wr = b.load(b.gep(tw, [u.i64(0), b.mul(p, u.i64(2))]))
        wi = b.load(b.gep(tw, [u.i64(0), b.add(b.mul(p, u.i64(2)),
                                                 u.i64(1))]))
        term = b.fsub(b.fmul(xr, wr), b.fmul(xi, wi))
        b.store(b.fadd(b.load(acc), b.fmul(two, term)), acc)
        nxt = b.add(p, t)
        nxt = b.select(b.icmp_signed(">=", nxt, u.i64(n)),
                       b.sub(nxt, u.i64(n)), nxt)
        b.store(nxt, pos)
      if n % 2 == 0 and n // 2 < half:
        xn, _ = cx.load(work, b.add(rbase, u.i64(n // 2)))
        odd = b.trunc(t, u.I1)
        b.store(b.fadd(b.load(acc), b.select(odd, b.fneg(xn), xn)), acc)
      o = b.add(out_base, b.add(b.mul(r, u.i64(n)), t))
      _store_value(b, b.gep(dst, [o]), out_et, b.fmul(b.load(acc), scale),
                   None)
