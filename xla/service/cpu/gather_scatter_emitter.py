"""CPU kernels for `gather` and `scatter` with general dimension numbers.

Gather (XLA semantics, as the HLO evaluator): for every batch position (an
index vector of `start_indices`) the start of the slice in the operand is
the index vector scattered through `start_index_map`, each component clamped
to [0, operand_dim - slice_size], plus the batch position itself along
`operand_batching_dims` (paired with `start_indices_batching_dims`). The
slice's non-collapsed, non-batching dims land on `offset_dims` of the
result; the batch dims fill the other result dims in order. The parallel
extent is the number of batch positions; each copies one slice.

Scatter: the result starts as a copy of the operands (skipped when the
runtime gave the result the operand's buffer); then every update element,
in row-major order of the updates, is combined into the result element it
targets with the `to_apply` computation (`ctx.scalar_computation`; for
variadic scatter all n results and n updates at once). An element whose
target lies outside the operand in any dimension is skipped on its own
(like the StableHLO spec and the evaluator; XLA's expander drops whole
windows instead). The updates apply sequentially, so the extent is 1 and
the result is deterministic for any combiner.
"""

from __future__ import annotations

import math

from llvmlite import ir

import support
from xla import primitive_util
from xla.service.cpu import elemental_ir_emitter as elemental
from xla.service.cpu import kernel_api
from xla.service.cpu import op_emitter_util as u

I64 = u.I64


class _Indices:
  """Reads index vectors of a start/scatter indices array."""

  def __init__(self, ptr, shape, ivd: int, opcode: str):
    self.ptr = ptr
    self.et = shape.element_type
    if not primitive_util.is_integral(self.et):
      raise support.InvalidArgumentError(
          f"{opcode}: indices must be integers, got "
          f"{primitive_util.lowercase_name(self.et)}")
    self.signed = primitive_util.is_signed_integral(self.et)
    dims = list(shape.dimensions)
    strides = u.row_major_strides(dims)
    if ivd >= len(dims):
      self.batch_dims, self.batch_strides = dims, strides
      self.vector_size, self.vector_stride = 1, 0
    else:
      self.batch_dims = dims[:ivd] + dims[ivd + 1:]
      self.batch_strides = strides[:ivd] + strides[ivd + 1:]
      self.vector_size, self.vector_stride = dims[ivd], strides[ivd]
    self.ivd = ivd

  def batch_pos(self, indices_dim: int) -> int:
    """The position of an indices dim among the batch dims."""
    return indices_dim - (1 if indices_dim > self.ivd else 0)

  def load(self, b: ir.IRBuilder, batch_idx, k: int) -> ir.Value:
    """Component k of the index vector at batch multi-index batch_idx, i64."""
    lin = u.linear_index(b, list(batch_idx) + [u.i64(k)],
                         list(self.batch_strides) + [self.vector_stride])
    v = elemental.load_element(b, u.element_ptr(b, self.ptr, lin), self.et)
    return u.to_i64_index(b, v, self.signed)


def _empty_kernel(ka: u.KernelArgs) -> kernel_api.KernelSpec:
  ka.b.ret_void()
  return kernel_api.KernelSpec(ka.fn.name, 1, 0)


@kernel_api.register_kernel_emitter("gather")
def emit_gather(ctx: kernel_api.KernelContext,
                instr) -> kernel_api.KernelSpec:
  dn = instr.gather_dimension_numbers
  offset_dims = tuple(dn.offset_dims)
  collapsed = tuple(dn.collapsed_slice_dims)
  sim = tuple(dn.start_index_map)
  obatch = tuple(dn.operand_batching_dims or ())
  ibatch = tuple(dn.start_indices_batching_dims or ())
  slice_sizes = instr.gather_slice_sizes
  oshape = tuple(instr.operand(0).shape.dimensions)
  rshape = tuple(instr.shape.dimensions)
  rank = len(oshape)
  if len(slice_sizes) != rank or any(
      not 0 <= s <= n for s, n in zip(slice_sizes, oshape)):
    raise support.InvalidArgumentError(
        f"gather {instr.name}: slice_sizes {list(slice_sizes)} do not fit "
        f"the operand shape {list(oshape)}")
  ka = u.KernelArgs(ctx, instr, f"gather_{instr.name}")
  b = ka.b
  idx = _Indices(ka.operands[1], instr.operand(1).shape,
                 dn.index_vector_dim, "gather")
  if idx.vector_size != len(sim):
    raise support.InvalidArgumentError(
        f"gather {instr.name}: index vectors have {idx.vector_size} "
        f"entries, start_index_map has {len(sim)}")
  off_operand = [d for d in range(rank)
                 if d not in collapsed and d not in obatch]
  expect, batch_it, off_it = [], iter(idx.batch_dims), iter(off_operand)
  for r in range(len(offset_dims) + len(idx.batch_dims)):
    expect.append(slice_sizes[next(off_it)] if r in offset_dims else
                  next(batch_it))
  if tuple(expect) != rshape or len(off_operand) != len(offset_dims):
    raise support.InvalidArgumentError(
        f"gather {instr.name}: result shape {list(rshape)} does not match "
        f"the dimension numbers (expected {expect})")
  nbatch = math.prod(idx.batch_dims)
  if nbatch == 0 or math.prod(rshape) == 0:
    return _empty_kernel(ka)
  batch_result_dims = [r for r in range(len(rshape)) if r not in offset_dims]
  ostrides = u.row_major_strides(oshape)
  rstrides = u.row_major_strides(rshape)
  slice_shape = [slice_sizes[d] for d in off_operand]
  with u.for_range(b, ka.begin, ka.end, "batch") as bl:
    bi = u.delinearize(b, bl, idx.batch_dims)
    start = {}
    for k, d in enumerate(sim):
      v = idx.load(b, bi, k)
      start[d] = u.clamp(b, v, 0, oshape[d] - slice_sizes[d])
    for d, ib in zip(obatch, ibatch):
      pos = bi[idx.batch_pos(ib)]
      start[d] = b.add(start[d], pos) if d in start else pos
    op_base = u.linear_index(b, [start[d] for d in sorted(start)],
                             [ostrides[d] for d in sorted(start)])
    out_base = u.linear_index(b, bi, [rstrides[r] for r in batch_result_dims])
    with u.loop_nest(b, slice_shape, "off") as oi:
      src = b.add(op_base, u.linear_index(
          b, oi, [ostrides[d] for d in off_operand]))
      dst = b.add(out_base, u.linear_index(
          b, oi, [rstrides[r] for r in offset_dims]))
      b.store(b.load(b.gep(ka.operands[0], [src])),
              b.gep(ka.results[0], [dst]))
  b.ret_void()
  per = math.prod(slice_shape)
  return kernel_api.KernelSpec(ka.fn.name, nbatch, cost=nbatch * (per + 4))


@kernel_api.register_kernel_emitter("scatter")
def emit_scatter(ctx: kernel_api.KernelContext,
                 instr) -> kernel_api.KernelSpec:
  nops = instr.operand_count
  if nops < 3 or nops % 2 == 0:
    raise support.InvalidArgumentError(
        f"scatter {instr.name}: expected n operands, indices, n updates")
  n = (nops - 1) // 2
  dn = instr.scatter_dimension_numbers
  uwd = tuple(dn.update_window_dims)
  iwd = tuple(dn.inserted_window_dims)
  sdod = tuple(dn.scatter_dims_to_operand_dims)
  ibd = tuple(dn.input_batching_dims or ())
  sibd = tuple(dn.scatter_indices_batching_dims or ())
  ishape = tuple(instr.operand(0).shape.dimensions)
  ushape = tuple(instr.operand(n + 1).shape.dimensions)
  rank = len(ishape)
  comb = ctx.scalar_computation(instr.to_apply)
  ka = u.KernelArgs(ctx, instr, f"scatter_{instr.name}", optsize=True)
  b = ka.b
  inputs = ka.operands[:n]
  updates = ka.operands[n + 1:]
  idx = _Indices(ka.operands[n], instr.operand(n).shape, dn.index_vector_dim,
                 "scatter")
  if idx.vector_size != len(sdod):
    raise support.InvalidArgumentError(
        f"scatter {instr.name}: index vectors have {idx.vector_size} "
        f"entries, scatter_dims_to_operand_dims has {len(sdod)}")
  scatter_axes = [d for d in range(len(ushape)) if d not in uwd]
  if [ushape[d] for d in scatter_axes] != list(idx.batch_dims):
    raise support.InvalidArgumentError(
        f"scatter {instr.name}: updates shape {list(ushape)} does not match "
        f"the scatter indices batch shape {idx.batch_dims}")
  win_input = [d for d in range(rank) if d not in iwd and d not in ibd]
  if len(win_input) != len(uwd):
    raise support.InvalidArgumentError(
        f"scatter {instr.name}: {len(uwd)} update window dims for "
        f"{len(win_input)} operand window dims")
  count = math.prod(ishape)
  for k in range(n):
    u.copy_array(b, ka.results[k], inputs[k], count,
                 ka.result_shapes[k].element_type)
  nupd = math.prod(ushape)
  if nupd == 0 or count == 0:
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, cost=count)
  res_tys = [kernel_api.llvm_storage_type(s.element_type)
             for s in ka.result_shapes]
  tmps = [u.entry_alloca(b, ty, name=f"comb{k}")
          for k, ty in enumerate(res_tys)]
  istrides = u.row_major_strides(ishape)
  ustrides = u.row_major_strides(ushape)
  fn = b.function
  with u.loop_nest(b, ushape, "upd") as ui:
    bi = [ui[d] for d in scatter_axes]
    terms = []
    checks = []
    for d in range(rank):
      comp = None
      bounded = True
      if d in sdod:
        comp = idx.load(b, bi, sdod.index(d))
        bounded = False
      if d in ibd:
        src_dim = sibd[ibd.index(d)]
        pos = idx.batch_pos(src_dim)
        v = bi[pos]
        comp = v if comp is None else b.add(comp, v)
        bounded = bounded and idx.batch_dims[pos] <= ishape[d]
      if d in win_input:
        ud = uwd[win_input.index(d)]
        v = ui[ud]
        comp = v if comp is None else b.add(comp, v)
        bounded = bounded and ushape[ud] <= ishape[d]
      if comp is None:
        continue
      if not bounded:
        checks.append(b.icmp_unsigned("<", comp, u.i64(ishape[d])))
      terms.append((comp, istrides[d]))
    lin = u.linear_index(b, [c for c, _ in terms], [s for _, s in terms])
    ulin = u.linear_index(b, ui, ustrides)
    apply_bb = fn.append_basic_block("scatter.apply")
    next_bb = fn.append_basic_block("scatter.next")
    ok = ir.Constant(u.I1, 1)
    for c in checks:
      ok = b.and_(ok, c)
    b.cbranch(ok, apply_bb, next_bb)
    b.position_at_end(apply_bb)
    targets = [b.gep(r, [lin]) for r in ka.results]
    sources = [b.gep(p, [ulin]) for p in updates]
    b.call(comb, targets + sources + tmps)
    for tgt, tmp in zip(targets, tmps):
      b.store(b.load(tmp), tgt)
    b.branch(next_bb)
    b.position_at_end(next_bb)
  b.ret_void()
  return kernel_api.KernelSpec(ka.fn.name, 1, cost=count + 4 * nupd * n)
