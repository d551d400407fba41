"""SPMD handlers for data-parallel ops: elementwise, broadcast, transpose,
reshape, slicing ops, concatenate, sort, iota, constant, reduce and dot.

Each handler gets the computation partitioner `cp` (its builder `cp.b`, the
partitioned operands `cp.operand(i)`, the sharding an instruction must end
up with `cp.target(instr)`) and returns the instruction's PartitionedHlo
under that sharding. The common pattern: pick the operand shardings under
which the op can run on each partition's shard alone, reshard the operands
to them, emit the op on the shards, and reshard the result to the target.
Where a partition's shard of a tiled dimension carries padding that would
change the result (reduced or contracted dimensions), it is masked with the
reduction's identity first.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

import support
from xla import primitive_util
from xla.hlo.ir import hlo_opcode
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.service.spmd import partitioned_hlo as ph_lib
from xla.service.spmd import sharding_util as su
from xla.service.spmd.partitioned_hlo import PartitionedHlo
from xla.service.spmd.partitioned_hlo import register_handler
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType


def copy(instr: HloInstruction, shape, operands: Sequence[HloInstruction],
         **attr_changes) -> HloInstruction:
  """An unattached copy of `instr` with a new shape and operands (same
  attributes, metadata and frontend attributes, no sharding)."""
  attrs = dict(instr.attrs)
  attrs.update(attr_changes)
  new = HloInstruction(instr.opcode, shape, tuple(operands),
                       {k: v for k, v in attrs.items() if v is not None},
                       name=instr.name)
  new.metadata = instr.metadata
  new.frontend_attributes = dict(instr.frontend_attributes)
  new.backend_config = instr.backend_config
  new.literal = instr.literal
  return new


def clone(b: ph_lib.Builder, instr: HloInstruction, shape,
          operands: Sequence[HloInstruction], **attr_changes
          ) -> HloInstruction:
  """`copy`, added to the builder's computation."""
  return b.add(copy(instr, shape, operands, **attr_changes))


def tile_map(cp, sharding: HloSharding, rank: int) -> su.TileMap:
  return su.tile_map(sharding, rank, cp.n)


def _local(instr_shape, sharding: HloSharding):
  return ph_lib.local_shape(instr_shape, sharding)


def finish(cp, instr, ph: PartitionedHlo) -> PartitionedHlo:
  """`ph` resharded to the instruction's target sharding."""
  return ph_lib.reshard(cp.b, ph, cp.target(instr))


# -- elementwise ---------------------------------------------------------------


def handle_elementwise(cp, instr) -> PartitionedHlo:
  target = cp.target(instr)
  rank = instr.shape.rank
  operands = []
  for i, op in enumerate(instr.operands):
    want = target if op.shape.rank == rank else HloSharding.replicate()
    operands.append(ph_lib.reshard(cp.b, cp.operand(i), want).hlo)
  new = clone(cp.b, instr, _local(instr.shape, target), operands)
  return PartitionedHlo(new, instr.shape, target)


# -- broadcast, transpose, reshape ---------------------------------------------


@register_handler(O.kBroadcast)
def handle_broadcast(cp, instr) -> PartitionedHlo:
  target = cp.target(instr)
  tm = tile_map(cp, target, instr.shape.rank)
  want = tm.project(instr.dimensions).to_sharding()
  operand = ph_lib.reshard(cp.b, cp.operand(0), want)
  new = clone(cp.b, instr, _local(instr.shape, target), [operand.hlo])
  return PartitionedHlo(new, instr.shape, target)


@register_handler(O.kTranspose)
def handle_transpose(cp, instr) -> PartitionedHlo:
  target = cp.target(instr)
  perm = instr.dimensions
  inverse = [perm.index(d) for d in range(len(perm))]
  tm = tile_map(cp, target, instr.shape.rank)
  want = tm.transpose(inverse).to_sharding()
  operand = ph_lib.reshard(cp.b, cp.operand(0), want)
  new = clone(cp.b, instr, _local(instr.shape, target), [operand.hlo])
  return PartitionedHlo(new, instr.shape, target)


@register_handler(O.kReshape)
def handle_reshape(cp, instr) -> PartitionedHlo:
  target = cp.target(instr)
  src = instr.operand(0).shape.dimensions
  dst = instr.shape.dimensions
  operand = cp.operand(0)
  tm = tile_map(cp, target, len(dst))
  # The operand tiling a local reshape turns into the target tiling ...
  back = su.reshape_tile_map(tm, dst, src, require_even=True)
  if back is not None and back.is_regular():
    forth = su.reshape_tile_map(back, src, dst, require_even=True)
    if forth == tm:
      operand = ph_lib.reshard(cp.b, operand, back.to_sharding())
      new = clone(cp.b, instr, _local(instr.shape, target), [operand.hlo])
      return PartitionedHlo(new, instr.shape, target)
  # ... or the tiling a local reshape of the operand as it is gives ...
  om = tile_map(cp, operand.sharding, len(src))
  out = su.reshape_tile_map(om, src, dst, require_even=True)
  if out is not None and out.is_regular():
    s = out.to_sharding()
    new = clone(cp.b, instr, _local(instr.shape, s), [operand.hlo])
    return finish(cp, instr, PartitionedHlo(new, instr.shape, s))
  # ... or the whole value.
  operand = ph_lib.replicate(cp.b, operand)
  new = clone(cp.b, instr, instr.shape, [operand.hlo])
  return finish(cp, instr, PartitionedHlo(new, instr.shape,
                                          HloSharding.replicate()))


# -- slicing ops: the touched dimensions are made whole first ------------------


def _untiled_along(cp, instr, dims) -> HloSharding:
  """The target sharding of `instr` with `dims` untiled."""
  target = cp.target(instr)
  tm = tile_map(cp, target, instr.shape.rank)
  return tm.replicate_dims(dims).to_sharding()


@register_handler(O.kSlice, O.kPad, O.kReverse, O.kDynamicSlice)
def handle_slicing(cp, instr) -> PartitionedHlo:
  """Operand tiled like the target except along the touched dims; the op
  runs locally with its global parameters on those dims."""
  touched = su.touched_dims(instr)
  s = _untiled_along(cp, instr, touched)
  operand = ph_lib.reshard(cp.b, cp.operand(0), s)
  local = _local(instr.shape, s)
  others = [ph_lib.replicate(cp.b, cp.operand(i)).hlo
            for i in range(1, instr.operand_count)]
  changes = {}
  if instr.opcode == O.kSlice:
    ranges = []
    for d, (a, z, st) in enumerate(instr.attr("slice")):
      if d in touched:
        ranges.append((a, z, st))
      else:
        ranges.append((0, operand.hlo.shape.dimensions[d], 1))
    changes["slice"] = tuple(ranges)
  elif instr.opcode == O.kDynamicSlice:
    changes["dynamic_slice_sizes"] = tuple(local.dimensions)
  new = clone(cp.b, instr, local, [operand.hlo] + others, **changes)
  return finish(cp, instr, PartitionedHlo(new, instr.shape, s))


@register_handler(O.kDynamicUpdateSlice)
def handle_dynamic_update_slice(cp, instr) -> PartitionedHlo:
  touched = su.touched_dims(instr)
  s = _untiled_along(cp, instr, touched)
  operand = ph_lib.reshard(cp.b, cp.operand(0), s)
  update = ph_lib.reshard(cp.b, cp.operand(1), s)
  indices = [ph_lib.replicate(cp.b, cp.operand(i)).hlo
             for i in range(2, instr.operand_count)]
  new = clone(cp.b, instr, _local(instr.shape, s),
              [operand.hlo, update.hlo] + indices)
  return finish(cp, instr, PartitionedHlo(new, instr.shape, s))


@register_handler(O.kConcatenate)
def handle_concatenate(cp, instr) -> PartitionedHlo:
  s = _untiled_along(cp, instr, instr.dimensions)
  operands = [ph_lib.reshard(cp.b, cp.operand(i), s).hlo
              for i in range(instr.operand_count)]
  new = clone(cp.b, instr, _local(instr.shape, s), operands)
  return finish(cp, instr, PartitionedHlo(new, instr.shape, s))


@register_handler(O.kSort)
def handle_sort(cp, instr) -> PartitionedHlo:
  rank = instr.operand(0).shape.rank
  target = cp.target(instr)
  first = (target.tuple_elements[0] if target.is_tuple else target)
  s = tile_map(cp, first, rank).replicate_dims(instr.dimensions).to_sharding()
  operands = [ph_lib.reshard(cp.b, cp.operand(i), s).hlo
              for i in range(instr.operand_count)]
  if instr.shape.is_tuple():
    s_all = HloSharding.tuple_sharding([s] * instr.operand_count)
  else:
    s_all = s
  new = clone(cp.b, instr, _local(instr.shape, s_all), operands)
  return finish(cp, instr, PartitionedHlo(new, instr.shape, s_all))


# -- iota and constants --------------------------------------------------------


@register_handler(O.kIota)
def handle_iota(cp, instr) -> PartitionedHlo:
  target = cp.target(instr)
  local = _local(instr.shape, target)
  x = clone(cp.b, instr, local, [])
  d = instr.iota_dimension
  if not target.is_replicated and not target.is_manual:
    tm = tile_map(cp, target, instr.shape.rank)
    if tm.counts[d] > 1:
      t = tm.tile_sizes(instr.shape.dimensions)[d]
      offs = [tm.index[p][d] * t for p in range(cp.n)]
      off = cp.b.per_partition(offs)
      et = instr.shape.element_type
      if et != P.S32:
        off = cp.b.emit(O.kConvert, ph_lib.array_shape(et, ()), (off,))
      x = cp.b.emit(O.kAdd, local, (x, cp.b.broadcast_scalar(off, local)))
  return PartitionedHlo(x, instr.shape, target)


@register_handler(O.kConstant)
def handle_constant(cp, instr) -> PartitionedHlo:
  whole = clone(cp.b, instr, instr.shape, [])
  if cp.target(instr).is_manual:
    return PartitionedHlo(whole, instr.shape, cp.target(instr))
  return finish(cp, instr, PartitionedHlo(whole, instr.shape,
                                          HloSharding.replicate()))


# -- reduce --------------------------------------------------------------------

_IDENTITY_OPS = {O.kAdd, O.kMultiply, O.kMaximum, O.kMinimum, O.kAnd, O.kOr}


def _identity(opcode: HloOpcode, et: PrimitiveType):
  """The identity of a binary reduction over `et`, or None."""
  dt = primitive_util.numpy_dtype(et)
  if et == P.PRED:
    return {O.kAnd: True, O.kOr: False, O.kMaximum: False,
            O.kMinimum: True}.get(opcode)
  if opcode == O.kAdd:
    return 0
  if opcode == O.kMultiply:
    return 1
  if primitive_util.is_floating_point(et):
    return {O.kMaximum: -np.inf, O.kMinimum: np.inf}.get(opcode)
  if primitive_util.is_integral(et):
    info = np.iinfo(dt)
    return {O.kMaximum: info.min, O.kMinimum: info.max,
            O.kAnd: -1 if info.min < 0 else info.max,
            O.kOr: 0}.get(opcode)
  return None


def reducer_with_identity(reducer, init: HloInstruction) -> bool:
  """Whether `reducer` is a plain binary op of its two parameters and the
  original init value `init` is a constant equal to its identity (then
  partial reductions can be combined and padding filled with `init`)."""
  root = reducer.root_instruction
  if root.opcode not in _IDENTITY_OPS or reducer.num_parameters != 2:
    return False
  if {o.opcode for o in root.operands} != {O.kParameter} or len(
      {o.parameter_number for o in root.operands}) != 2:
    return False
  if init.opcode != O.kConstant or init.shape.dimensions:
    return False
  want = _identity(root.opcode, init.shape.element_type)
  if want is None:
    return False
  value = np.asarray(init.literal.array)
  with np.errstate(all="ignore"):
    return bool(value == np.asarray(want).astype(value.dtype))


def adds(comp) -> bool:
  """Whether a scalar computation adds its two parameters (unreduced
  partials are summed)."""
  root = comp.root_instruction
  return (root.opcode == O.kAdd and
          all(o.opcode == O.kParameter for o in root.operands))


def _is_sum(instr) -> bool:
  return adds(instr.to_apply)


@register_handler(O.kReduce)
def handle_reduce(cp, instr) -> PartitionedHlo:
  b = cp.b
  count = instr.operand_count // 2
  rank = instr.operand(0).shape.rank
  reduced = list(instr.dimensions)
  kept = [d for d in range(rank) if d not in reduced]
  target = cp.target(instr)
  targets = (list(target.tuple_elements) if instr.shape.is_tuple() else
             [target])
  if any(t.is_manual for t in targets):
    return cp.manual_clone(instr)
  tm = tile_map(cp, targets[0], rank - len(reduced))
  inputs = [cp.operand(i) for i in range(count)]
  om = tile_map(cp, inputs[0].sharding, rank)
  combinable = count == 1 and reducer_with_identity(
      instr.to_apply, instr.operand(count))

  # Candidate A: keep the operand's tiling; partial results are combined
  # with an all-reduce where it tiles reduced dims.
  cand_a = None
  groups = None
  partial = any(om.counts[d] > 1 for d in reduced)
  if not partial or combinable:
    out = om.project(kept)
    if partial:
      groups = su.reduction_groups(om, reduced)
    if out.is_regular() and (groups is not None or not partial):
      elems = float(np.prod(instr.operand(0).shape.dimensions)) / max(
          1, om.num_tiles)
      out_shape = (instr.shape.tuple_shapes[0] if instr.shape.is_tuple()
                   else instr.shape)
      cost = ph_lib.reshard_cost(out_shape, out, tm) + (
          elems if partial else 0.0)
      cand_a = (cost, om, out)
  # Candidate B: the operand tiled as the target on the kept dims.
  want = tm.embed(rank, kept)
  cost_b = ph_lib.reshard_cost(instr.operand(0).shape, om, want) * count
  if cand_a is not None and cand_a[0] <= cost_b:
    _, in_map, out_map = cand_a
  else:
    in_map, out_map, groups, partial = want, tm, None, False
  in_sharding = in_map.to_sharding()
  inputs = [ph_lib.reshard(b, x, in_sharding) for x in inputs]
  inits = [ph_lib.replicate(b, cp.operand(count + i)).hlo
           for i in range(count)]
  if partial:
    inputs = [ph_lib.mask_padding(b, x, reduced, init)
              for x, init in zip(inputs, inits)]
  out_sharding = out_map.to_sharding()
  if instr.shape.is_tuple():
    out_all = HloSharding.tuple_sharding([out_sharding] * count)
  else:
    out_all = out_sharding
  new = clone(b, instr, _local(instr.shape, out_all),
              [x.hlo for x in inputs] + inits)
  if partial and not instr.shape.is_tuple() and _is_sum(instr):
    partials = cp.partials_if_unreduced(instr, new, groups, out_all)
    if partials is not None:
      return partials
  if partial:
    new = ph_lib.all_reduce(b, new, groups, instr.to_apply)
  return finish(cp, instr, PartitionedHlo(new, instr.shape, out_all))


# -- dot -----------------------------------------------------------------------


def _dot_candidates(dd: su.DotDims, lm: su.TileMap, rm: su.TileMap,
                    tm: su.TileMap, lrank: int, rrank: int):
  """(lhs map, rhs map) pairs a dot may run under, in order of
  preference on equal cost."""
  yield lm, rm
  yield lm, su.dot_other_operand_map(dd, lm, "lhs", rrank)
  yield su.dot_other_operand_map(dd, rm, "rhs", lrank), rm
  yield (su.dot_operand_map_from_output(dd, tm, "lhs", lrank),
         su.dot_operand_map_from_output(dd, tm, "rhs", rrank))


def _partial_map(dd: su.DotDims, lhs: su.TileMap, out: su.TileMap
                 ) -> su.TileMap:
  """The output map extended by the contracting indices (of the lhs)."""
  counts = list(out.counts) + [lhs.counts[d] for d in dd.lhs_contracting]
  index = [list(o) + [l[d] for d in dd.lhs_contracting]
           for o, l in zip(out.index, lhs.index)]
  return su.TileMap.from_indices(counts, index)


@register_handler(O.kDot)
def handle_dot(cp, instr) -> PartitionedHlo:
  """Batch- and free-dimension tiling runs locally; contracting-dimension
  tiling runs locally on matching shards and all-reduces the partial
  products; the operand tilings are chosen (from the operands as they are,
  or from the target) by the elements they would move."""
  b = cp.b
  target = cp.target(instr)
  if target.is_manual:
    return cp.manual_clone(instr)
  dd = su.DotDims.of(instr)
  lhs, rhs = cp.operand(0), cp.operand(1)
  lshape, rshape = instr.operand(0).shape, instr.operand(1).shape
  lm = tile_map(cp, lhs.sharding, lshape.rank)
  rm = tile_map(cp, rhs.sharding, rshape.rank)
  tm = tile_map(cp, target, instr.shape.rank)
  out_elems = float(np.prod(instr.shape.dimensions))
  best = None
  for lq, rq in _dot_candidates(dd, lm, rm, tm, lshape.rank, rshape.rank):
    if not (lq.is_regular() and rq.is_regular()):
      continue
    out = su.dot_output_map(dd, lq, rq)
    if out is None or not out.is_regular():
      continue
    groups = None
    if any(lq.counts[d] > 1 for d in dd.lhs_contracting):
      partial = _partial_map(dd, lq, out)
      n_out = out.rank
      groups = su.reduction_groups(
          partial, list(range(n_out, partial.rank)))
      if groups is None:
        continue
    cost = (ph_lib.reshard_cost(lshape, lm, lq) +
            ph_lib.reshard_cost(rshape, rm, rq) +
            ph_lib.reshard_cost(instr.shape, out, tm) +
            (out_elems / max(1, out.num_tiles) if groups else 0.0))
    if best is None or cost < best[0]:
      best = (cost, lq, rq, out, groups)
  if best is None:
    raise support.InternalError(f"SPMD: no dot strategy for {instr.name}")
  _, lq, rq, out, groups = best
  lhs = ph_lib.reshard(b, lhs, lq.to_sharding())
  rhs = ph_lib.reshard(b, rhs, rq.to_sharding())
  if groups:
    for_lhs = b.scalar(0, lshape.element_type)
    for_rhs = b.scalar(0, rshape.element_type)
    lhs = ph_lib.mask_padding(b, lhs, dd.lhs_contracting, for_lhs)
    rhs = ph_lib.mask_padding(b, rhs, dd.rhs_contracting, for_rhs)
  out_sharding = out.to_sharding()
  new = clone(b, instr, _local(instr.shape, out_sharding),
              [lhs.hlo, rhs.hlo])
  if groups:
    partials = cp.partials_if_unreduced(instr, new, groups, out_sharding)
    if partials is not None:
      return partials
    new = ph_lib.all_reduce(
        b, new, groups, cp.state.sum_reducer(instr.shape.element_type))
  return finish(cp, instr, PartitionedHlo(new, instr.shape, out_sharding))


def _register_elementwise() -> None:
  for op in O:
    if hlo_opcode.is_elementwise(op) and op not in ph_lib.HANDLERS:
      register_handler(op)(handle_elementwise)
  for op in (O.kBitcastConvert, O.kStochasticConvert):
    if op not in ph_lib.HANDLERS:
      register_handler(op)(_same_dims_elementwise)


def _same_dims_elementwise(cp, instr) -> PartitionedHlo:
  if all(o.shape.dimensions == instr.shape.dimensions
         for o in instr.operands):
    return handle_elementwise(cp, instr)
  return cp.replicated_fallback(instr)


_register_elementwise()
