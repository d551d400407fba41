"""Reduction kernels: standalone `reduce`, reduction input fusions and
multi-output fusions that mix reductions with elementwise outputs.

A *group* is one or more reduce instructions over the same input
dimensions and the same reduced dimensions (sibling reductions of a
multi-output fusion), plus optional elementwise outputs over the input
shape. One kernel computes the whole group in a single sweep over the
input, each input element generated once (`ElementGenerator`).

Two loop structures, chosen by whether the last (contiguous, size > 1)
input dimension is reduced:

* row reduction (last dimension reduced): the units are chunks of output
  elements; for each output element the reduced dimensions are swept with
  the last one innermost. When the reducer is a single associative binary
  op with an identity (add, multiply, maximum, minimum, and, or, xor) on a
  vectorizable type, the innermost loop first generates a tile of
  `TILE` input elements into a stack buffer (a plain loop that LLVM
  vectorizes) and then folds the tile into `UNROLL` vector accumulators
  (explicit `<W x T>` ops); the accumulators are combined lane by lane at
  the end. This reassociates the reduction (as XLA's CPU backend does).
  Other reducers (variadic, complex, arbitrary computations) fold element
  by element in order.

* column reduction (last dimension kept): outputs are initialised, then the
  input is swept in row-major order with `out[kept] = f(out[kept], x)`;
  the innermost loop is elementwise over contiguous input and output
  elements (vectorizable, and each output element sees its inputs in
  order). Units are (value of the first kept dimension, block of `COLUMN_
  BLOCK` indices of the last dimension), so a unit's outputs stay in cache.

Concatenates in the inputs split the sweep (a column reduction: any
dimension; a row reduction: the last) at their pieces (`concat_split`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from llvmlite import ir

import support
from xla import primitive_util
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import concat_split
from xla.service.cpu import elemental_convert as ec
from xla.service.cpu import elemental_ir_emitter as eie
from xla.service.cpu import elemental_util as eu
from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter as le
from xla.service.cpu import loop_kernels
from xla.service.cpu.elemental_generator import ElementGenerator
from xla.service.cpu.elemental_generator import apply_computation
from xla.service.cpu.loop_emitter import Index
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType

UNROLL = 4
TILE_VECTORS = 16  # vectors of W elements per tile
COLUMN_BLOCK = 1024
TARGET_UNIT_ELEMENTS = loop_kernels.TARGET_UNIT_ELEMENTS
# Rows up to this long that the vector path cannot take go through tiles
# of generated inputs (`_Emitter._emit_short_rows`), of at most this many
# elements per reducer input.
SHORT_ROW = 32
SHORT_TILE_ELEMENTS = 2048
# Rows up to this long fill their tiles with the row unrolled
# (`_Emitter._fill_unrolled`).
SHORT_UNROLL = 8


@dataclasses.dataclass
class ReduceOutput:
  reduce: object  # the reduce HloInstruction (fused or standalone)
  ptrs: list  # one storage pointer per result leaf


@dataclasses.dataclass
class ReductionGroup:
  reduces: list[ReduceOutput]
  extras: list  # (instruction over the input shape, storage pointer)

  @property
  def input_dims(self) -> tuple[int, ...]:
    return tuple(self.reduces[0].reduce.operand(0).shape.dimensions)

  @property
  def reduced(self) -> tuple[int, ...]:
    return tuple(sorted(self.reduces[0].reduce.dimensions))


def group_key(reduce_instr) -> tuple:
  return (tuple(reduce_instr.operand(0).shape.dimensions),
          tuple(sorted(reduce_instr.dimensions)))


def _n_inputs(r) -> int:
  return r.operand_count // 2


def _element_types(r) -> list:
  return [l.element_type for l in kernel_api.array_leaves(r.shape)]


def _cost(group: ReductionGroup) -> int:
  n = math.prod(group.input_dims)
  return n * (4 + sum(len(r.reduce.to_apply.instructions)
                      for r in group.reduces) + len(group.extras))


# -- vectorizable reducers ---------------------------------------------------------

_IDENTITY_OPS = (O.kAdd, O.kMultiply, O.kMaximum, O.kMinimum, O.kAnd, O.kOr,
                 O.kXor)


def _identity(op, et) -> Optional[object]:
  k = ec.kind(et)
  if k == "float":
    return {O.kAdd: -0.0, O.kMultiply: 1.0, O.kMaximum: -math.inf,
            O.kMinimum: math.inf}.get(op)
  if k in ("sint", "uint"):
    bits = primitive_util.bit_width(et)
    if k == "sint":
      lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
      lo, hi = 0, (1 << bits) - 1
    return {O.kAdd: 0, O.kMultiply: 1, O.kMaximum: lo, O.kMinimum: hi,
            O.kAnd: -1 if k == "sint" else hi, O.kOr: 0, O.kXor: 0}.get(op)
  return None


def vector_reducer(r) -> Optional[tuple]:
  """(binary op instruction, identity) if reduce `r` folds with one
  associative op that has an identity on a vectorizable type, else None."""
  if _n_inputs(r) != 1:
    return None
  comp = r.to_apply
  root = comp.root_instruction
  if root.opcode not in _IDENTITY_OPS or root.operand_count != 2:
    return None
  if {o.opcode for o in root.operands} != {O.kParameter} or (
      root.operand(0) is root.operand(1)):
    return None
  et = r.shape.element_type
  if et in ec.NARROW_INTS or et == P.PRED:
    return None
  try:
    ident = _identity(root.opcode, et)
  except support.UnimplementedError:
    return None
  if ident is None:
    return None
  return root, ident


def row_tile(length: int, widths: list[int]) -> int:
  """Elements per tile of a vectorized row reduction of `length` whose
  reducers use vectors of `widths` lanes (powers of two), or 0 for the
  scalar path. A tile is TILE_VECTORS of the widest vectors, or fewer for
  a short row, down to one UNROLL group (a row of 65, attention over 65
  tokens, took the scalar path and ran 5x slower than XLA); every fold
  step divides it."""
  step = max(widths) * UNROLL
  return min(step * (TILE_VECTORS // UNROLL), length // step * step)


def _byte_width(ty: ir.Type) -> int:
  if isinstance(ty, ir.IntType):
    return max(1, ty.width // 8)
  return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(ty)]


# -- the kernel ----------------------------------------------------------------------


class _Emitter:
  """Emits the loops of one reduction group into `args`' kernel."""

  def __init__(self, ctx, args: loop_kernels.KernelArgs,
               gen: ElementGenerator, group: ReductionGroup):
    self.ctx = ctx
    self.b = args.b
    self.args = args
    self.gen = gen
    self.group = group
    self.dims = group.input_dims
    self.red = set(group.reduced)
    self.rank = len(self.dims)
    self.kept = [d for d in range(self.rank) if d not in self.red]
    self.out_dims = [self.dims[d] for d in self.kept]

  # -- helpers ---------------------------------------------------------------------

  def _inputs_at(self, ro: ReduceOutput, index: Index):
    r = ro.reduce
    return [self.gen.value(r.operand(i), index) for i in range(_n_inputs(r))]

  def _inits(self, ro: ReduceOutput):
    r = ro.reduce
    n = _n_inputs(r)
    return [self.gen.value(r.operand(n + i), Index.scalar())
            for i in range(n)]

  def _fold(self, ro: ReduceOutput, accs, xs):
    r = ro.reduce
    res = apply_computation(self.ctx, self.b, r.to_apply, list(accs) +
                            list(xs))
    return list(res) if isinstance(res, tuple) else [res]

  def _store_extras(self, index: Index):
    b = self.b
    vals = [(self.gen.value(instr, index), ptr, instr)
            for instr, ptr in self.group.extras]
    for v, ptr, instr in vals:
      eie.store_element(b, v, le.element_ptr(b, ptr, index),
                        instr.shape.element_type)

  def _full_index(self, kept_multi, red_multi) -> Index:
    multi, k, r = [], 0, 0
    for d in range(self.rank):
      if d in self.red:
        multi.append(red_multi[r])
        r += 1
      else:
        multi.append(kept_multi[k])
        k += 1
    return Index(self.dims, multi)

  # -- dispatch --------------------------------------------------------------------

  def emit(self) -> int:
    eff = [d for d in range(self.rank) if self.dims[d] != 1]
    if eff and eff[-1] in self.red:
      return self._emit_row(eff[-1])
    return self._emit_column(eff[-1] if eff else None)

  # -- row reductions --------------------------------------------------------------

  def _emit_row(self, last: int) -> int:
    b = self.b
    n_out = math.prod(self.out_dims)
    row = math.prod(self.dims[d] for d in self.red)
    if n_out == 0:
      return 0
    if (sorted(self.red) == [last] and 0 < row <= SHORT_ROW and n_out > 1
        and self._vector_plan(row) is None):
      return self._emit_short_rows(last, n_out, row)
    c = max(1, min(n_out, -(-TARGET_UNIT_ELEMENTS // max(1, row))))
    extent = -(-n_out // c)
    red_dims = sorted(self.red)
    outer_red = [d for d in red_dims if d != last]
    after_last = [d for d in red_dims if d > last]  # all of size 1
    length = self.dims[last]
    vec = self._vector_plan(length)
    splitter = self._splitter(allowed=[last])
    with le.for_range(b, self.args.begin, self.args.end, "unit") as u:
      lo = le.mul(b, u, c)
      hi_raw = b.add(lo, le.i64(c))
      hi = le.min_i64(b, hi_raw, n_out)
      with le.for_range(b, lo, hi, "out") as o:
        out_index = Index(self.out_dims, linear=o)
        kmulti = out_index.multi(b)
        with self.gen.scope():
          acc_slots = self._init_accumulators()
          vslots = self._init_vector_accumulators(vec)
          with le.loop_nest(b, [self.dims[d] for d in outer_red],
                            "r") as ridx:
            rmap = dict(zip(outer_red, ridx))
            for d in after_last:
              rmap[d] = le.i64(0)

            def index_at(j, rmap=rmap):
              rm = dict(rmap)
              rm[last] = j
              return self._full_index(kmulti, [rm[d] for d in red_dims])

            self._row_segment(length, index_at, acc_slots, vslots, vec,
                              splitter)
          self._combine_vectors(acc_slots, vslots, vec)
          for ro, slots in zip(self.group.reduces, acc_slots):
            for slot, ptr, et in zip(slots, ro.ptrs, _element_types(ro.reduce)):
              eie.store_element(b, b.load(slot),
                                le.element_ptr(b, ptr, out_index), et)
    return extent

  def _emit_short_rows(self, last: int, n_out: int, row: int) -> int:
    """Rows of at most SHORT_ROW elements that the vector path cannot take
    (too short, or a variadic reducer such as argmax): for a block of
    outputs, a plain loop over their contiguous input elements generates
    the reducers' inputs into stack tiles (LLVM vectorizes it: the fused
    producers' math runs in vector lanes), then each output folds its
    row from the tile, in order. Categorical sampling (a Gumbel argmax
    over 3 classes, two logs per element) measured 0.96 ms for 8192 rows
    element by element."""
    del last
    b = self.b
    c = max(1, min(n_out, -(-TARGET_UNIT_ELEMENTS // row)))
    extent = -(-n_out // c)
    sub = max(1, min(c, SHORT_TILE_ELEMENTS // row))
    # A row of 2^k elements keeps the flat fill even then: `t % row` is a
    # mask there, and LLVM vectorizes the fill (the unrolled one measured
    # up to 1.35x slower where both vectorize).
    unrolled = (row <= SHORT_UNROLL and row & (row - 1) != 0 and
                self._inputs_need_positions())
    tiles = []
    for ro in self.group.reduces:
      r = ro.reduce
      mine = []
      for i in range(_n_inputs(r)):
        ty = eie.compute_type(r.operand(i).shape.element_type)
        tile = le.entry_alloca(b, ir.ArrayType(ty, sub * row), "short")
        tile.align = 64
        mine.append(tile)
      tiles.append(mine)
    with le.for_range(b, self.args.begin, self.args.end, "unit") as u:
      lo = le.mul(b, u, c)
      hi_raw = b.add(lo, le.i64(c))
      hi = le.min_i64(b, hi_raw, n_out)
      with le.for_range(b, lo, hi, "sub", step=sub) as s0:
        end_raw = b.add(s0, le.i64(sub))
        end = b.select(b.icmp_signed("<", end_raw, hi), end_raw, hi)
        count = b.sub(end, s0)
        base = le.mul(b, s0, row)
        if unrolled:
          self._fill_unrolled(s0, count, row, tiles)
        else:
          with le.for_range(b, 0, le.mul(b, count, row), "fill") as t:
            with self.gen.scope():
              index = Index(self.dims, linear=b.add(base, t))
              self._fill_at(index, t, tiles)
        with le.for_range(b, 0, count, "out") as k:
          o = b.add(s0, k)
          out_index = Index(self.out_dims, linear=o)
          with self.gen.scope():
            acc_slots = self._init_accumulators()
            first = le.mul(b, k, row)
            with le.for_range(b, 0, row, "elem") as j:
              at = b.add(first, j)
              for ro, slots, mine in zip(self.group.reduces, acc_slots,
                                         tiles):
                xs = [b.load(b.gep(tile, [le.i64(0), at])) for tile in mine]
                accs = [b.load(slot) for slot in slots]
                for slot, v in zip(slots, self._fold(ro, accs, xs)):
                  b.store(v, slot)
            for ro, slots in zip(self.group.reduces, acc_slots):
              for slot, ptr, et in zip(slots, ro.ptrs,
                                       _element_types(ro.reduce)):
                eie.store_element(b, b.load(slot),
                                  le.element_ptr(b, ptr, out_index), et)
    return extent

  def _inputs_need_positions(self) -> bool:
    """Whether generating the reducers' inputs (and the extra outputs)
    at an element needs its position by dimension, not just its linear
    offset: they reach something other than elementwise ops, parameters,
    constants of their shape, scalar broadcasts and reshapes."""
    roots = [ro.reduce.operand(i) for ro in self.group.reduces
             for i in range(_n_inputs(ro.reduce))]
    roots += [instr for instr, _ in self.group.extras]
    seen, stack = set(), list(roots)
    while stack:
      instr = stack.pop()
      if id(instr) in seen or not instr.shape.dimensions:
        continue
      seen.add(id(instr))
      op = instr.opcode
      if op in (O.kParameter, O.kConstant) or self.gen.is_source(instr):
        continue
      if op == O.kBroadcast and not instr.operand(0).shape.dimensions:
        continue
      if op in (O.kReshape, O.kBitcast, O.kCopy) or instr.is_elementwise():
        stack.extend(instr.operands)
        continue
      return True
    return False

  def _fill_at(self, index: Index, at, tiles) -> None:
    b = self.b
    for ro, mine in zip(self.group.reduces, tiles):
      for v, tile in zip(self._inputs_at(ro, index), mine):
        b.store(v, b.gep(tile, [le.i64(0), at]))
    self._store_extras(index)

  def _fill_unrolled(self, s0, count, row: int, tiles) -> None:
    """The fill of `_emit_short_rows` as a loop over outputs whose body
    generates each of the `row` elements at a constant position in the
    row. An operand indexed by the reduced dimension alone (the logits of
    a categorical sample, broadcast along the rows, or an argmax's iota)
    is then a constant per element instead of a gather by `t % row`, which
    kept LLVM from vectorizing the whole fill; the input loads and tile
    stores become interleaved groups of `row` members. Categorical
    sampling over 3 classes (8192 rows) took 0.38 ms with the flat fill
    (JAX CPU 0.07-0.13 ms)."""
    b = self.b
    with le.for_range(b, 0, count, "fill") as k:
      o = b.add(s0, k)
      kmulti = Index(self.out_dims, linear=o).multi(b)
      first = le.mul(b, o, row)
      slot0 = le.mul(b, k, row)
      for j in range(row):
        with self.gen.scope():
          multi = self._full_index(kmulti, [le.i64(j)]).multi(b)
          index = Index(self.dims, multi, linear=b.add(first, le.i64(j)))
          self._fill_at(index, b.add(slot0, le.i64(j)), tiles)

  def _init_accumulators(self):
    b = self.b
    slots = []
    for ro in self.group.reduces:
      inits = self._inits(ro)
      mine = []
      for v in inits:
        s = le.entry_alloca(b, v.type, "acc")
        b.store(v, s)
        mine.append(s)
      slots.append(mine)
    return slots

  def _vector_plan(self, length: int):
    """Per reduce (op, identity, W) when every reduce of the group can use
    vector accumulators over a row of `length`, else None."""
    plans = []
    for ro in self.group.reduces:
      vr = vector_reducer(ro.reduce)
      if vr is None:
        return None
      et = ro.reduce.shape.element_type
      ty = eie.compute_type(et)
      w = max(2, self.ctx.target.vector_width(8 * _byte_width(ty)))
      plans.append((vr[0], vr[1], w, ty))
    tile = row_tile(length, [p[2] for p in plans])
    if tile == 0:
      return None
    return plans, tile

  def _init_vector_accumulators(self, vec):
    if vec is None:
      return None
    b = self.b
    plans, _ = vec
    out = []
    for op, ident, w, ty in plans:
      vty = ir.VectorType(ty, w)
      slots = []
      for _ in range(UNROLL):
        s = le.entry_alloca(b, vty, "vacc")
        b.store(eu.const(vty, ident), s)
        slots.append(s)
      out.append(slots)
    return out

  def _row_segment(self, length, index_at, acc_slots, vslots, vec,
                   splitter=None):
    """Folds the row positions [0, length) of the last dimension;
    `splitter` (a `concat_split.Splitter` of that dimension) splits the
    loops generating the inputs."""
    b = self.b

    def along(lo, hi, name, body):
      if splitter is None:
        with le.for_range(b, lo, hi, name) as j:
          body(j)
      else:
        splitter.loop(b, lo, hi, name, body)

    start = 0
    if vec is not None:
      plans, tile = vec
      ntiles = length // tile
      tmps = []
      for _, _, _, ty in plans:
        tmp = le.entry_alloca(b, ir.ArrayType(ty, tile), "tile")
        tmp.align = 64
        tmps.append(tmp)
      with le.for_range(b, 0, ntiles, "tile") as t:
        base = le.mul(b, t, tile)

        def fill(pos, j, tmps=tmps):
          with self.gen.scope():
            index = index_at(pos)
            vals = [self._inputs_at(ro, index)[0] for ro in self.group.reduces]
            self._store_extras(index)
            for v, tmp in zip(vals, tmps):
              b.store(v, b.gep(tmp, [le.i64(0), j]))

        if splitter is None:
          with le.for_range(b, 0, tile, "fill") as j:
            fill(b.add(base, j), j)
        else:
          splitter.loop(b, base, b.add(base, le.i64(tile)), "fill",
                        lambda pos, base=base: fill(pos, b.sub(pos, base)))
        for (op, _, w, ty), tmp, slots in zip(plans, tmps, vslots):
          vty = ir.VectorType(ty, w)
          step = w * UNROLL
          with le.for_range(b, 0, tile, "fold", step=step) as v:
            for k in range(UNROLL):
              off = b.add(v, le.i64(k * w))
              p = b.bitcast(b.gep(tmp, [le.i64(0), off]), vty.as_pointer())
              x = b.load(p, align=_byte_width(ty))
              acc = b.load(slots[k])
              b.store(eie.emit_elementwise(b, op, [acc, x]), slots[k])
      start = ntiles * tile
      if start == length:
        return
    def elem(j):
      with self.gen.scope():
        index = index_at(j)
        for ro, slots in zip(self.group.reduces, acc_slots):
          xs = self._inputs_at(ro, index)
          accs = [b.load(s) for s in slots]
          new = self._fold(ro, accs, xs)
          for s, v in zip(slots, new):
            b.store(v, s)
        self._store_extras(index)

    along(start, length, "elem", elem)

  def _combine_vectors(self, acc_slots, vslots, vec):
    if vec is None:
      return
    b = self.b
    plans, _ = vec
    for (op, _, w, ty), slots, accs in zip(plans, vslots, acc_slots):
      vals = [b.load(s) for s in slots]
      while len(vals) > 1:
        vals = [eie.emit_elementwise(b, op, [vals[i], vals[i + 1]])
                for i in range(0, len(vals), 2)]
      v = vals[0]
      width = w
      while width > 1:
        half = width // 2
        lo = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(le.I32, half),
                                                list(range(half))))
        hi = b.shuffle_vector(v, v, ir.Constant(
            ir.VectorType(le.I32, half), list(range(half, width))))
        v = eie.emit_elementwise(b, op, [lo, hi]) if half > 1 else None
        if half == 1:
          s0 = b.extract_element(lo, ir.Constant(le.I32, 0))
          s1 = b.extract_element(hi, ir.Constant(le.I32, 0))
          v = eie.emit_elementwise(b, op, [s0, s1])
        width = half
      acc = b.load(accs[0])
      b.store(eie.emit_elementwise(b, op, [acc, v]), accs[0])

  # -- column reductions -------------------------------------------------------------

  def _emit_column(self, last: Optional[int]) -> int:
    b = self.b
    dims = self.dims
    if 0 in self.out_dims:
      return 0
    big = [d for d in self.kept if dims[d] != 1]
    k0 = big[0] if big else None
    if last is None:
      nb, block = 1, 1
    else:
      block = min(dims[last], COLUMN_BLOCK)
      nb = -(-dims[last] // block)
    if k0 is None or last is None or k0 == last:
      extent = nb
      k0 = last
    else:
      extent = dims[k0] * nb
    with le.for_range(b, self.args.begin, self.args.end, "unit") as u:
      jb = le.urem(b, u, nb)
      k0v = le.udiv(b, u, nb) if k0 != last else None
      if last is not None:
        j_lo = le.mul(b, jb, block)
        hi_raw = b.add(j_lo, le.i64(block))
        j_hi = le.min_i64(b, hi_raw, dims[last])
      fixed = {}
      if k0v is not None:
        fixed[k0] = k0v

      def sweep(dim_set, body, splitter=None):
        """Loops over `dim_set` dims in order (excluding k0 and last), then
        the last dim's block; calls body(multi-dict). `splitter` (a
        `concat_split.Splitter`) splits its dimension's iteration."""
        loop_dims = [d for d in dim_set if d not in (k0, last)]

        def along(d, lo, hi, name, m, inner):
          loop_kernels.loop_along(b, splitter, d, lo, hi, name,
                                  lambda i: inner({**m, d: i}))

        def nest(k, m):
          if k < len(loop_dims):
            d = loop_dims[k]
            if dims[d] == 1:
              nest(k + 1, {**m, d: le.i64(0)})
            else:
              along(d, 0, dims[d], f"c{k}", m,
                    lambda m2: nest(k + 1, m2))
            return
          if last is None:
            body(m)
          elif dims[last] == 1:
            body({**m, last: le.i64(0)})
          else:
            along(last, j_lo, j_hi, "j", m, body)

        if (splitter is not None and k0v is not None and
            splitter.dim == k0):
          splitter.branch(b, k0v, lambda: nest(0, dict(fixed)))
        else:
          nest(0, dict(fixed))

      # 1. Initialise this unit's outputs.
      def init_body(m):
        with self.gen.scope():
          oidx = Index(self.out_dims, [m.get(d, le.i64(0)) for d in self.kept])
          for ro in self.group.reduces:
            for v, ptr, et in zip(self._inits(ro), ro.ptrs,
                                  _element_types(ro.reduce)):
              eie.store_element(b, v, le.element_ptr(b, ptr, oidx), et)

      sweep(self.kept, init_body)

      # 2. Sweep the input.
      def sweep_body(m):
        with self.gen.scope():
          index = Index(dims, [m.get(d, le.i64(0)) for d in range(self.rank)])
          oidx = Index(self.out_dims, [m.get(d, le.i64(0)) for d in self.kept])
          for ro in self.group.reduces:
            ets = _element_types(ro.reduce)
            ptrs = [le.element_ptr(b, p, oidx) for p in ro.ptrs]
            xs = self._inputs_at(ro, index)
            accs = [eie.load_element(b, p, et) for p, et in zip(ptrs, ets)]
            new = self._fold(ro, accs, xs)
            for v, p, et in zip(new, ptrs, ets):
              eie.store_element(b, v, p, et)
          self._store_extras(index)

      sweep(range(self.rank), sweep_body, self._splitter())
    return extent

  def _splitter(self, allowed=None):
    """A `concat_split.Splitter` for a sweep over the input (splitting
    one of the dimensions `allowed`, default any), or None."""
    roots = [ro.reduce.operand(i) for ro in self.group.reduces
             for i in range(_n_inputs(ro.reduce))]
    roots += [instr for instr, _ in self.group.extras]
    split = concat_split.plan(roots, self.dims, self.gen.is_source, allowed)
    return None if split is None else concat_split.Splitter(split, self.gen)


def emit_group(ctx, args: loop_kernels.KernelArgs, gen: ElementGenerator,
               group: ReductionGroup) -> kernel_api.KernelSpec:
  """Emits the body of `args`' kernel for `group` and finishes it."""
  em = _Emitter(ctx, args, gen, group)
  extent = em.emit()
  args.b.ret_void()
  loop_kernels.annotate_noalias(args)
  return kernel_api.KernelSpec(args.name, extent, _cost(group))
