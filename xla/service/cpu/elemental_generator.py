"""Element generators: the value of an HLO instruction at an index, in IR.

`ElementGenerator.value(instr, index)` emits the IR computing element
`index` of `instr` (in compute type, see `elemental_ir_emitter`), pulling
its operands' elements on demand. Instructions whose arrays live in memory
(kernel arguments: fused parameters, or the operands of a standalone
instruction) are *sources* and are loaded; every other instruction is
generated from its operands:

  elementwise ops      `elemental_ir_emitter.emit_elementwise` on operand
                       values at the same index (scalar operands of clamp /
                       select at the scalar index)
  copy                 the operand value
  broadcast, transpose, slice, reverse, pad, concatenate, dynamic-slice,
  dynamic-update-slice, reshape, bitcast
                       the operand at the mapped index (reshape / bitcast
                       keep the *linear* index, so chains stay affine, and
                       the index values of the leading and trailing
                       dimensions both shapes share; a concatenate branches
                       on the operand unless the caller's loop pins it,
                       see `pinned`)
  iota                 the index along `iota_dimension`, converted
  constant             scalars inline; arrays as internal LLVM globals
  map                  the mapped computation inlined on operand values
  reduce               a loop over the reduced dimensions (only used when a
                       reduce is fused as a non-root producer)

Values computed at an index are memoised per (instruction, index *value*)
inside a *scope*: the key is the index's LLVM values (its linear form and/or
its multi-dimensional form; constants by value, other values by identity),
so two `Index` objects naming the same element share one emission (a
broadcast, reshape or scalar operand builds a fresh `Index` on each use).
A caller opens a scope around each loop body (`with gen.scope()`) and
branches and inner loops open nested scopes, so a memoised value always
dominates its reuse. With the memo, emitting a fusion costs time linear in
its instruction count however often values are shared (a chain where each
value is used twice would otherwise cost 2^depth).

Chains of elementwise operations are emitted iteratively (operands first,
in post order), so the Python recursion depth grows with the number of
index-changing instructions on a path, not with the chain's length.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
from llvmlite import ir

import support
from xla import primitive_util
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import elemental_convert as ec
from xla.service.cpu import elemental_ir_emitter as eie
from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter as le
from xla.service.cpu.loop_emitter import Index
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType

# Opcodes the generator maps to operand indices.
INDEX_OPCODES = frozenset({
    O.kBroadcast, O.kTranspose, O.kSlice, O.kReverse, O.kPad,
    O.kConcatenate, O.kDynamicSlice, O.kDynamicUpdateSlice, O.kReshape,
    O.kBitcast, O.kIota, O.kConstant, O.kMap, O.kCopy, O.kReduce,
    O.kParameter,
})


def generatable(instr) -> bool:
  """Whether `ElementGenerator` can produce `instr` element by element."""
  op = instr.opcode
  if op in INDEX_OPCODES:
    return True
  return op in eie.SUPPORTED_OPCODES


def _shape_dims(instr) -> tuple[int, ...]:
  return tuple(instr.shape.dimensions)


def _value_key(v):
  """A hashable key naming LLVM value `v`: integer constants by value,
  anything else by identity."""
  if isinstance(v, ir.Constant) and isinstance(v.type, ir.IntType):
    return (v.type.width, v.constant)
  return id(v)


def memo_keys(instr, index: Index) -> tuple:
  """The memo keys of element `index` of `instr`: one per form (linear,
  multi-dimensional) the index has."""
  keys = []
  lin = index.linear_if_known()
  if lin is not None:
    keys.append((id(instr), index.dims, "l", _value_key(lin)))
  multi = index.multi_if_known()
  if multi is not None:
    keys.append((id(instr), index.dims, "m") +
                tuple(_value_key(m) for m in multi))
  return tuple(keys)


# opcode -> the ElementGenerator method that generates it (the indexing and
# data-movement ops it handles itself), registered where each is defined.
_HANDLERS: dict = {}


def _generates(*opcodes):
  def register(method):
    for op in opcodes:
      if op in _HANDLERS:
        raise support.InternalError(
            f"two element generators for {op.value}")
      _HANDLERS[op] = method
    return method
  return register


class _Source:
  """An array in memory: a storage-type pointer and its shape."""

  def __init__(self, ptr: ir.Value, shape):
    self.ptr = ptr
    self.shape = shape


class ElementGenerator:
  """See the module docstring."""

  def __init__(self, ctx: kernel_api.KernelContext, b: ir.IRBuilder,
               sources: dict[int, tuple[ir.Value, object]]):
    self.ctx = ctx
    self.b = b
    self._sources = {k: _Source(p, s) for k, (p, s) in sources.items()}
    self._memo: list[dict] = [{}]
    # id(instr) -> (instr, its one-element operands, transitively)
    self._singles: dict[int, tuple] = {}
    # id(concatenate) -> the operand every element generated here comes
    # from (see `pinned`).
    self._pins: dict[int, int] = {}

  # -- scopes --------------------------------------------------------------------

  @contextlib.contextmanager
  def scope(self):
    self._memo.append({})
    try:
      yield
    finally:
      self._memo.pop()

  @contextlib.contextmanager
  def pinned(self, pins):
    """Within the block, each concatenate of `pins` ((concatenate, operand
    number) pairs) is generated as its operand alone: the caller's loops
    only reach elements of that operand there (`concat_split`), so the
    branches choosing the operand are left out and the operand is read at
    an affine index."""
    saved = self._pins
    self._pins = dict(saved)
    self._pins.update((id(c), k) for c, k in pins)
    try:
      yield
    finally:
      self._pins = saved

  def _lookup(self, keys):
    for d in reversed(self._memo):
      for key in keys:
        hit = d.get(key)
        if hit is not None:
          return hit[0]
    return None

  def _remember(self, keys, v, instr, index) -> None:
    # The entry keeps `instr` and `index` (hence the index's LLVM values)
    # alive, so the ids in its key are not reused while the scope lives.
    entry = (v, index, instr)
    memo = self._memo[-1]
    for key in keys:
      memo[key] = entry

  # -- entry point ---------------------------------------------------------------

  def value(self, instr, index: Index) -> ir.Value:
    keys = memo_keys(instr, index)
    hit = self._lookup(keys)
    if hit is not None:
      return hit
    if self._is_elementwise(instr):
      self._emit_elementwise_dag(instr, index)
      hit = self._lookup(memo_keys(instr, index))
      assert hit is not None, instr.name
      return hit
    v = self._generate(instr, index)
    # The index may have gained a form while generating: key by all of them.
    self._remember(memo_keys(instr, index), v, instr, index)
    return v

  def _is_elementwise(self, instr) -> bool:
    op = instr.opcode
    return (op not in _HANDLERS and op in eie.SUPPORTED_OPCODES and
            id(instr) not in self._sources)

  def _emit_elementwise_dag(self, root, index: Index) -> None:
    """Emits `root` (elementwise) and the elementwise instructions it
    reaches through same-index operands, operands first, without recursion;
    other operands are generated through `value` when their user is
    emitted."""
    stack = [(root, index, False)]
    while stack:
      instr, idx, expanded = stack.pop()
      if self._lookup(memo_keys(instr, idx)) is not None:
        continue
      if not expanded:
        stack.append((instr, idx, True))
        for o in reversed(instr.operands):
          oidx = self._operand_index(o, idx)
          if (self._is_elementwise(o) and
              self._lookup(memo_keys(o, oidx)) is None):
            stack.append((o, oidx, False))
        continue
      v = self._elementwise(instr, idx)
      self._remember(memo_keys(instr, idx), v, instr, idx)

  def is_source(self, instr) -> bool:
    return id(instr) in self._sources

  def source_pointer(self, instr) -> "ir.Value | None":
    """The storage pointer of `instr` when it is an array in memory."""
    src = self._sources.get(id(instr))
    return None if src is None else src.ptr

  def _generate(self, instr, index: Index) -> ir.Value:
    b = self.b
    src = self._sources.get(id(instr))
    et = instr.shape.element_type if not instr.shape.is_tuple() else None
    if src is not None:
      ptr = le.element_ptr(b, src.ptr, index)
      return eie.load_element(b, ptr, src.shape.element_type)
    op = instr.opcode
    handler = _HANDLERS.get(op)
    if handler is not None:
      return handler(self, instr, index)
    if op in eie.SUPPORTED_OPCODES:
      return self._elementwise(instr, index)
    raise support.UnimplementedError(
        f"CPU backend: opcode {op.value} cannot be generated element-wise "
        f"({instr.name}, element type "
        f"{primitive_util.lowercase_name(et) if et is not None else 'tuple'})")

  # -- elementwise -----------------------------------------------------------------

  def _operand_index(self, operand, index: Index) -> Index:
    if not operand.shape.dimensions:
      return Index.scalar()
    return index

  def _elementwise(self, instr, index: Index) -> ir.Value:
    vals = [self.value(o, self._operand_index(o, index))
            for o in instr.operands]
    return eie.emit_elementwise(self.b, instr, vals)

  @_generates(O.kCopy)
  def _copy(self, instr, index: Index) -> ir.Value:
    return self.value(instr.operand(0), index)

  # -- data movement -----------------------------------------------------------------

  @_generates(O.kBroadcast)
  def _broadcast(self, instr, index: Index) -> ir.Value:
    op = instr.operand(0)
    if not op.shape.dimensions:
      return self.value(op, Index.scalar())
    multi = index.multi(self.b)
    return self.value(op, Index(_shape_dims(op),
                                [multi[d] for d in instr.dimensions]))

  @_generates(O.kReshape, O.kBitcast)
  def _reshape(self, instr, index: Index) -> ir.Value:
    op = instr.operand(0)
    if (primitive_util.bit_width(op.shape.element_type) !=
        primitive_util.bit_width(instr.shape.element_type)):
      raise support.UnimplementedError(
          f"CPU backend: {instr.opcode.value} {instr.name} changes the "
          "element width")
    dims = _shape_dims(op)
    if dims == index.dims:
      return self.value(op, index)
    multi = index.multi_if_known()
    if multi is not None:
      op_multi = reshape_multi(self.b, multi, index.dims, dims)
      if op_multi is not None:
        # The dimensions the reshape leaves alone keep their index values
        # (a loop's induction variable stays one, for the vectorizer). The
        # linear form goes along as before: values keyed by it are shared
        # with the other paths that reach them.
        return self.value(op, Index(dims, op_multi,
                                    linear=index.linear(self.b)))
    return self.value(op, Index(dims, linear=index.linear(self.b)))

  @_generates(O.kTranspose)
  def _transpose(self, instr, index: Index) -> ir.Value:
    op = instr.operand(0)
    multi = index.multi(self.b)
    perm = instr.dimensions
    op_multi = [None] * len(perm)
    for i, p in enumerate(perm):
      op_multi[p] = multi[i]
    return self.value(op, Index(_shape_dims(op), op_multi))

  @_generates(O.kSlice)
  def _slice(self, instr, index: Index) -> ir.Value:
    b = self.b
    op = instr.operand(0)
    multi = index.multi(b)
    op_multi = [le.add(b, start, le.mul(b, m, stride)) for m, start, stride in
                zip(multi, instr.slice_starts, instr.slice_strides)]
    return self.value(op, Index(_shape_dims(op), op_multi))

  @_generates(O.kReverse)
  def _reverse(self, instr, index: Index) -> ir.Value:
    b = self.b
    op = instr.operand(0)
    multi = list(index.multi(b))
    for d in instr.dimensions:
      size = instr.shape.dimensions[d]
      multi[d] = b.sub(le.i64(size - 1), multi[d])
    return self.value(op, Index(_shape_dims(op), multi))

  def start_indices(self, instr, first: int, operand_dims, sizes):
    """Clamped dynamic start indices (dynamic-slice / -update-slice)."""
    b = self.b
    rank = len(operand_dims)
    if instr.operand_count == first + 1 and instr.operand(first).shape.rank:
      # Old form: one rank-1 index operand.
      vec = instr.operand(first)
      raws = [self.value(vec, Index(_shape_dims(vec), [le.i64(d)]))
              for d in range(rank)]
      types = [vec.shape.element_type] * rank
    else:
      ops = instr.operands[first:first + rank]
      raws = [self.value(o, Index.scalar()) for o in ops]
      types = [o.shape.element_type for o in ops]
    starts = []
    for raw, t, dim, size in zip(raws, types, operand_dims, sizes):
      signed = primitive_util.is_signed_integral(t)
      v = le.to_i64(b, raw, signed)
      starts.append(le.clamp_i64(b, v, 0, max(0, dim - size)))
    return starts

  @_generates(O.kDynamicSlice)
  def _dynamic_slice(self, instr, index: Index) -> ir.Value:
    b = self.b
    op = instr.operand(0)
    starts = self.start_indices(instr, 1, _shape_dims(op),
                                 _shape_dims(instr))
    multi = index.multi(b)
    op_multi = [le.add(b, s, m) for s, m in zip(starts, multi)]
    return self.value(op, Index(_shape_dims(op), op_multi))

  @_generates(O.kDynamicUpdateSlice)
  def _dynamic_update_slice(self, instr, index: Index) -> ir.Value:
    b = self.b
    op, upd = instr.operand(0), instr.operand(1)
    udims = _shape_dims(upd)
    starts = self.start_indices(instr, 2, _shape_dims(op), udims)
    multi = index.multi(b)
    inside = ir.Constant(le.I1, 1)
    rel = []
    for s, m, d in zip(starts, multi, udims):
      r = b.sub(m, s)
      rel.append(r)
      ok = b.and_(b.icmp_signed(">=", r, le.i64(0)),
                  b.icmp_signed("<", r, le.i64(d)))
      inside = b.and_(inside, ok)
    base = self.value(op, index)
    if not all(udims):
      return base
    clamped = [le.clamp_i64(b, r, 0, d - 1) for r, d in zip(rel, udims)]
    with self.scope():
      new = self.value(upd, Index(udims, clamped))
    return b.select(inside, new, base)

  @_generates(O.kPad)
  def _pad(self, instr, index: Index) -> ir.Value:
    b = self.b
    op, pad_value = instr.operand(0), instr.operand(1)
    pv = self.value(pad_value, Index.scalar())
    op_dims = _shape_dims(op)
    if not all(op_dims):
      return pv
    multi = index.multi(b)
    valid = ir.Constant(le.I1, 1)
    op_multi = []
    for d, (m, dim) in enumerate(zip(multi, op_dims)):
      pd = instr.padding_config.dimensions[d]
      lo, interior = pd.edge_padding_low, pd.interior_padding
      t = b.sub(m, le.i64(lo)) if lo else m
      step = interior + 1
      span = (dim - 1) * step + 1
      ok = b.and_(b.icmp_signed(">=", t, le.i64(0)),
                  b.icmp_signed("<", t, le.i64(span)))
      if step > 1:
        ok = b.and_(ok, b.icmp_unsigned(
            "==", b.urem(t, le.i64(step)), le.i64(0)))
        q = b.sdiv(t, le.i64(step))
      else:
        q = t
      valid = b.and_(valid, ok)
      op_multi.append(le.clamp_i64(b, q, 0, dim - 1))
    inner = self.value(op, Index(op_dims, op_multi))
    return b.select(valid, inner, pv)

  @_generates(O.kConcatenate)
  def _concatenate(self, instr, index: Index) -> ir.Value:
    b = self.b
    dim = instr.dimensions[0]
    multi = index.multi(b)
    pieces = []
    offset = 0
    for o in instr.operands:
      size = o.shape.dimensions[dim]
      if size:
        pieces.append((o, offset, size))
      offset += size
    pin = self._pins.get(id(instr))
    if pin is not None:
      off = sum(o.shape.dimensions[dim] for o in instr.operands[:pin])
      op_multi = list(multi)
      op_multi[dim] = le.add(b, multi[dim], -off)
      o = instr.operand(pin)
      return self.value(o, Index(_shape_dims(o), op_multi))
    if not pieces:
      # Every piece is empty, so the result has no elements and this value
      # is never read (a loop over the result does not run).
      return ir.Constant(eie.compute_type(instr.shape.element_type),
                         ir.Undefined)
    at = multi[dim]
    if isinstance(at, ir.Constant):
      # A known position (an element taken by a slice, or a scalar chain
      # of a small solver): the piece is known, so no branches. Branching
      # would also give each piece a memo scope of its own, regenerating
      # what the pieces share, once per piece at every level of nesting.
      pos = int(at.constant)
      for o, off, size in pieces:
        if off <= pos < off + size:
          op_multi = list(multi)
          op_multi[dim] = le.i64(pos - off)
          return self.value(o, Index(_shape_dims(o), op_multi))
    # Single-element values the pieces use are generated here, before the
    # branches, so that every piece finds them in the memo instead of
    # generating them again in its own scope (they are index-free: the
    # scalar arithmetic of a solver step, or elements taken by slices).
    for o, _, _ in pieces:
      for single in self._single_elements_below(o):
        self.value(single, Index(_shape_dims(single),
                                 [le.i64(0)] * len(single.shape.dimensions)))
    merge = b.append_basic_block("concat.merge")
    incoming = []
    for k, (o, off, size) in enumerate(pieces):
      last = k == len(pieces) - 1
      if not last:
        take = b.append_basic_block(f"concat.take{k}")
        nxt = b.append_basic_block(f"concat.next{k}")
        b.cbranch(b.icmp_signed("<", multi[dim], le.i64(off + size)), take,
                  nxt)
        b.position_at_end(take)
      op_multi = list(multi)
      if off:
        op_multi[dim] = b.sub(multi[dim], le.i64(off))
      with self.scope():
        v = self.value(o, Index(_shape_dims(o), op_multi))
      incoming.append((v, b.block))
      b.branch(merge)
      if not last:
        b.position_at_end(nxt)
    b.position_at_end(merge)
    phi = b.phi(incoming[0][0].type)
    for v, blk in incoming:
      phi.add_incoming(v, blk)
    return phi

  def _single_elements_below(self, root) -> list:
    """The one-element instructions `root` reaches through its operands
    (stopping at sources), operands before users."""
    cache = self._singles
    hit = cache.get(id(root))
    if hit is not None:
      return hit[1]
    order = [instr for instr in post_order_below([root], self.is_source)
             if instr is not root and not instr.shape.is_tuple() and
             math.prod(instr.shape.dimensions) == 1 and generatable(instr)]
    cache[id(root)] = (root, order)
    return order

  # -- generated values ----------------------------------------------------------------

  @_generates(O.kIota)
  def _iota(self, instr, index: Index) -> ir.Value:
    b = self.b
    d = instr.iota_dimension
    v = index.multi(b)[d] if instr.shape.dimensions else le.i64(0)
    et = instr.shape.element_type
    if primitive_util.is_complex(et):
      comp = ec.component_type(et)
      re = ec.convert(b, v, P.S64, comp)
      ty = eie.compute_type(et)
      out = ir.Constant(ty, ir.Undefined)
      out = b.insert_value(out, re, 0)
      return b.insert_value(out, ir.Constant(re.type, 0.0), 1)
    return ec.convert(b, v, P.S64, et)

  @_generates(O.kConstant)
  def _constant(self, instr, index: Index) -> ir.Value:
    lit = instr.literal
    n = int(np.prod(instr.shape.dimensions, dtype=np.int64))
    if n == 1:
      from xla.literal import Literal  # pylint: disable=g-import-not-at-top
      from xla.shape import Shape  # pylint: disable=g-import-not-at-top
      scalar = Literal(Shape.array(instr.shape.element_type, ()),
                       np.asarray(lit.array).reshape(()))
      return eie.constant_value(scalar)
    ptr = constant_global(self.ctx, instr)
    return eie.load_element(self.b, le.element_ptr(self.b, ptr, index),
                            instr.shape.element_type)

  @_generates(O.kMap)
  def _map(self, instr, index: Index) -> ir.Value:
    vals = [self.value(o, self._operand_index(o, index))
            for o in instr.operands]
    return apply_computation(self.ctx, self.b, instr.to_apply, vals)

  @_generates(O.kReduce)
  def _reduce(self, instr, index: Index) -> ir.Value:
    """A reduce used as a fused producer: loops over its reduced dims."""
    b = self.b
    if instr.shape.is_tuple():
      raise support.UnimplementedError(
          f"CPU backend: variadic reduce {instr.name} as a fused producer")
    inp, init = instr.operand(0), instr.operand(1)
    in_dims = _shape_dims(inp)
    red = set(instr.dimensions)
    out_multi = index.multi(b)
    acc_ty = eie.compute_type(instr.shape.element_type)
    acc = le.entry_alloca(b, acc_ty, "red.acc")
    b.store(self.value(init, Index.scalar()), acc)
    red_dims = [d for d in range(len(in_dims)) if d in red]
    with self.scope():
      with le.loop_nest(b, [in_dims[d] for d in red_dims], "rp") as ridx:
        with self.scope():
          multi, k, r = [], 0, 0
          for d in range(len(in_dims)):
            if d in red:
              multi.append(ridx[r])
              r += 1
            else:
              multi.append(out_multi[k])
              k += 1
          x = self.value(inp, Index(in_dims, multi))
          new = apply_computation(self.ctx, b, instr.to_apply,
                                  [b.load(acc), x])
          b.store(new, acc)
    return b.load(acc)




def post_order_below(roots, is_source) -> list:
  """The instructions reachable from `roots` through their operands, not
  going below those `is_source` holds for, operands before users."""
  out, seen = [], set()
  stack = [(r, False) for r in reversed(roots)]
  while stack:
    instr, expanded = stack.pop()
    if expanded:
      out.append(instr)
      continue
    if id(instr) in seen:
      continue
    seen.add(id(instr))
    stack.append((instr, True))
    if is_source(instr):
      continue
    for o in reversed(instr.operands):
      if id(o) not in seen:
        stack.append((o, False))
  return out


def reshape_multi(b: ir.IRBuilder, multi, dims, op_dims):
  """The operand index of a reshape from `op_dims` to `dims` at result
  index `multi`, keeping the index values of the leading and trailing
  dimensions the two shapes share (the middle ones go through their
  linear offset); None when they share none."""
  dims, op_dims = tuple(dims), tuple(op_dims)
  n = min(len(dims), len(op_dims))
  a = 0
  while a < n and dims[a] == op_dims[a]:
    a += 1
  z = 0
  while z < n - a and dims[-1 - z] == op_dims[-1 - z]:
    z += 1
  if a + z == 0:
    return None
  mid = dims[a:len(dims) - z]
  op_mid = op_dims[a:len(op_dims) - z]
  lin = le.i64(0)
  for m, s in zip(multi[a:len(dims) - z], le.strides_of(mid)):
    lin = le.add(b, lin, le.mul(b, m, s))
  # The offset is below prod(op_mid): the first dimension needs no urem.
  op_mid_multi = [le.udiv(b, lin, s) if k == 0 else
                  le.urem(b, le.udiv(b, lin, s), d)
                  for k, (d, s) in enumerate(zip(op_mid,
                                                 le.strides_of(op_mid)))]
  return (list(multi[:a]) + op_mid_multi +
          list(multi[len(dims) - z:]))


def opcode_handler(opcode: HloOpcode):
  """The ElementGenerator method that generates `opcode` (indexing and
  data-movement ops it handles itself); None for other opcodes."""
  return _HANDLERS.get(opcode)


def apply_computation(ctx: kernel_api.KernelContext, b: ir.IRBuilder,
                      computation, values):
  """Applies a scalar computation to compute-type values (scalars or
  vectors, or tuples of them); inlined when every instruction is
  elementwise, else through `ctx.scalar_computation` (scalars only)."""
  try:
    return eie.emit_computation_values(b, computation, list(values))
  except support.UnimplementedError:
    pass
  flat = []
  for v in values:
    flat.extend(v if isinstance(v, tuple) else [v])
  if any(isinstance(v.type, ir.VectorType) for v in flat):
    raise support.UnimplementedError(
        f"CPU backend: computation {computation.name} cannot be vectorized")
  fn = ctx.scalar_computation(computation)
  params = sorted(computation.parameter_instructions,
                  key=lambda p: p.parameter_number)
  leaves_in = [l for p in params for l in kernel_api.array_leaves(p.shape)]
  root = computation.root_instruction
  leaves_out = kernel_api.array_leaves(root.shape)
  args = []
  for v, leaf in zip(flat, leaves_in):
    slot = le.entry_alloca(b, kernel_api.llvm_storage_type(leaf.element_type))
    eie.store_element(b, v, slot, leaf.element_type)
    args.append(slot)
  outs = []
  for leaf in leaves_out:
    slot = le.entry_alloca(b, kernel_api.llvm_storage_type(leaf.element_type))
    args.append(slot)
    outs.append((slot, leaf))
  b.call(fn, args)
  results = [eie.load_element(b, s, l.element_type) for s, l in outs]
  if root.shape.is_tuple():
    return tuple(results)
  return results[0]


def constant_global(ctx: kernel_api.KernelContext, instr) -> ir.Value:
  """A pointer (storage type) to an internal global holding the constant
  array of `instr`, created once per LLVM module."""
  cache = ctx.constant_globals
  hit = cache.get(id(instr))
  if hit is not None:
    return hit[0]
  data = constant_bytes(instr.literal, instr.shape)
  arr_ty = ir.ArrayType(le.I8, max(1, len(data)))
  g = ir.GlobalVariable(ctx.module, arr_ty,
                        ctx.unique_name(f"const_{instr.name}"))
  g.global_constant = True
  g.linkage = "internal"
  g.align = 64
  g.initializer = ir.Constant(arr_ty, bytearray(data or b"\0"))
  storage = kernel_api.llvm_storage_type(instr.shape.element_type)
  builder_ptr = g.bitcast(storage.as_pointer())
  cache[id(instr)] = (builder_ptr, instr)
  return builder_ptr


def constant_bytes(literal, shape) -> bytes:
  """The row-major storage bytes of an array literal."""
  dt = primitive_util.numpy_dtype(shape.element_type)
  arr = np.ascontiguousarray(np.asarray(literal.array).astype(dt, copy=False)
                             .reshape(tuple(shape.dimensions)))
  if shape.element_type == P.PRED:
    arr = arr.astype(np.uint8)
  return arr.tobytes()
