"""CPU kernels for `reduce-window` (variadic) and `select-and-scatter`.

Window geometry (per dimension): the input is dilated by `base_dilation`
(holes between elements), padded by `padding_low` / `padding_high`
(negative = cropped), and output element o reads the padded positions
`o * stride + w * window_dilation` for window offsets w. A padded position
p maps back to input index (p - padding_low) / base_dilation when that
division is exact and in range; otherwise it is padding (or a hole).

reduce-window: every output element folds its window in row-major window
order, starting from the init values: acc = reducer(acc, x), where x is
the input element or, at a padding position, the init value (XLA pads with
the init value, so a non-neutral init counts once per padding position, as
in the evaluator). Bounds checks are emitted only for dimensions that have
padding or base dilation. The parallel extent counts blocks of output
elements. Without padding or base dilation, a window that keeps the last
dimension whole (NHWC pooling) runs as rows instead (`_emit_rows`): each
window position is a contiguous input row, folded elementwise into a row
of outputs along a vectorized loop (measured 8x faster on the convnet
bench's 2x2 max pools).

select-and-scatter: the result starts as the init value everywhere; for
every source element (row-major) the window's selected element is the
first valid one, replaced by each later valid one v for which
select(current, v) is false; the source value is then combined into the
result at the selected position with `scatter`. A window with no valid
element scatters nothing. Sequential (extent 1): windows overlap.
"""

from __future__ import annotations

import math
from typing import Optional

from llvmlite import ir
import numpy as np

import support
from xla.hlo.ir.hlo_opcode import HloOpcode
# Imported for its side effect: it installs the emitter behind
# KernelContext.scalar_computation, which the window reducers use.
from xla.service.cpu import elemental_ir_emitter  # pylint: disable=unused-import
from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter as le
from xla.service.cpu import op_emitter_util as u

I1 = u.I1
I8 = u.I8
O = HloOpcode

# Output elements per unit of reduce-window's parallel extent.
_BLOCK = 256
# Windows of at most this many positions are unrolled in the row kernel.
_SMALL_WINDOW = 16


class _Window:
  """Per-dimension window parameters of an instruction on `rank` dims."""

  def __init__(self, instr, in_dims, out_dims):
    rank = len(in_dims)
    wd = instr.window.dimensions
    if wd and len(wd) != rank:
      raise support.InvalidArgumentError(
          f"{instr.opcode.value} {instr.name}: window has {len(wd)} "
          f"dimensions, operand rank {rank}")
    get = lambda f, dflt: [getattr(d, f) for d in wd] if wd else [dflt] * rank
    self.size = get("size", 1)
    self.stride = get("stride", 1)
    self.lo = get("padding_low", 0)
    self.hi = get("padding_high", 0)
    self.wdil = get("window_dilation", 1)
    self.bdil = get("base_dilation", 1)
    if wd and any(d.window_reversal for d in wd):
      raise support.UnimplementedError(
          f"{instr.opcode.value} {instr.name}: window reversal")
    if any(v < 1 for v in self.stride + self.wdil + self.bdil) or any(
        s < 0 for s in self.size):
      raise support.InvalidArgumentError(
          f"{instr.opcode.value} {instr.name}: invalid window {wd}")
    self.in_dims = list(in_dims)
    self.out_dims = list(out_dims)
    expect = []
    for d in range(rank):
      padded = self.lo[d] + self.hi[d] + (
          (in_dims[d] - 1) * self.bdil[d] + 1 if in_dims[d] else 0)
      span = (self.size[d] - 1) * self.wdil[d] + 1
      expect.append(max(0, (padded - span) // self.stride[d] + 1)
                    if padded >= span else 0)
    if expect != self.out_dims:
      raise support.InvalidArgumentError(
          f"{instr.opcode.value} {instr.name}: output dims {self.out_dims} "
          f"do not match the window (expected {expect})")
    self.in_strides = u.row_major_strides(in_dims)

  def position(self, b: ir.IRBuilder, out_idx, win_idx):
    """(valid i1 or None when always valid, input linear index) of window
    offset win_idx of output element out_idx."""
    valid = None
    terms = []
    for d in range(len(self.in_dims)):
      p = u.linear_index(b, [out_idx[d], win_idx[d]],
                         [self.stride[d], self.wdil[d]])
      if self.lo[d]:
        p = b.sub(p, u.i64(self.lo[d]))
      checked = self.lo[d] > 0 or self.hi[d] > 0 or self.bdil[d] > 1
      if self.bdil[d] > 1:
        q = b.sdiv(p, u.i64(self.bdil[d]))
        exact = b.icmp_signed("==", b.mul(q, u.i64(self.bdil[d])), p)
        ok = b.and_(exact, b.icmp_unsigned("<", q, u.i64(self.in_dims[d])))
        ok = b.and_(ok, b.icmp_signed(">=", p, u.i64(0)))
        p = q
      elif checked:
        ok = b.icmp_unsigned("<", p, u.i64(self.in_dims[d]))
      if checked:
        valid = ok if valid is None else b.and_(valid, ok)
      terms.append(p)
    return valid, u.linear_index(b, terms, self.in_strides)


@kernel_api.register_kernel_emitter("reduce-window")
def emit_reduce_window(ctx: kernel_api.KernelContext,
                       instr) -> kernel_api.KernelSpec:
  nops = instr.operand_count
  if nops % 2:
    raise support.InvalidArgumentError(
        f"reduce-window {instr.name}: expected n inputs and n init values")
  n = nops // 2
  in_dims = tuple(instr.operand(0).shape.dimensions)
  for k in range(n, nops):
    if instr.operand(k).shape.dimensions:
      raise support.InvalidArgumentError(
          f"reduce-window {instr.name}: init values must be scalars")
  leaves = kernel_api.array_leaves(instr.shape)
  out_dims = tuple(leaves[0].dimensions)
  win = _Window(instr, in_dims, out_dims)
  reducer = ctx.scalar_computation(instr.to_apply)
  ka = u.KernelArgs(ctx, instr, f"reduce_window_{instr.name}")
  b = ka.b
  total = math.prod(out_dims)
  if total == 0:
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, 0)
  inputs, inits = ka.operands[:n], ka.operands[n:]
  scan = _prefix_scan_dim(instr, win, n)
  if scan is not None:
    return _emit_prefix_scan(ka, win, reducer, scan)
  if _rows_apply(win, n):
    return _emit_rows(ka, win, reducer)
  tys = [kernel_api.llvm_storage_type(s.element_type)
         for s in ka.result_shapes]
  accs = [u.entry_alloca(b, ty, name=f"acc{k}") for k, ty in enumerate(tys)]
  tmps = [u.entry_alloca(b, ty, name=f"tmp{k}") for k, ty in enumerate(tys)]
  lo = b.mul(ka.begin, u.i64(_BLOCK))
  hi = b.mul(ka.end, u.i64(_BLOCK))
  hi = b.select(b.icmp_signed(">", hi, u.i64(total)), u.i64(total), hi)
  with u.for_range(b, lo, hi, "out") as o:
    oi = u.delinearize(b, o, out_dims)
    for acc, init in zip(accs, inits):
      b.store(b.load(init), acc)
    with u.loop_nest(b, win.size, "w") as wi:
      valid, lin = win.position(b, oi, wi)
      xs = []
      for x, init in zip(inputs, inits):
        p = b.gep(x, [lin])
        xs.append(p if valid is None else b.select(valid, p, init))
      b.call(reducer, accs + xs + tmps)
      for acc, tmp in zip(accs, tmps):
        b.store(b.load(tmp), acc)
    for acc, res in zip(accs, ka.results):
      b.store(b.load(acc), b.gep(res, [o]))
  b.ret_void()
  extent = (total + _BLOCK - 1) // _BLOCK
  return kernel_api.KernelSpec(ka.fn.name, extent,
                               cost=total * math.prod(win.size) * 2 * n)


_FOLDS = {O.kAdd: lambda a, b: a + b, O.kMultiply: lambda a, b: a * b,
          O.kMaximum: np.maximum, O.kMinimum: np.minimum,
          O.kAnd: lambda a, b: a & b, O.kOr: lambda a, b: a | b,
          O.kXor: lambda a, b: a ^ b}


def _prefix_scan_dim(instr, win: _Window, n: int) -> Optional[int]:
  """The dimension of an inclusive prefix scan, or None.

  JAX lowers cumsum / cumprod / cummax on CPU to a reduce-window whose
  window spans the whole of one dimension with all of it padded below
  (size = N, padding N-1 low and 0 high, stride 1), which the general
  kernel folds in O(N) per element: O(N^2) per line (a Monte Carlo path
  simulation's cumsum over 32 steps took 4.4 ms of an 8 ms step). Output
  i folds init, then N-1-i padding positions (init again), then x[0..i]
  in order; when the reducer is one binary op with op(init, init) == init
  (bitwise), the padding changes nothing and the result is the running
  fold init, x[0], ..., x[i], computed in the same order by a scan."""
  if n != 1:
    return None
  rank = len(win.in_dims)
  big = [d for d in range(rank) if win.size[d] != 1]
  if len(big) != 1:
    return None
  d = big[0]
  size = win.in_dims[d]
  for e in range(rank):
    if win.stride[e] != 1 or win.bdil[e] != 1 or win.wdil[e] != 1:
      return None
    if e != d and (win.lo[e] or win.hi[e]):
      return None
  if (win.size[d] != size or win.out_dims[d] != size or
      win.lo[d] != size - 1 or win.hi[d] != 0):
    return None
  root = instr.to_apply.root_instruction
  init = instr.operand(1)
  if (root.opcode not in _FOLDS or root.operand_count != 2 or
      {o.opcode for o in root.operands} != {O.kParameter} or
      root.operand(0) is root.operand(1) or init.opcode != O.kConstant or
      init.literal is None):
    return None
  value = np.asarray(init.literal.array).reshape(())
  with np.errstate(all="ignore"):
    twice = np.asarray(_FOLDS[root.opcode](value, value), value.dtype)
  if twice.tobytes() != value.tobytes():
    return None
  return d


def _emit_prefix_scan(ka: u.KernelArgs, win: _Window, reducer,
                      d: int) -> kernel_api.KernelSpec:
  """An inclusive prefix scan along dimension `d` (see _prefix_scan_dim):
  units are indices of the dimensions before `d`; each scans its slab of
  N x inner elements, row by row, so the innermost loop runs along the
  contiguous dimensions after `d` (vectorized) unless `d` is the last."""
  b = ka.b
  dims = win.in_dims
  size = dims[d]
  outer = math.prod(dims[:d])
  inner = math.prod(dims[d + 1:])
  ty = kernel_api.llvm_storage_type(ka.result_shapes[0].element_type)
  x, init, out = ka.operands[0], ka.operands[1], ka.results[0]
  acc = u.entry_alloca(b, ty, name="acc")
  tmp = u.entry_alloca(b, ty, name="tmp")
  init_v = b.load(init)
  with u.for_range(b, ka.begin, ka.end, "slab") as s:
    base = b.mul(s, u.i64(size * inner))
    if inner == 1:
      b.store(init_v, acc)
      with u.for_range(b, 0, size, "k") as k:
        i = b.add(base, k)
        b.call(reducer, [acc, b.gep(x, [i]), tmp])
        v = b.load(tmp)
        b.store(v, acc)
        b.store(v, b.gep(out, [i]))
    else:
      with u.for_range(b, 0, inner, "c0") as c:
        i = b.add(base, c)
        b.store(init_v, acc)
        b.call(reducer, [acc, b.gep(x, [i]), tmp])
        b.store(b.load(tmp), b.gep(out, [i]))
      with u.for_range(b, 1, size, "k") as k:
        row = b.add(base, b.mul(k, u.i64(inner)))
        prev = b.sub(row, u.i64(inner))
        with u.for_range(b, 0, inner, "c") as c:
          i = b.add(row, c)
          b.call(reducer, [b.gep(out, [b.add(prev, c)]), b.gep(x, [i]), tmp])
          b.store(b.load(tmp), b.gep(out, [i]))
  b.ret_void()
  return kernel_api.KernelSpec(ka.fn.name, outer,
                               cost=outer * size * inner * 2)


def _rows_apply(win: _Window, n: int) -> bool:
  """Whether the row kernel applies: one input, no padding or base
  dilation anywhere, and a last dimension that the window does not reduce
  (size 1, stride 1), as in NHWC pooling."""
  rank = len(win.in_dims)
  return (n == 1 and rank >= 2 and win.size[-1] == 1 and
          win.stride[-1] == 1 and win.out_dims[-1] == win.in_dims[-1] and
          not any(win.lo) and not any(win.hi) and
          all(d == 1 for d in win.bdil))


def _emit_rows(ka: u.KernelArgs, win: _Window,
               reducer) -> kernel_api.KernelSpec:
  """reduce-window as rows along the kept last dimension: units are output
  rows (all but the last index); every window position is a contiguous
  input row of the same length folded elementwise. Small windows (up to
  _SMALL_WINDOW positions, unrolled) are folded innermost per element, the
  element loop outermost, so LLVM vectorizes along the row with the
  accumulator in registers; larger windows accumulate into the output row,
  one input row at a time. Each element still folds its window in
  row-major window order."""
  b = ka.b
  out_dims = win.out_dims
  row = out_dims[-1]
  outer = out_dims[:-1]
  rows = math.prod(outer)
  ty = kernel_api.llvm_storage_type(ka.result_shapes[0].element_type)
  x, init, out = ka.operands[0], ka.operands[1], ka.results[0]
  acc = u.entry_alloca(b, ty, name="acc")
  tmp = u.entry_alloca(b, ty, name="tmp")
  init_v = b.load(init)
  wsize = math.prod(win.size)

  def window_offsets(oi, wi):
    _, lin = win.position(b, list(oi) + [u.i64(0)], list(wi) + [u.i64(0)])
    return lin

  with u.for_range(b, ka.begin, ka.end, "row") as r:
    oi = u.delinearize(b, r, outer)
    obase = b.mul(r, u.i64(row))
    if wsize <= _SMALL_WINDOW:
      with le.for_range(b, 0, row, "c",
                        loop_metadata=le.no_unroll_metadata(b.module)) as c:
        b.store(init_v, acc)
        with u.loop_nest(b, win.size[:-1], "w") as wi:
          lin = b.add(window_offsets(oi, wi), c)
          b.call(reducer, [acc, b.gep(x, [lin]), tmp])
          b.store(b.load(tmp), acc)
        b.store(b.load(acc), b.gep(out, [b.add(obase, c)]))
    else:
      with u.for_range(b, 0, row, "c0") as c:
        b.store(init_v, b.gep(out, [b.add(obase, c)]))
      with u.loop_nest(b, win.size[:-1], "w") as wi:
        xbase = window_offsets(oi, wi)
        with u.for_range(b, 0, row, "c") as c:
          o = b.gep(out, [b.add(obase, c)])
          b.call(reducer, [o, b.gep(x, [b.add(xbase, c)]), tmp])
          b.store(b.load(tmp), o)
  b.ret_void()
  return kernel_api.KernelSpec(ka.fn.name, rows,
                               cost=rows * row * wsize * 2)


@kernel_api.register_kernel_emitter("select-and-scatter")
def emit_select_and_scatter(ctx: kernel_api.KernelContext,
                            instr) -> kernel_api.KernelSpec:
  if instr.operand_count != 3:
    raise support.InvalidArgumentError(
        f"select-and-scatter {instr.name}: expected operand, source, init")
  in_dims = tuple(instr.operand(0).shape.dimensions)
  src_dims = tuple(instr.operand(1).shape.dimensions)
  win = _Window(instr, in_dims, src_dims)
  select = ctx.scalar_computation(instr.attr("select"))
  scatter = ctx.scalar_computation(instr.attr("scatter"))
  ka = u.KernelArgs(ctx, instr, f"select_and_scatter_{instr.name}",
                    optsize=True)
  b = ka.b
  operand, source, init = ka.operands
  out = ka.results[0]
  count = math.prod(in_dims)
  with u.for_range(b, 0, count, "fill") as i:
    b.store(b.load(init), b.gep(out, [i]))
  nsrc = math.prod(src_dims)
  if nsrc == 0 or count == 0:
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, count)
  ty = kernel_api.llvm_storage_type(ka.result_shapes[0].element_type)
  has = u.entry_alloca(b, I1, name="has")
  cur = u.entry_alloca(b, u.I64, name="cur")
  keep = u.entry_alloca(b, I8, name="keep")
  tmp = u.entry_alloca(b, ty, name="tmp")
  src_strides = u.row_major_strides(src_dims)
  with u.loop_nest(b, src_dims, "src") as si:
    b.store(ir.Constant(I1, 0), has)
    b.store(u.i64(0), cur)
    with u.loop_nest(b, win.size, "w") as wi:
      valid, lin = win.position(b, si, wi)
      valid = ir.Constant(I1, 1) if valid is None else valid
      with b.if_then(valid):
        h = b.load(has)
        with b.if_else(h) as (then, otherwise):
          with then:
            b.call(select, [b.gep(operand, [b.load(cur)]),
                            b.gep(operand, [lin]), keep])
            with b.if_then(b.icmp_unsigned("==", b.load(keep),
                                           ir.Constant(I8, 0))):
              b.store(lin, cur)
          with otherwise:
            b.store(ir.Constant(I1, 1), has)
            b.store(lin, cur)
    with b.if_then(b.load(has)):
      target = b.gep(out, [b.load(cur)])
      s = b.gep(source, [u.linear_index(b, si, src_strides)])
      b.call(scatter, [target, s, tmp])
      b.store(b.load(tmp), target)
  b.ret_void()
  return kernel_api.KernelSpec(ka.fn.name, 1,
                               cost=count + nsrc * math.prod(win.size) * 3)
