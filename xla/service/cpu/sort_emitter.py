"""CPU kernels for `sort` (variadic, any comparator) and `topk`.

Each row along the sort dimension is sorted independently; the kernel's
parallel extent is the number of rows. With one operand the row's values
are copied into a scratch row and sorted there (then copied to the
output), so the comparator reads them directly. With several operands the
row is sorted as a permutation of its positions (i32): the comparator reads
the input arrays through `perm[k] * stride`, and every operand is then
gathered through the final permutation into its output (through a scratch
row when the output is the input buffer). Either way strided (non-minor)
sort dimensions and outputs that share their input's buffer work.

The sort itself is a stable bottom-up merge sort over a buffer of elements
(values or indices): runs of `_RUN` elements are insertion-sorted, then
merged pairwise, ping-ponging between two buffers (the number of passes is
static, so which buffer holds the result is known when emitting). Merges
take from the right run only when its head is strictly less, which keeps
equal elements in input order; a merge whose runs are already in order is
a copy. Scratch is on the stack when small, else malloc'ed once per kernel
call. Kernels are `optsize`: their loops are comparison bound, and O3's
full unrolling of static trip counts only multiplies code and compile time.

The comparator is the HLO computation through `ctx.scalar_computation`
(`void cmp(T0* lhs0, T0* rhs0, T1* lhs1, ..., pred* out)`); `topk` uses the
built-in order (floats in IEEE totalOrder, descending for `largest`) with
ties broken by lower index, as XLA does. topk with k <= SELECT_MAX_K
selects instead of sorting (`_emit_topk_select`): one pass over the row
keeps the k best in a sorted list, comparing a vector of keys at a time
against the k-th best; jax's `lax.top_k` reaches it through
topk_rewriter.py (sort + slices -> topk).
"""

from __future__ import annotations

import functools
import math
from typing import Callable

from llvmlite import ir

import support
from xla import primitive_util
from xla.service.cpu import elemental_ir_emitter as elemental
from xla.service.cpu import kernel_api
from xla.service.cpu import op_emitter_util as u
from xla.service.cpu import runtime_library
from xla.xla_data import PrimitiveType

I1, I8, I32, I64 = u.I1, u.I8, u.I32, u.I64

# Run length sorted by insertion sort before merging.
_RUN = 16

# less(builder, ptr_a, ptr_b) -> i1: the strict order on two buffer slots.
Less = Callable[[ir.IRBuilder, ir.Value, ir.Value], ir.Value]


class _RowSorter:
  """Emits a stable sort of the `n` elements of `bufs[0]` (elements of
  `elem_ty`, `elem_bytes` each), with `bufs[1]` as the merge buffer. `n`
  is an int or (in a library routine) an i64 value."""

  def __init__(self, b: ir.IRBuilder, n, elem_ty: ir.Type,
               elem_bytes: int, less: Less, bufs):
    self.b = b
    self.n = n
    self.nv = u.i64(n) if isinstance(n, int) else n
    self.elem_ty = elem_ty
    self.elem_bytes = elem_bytes
    self.less = less
    self.first, self.second = bufs

  def sort(self) -> ir.Value:
    """Sorts; returns the buffer (elem_ty*) that holds the result."""
    b = self.b
    if isinstance(self.n, int) and self.n <= _RUN:
      if self.n > 1:
        self._insertion_runs()
      return self.first
    self._insertion_runs()
    # Merge passes while the runs are shorter than the row, ping-ponging
    # between the buffers: the last pass's destination holds the result.
    ptr_ty = self.elem_ty.as_pointer()
    src = u.entry_alloca(b, ptr_ty, name="src")
    dst = u.entry_alloca(b, ptr_ty, name="dst")
    wid = u.entry_alloca(b, I64, name="width")
    b.store(self.first, src)
    b.store(self.second, dst)
    b.store(u.i64(_RUN), wid)
    fn = b.function
    cond = fn.append_basic_block("pass.cond")
    body = fn.append_basic_block("pass.body")
    done = fn.append_basic_block("pass.end")
    b.branch(cond)
    b.position_at_end(cond)
    b.cbranch(b.icmp_signed("<", b.load(wid), self.nv), body, done)
    b.position_at_end(body)
    s, d, w = b.load(src), b.load(dst), b.load(wid)
    self._merge_pass(s, d, w)
    b.store(d, src)
    b.store(s, dst)
    b.store(b.shl(w, u.i64(1)), wid)
    b.branch(cond)
    b.position_at_end(done)
    return b.load(src)

  def _insertion_runs(self) -> None:
    b, nv = self.b, self.nv
    buf = self.first
    slot = u.entry_alloca(b, self.elem_ty, name="ins_x")
    j = u.entry_alloca(b, I64, name="j")
    if isinstance(self.n, int):
      nruns = u.i64((self.n + _RUN - 1) // _RUN)
    else:
      nruns = b.udiv(b.add(nv, u.i64(_RUN - 1)), u.i64(_RUN))
    with u.for_range(b, 0, nruns, "irun") as r:
      start = b.mul(r, u.i64(_RUN))
      stop = b.add(start, u.i64(_RUN))
      stop = b.select(b.icmp_signed(">", stop, nv), nv, stop)
      with u.for_range(b, b.add(start, u.i64(1)), stop, "ins") as i:
        x = b.load(b.gep(buf, [i]))
        b.store(x, slot)
        b.store(i, j)
        fn = b.function
        cond = fn.append_basic_block("shift.cond")
        test = fn.append_basic_block("shift.test")
        body = fn.append_basic_block("shift.body")
        done = fn.append_basic_block("shift.end")
        b.branch(cond)
        b.position_at_end(cond)
        jv = b.load(j)
        b.cbranch(b.icmp_signed(">", jv, start), test, done)
        b.position_at_end(test)
        prev_ptr = b.gep(buf, [b.sub(jv, u.i64(1))])
        b.cbranch(self.less(b, slot, prev_ptr), body, done)
        b.position_at_end(body)
        b.store(b.load(prev_ptr), b.gep(buf, [jv]))
        b.store(b.sub(jv, u.i64(1)), j)
        b.branch(cond)
        b.position_at_end(done)
        b.store(x, b.gep(buf, [b.load(j)]))

  def _merge_pass(self, src, dst, width) -> None:
    """Merges adjacent runs of `width` from src into dst."""
    b = self.b
    nn = self.nv
    two_w = b.shl(width, u.i64(1))
    npairs = b.udiv(b.add(nn, b.sub(two_w, u.i64(1))), two_w)
    ordered = u.entry_alloca(b, I1, name="ordered")
    with u.for_range(b, 0, npairs, "pair") as p:
      lo = b.mul(p, two_w)
      mid = b.add(lo, width)
      mid = b.select(b.icmp_signed(">", mid, nn), nn, mid)
      hi = b.add(mid, width)
      hi = b.select(b.icmp_signed(">", hi, nn), nn, hi)
      # Runs already in order (or a lone run): copy.
      b.store(ir.Constant(I1, 1), ordered)
      with b.if_then(b.icmp_signed("<", mid, hi)):
        b.store(b.not_(self.less(b, b.gep(src, [mid]),
                                 b.gep(src, [b.sub(mid, u.i64(1))]))),
                ordered)
      with b.if_else(b.load(ordered)) as (then, otherwise):
        with then:
          u.memcpy(b, b.gep(dst, [lo]), b.gep(src, [lo]),
                   b.mul(b.sub(hi, lo), u.i64(self.elem_bytes)))
        with otherwise:
          self._merge(src, dst, lo, mid, hi)

  def _merge(self, src, dst, lo, mid, hi) -> None:
    """dst[lo:hi] = stable merge of src[lo:mid] and src[mid:hi]; taking
    from the right only when its head is strictly less."""
    b = self.b
    i = u.entry_alloca(b, I64, name="mi")
    j = u.entry_alloca(b, I64, name="mj")
    right = u.entry_alloca(b, I1, name="take_right")
    b.store(lo, i)
    b.store(mid, j)
    with u.for_range(b, lo, hi, "mk") as k:
      iv, jv = b.load(i), b.load(j)
      i_ok = b.icmp_signed("<", iv, mid)
      j_ok = b.icmp_signed("<", jv, hi)
      b.store(b.not_(i_ok), right)
      with b.if_then(b.and_(i_ok, j_ok)):
        b.store(self.less(b, b.gep(src, [jv]), b.gep(src, [iv])), right)
      take = b.load(right)
      pick = b.select(take, jv, iv)
      b.store(b.load(b.gep(src, [pick])), b.gep(dst, [k]))
      b.store(b.add(iv, b.zext(b.not_(take), I64)), i)
      b.store(b.add(jv, b.zext(take, I64)), j)


def _row_geometry(dims, dim):
  n = dims[dim]
  inner = math.prod(dims[dim + 1:])
  outer = math.prod(dims[:dim])
  return n, inner, outer


def _row_base(b, row, n, inner):
  """The linear index of a row's first element (rows enumerate the
  non-sorted dimensions in row-major order)."""
  if inner == 1:
    return b.mul(row, u.i64(n))
  o = b.udiv(row, u.i64(inner))
  i = b.urem(row, u.i64(inner))
  return b.add(b.mul(o, u.i64(n * inner)), i)


def _emit_rows(ka: u.KernelArgs, n: int, inner: int, scratch_bytes: int,
               body) -> None:
  """The per-call loop over rows [begin, end) with one scratch buffer;
  body(scratch, row_base_index)."""
  b = ka.b
  scratch = u.Scratch(b, scratch_bytes)
  with u.for_range(b, ka.begin, ka.end, "row") as row:
    body(scratch, _row_base(b, row, n, inner))
  scratch.release(b)
  b.ret_void()


def _elem(b, ptr, base, idx, stride):
  off = idx if stride == 1 else b.mul(idx, u.i64(stride))
  return b.gep(ptr, [b.add(base, off)])


def _iota(b, buf, n):
  with u.for_range(b, 0, n, "iota") as k:
    b.store(b.trunc(k, I32), b.gep(buf, [k]))


def _load_index(b, ptr):
  return b.zext(b.load(ptr), I64)


def _copy_row(b, dst, dst_base, dst_stride, src, src_base, src_stride, n,
              elem_bytes):
  """dst[dst_base + k*dst_stride] = src[src_base + k*src_stride], k < n."""
  if dst_stride == 1 and src_stride == 1:
    u.memcpy(b, b.gep(dst, [dst_base]), b.gep(src, [src_base]),
             n * elem_bytes)
    return
  with u.for_range(b, 0, n, "cp") as k:
    b.store(b.load(_elem(b, src, src_base, k, src_stride)),
            _elem(b, dst, dst_base, k, dst_stride))


def _gather_row(b, src, dst, base, perm, count, stride, elem_ty, tmp):
  """dst[base + k*stride] = src[base + perm[k]*stride] for k < count, via
  the scratch row `tmp` when dst is src."""
  same = b.icmp_unsigned("==", b.bitcast(src, u.I8_PTR),
                         b.bitcast(dst, u.I8_PTR))
  with b.if_else(same) as (then, otherwise):
    with then:
      tmp = b.bitcast(tmp, elem_ty.as_pointer())
      with u.for_range(b, 0, count, "gt") as k:
        p = _load_index(b, b.gep(perm, [k]))
        b.store(b.load(_elem(b, src, base, p, stride)), b.gep(tmp, [k]))
      with u.for_range(b, 0, count, "gs") as k:
        b.store(b.load(b.gep(tmp, [k])), _elem(b, dst, base, k, stride))
    with otherwise:
      with u.for_range(b, 0, count, "gd") as k:
        p = _load_index(b, b.gep(perm, [k]))
        b.store(b.load(_elem(b, src, base, p, stride)),
                _elem(b, dst, base, k, stride))


def _check_n(instr, n):
  if n >= 2**31:
    raise support.UnimplementedError(
        f"CPU codegen for {instr.opcode.value} ({instr.name}): rows of "
        f"{n} elements (at most 2^31 - 1)")


@kernel_api.register_kernel_emitter("sort")
def emit_sort(ctx: kernel_api.KernelContext, instr) -> kernel_api.KernelSpec:
  shapes = [op.shape for op in instr.operands]
  for s in shapes:
    if s.is_tuple():
      raise support.InvalidArgumentError(
          f"sort {instr.name}: tuple-shaped operand")
  dims = tuple(shapes[0].dimensions)
  dim = instr.dimensions[0] if instr.dimensions else len(dims) - 1
  if not dims:
    n, inner, outer = 1, 1, 1
  else:
    n, inner, outer = _row_geometry(dims, dim)
  _check_n(instr, n)
  cmp_fn = ctx.scalar_computation(instr.to_apply)
  ka = u.KernelArgs(ctx, instr, f"sort_{instr.name}", optsize=True)
  b = ka.b
  rows = outer * inner
  if rows == 0 or n == 0:
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, 0)
  elem_tys = [kernel_api.llvm_storage_type(s.element_type) for s in shapes]
  elem_bytes = [u.byte_size(s.element_type) for s in shapes]
  flag = u.entry_alloca(b, I8, name="cmp_out")

  def compare(bb, args):
    bb.call(cmp_fn, args + [flag])
    return bb.icmp_unsigned("!=", bb.load(flag), ir.Constant(I8, 0))

  if len(shapes) == 1:
    # One operand: sort the values themselves in two scratch rows, by the
    # library routine for the element size with the comparator behind a
    # function pointer, as XLA's runtime sort takes it.
    ty, nb = elem_tys[0], elem_bytes[0]
    routine = runtime_library.declare(b.module, _sort_routine_name(nb))
    less_fn = _less_wrapper(ctx, ka.fn.name, cmp_fn, ty)

    def body(scratch, base):
      bufs = (scratch.at(b, 0, ty), scratch.at(b, n * nb, ty))
      _copy_row(b, bufs[0], u.i64(0), 1, ka.operands[0], base, inner, n, nb)
      res = b.call(routine, [b.bitcast(bufs[0], u.I8_PTR),
                             b.bitcast(bufs[1], u.I8_PTR), u.i64(n),
                             less_fn])
      res = b.bitcast(res, ty.as_pointer())
      _copy_row(b, ka.results[0], base, inner, res, u.i64(0), 1, n, nb)

    _emit_rows(ka, n, inner, 2 * n * nb, body)
  else:
    # Several operands: sort a permutation of the row's positions.
    def body(scratch, base):
      bufs = (scratch.at(b, 0, I32), scratch.at(b, 4 * n, I32))
      _iota(b, bufs[0], n)

      def less(bb, pa, pb):
        ia, ib = _load_index(bb, pa), _load_index(bb, pb)
        args = []
        for ptr in ka.operands:
          args += [_elem(bb, ptr, base, ia, inner),
                   _elem(bb, ptr, base, ib, inner)]
        return compare(bb, args)

      perm = _RowSorter(b, n, I32, 4, less, bufs).sort()
      tmp = scratch.at(b, 8 * n, I8)
      for src, dst, ty in zip(ka.operands, ka.results, elem_tys):
        _gather_row(b, src, dst, base, perm, n, inner, ty, tmp)

    _emit_rows(ka, n, inner, 8 * n + n * max(elem_bytes), body)
  log = max(1, math.ceil(math.log2(max(n, 2))))
  return kernel_api.KernelSpec(ka.fn.name, rows,
                               cost=rows * n * log * 4 * len(shapes))


_LESS_TYPE = ir.FunctionType(I1, [u.I8_PTR, u.I8_PTR])


def _sort_routine_name(elem_bytes: int) -> str:
  return f"{runtime_library.PREFIX}sort_b{8 * elem_bytes}"


def _less_wrapper(ctx, kernel_name: str, cmp_fn, ty) -> ir.Function:
  """i1 less(i8* a, i8* b): the sort's comparator on two elements, as a
  function the library routine calls through a pointer."""
  fn = ir.Function(ctx.module, _LESS_TYPE, f"{kernel_name}_less")
  fn.linkage = "internal"
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  flag = b.alloca(I8, name="cmp_out")
  pa, pb = (b.bitcast(a, ty.as_pointer()) for a in fn.args)
  b.call(cmp_fn, [pa, pb, flag])
  b.ret(b.icmp_unsigned("!=", b.load(flag), ir.Constant(I8, 0)))
  return fn


def _build_sort_routine(fn: ir.Function, bits: int) -> None:
  """sort(first, second, n, less) -> the buffer holding the result: the
  stable merge sort of `_RowSorter` on n elements of `bits` bits in
  `first`, with `second` as the merge buffer, comparing through `less`.
  A library routine (runtime_library.py): every program's single-operand
  sort shares it and compiles only its comparator."""
  first, second, n, less = fn.args
  ty = ir.IntType(bits)
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  bufs = (b.bitcast(first, ty.as_pointer()), b.bitcast(second, ty.as_pointer()))

  def call_less(bb, pa, pb):
    return bb.call(less, [bb.bitcast(pa, u.I8_PTR), bb.bitcast(pb, u.I8_PTR)])

  res = _RowSorter(b, n, ty, bits // 8, call_less, bufs).sort()
  b.ret(b.bitcast(res, u.I8_PTR))


for _bits in (8, 16, 32, 64, 128):
  runtime_library.routine(
      _sort_routine_name(_bits // 8),
      ir.FunctionType(u.I8_PTR, [u.I8_PTR, u.I8_PTR, I64,
                                 _LESS_TYPE.as_pointer()]))(
          functools.partial(_build_sort_routine, bits=_bits))


def _native_less(et: PrimitiveType, largest: bool):
  """The built-in strict order of topk on loaded storage values."""
  direction = "GT" if largest else "LT"
  is_float = primitive_util.is_floating_point(et)

  def less(b, x, y):
    return elemental.compare(b, et, direction, x, y, total_order=is_float)

  return less


# topk selects when k is at most this (see _emit_topk_select); above, each
# row is merge sorted. Selection costs n key compares plus O(k) shifts per
# insertion: about k * ln(n / k) insertions on data in random order, n in
# the worst case (rows already in order), where k <= 64 keeps it within a
# few times the sort.
SELECT_MAX_K = 64

_FLOAT_KEYS = {PrimitiveType.F16: 16, PrimitiveType.BF16: 16,
               PrimitiveType.F32: 32, PrimitiveType.F64: 64}


def _topk_key(et: PrimitiveType):
  """(key type, signed, is_float): topk's order on `et` as an integer
  compare of keys made from the stored bits, or None (no such key)."""
  if et in _FLOAT_KEYS:
    return ir.IntType(_FLOAT_KEYS[et]), True, True
  if primitive_util.is_signed_integral(et):
    return kernel_api.llvm_storage_type(et), True, False
  if primitive_util.is_unsigned_integral(et) or et == PrimitiveType.PRED:
    return kernel_api.llvm_storage_type(et), False, False
  return None


def _key(b, bits, is_float):
  """The total-order key of float bits (scalar or vector): flipping the
  magnitude bits of negative values makes a signed integer compare order
  them as IEEE totalOrder (-NaN < -inf < ... < -0 < +0 < ... < +inf < NaN)."""
  if not is_float:
    return bits
  elem = bits.type.element if isinstance(bits.type, ir.VectorType) else (
      bits.type)
  w = elem.width
  sign = b.ashr(bits, ir.Constant(bits.type, w - 1))
  return b.xor(bits, b.lshr(sign, ir.Constant(bits.type, 1)))


@kernel_api.register_kernel_emitter("topk")
def emit_topk(ctx: kernel_api.KernelContext, instr) -> kernel_api.KernelSpec:
  shape = instr.operand(0).shape
  et = shape.element_type
  if primitive_util.is_complex(et):
    raise support.UnimplementedError(
        f"CPU codegen for topk ({instr.name}): complex operands")
  dims = tuple(shape.dimensions)
  if not dims:
    raise support.InvalidArgumentError(f"topk {instr.name}: scalar operand")
  k = instr.k
  n = dims[-1]
  _check_n(instr, n)
  if not 0 <= k <= n:
    raise support.InvalidArgumentError(
        f"topk {instr.name}: k={k} outside [0, {n}]")
  rows = math.prod(dims[:-1])
  key = _topk_key(et)
  select = key is not None and k <= SELECT_MAX_K
  ka = u.KernelArgs(ctx, instr, f"topk_{instr.name}", optsize=True)
  b = ka.b
  if rows == 0 or k == 0:
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, 0)
  largest = instr.largest
  idx_et = ka.result_shapes[1].element_type
  idx_ty = kernel_api.llvm_storage_type(idx_et)
  if not isinstance(idx_ty, ir.IntType):
    raise support.InvalidArgumentError(
        f"topk {instr.name}: indices must be integers")
  if select:
    kt, signed, is_float = key
    name = _select_routine_name(kt.width, signed, is_float, largest,
                                idx_ty.width)
    fn = runtime_library.declare(b.module, name)
    b.call(fn, [b.bitcast(ka.operands[0], kt.as_pointer()),
                b.bitcast(ka.results[0], kt.as_pointer()),
                b.bitcast(ka.results[1], idx_ty.as_pointer()),
                ka.begin, ka.end, u.i64(n), u.i64(k)])
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, rows, cost=rows * (2 * n + k * k))
  cmp = _native_less(et, largest)
  src = ka.operands[0]

  def body(scratch, base):
    bufs = (scratch.at(b, 0, I32), scratch.at(b, 4 * n, I32))
    _iota(b, bufs[0], n)

    def less(bb, pa, pb):
      ia, ib = _load_index(bb, pa), _load_index(bb, pb)
      x = elemental.load_element(bb, bb.gep(src, [bb.add(base, ia)]), et)
      y = elemental.load_element(bb, bb.gep(src, [bb.add(base, ib)]), et)
      return cmp(bb, x, y)

    perm = _RowSorter(b, n, I32, 4, less, bufs).sort()
    row = b.udiv(base, u.i64(n))
    out_base = b.mul(row, u.i64(k))
    with u.for_range(b, 0, k, "topk") as j:
      p = _load_index(b, b.gep(perm, [j]))
      b.store(b.load(b.gep(src, [b.add(base, p)])),
              b.gep(ka.results[0], [b.add(out_base, j)]))
      _store_index(b, p, idx_ty, b.gep(ka.results[1], [b.add(out_base, j)]))

  _emit_rows(ka, n, 1, 8 * n, body)
  log = max(1, math.ceil(math.log2(max(n, 2))))
  return kernel_api.KernelSpec(ka.fn.name, rows, cost=rows * n * log * 4)


def _store_index(b, p, idx_ty, ptr):
  """Stores the i64 position `p` as an index of type idx_ty."""
  if idx_ty.width < 64:
    p = b.trunc(p, idx_ty)
  b.store(p, ptr)


def _select_routine_name(width: int, signed: bool, is_float: bool,
                         largest: bool, idx_width: int) -> str:
  kind = "f" if is_float else ("s" if signed else "u")
  order = "largest" if largest else "smallest"
  return (f"{runtime_library.PREFIX}topk_{kind}{width}_{order}_"
          f"i{idx_width}")


def _build_topk_select(fn: ir.Function, width: int, signed: bool,
                       is_float: bool, largest: bool) -> None:
  """topk(src, out_keys, out_idx, row_begin, row_end, n, k), k <=
  SELECT_MAX_K: per row, the k best elements by insertion into a sorted
  list of k (key, position) pairs, best first, scanning the row once in
  order. Elements are handled as their stored bits (`out_keys` receives
  them unchanged); floats compare by their totalOrder key. A library
  routine (runtime_library.py): n and k are arguments, so every program's
  top-k shares one compiled scan.

  An element enters when it beats the list's last (k-th) key strictly, and
  goes after every entry it does not beat, so equal keys keep index order
  (XLA's ties-to-lower-index). The first k elements fill the list; the
  rest of the row is scanned a vector of L keys at a time against the
  k-th key, and only lanes that beat it take the scalar insertion path
  (re-checked, since each insertion raises the bar)."""
  src_bits, out_keys, out_idx, row_begin, row_end, n, k = fn.args
  kt = src_bits.type.pointee
  idx_ty = out_idx.type.pointee
  b = ir.IRBuilder(fn.append_basic_block("entry"))
  lanes = max(2, min(64, runtime_library.host_vector_bits() // kt.width))
  vt = ir.VectorType(kt, lanes)
  keys = u.entry_alloca(b, kt, SELECT_MAX_K, name="topk_keys")
  pos = u.entry_alloca(b, I32, SELECT_MAX_K, name="topk_pos")
  thr = u.entry_alloca(b, kt, name="topk_thr")
  jslot = u.entry_alloca(b, I64, name="topk_j")
  op = ">" if largest else "<"
  last = b.sub(k, u.i64(1))

  def better(bb, x, y):
    if signed:
      return bb.icmp_signed(op, x, y)
    return bb.icmp_unsigned(op, x, y)

  def insert(kv, i, start):
    """Shifts the entries [.., start) that kv beats down by one and puts
    (kv, i) in the gap (entry `start` is overwritten)."""
    fn_ = b.function
    cond = fn_.append_basic_block("ins.cond")
    test = fn_.append_basic_block("ins.test")
    body = fn_.append_basic_block("ins.body")
    done = fn_.append_basic_block("ins.end")
    b.store(start, jslot)
    b.branch(cond)
    b.position_at_end(cond)
    jv = b.load(jslot)
    b.cbranch(b.icmp_signed(">", jv, u.i64(0)), test, done)
    b.position_at_end(test)
    jp = b.sub(jv, u.i64(1))
    prev = b.load(b.gep(keys, [jp]))
    b.cbranch(better(b, kv, prev), body, done)
    b.position_at_end(body)
    b.store(prev, b.gep(keys, [jv]))
    b.store(b.load(b.gep(pos, [jp])), b.gep(pos, [jv]))
    b.store(jp, jslot)
    b.branch(cond)
    b.position_at_end(done)
    jv = b.load(jslot)
    b.store(kv, b.gep(keys, [jv]))
    b.store(b.trunc(i, I32), b.gep(pos, [jv]))

  def step(base, i):
    """Offers element i of the row to the full list."""
    kv = _key(b, b.load(b.gep(src_bits, [b.add(base, i)])), is_float)
    with b.if_then(better(b, kv, b.load(thr))):
      insert(kv, i, last)
      b.store(b.load(b.gep(keys, [last])), thr)

  # The scalar head runs up to a multiple of L (at least k), full vectors
  # to the last multiple of L, then a scalar tail.
  lanes_c = u.i64(lanes)
  head_end = b.mul(b.udiv(b.add(k, u.i64(lanes - 1)), lanes_c), lanes_c)
  head_end = b.select(b.icmp_unsigned("<", head_end, n), head_end, n)
  vec_end = b.mul(b.udiv(n, lanes_c), lanes_c)
  has_vec = b.icmp_unsigned(">", vec_end, head_end)
  n_vec = b.select(has_vec, b.udiv(b.sub(vec_end, head_end), lanes_c),
                   u.i64(0))
  tail_start = b.add(head_end, b.mul(n_vec, lanes_c))
  mask_ty = ir.IntType(lanes)

  with u.for_range(b, row_begin, row_end, "row") as row:
    base = b.mul(row, n)
    with u.for_range(b, 0, k, "fill") as i:
      kv = _key(b, b.load(b.gep(src_bits, [b.add(base, i)])), is_float)
      insert(kv, i, i)
    b.store(b.load(b.gep(keys, [last])), thr)
    with u.for_range(b, k, head_end, "head") as i:
      step(base, i)
    with u.for_range(b, 0, n_vec, "vec") as c:
      i0 = b.add(b.mul(c, lanes_c), head_end)
      vp = b.bitcast(b.gep(src_bits, [b.add(base, i0)]), vt.as_pointer())
      kvec = _key(b, b.load(vp, align=kt.width // 8), is_float)
      t = b.load(thr)
      tv = b.insert_element(ir.Constant(vt, ir.Undefined), t, u.I32(0))
      tv = b.shuffle_vector(tv, ir.Constant(vt, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, lanes), 0))
      mask = b.bitcast(better(b, kvec, tv), mask_ty)
      with b.if_then(b.icmp_unsigned("!=", mask, ir.Constant(mask_ty, 0))):
        fn_ = b.function
        pre = b.block
        cond = fn_.append_basic_block("lane.cond")
        body = fn_.append_basic_block("lane.body")
        done = fn_.append_basic_block("lane.end")
        b.branch(cond)
        b.position_at_end(cond)
        m = b.phi(mask_ty, name="lanes")
        m.add_incoming(mask, pre)
        b.cbranch(b.icmp_unsigned("!=", m, ir.Constant(mask_ty, 0)), body,
                  done)
        b.position_at_end(body)
        lane = b.cttz(m, ir.Constant(ir.IntType(1), 1))
        step(base, b.add(i0, b.zext(lane, I64)))
        m.add_incoming(b.and_(m, b.sub(m, ir.Constant(mask_ty, 1))),
                       b.block)
        b.branch(cond)
        b.position_at_end(done)
    with u.for_range(b, tail_start, n, "tail") as i:
      step(base, i)
    out_base = b.mul(row, k)
    with u.for_range(b, 0, k, "out") as j:
      p = b.zext(b.load(b.gep(pos, [j])), I64)
      b.store(b.load(b.gep(src_bits, [b.add(base, p)])),
              b.gep(out_keys, [b.add(out_base, j)]))
      _store_index(b, p, idx_ty, b.gep(out_idx, [b.add(out_base, j)]))
  b.ret_void()


def _register_select_routines() -> None:
  for width, signed, is_float in ((16, True, True), (32, True, True),
                                  (64, True, True), (8, True, False),
                                  (16, True, False), (32, True, False),
                                  (64, True, False), (8, False, False),
                                  (16, False, False), (32, False, False),
                                  (64, False, False)):
    kt = ir.IntType(width)
    for largest in (True, False):
      for idx_width in (32, 64):
        it = ir.IntType(idx_width)
        fn_type = ir.FunctionType(ir.VoidType(), [
            kt.as_pointer(), kt.as_pointer(), it.as_pointer(), I64, I64,
            I64, I64])
        runtime_library.routine(
            _select_routine_name(width, signed, is_float, largest,
                                 idx_width), fn_type)(
                functools.partial(_build_topk_select, width=width,
                                  signed=signed, is_float=is_float,
                                  largest=largest))


_register_select_routines()
