"""SpmdPartitioner: a global program with shardings -> one partition's
program with collectives (after xla/service/spmd/spmd_partitioner.cc).

Every instruction of the input must carry the sharding its value should
have (run `ShardingPropagation` first; an instruction without one is taken
as replicated). The pass builds a new entry computation in which each
instruction's value is this partition's shard: the entry parameters take
the shard shapes of their shardings, and each instruction is rewritten by
the handler registered for its opcode in `partitioned_hlo.HANDLERS` (the
data-parallel ops in `spmd_handlers`; parameters, tuples, control flow and
the SPMD custom calls here). Computations that while loops, calls and
conditionals run are partitioned the same way, once per call site.

Manual regions (shard_map in GSPMD form) are supported: a value sharded
`{manual}` already has its per-partition shape, instructions on manual
values are copied as they are (their collectives included), and the custom
calls `SPMDFullToShardShape` / `SPMDShardToFullShape` convert between a
tiled global value and its manual shard. `Sharding` custom calls become
reshards.

Unreduced values (`{unreduced}`, an `unreduced` subgroup: each device of a
group holds a partial result, the value is their sum) pass through the
SPMD custom calls, tuples and control flow as they are, through copy,
negate, add and subtract with an unreduced result, and through the ops
that only move or convert elements (transpose, reshape, broadcast, slices,
dynamic-update-slice, concatenate, convert within floats or within
integers) where operands and result are unreduced over the same groups; a
contraction or sum whose partial results are the unreduced result keeps
them; any other op reads them reduced (an all-reduce over each group), and
an unreduced result of one is computed reduced, then kept on the first
device of each group, zeros on the others (`partitioned_hlo.reshard` does
both).

An op without a handler runs whole: its operands are all-gathered, every
partition computes the full result, and each keeps its own tile. Ops for
which that is not the same program (collectives, partition-id, stateful
random numbers, side effects) raise support.UnimplementedError naming the
op, as do shardings the partitioner cannot express (partially manual).

A custom call sharded `{maximal device=D}` (JAX's annotation of a host
callback under `jit`: `jax.debug.print`, `pure_callback`, `io_callback`)
runs on partition D alone, with its operands whole, inside a conditional;
its array results are then summed over the partitions (the others give
zeros), so every partition holds D's result, replicated.

After the pass, `module.config` says `num_partitions=N` and
`use_spmd_partitioning=true`, and the entry layout is the per-partition one.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

import support
from xla import primitive_util
from xla import shape_util
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir import hlo_sharding
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.pass_ import hlo_pass_interface
from xla.hlo.transforms.simplifiers import hlo_dce
from xla.literal import Literal
from xla.service.spmd import halo_exchange  # noqa: F401 (conv, reduce-window)
from xla.service.spmd import partitioned_hlo as ph_lib
from xla.service.spmd import sharding_propagation as sp
from xla.service.spmd import sharding_util as su
from xla.service.spmd import spmd_handlers
from xla.service.spmd.partitioned_hlo import PartitionedHlo
from xla.service.spmd.partitioned_hlo import register_handler
from xla.shape import ProgramShape

O = HloOpcode

# Ops the replicated fallback must not run on every partition.
_NOT_REPLICABLE = frozenset({
    O.kPartitionId, O.kReplicaId, O.kRng, O.kRngGetAndUpdateState,
    O.kInfeed, O.kOutfeed, O.kSend, O.kSendDone, O.kRecv, O.kRecvDone,
    O.kAsyncStart, O.kAsyncUpdate, O.kAsyncDone,
}) | frozenset(op for op in HloOpcode if op.value.startswith(
    ("all-", "collective-", "reduce-scatter", "ragged-all")))

# Handlers that deal with manual shardings themselves.
_MANUAL_AWARE = frozenset({O.kCustomCall, O.kWhile, O.kCall, O.kConditional,
                           O.kParameter})
# Handlers that move values only through `reshard`, which reduces unreduced
# ones where needed; every other handler gets its operands reduced and
# computes an unreduced result reduced, then keeps it on one device of each
# group (a sum of partials is what an unreduced value means; computing the
# partials themselves, as XLA's dot handler does, is left to come).
# Elementwise ops linear in their operands: with an unreduced result they
# run on partials of their operands under the result's sharding.
_LINEAR_ELEMENTWISE = frozenset({O.kCopy, O.kNegate, O.kAdd, O.kSubtract})
# Ops that only move, replicate or convert the elements of some operands
# (the others, if any, are indices): linear in those, so with those
# operands and the result unreduced over the same groups they run on each
# device's partials, read under the reduced sharding, and the partials they
# give still add up to the result. The resharding their handlers do between
# reduced shardings (all-gather, all-to-all, dynamic-slice) is linear too.
# This keeps an unreduced gradient unreduced through the transposes,
# converts and slice updates that autodiff and scan put between a
# contraction and its accumulator, so it is summed once, after the loop.
# opcode -> the indices of its linear operands (None: all of them).
_LINEAR_MOVES: dict[HloOpcode, Optional[tuple[int, ...]]] = {
    O.kTranspose: (0,), O.kReshape: (0,), O.kBroadcast: (0,),
    O.kReverse: (0,), O.kSlice: (0,), O.kDynamicSlice: (0,),
    O.kConvert: (0,), O.kDynamicUpdateSlice: (0, 1), O.kConcatenate: None,
}


def _linear_convert(instr) -> bool:
  """Whether convert `instr` maps a sum of partials to the sum of their
  converts (up to rounding): between floating types, or between integer
  types (two's complement wrap-around is a ring homomorphism); not between
  the two kinds."""
  src = instr.operand(0).shape.element_type
  dst = instr.shape.element_type
  kinds = []
  for et in (src, dst):
    if primitive_util.is_floating_point(et) or primitive_util.is_complex(et):
      kinds.append("float")
    elif primitive_util.is_integral(et):
      kinds.append("int")
    else:
      return False
  if primitive_util.is_complex(src) and not primitive_util.is_complex(dst):
    return False
  return kinds[0] == kinds[1]


_UNREDUCED_AWARE = frozenset({O.kCustomCall, O.kWhile, O.kCall,
                              O.kConditional, O.kParameter, O.kTuple,
                              O.kGetTupleElement, O.kOptimizationBarrier})


def _replicated(shape) -> HloSharding:
  """Replicated, as a tuple sharding leaf by leaf for a tuple shape."""
  whole = HloSharding.single(shape, HloSharding.replicate())
  if shape.is_tuple():
    whole = HloSharding.tuple_sharding(sp.leaves_of(whole, shape))
  return whole


def _sharding_on(instr) -> HloSharding:
  """The instruction's sharding (replicated if none), as a tuple sharding
  for a tuple shape."""
  s = hlo_sharding.of(instr)
  if s is None:
    s = HloSharding.replicate()
  if instr.shape.is_tuple():
    return HloSharding.tuple_sharding(sp.leaves_of(s, instr.shape))
  return s


def _is_manual(s: HloSharding) -> bool:
  return s.is_manual


class ComputationPartitioner:
  """Builds the partitioned form of one computation (see the module
  docstring). `param_shardings` gives the shardings its parameters arrive
  with (None for the entry: each parameter's own), `root_sharding` the one
  its result must leave with (None: the root's own)."""

  def __init__(self, state: ph_lib.SpmdState, comp: HloComputation,
               param_shardings: Optional[Sequence[HloSharding]] = None,
               root_sharding: Optional[HloSharding] = None,
               name: Optional[str] = None):
    self.state = state
    self.comp = comp
    self.param_shardings = param_shardings
    self.root_sharding = root_sharding
    new = HloComputation(name or comp.name)
    state.module.add_embedded_computation(new)
    self.b = ph_lib.Builder(state, new)
    self.values: dict[int, PartitionedHlo] = {}
    self._current: Optional[HloInstruction] = None
    # id(instr) -> its value reduced (an unreduced value read by a handler
    # that does not take one), made once.
    self._reduced: dict[int, PartitionedHlo] = {}
    # id(instr) -> the sharding its handler computes (an unreduced target
    # read reduced by a handler that does not make one).
    self._computed_as: dict[int, HloSharding] = {}
    # id(instr) -> its unreduced target, while its handler runs.
    self._unreduced_goal: dict[int, HloSharding] = {}
    # id(instr) -> its partials under the reduced sharding, read by a
    # linear op that runs on them (see _LINEAR_MOVES), while it runs.
    self._as_partials: dict[int, PartitionedHlo] = {}
    self._linear: Optional[tuple[int, ...]] = None

  @property
  def n(self) -> int:
    return self.state.n

  def target(self, instr) -> HloSharding:
    return self._computed_as.get(id(instr)) or _sharding_on(instr)

  def operand(self, i: int) -> PartitionedHlo:
    instr = self._current.operand(i)
    if id(instr) in self._as_partials and (
        self._linear is None or i in self._linear):
      return self._as_partials[id(instr)]
    value = self.values[id(instr)]
    if (self._current.opcode in _UNREDUCED_AWARE or
        value.base_shape.is_tuple() or
        not ph_lib.has_unreduced(value.sharding)):
      return value
    reduced = self._reduced.get(id(instr))
    if reduced is None:
      reduced = ph_lib.reduce_unreduced(self.b, value)
      self._reduced[id(instr)] = reduced
    return reduced

  def value(self, instr) -> PartitionedHlo:
    return self.values[id(instr)]

  def run(self) -> HloComputation:
    for instr in self.comp.instructions_in_stable_order():
      self._current = instr
      self.values[id(instr)] = self._dispatch(instr)
    root = self.values[id(self.comp.root_instruction)]
    if self.root_sharding is not None:
      root = ph_lib.reshard(self.b, root, self.root_sharding)
    self.b.comp.set_root_instruction(root.hlo)
    return self.b.comp

  def _dispatch(self, instr) -> PartitionedHlo:
    try:
      target = self.target(instr)
      if instr.opcode not in _MANUAL_AWARE and _is_manual(target):
        return self.manual_clone(instr)
      if (instr.opcode in _LINEAR_ELEMENTWISE and
          ph_lib.has_unreduced(target)):
        # Partials in, partials out: the op runs on each device's partial
        # (its operands made partials of the target's first).
        operands = [ph_lib.reshard(self.b, self.values[id(op)], target).hlo
                    for op in instr.operands]
        new = spmd_handlers.clone(self.b, instr, operands[0].shape, operands)
        return PartitionedHlo(new, instr.shape, target)
      if instr.opcode in _LINEAR_MOVES and ph_lib.has_unreduced(target):
        partials = self._move_partials(instr, target)
        if partials is not None:
          return partials
      if (instr.opcode == O.kScatter and target.is_unreduced and
          not instr.shape.is_tuple()):
        partials = self._scatter_partials(instr, target)
        if partials is not None:
          return partials
      if (instr.opcode not in _UNREDUCED_AWARE and
          not instr.shape.is_tuple() and ph_lib.has_unreduced(target)):
        self._computed_as[id(instr)] = ph_lib.split_unreduced(
            target, self.n)[0]
        self._unreduced_goal[id(instr)] = target
        try:
          value = self._handle(instr)
        finally:
          del self._computed_as[id(instr)]
          del self._unreduced_goal[id(instr)]
        return ph_lib.reshard(self.b, value, target)
      return self._handle(instr)
    except support.UnimplementedError as e:
      where = f"{instr.opcode.value} ({instr.name})"
      if where in str(e):
        raise
      raise support.UnimplementedError(
          f"{e} [partitioning {where}]") from None

  def _move_partials(self, instr, target: HloSharding
                     ) -> Optional[PartitionedHlo]:
    """A linear data-movement op (_LINEAR_MOVES) run on the partials of
    its linear operands, where those and the result are unreduced over the
    same groups; else None."""
    if instr.shape.is_tuple():
      return None
    if instr.opcode == O.kConvert and not _linear_convert(instr):
      return None
    linear = _LINEAR_MOVES[instr.opcode]
    indices = range(instr.operand_count) if linear is None else linear
    base, groups = ph_lib.split_unreduced(target, self.n)
    partials = {}
    for i in indices:
      source = instr.operand(i)
      value = self.values[id(source)]
      if value.base_shape.is_tuple() or not ph_lib.has_unreduced(
          value.sharding):
        return None
      source_base, source_groups = ph_lib.split_unreduced(value.sharding,
                                                          self.n)
      if source_groups != groups:
        return None
      partials[id(source)] = PartitionedHlo(value.hlo, value.base_shape,
                                            source_base)
    if set(partials) & {id(instr.operand(i)) for i in range(
        instr.operand_count) if i not in indices}:
      return None  # one value both as partials and as indices
    self._as_partials = partials
    self._linear = linear
    self._computed_as[id(instr)] = base
    try:
      result = self._handle(instr)
    finally:
      self._as_partials = {}
      self._linear = None
      del self._computed_as[id(instr)]
    result = ph_lib.reshard(self.b, result, base)
    return PartitionedHlo(result.hlo, instr.shape, target)

  def _scatter_partials(self, instr, target: HloSharding
                        ) -> Optional[PartitionedHlo]:
    """An adding scatter whose result is `{unreduced}`, as XLA makes it:
    each device scatters its own tile of the indices and updates into its
    partial of the operand (the operand kept on one device). Only where
    the updates are all scatter dimensions and the indices are split along
    their batch dimensions over every device, evenly; else None."""
    operand, indices, updates = instr.operands
    attrs = instr.attrs
    if attrs.get("update_window_dims") or not spmd_handlers.adds(
        instr.to_apply):
      return None
    ivd = attrs["index_vector_dim"]
    ishape = indices.shape
    batch = [d for d in range(ishape.rank) if d != ivd]
    if updates.shape.rank != len(batch):
      return None
    ivalue = self.values[id(indices)]
    if ph_lib.has_unreduced(ivalue.sharding):
      return None
    imap = su.tile_map(ivalue.sharding, ishape.rank, self.n)
    if (imap.num_tiles != self.n or
        (ivd < ishape.rank and imap.counts[ivd] != 1) or any(
            ishape.dimensions[d] % imap.counts[d] for d in batch)):
      return None
    umap = imap.project(batch)
    uvalue = self.values[id(updates)]
    if ph_lib.has_unreduced(uvalue.sharding):
      uvalue = ph_lib.reduce_unreduced(self.b, uvalue)
    uvalue = ph_lib.reshard(self.b, uvalue, umap.to_sharding())
    ovalue = ph_lib.reshard(self.b, self.values[id(operand)], target)
    new = spmd_handlers.clone(self.b, instr, ovalue.hlo.shape,
                              [ovalue.hlo, ivalue.hlo, uvalue.hlo])
    return PartitionedHlo(new, instr.shape, target)

  def _handle(self, instr) -> PartitionedHlo:
    handler = ph_lib.HANDLERS.get(instr.opcode)
    if handler is None:
      return self.replicated_fallback(instr)
    return handler(self, instr)

  # -- shared by handlers ------------------------------------------------------

  def partials_if_unreduced(self, instr, partial: HloInstruction,
                            groups, sharding: HloSharding
                            ) -> Optional[PartitionedHlo]:
    """For a handler about to all-reduce `partial` (each device's partial
    result, to be `sharding` once summed over `groups`): the partials
    themselves as the result, where the instruction's target is unreduced
    over exactly those groups (as XLA leaves a contraction or reduction
    over the unreduced axes); else None."""
    goal = self._unreduced_goal.get(id(instr))
    if goal is None:
      return None
    base, goal_groups = ph_lib.split_unreduced(goal, self.n)
    if sorted(sorted(g) for g in groups) != goal_groups:
      return None
    rank = instr.shape.rank
    if (su.tile_map(sharding, rank, self.n) !=
        su.tile_map(base, rank, self.n)):
      return None
    return PartitionedHlo(partial, instr.shape, goal)

  def manual_clone(self, instr) -> PartitionedHlo:
    """`instr` on manual values: copied with its operands' local values
    (which have the global shapes of a manual region)."""
    operands = []
    for i, op in enumerate(instr.operands):
      value = self.operand(i)
      s = value.sharding
      if not (s.is_manual or s.is_replicated):
        raise support.UnimplementedError(
            f"Unimplemented: SPMD partitioning of {instr.opcode.value} "
            f"({instr.name}): manual result from operand {op.name} sharded "
            f"{s}")
      operands.append(value.hlo)
    new = spmd_handlers.clone(self.b, instr, instr.shape, operands)
    return PartitionedHlo(new, instr.shape, self.target(instr))

  def replicated_fallback(self, instr) -> PartitionedHlo:
    """Runs `instr` whole on every partition, from all-gathered operands,
    then keeps this partition's tile of the result."""
    if instr.opcode in _NOT_REPLICABLE or instr.has_side_effect():
      raise support.UnimplementedError(
          f"Unimplemented: SPMD partitioning of {instr.opcode.value} "
          f"({instr.name}) outside a manual region (sharding "
          f"{self.target(instr)})")
    operands = [ph_lib.replicate(self.b, self.operand(i)).hlo
                for i in range(instr.operand_count)]
    new = spmd_handlers.clone(self.b, instr, instr.shape, operands)
    whole = _replicated(instr.shape)
    return ph_lib.reshard(self.b, PartitionedHlo(new, instr.shape, whole),
                          self.target(instr))


# -- parameters, tuples --------------------------------------------------------


@register_handler(O.kParameter)
def handle_parameter(cp: ComputationPartitioner, instr) -> PartitionedHlo:
  own = cp.target(instr)
  arrives = own
  if cp.param_shardings is not None:
    arrives = cp.param_shardings[instr.parameter_number]
  new = hi.create_parameter(instr.parameter_number,
                            ph_lib.local_shape(instr.shape, arrives),
                            instr.name)
  new.metadata = instr.metadata
  if cp.param_shardings is None and instr.sharding is not None:
    new.sharding = instr.sharding
  cp.b.add(new)
  return ph_lib.reshard(cp.b, PartitionedHlo(new, instr.shape, arrives), own)


@register_handler(O.kTuple)
def handle_tuple(cp: ComputationPartitioner, instr) -> PartitionedHlo:
  target = cp.target(instr)
  elements = []
  for i, op in enumerate(instr.operands):
    want = target.get_sub_sharding(instr.shape, (i,))
    elements.append(ph_lib.reshard(cp.b, cp.operand(i), want).hlo)
  return PartitionedHlo(cp.b.tuple(elements), instr.shape, target)


@register_handler(O.kGetTupleElement)
def handle_get_tuple_element(cp: ComputationPartitioner, instr
                             ) -> PartitionedHlo:
  operand = cp.operand(0)
  index = instr.tuple_index
  sub = operand.sharding.get_sub_sharding(operand.base_shape, (index,))
  value = PartitionedHlo(cp.b.gte(operand.hlo, index), instr.shape, sub)
  return ph_lib.reshard(cp.b, value, cp.target(instr))


@register_handler(O.kOptimizationBarrier)
def handle_optimization_barrier(cp: ComputationPartitioner, instr
                                ) -> PartitionedHlo:
  target = cp.target(instr)
  operand = ph_lib.reshard(cp.b, cp.operand(0), target)
  new = spmd_handlers.clone(cp.b, instr, operand.hlo.shape, [operand.hlo])
  return PartitionedHlo(new, instr.shape, target)


# -- control flow --------------------------------------------------------------


@register_handler(O.kWhile)
def handle_while(cp: ComputationPartitioner, instr) -> PartitionedHlo:
  """Body and condition partitioned with the loop's sharding on their
  parameter; the body's result leaves with it too."""
  target = cp.target(instr)
  init = ph_lib.reshard(cp.b, cp.operand(0), target)
  body = ComputationPartitioner(cp.state, instr.while_body, [target],
                                target).run()
  cond_root = HloSharding.replicate()
  if _is_manual(_sharding_on(instr.while_condition.root_instruction)):
    cond_root = HloSharding.manual()
  cond = ComputationPartitioner(cp.state, instr.while_condition, [target],
                                cond_root).run()
  new = spmd_handlers.clone(cp.b, instr, init.hlo.shape, [init.hlo],
                            condition=cond, body=body)
  return PartitionedHlo(new, instr.shape, target)


@register_handler(O.kCall)
def handle_call(cp: ComputationPartitioner, instr) -> PartitionedHlo:
  target = cp.target(instr)
  callee = instr.to_apply
  params = [_sharding_on(callee.parameter_instruction(i))
            for i in range(instr.operand_count)]
  operands = [ph_lib.reshard(cp.b, cp.operand(i), s).hlo
              for i, s in enumerate(params)]
  new_callee = ComputationPartitioner(cp.state, callee, params, target).run()
  new = spmd_handlers.clone(cp.b, instr,
                            ph_lib.local_shape(instr.shape, target),
                            operands, to_apply=new_callee)
  return PartitionedHlo(new, instr.shape, target)


@register_handler(O.kConditional)
def handle_conditional(cp: ComputationPartitioner, instr) -> PartitionedHlo:
  target = cp.target(instr)
  index = cp.operand(0)
  if not _is_manual(index.sharding):
    index = ph_lib.replicate(cp.b, index)
  operands = [index.hlo]
  branches = []
  for k, branch in enumerate(instr.branch_computations):
    s = _sharding_on(branch.parameter_instruction(0))
    operands.append(ph_lib.reshard(cp.b, cp.operand(k + 1), s).hlo)
    branches.append(ComputationPartitioner(cp.state, branch, [s],
                                           target).run())
  changes = {}
  if instr.attrs.get("branch_computations") is not None:
    changes["branch_computations"] = tuple(branches)
  else:
    changes["true_computation"], changes["false_computation"] = branches
  new = spmd_handlers.clone(cp.b, instr,
                            ph_lib.local_shape(instr.shape, target),
                            operands, **changes)
  return PartitionedHlo(new, instr.shape, target)


# -- custom calls --------------------------------------------------------------


def _check_no_manual_subgroup(instr, s: HloSharding) -> None:
  leaves = s.tuple_elements if s.is_tuple else (s,)
  for leaf in leaves:
    if leaf.type == hlo_sharding.OpShardingType.OTHER and (
        hlo_sharding.OpShardingType.MANUAL in leaf.subgroup_types):
      raise support.UnimplementedError(
          f"Unimplemented: SPMD partitioning of {instr.opcode.value} "
          f"({instr.name}) with partially manual sharding {leaf}")


@register_handler(O.kCustomCall)
def handle_custom_call(cp: ComputationPartitioner, instr) -> PartitionedHlo:
  target = cp.target(instr)
  name = instr.custom_call_target
  _check_no_manual_subgroup(instr, target)
  if name == sp.SHARDING_TARGET:
    return ph_lib.reshard(cp.b, cp.operand(0), target)
  # The manual-shape conversions move no data: the shard is the value
  # itself. XLA emits a copy here and its algebraic simplifier removes it;
  # we emit none (a 64 MiB shard_map psum spent half its time in them).
  if name == sp.FULL_TO_SHARD_TARGET:
    operand = cp.operand(0)
    _check_no_manual_subgroup(instr, operand.sharding)
    want = ph_lib.local_shape(operand.base_shape, operand.sharding)
    if want.dimensions != instr.shape.dimensions:
      raise support.InvalidArgumentError(
          f"{instr.name}: {name} to {instr.shape.to_string()} from a "
          f"value whose shards are {want.to_string()} "
          f"(sharding {operand.sharding})")
    return PartitionedHlo(operand.hlo, instr.shape, target)
  if name == sp.SHARD_TO_FULL_TARGET:
    operand = cp.operand(0)
    if not _is_manual(operand.sharding):
      operand = ph_lib.reshard(cp.b, operand, HloSharding.manual())
    want = ph_lib.local_shape(instr.shape, target)
    if want.dimensions != operand.hlo.shape.dimensions:
      raise support.InvalidArgumentError(
          f"{instr.name}: {name} of a {operand.hlo.shape.to_string()} shard "
          f"to {instr.shape.to_string()} sharded {target}, whose shards are "
          f"{want.to_string()}")
    return PartitionedHlo(operand.hlo, instr.shape, target)
  if _is_manual(target):
    return cp.manual_clone(instr)
  if name in _PER_PARTITION_TARGETS:
    return _per_partition(cp, instr)
  device = _maximal_device(instr)
  if device is not None:
    return _on_one_device(cp, instr, device)
  return cp.replicated_fallback(instr)


# Custom-call targets that every partition calls with the local values of
# its operands, as they are sharded (XLA's partitioner of JAX's partitioned
# debug callbacks does the same); their results, if any, are replicated.
_PER_PARTITION_TARGETS: set[str] = set()


def register_per_partition_target(target: str) -> None:
  """Makes the partitioner run custom calls to `target` on every partition
  with its operands' local shards (see `_per_partition`)."""
  _PER_PARTITION_TARGETS.add(target)


def _per_partition(cp: ComputationPartitioner, instr) -> PartitionedHlo:
  operands = []
  for i, op in enumerate(instr.operands):
    value = cp.operand(i)
    if ph_lib.has_unreduced(value.sharding):
      value = ph_lib.reduce_unreduced(cp.b, value)
    operands.append(value.hlo)
  for leaf in _leaf_shapes(instr.shape):
    if leaf.is_array() and leaf.rank:
      raise support.UnimplementedError(
          f"Unimplemented: SPMD partitioning of {instr.custom_call_target} "
          f"({instr.name}) with array results")
  new = spmd_handlers.clone(cp.b, instr, instr.shape, operands)
  whole = _replicated(instr.shape)
  return PartitionedHlo(new, instr.shape, whole)


def _maximal_device(instr) -> Optional[int]:
  """The device of `instr`'s `{maximal device=D}` sharding (a tuple's
  leaves all on D, or an empty tuple's own), or None."""
  s = hlo_sharding.of(instr)
  if s is None:
    return None
  leaves = s.tuple_elements if s.is_tuple else (s,)
  if not leaves or not all(leaf.is_maximal for leaf in leaves):
    return None
  devices = {leaf.tile_assignment.first() for leaf in leaves}
  return devices.pop() if len(devices) == 1 else None


def _leaf_shapes(shape) -> list:
  return list(shape.tuple_shapes) if shape.is_tuple() else [shape]


def _on_one_device(cp: ComputationPartitioner, instr, device: int
                   ) -> PartitionedHlo:
  """`instr` (sharded `{maximal device=D}`: a host callback under `jit`)
  run by partition D alone, as XLA runs it: its operands gathered whole,
  the call in a conditional that partition D takes (the others make
  zeros), and each array result summed over the partitions, which gives
  every partition D's value (replicated). A token passes through."""
  b = cp.b
  if not 0 <= device < cp.n:
    raise support.InvalidArgumentError(
        f"{instr.name}: sharding names device {device} of a program of "
        f"{cp.n} partitions")
  operands = []
  for i, op in enumerate(instr.operands):
    value = cp.operand(i)
    if op.shape.is_token():
      operands.append(value.hlo)
    else:
      operands.append(ph_lib.replicate(b, value).hlo)
  arg = b.tuple(operands)
  shape = instr.shape

  def branch(name: str, run: bool) -> HloComputation:
    comp = HloComputation(f"{instr.name}.{name}")
    cp.state.module.add_embedded_computation(comp)
    param = comp.add_instruction(hi.create_parameter(0, arg.shape, "args"))
    if run:
      ins = [comp.add_instruction(hi.create_get_tuple_element(param, i))
             for i in range(len(operands))]
      root = comp.add_instruction(spmd_handlers.copy(instr, shape, ins))
    else:
      leaves = []
      for k, leaf in enumerate(_leaf_shapes(shape)):
        if leaf.is_token():
          tokens = [comp.add_instruction(hi.create_get_tuple_element(
              param, i)) for i, op in enumerate(operands)
                    if op.shape.is_token()]
          leaves.append(comp.add_instruction(hi.create(
              O.kAfterAll, leaf, tuple(tokens))))
        else:
          et = leaf.element_type
          zero = comp.add_instruction(hi.create_constant(
              Literal.from_array(np.zeros((), primitive_util.numpy_dtype(et)),
                                 et)))
          leaves.append(comp.add_instruction(hi.create_broadcast(
              leaf, zero, ())))
      root = (comp.add_instruction(hi.create_tuple(leaves))
              if shape.is_tuple() else leaves[0])
    comp.set_root_instruction(root)
    return comp

  index = b.per_partition([0 if p == device else 1 for p in range(cp.n)])
  cond = b.add(hi.create_conditional(
      shape, index, [branch("on_device", True), branch("elsewhere", False)],
      [arg, arg]))
  everyone = [list(range(cp.n))]

  def broadcast(x):
    if x.shape.is_token():
      return x
    return ph_lib.all_reduce(b, x, everyone,
                             cp.state.sum_reducer(x.shape.element_type))

  if shape.is_tuple():
    result = b.tuple([broadcast(b.gte(cond, i))
                      for i in range(len(shape.tuple_shapes))])
  else:
    result = broadcast(cond)
  whole = _replicated(shape)
  return PartitionedHlo(result, shape, whole)


# -- the pass ------------------------------------------------------------------


def _reachable(entry: HloComputation) -> list[HloComputation]:
  out, seen, stack = [], set(), [entry]
  while stack:
    comp = stack.pop()
    if id(comp) in seen:
      continue
    seen.add(id(comp))
    out.append(comp)
    for instr in comp.instructions:
      stack.extend(instr.called_computations())
  return out


class SpmdPartitioner(hlo_pass_interface.HloModulePass):
  """See the module docstring."""

  def __init__(self, num_partitions: int):
    if num_partitions < 1:
      raise support.InvalidArgumentError(
          f"num_partitions must be positive, got {num_partitions}")
    self.num_partitions = int(num_partitions)

  @property
  def name(self) -> str:
    return "spmd-partitioning"

  def run(self, module, execution_threads=frozenset()) -> bool:
    entry = module.entry_computation
    if entry is None:
      raise support.FailedPreconditionError(
          f"module {module.name} has no entry computation")
    if module.config.replica_count not in (0, 1):
      raise support.UnimplementedError(
          f"Unimplemented: SPMD partitioning of a module with "
          f"{module.config.replica_count} replicas")
    old = _reachable(entry)
    state = ph_lib.SpmdState(module, self.num_partitions)
    new_entry = ComputationPartitioner(state, entry,
                                       name=f"{entry.name}_spmd").run()
    root = new_entry.root_instruction
    root_sharding = _sharding_on(entry.root_instruction)
    if root.opcode != O.kParameter:
      root.sharding = hlo_attrs.RawText(str(root_sharding))
    module.entry_computation = new_entry
    keep = {id(c) for c in _reachable(new_entry)}
    for comp in old:
      if id(comp) not in keep:
        module.remove_computation(comp, check_callers=False)
    hlo_dce.HloDCE(remove_dead_computations=False).run(module)
    config = module.config
    config.num_partitions = self.num_partitions
    config.use_spmd_partitioning = True
    old_layout = config.entry_computation_layout
    ps = new_entry.program_shape()
    config.entry_computation_layout = ProgramShape(
        tuple(shape_util.with_default_layouts(s) for s in ps.parameters),
        shape_util.with_default_layouts(ps.result),
        ps.parameter_names) if old_layout is not None else None
    return True


def partition(module, num_partitions: int) -> None:
  """Propagates shardings and partitions `module` in place."""
  sp.ShardingPropagation(num_partitions).run(module)
  SpmdPartitioner(num_partitions).run(module)
