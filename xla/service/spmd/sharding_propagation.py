"""ShardingPropagation: shardings for every instruction from a few annotated
ones (after xla/service/sharding_propagation.cc, in a simpler form).

The user annotates some instructions (`sharding=` on parameters, the root,
`custom-call(...), custom_call_target="Sharding"`); this pass gives every
other instruction of the entry computation, and of the computations that
while loops, calls and conditionals run, a sharding the SPMD partitioner can
follow. It works on the leaves of each value (an array is one leaf, a tuple
has one per element) and repeats, until nothing changes:

  * forward: an instruction takes a sharding derived from its operands'
    (elementwise ops the same one, a transpose the permuted one, a reduce the
    operand's with the reduced dimensions dropped, a dot the batch and free
    dimensions of its operands, ...);
  * backward: an operand takes one derived from its users' shardings;
  * across computations: a while loop, its body and condition parameters
    and the body root agree leaf by leaf; a call's operands flow to the
    callee's parameters and its root back to the call.

A leaf that has a sharding only takes another that is more specific (more
distinct tiles), and ties keep the first candidate (forward before backward,
operands and users in order), so the result is deterministic and the
iteration ends. Annotated leaves never change. What is still unknown at the
end becomes replicated. Entry parameters and the entry root's leaves
without an annotation are replicated unless the module config allows
propagation to them (`allow_spmd_sharding_propagation_to_parameters` /
`_to_output`, per parameter / per output leaf); a `{unknown}` leaf of a
tuple sharding counts as no annotation. Such a parameter or output whose
propagated sharding would cut it into uneven tiles is replicated instead
(its caller could not make or take uneven shards).

A `{maximal device=D}` sharding (JAX's annotation of a host callback
under `jit`) is never propagated: the partitioner runs that instruction on
device D alone and gives its results to every device.

A `Sharding` custom call whose backend_config names `unspecified_dims`
(an open dimension of a constraint) keeps its annotation on the other
dimensions and takes, on those, what propagation finds (a candidate
merged with the annotation, where one sharding can do both).

The rules per opcode live in `FORWARD` and `BACKWARD`, tables keyed by
HloOpcode; an opcode with no rule gets no sharding from propagation and so
ends up replicated, except in a manual region: there an op without a rule
(a collective, ...) on a manual operand, or with a manual user, is manual.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

import support
from xla import shape_util
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_sharding
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.hlo.pass_ import hlo_pass_interface
from xla.service.spmd import sharding_util as su

O = HloOpcode
_Leaves = list  # list[Optional[HloSharding]], one per leaf of a shape

# Custom-call targets with special meaning for SPMD.
SHARDING_TARGET = "Sharding"
FULL_TO_SHARD_TARGET = "SPMDFullToShardShape"
SHARD_TO_FULL_TARGET = "SPMDShardToFullShape"


def leaf_shapes(shape):
  return [s for _, s in shape_util.leaf_shapes(shape)] or [shape]


def num_leaves(shape) -> int:
  return len(leaf_shapes(shape))


def leaves_of(sharding: Optional[HloSharding], shape) -> _Leaves:
  """The per-leaf shardings of `sharding` on `shape` (Nones if None)."""
  n = num_leaves(shape)
  if sharding is None:
    return [None] * n
  if shape.is_tuple():
    return list(sharding.get_tuple_sharding(shape).tuple_elements) if n else [
        None]
  if sharding.is_tuple:
    single = sharding.extract_single_sharding()
    if single is None:
      raise support.InvalidArgumentError(
          f"tuple sharding {sharding} on array shape {shape.to_string()}")
    return [single]
  return [sharding]


def from_leaves(leaves: Sequence[HloSharding], shape) -> HloSharding:
  if shape.is_tuple():
    return HloSharding.tuple_sharding(leaves)
  return leaves[0]


def _has_unreduced(s: HloSharding) -> bool:
  return s.is_unreduced or (
      s.type == hlo_sharding.OpShardingType.OTHER and
      hlo_sharding.OpShardingType.UNREDUCED in s.subgroup_types)


def _elementwise_like(instr) -> bool:
  return instr.is_elementwise() or instr.opcode in (
      O.kBitcastConvert, O.kStochasticConvert) and all(
          o.shape.dimensions == instr.shape.dimensions
          for o in instr.operands)


class _Ctx:
  """What the rules need: the number of devices."""

  def __init__(self, num_devices: int):
    self.n = num_devices

  def map(self, s: Optional[HloSharding], rank: int):
    if s is None or s.is_manual or s.is_tuple:
      return None
    try:
      return su.tile_map(s, rank, self.n)
    except support.XlaError:
      return None

  def to(self, m) -> Optional[HloSharding]:
    return None if m is None else su.sharding_or_none(m)


def _best(cands: Sequence[Optional[HloSharding]]) -> Optional[HloSharding]:
  best = None
  for c in cands:
    if c is not None and su.sharding_score(c) > su.sharding_score(best):
      best = c
  return best


# -- rule helpers --------------------------------------------------------------


def _through(ctx: _Ctx, s: Optional[HloSharding], rank: int, fn
             ) -> Optional[HloSharding]:
  """`fn(map)` as a sharding; manual passes through unchanged."""
  if s is None:
    return None
  if s.is_manual:
    return s
  m = ctx.map(s, rank)
  if m is None:
    return None
  return ctx.to(fn(m))


# -- rules: sharding leaves from operand (forward) or user (backward) leaves --

ForwardRule = Callable[[_Ctx, object, list], Optional[_Leaves]]
BackwardRule = Callable[[_Ctx, object, int, _Leaves], Optional[_Leaves]]
FORWARD: dict[HloOpcode, ForwardRule] = {}
BACKWARD: dict[HloOpcode, BackwardRule] = {}


def _forward(*opcodes):
  def deco(fn):
    for op in opcodes:
      FORWARD[op] = fn
    return fn
  return deco


def _backward(*opcodes):
  def deco(fn):
    for op in opcodes:
      BACKWARD[op] = fn
    return fn
  return deco


def _elementwise_forward(ctx, instr, ops):
  rank = instr.shape.rank
  cands = [o[0] for o, op in zip(ops, instr.operands)
           if op.shape.rank == rank and o[0] is not None]
  return [_best(cands)]


def _elementwise_backward(ctx, instr, i, leaves):
  if instr.operand(i).shape.rank != instr.shape.rank:
    return [HloSharding.replicate()]
  return [leaves[0]]


@_forward(O.kBroadcast)
def _broadcast_fwd(ctx, instr, ops):
  dims = instr.dimensions
  rank = instr.shape.rank
  return [_through(ctx, ops[0][0], instr.operand(0).shape.rank,
                   lambda m: m.embed(rank, dims))]


@_backward(O.kBroadcast)
def _broadcast_bwd(ctx, instr, i, leaves):
  return [_through(ctx, leaves[0], instr.shape.rank,
                   lambda m: m.project(instr.dimensions))]


@_forward(O.kTranspose)
def _transpose_fwd(ctx, instr, ops):
  return [_through(ctx, ops[0][0], instr.shape.rank,
                   lambda m: m.transpose(instr.dimensions))]


@_backward(O.kTranspose)
def _transpose_bwd(ctx, instr, i, leaves):
  perm = instr.dimensions
  inverse = [perm.index(d) for d in range(len(perm))]
  return [_through(ctx, leaves[0], instr.shape.rank,
                   lambda m: m.transpose(inverse))]


@_forward(O.kReshape)
def _reshape_fwd(ctx, instr, ops):
  src = instr.operand(0).shape.dimensions
  return [_through(ctx, ops[0][0], len(src), lambda m: su.reshape_tile_map(
      m, src, instr.shape.dimensions))]


@_backward(O.kReshape)
def _reshape_bwd(ctx, instr, i, leaves):
  src = instr.operand(0).shape.dimensions
  return [_through(ctx, leaves[0], instr.shape.rank,
                   lambda m: su.reshape_tile_map(m, instr.shape.dimensions,
                                                 src))]


@_forward(O.kReduce)
def _reduce_fwd(ctx, instr, ops):
  n = instr.operand_count // 2
  rank = instr.operand(0).shape.rank
  kept = [d for d in range(rank) if d not in instr.dimensions]
  out = [_through(ctx, ops[j][0], rank, lambda m: m.project(kept))
         for j in range(n)]
  best = _best(out)
  return [best] * n


@_backward(O.kReduce)
def _reduce_bwd(ctx, instr, i, leaves):
  n = instr.operand_count // 2
  if i >= n:
    return [HloSharding.replicate()]
  rank = instr.operand(0).shape.rank
  kept = [d for d in range(rank) if d not in instr.dimensions]
  out_rank = rank - len(instr.dimensions)
  return [_through(ctx, leaves[min(i, len(leaves) - 1)], out_rank,
                   lambda m: m.embed(rank, kept))]


@_forward(O.kDot)
def _dot_fwd(ctx, instr, ops):
  lhs, rhs = ops[0][0], ops[1][0]
  if lhs is not None and lhs.is_manual or rhs is not None and rhs.is_manual:
    return [HloSharding.manual()]
  dd = su.DotDims.of(instr)
  lm = ctx.map(lhs, instr.operand(0).shape.rank)
  rm = ctx.map(rhs, instr.operand(1).shape.rank)
  cands = []
  if lm is not None and rm is not None:
    cands.append(ctx.to(su.dot_output_map(dd, lm, rm)))
  if lm is not None:
    cands.append(ctx.to(su.dot_output_map(dd, lm, None)))
  if rm is not None:
    cands.append(ctx.to(su.dot_output_map(dd, None, rm)))
  return [_best(cands)]


@_backward(O.kDot)
def _dot_bwd(ctx, instr, i, leaves):
  dd = su.DotDims.of(instr)
  rank = instr.operand(i).shape.rank
  return [_through(ctx, leaves[0], instr.shape.rank,
                   lambda m: su.dot_operand_map_from_output(
                       dd, m, "lhs" if i == 0 else "rhs", rank))]


def _any_manual(shardings) -> bool:
  return any(s is not None and s.is_manual for s in shardings)


def _conv_dims(instr) -> tuple[list[int], list[int]]:
  """(input dims, output dims) a convolution keeps tiled alike: batch and
  spatial dimensions (the SPMD partitioner exchanges halos along tiled
  spatial ones)."""
  dn = instr.convolution_dimension_numbers
  return ([dn.input_batch_dimension] + list(dn.input_spatial_dimensions),
          [dn.output_batch_dimension] + list(dn.output_spatial_dimensions))


def _moved(m, src: Sequence[int], dst: Sequence[int], rank: int):
  """A rank-`rank` map whose dim dst[i] is dim src[i] of `m`, others
  untiled."""
  return m.project(src).embed(rank, dst)


def _wide_window_dims(instr, m, dims: Sequence[int]) -> list[int]:
  """Of a convolution's spatial dims `dims` (of the input, or the output)
  tiled in `m`, those whose window is wider than an input tile: their
  tiling does not carry over (a window that spans the input, as a kernel
  gradient's does, makes partial results, not a split output)."""
  dn = instr.convolution_dimension_numbers
  sizes = instr.operand(0).shape.dimensions
  out = []
  for i, wd in enumerate(instr.window.dimensions):
    d = dims[i]
    if m.counts[d] > 1:
      width = (wd.size - 1) * wd.window_dilation + 1
      tile = -(-sizes[dn.input_spatial_dimensions[i]] // m.counts[d])
      if width > tile:
        out.append(d)
  return out


@_forward(O.kConvolution)
def _conv_fwd(ctx, instr, ops):
  if _any_manual(o[0] for o in ops):
    return [HloSharding.manual()]
  if instr.batch_group_count != 1:
    return None
  src, dst = _conv_dims(instr)
  spatial = instr.convolution_dimension_numbers.input_spatial_dimensions
  return [_through(ctx, ops[0][0], instr.operand(0).shape.rank,
                   lambda m: _moved(m.replicate_dims(
                       _wide_window_dims(instr, m, spatial)), src, dst,
                       instr.shape.rank))]


@_backward(O.kConvolution)
def _conv_bwd(ctx, instr, i, leaves):
  if _any_manual(leaves):
    return [HloSharding.manual()]
  if i != 0 or instr.batch_group_count != 1:
    return None
  src, dst = _conv_dims(instr)
  spatial = instr.convolution_dimension_numbers.output_spatial_dimensions
  return [_through(ctx, leaves[0], instr.shape.rank,
                   lambda m: _moved(m.replicate_dims(
                       _wide_window_dims(instr, m, spatial)), dst, src,
                       instr.operand(0).shape.rank))]


@_forward(O.kReduceWindow)
def _reduce_window_fwd(ctx, instr, ops):
  if _any_manual(o[0] for o in ops):
    return [HloSharding.manual()] * num_leaves(instr.shape)
  if instr.operand_count != 2:
    return None
  return [ops[0][0]]


@_backward(O.kReduceWindow)
def _reduce_window_bwd(ctx, instr, i, leaves):
  if _any_manual(leaves):
    return [HloSharding.manual()]
  if instr.operand_count != 2:
    return None
  return [leaves[0] if i == 0 else HloSharding.replicate()]


@_forward(O.kSlice, O.kPad, O.kDynamicSlice, O.kReverse)
def _slicing_fwd(ctx, instr, ops):
  touched = su.touched_dims(instr)
  return [_through(ctx, ops[0][0], instr.shape.rank,
                   lambda m: m.replicate_dims(touched))]


@_forward(O.kDynamicUpdateSlice)
def _dus_fwd(ctx, instr, ops):
  touched = su.touched_dims(instr)
  cands = [_through(ctx, ops[j][0], instr.shape.rank,
                    lambda m: m.replicate_dims(touched)) for j in (0, 1)]
  return [_best(cands)]


@_backward(O.kSlice, O.kPad, O.kDynamicSlice, O.kReverse,
           O.kDynamicUpdateSlice)
def _slicing_bwd(ctx, instr, i, leaves):
  if i > 0 and not (instr.opcode == O.kDynamicUpdateSlice and i == 1):
    return [HloSharding.replicate()]
  touched = su.touched_dims(instr)
  return [_through(ctx, leaves[0], instr.shape.rank,
                   lambda m: m.replicate_dims(touched))]


@_forward(O.kConcatenate)
def _concat_fwd(ctx, instr, ops):
  touched = su.touched_dims(instr)
  return [_best([_through(ctx, o[0], instr.shape.rank,
                          lambda m: m.replicate_dims(touched))
                 for o in ops])]


@_backward(O.kConcatenate)
def _concat_bwd(ctx, instr, i, leaves):
  touched = su.touched_dims(instr)
  return [_through(ctx, leaves[0], instr.shape.rank,
                   lambda m: m.replicate_dims(touched))]


@_forward(O.kSort)
def _sort_fwd(ctx, instr, ops):
  touched = su.touched_dims(instr)
  rank = instr.operand(0).shape.rank
  best = _best([_through(ctx, o[0], rank, lambda m: m.replicate_dims(touched))
                for o in ops])
  return [best] * instr.operand_count


@_backward(O.kSort)
def _sort_bwd(ctx, instr, i, leaves):
  touched = su.touched_dims(instr)
  rank = instr.operand(0).shape.rank
  return [_through(ctx, leaves[min(i, len(leaves) - 1)], rank,
                   lambda m: m.replicate_dims(touched))]


@_forward(O.kTuple)
def _tuple_fwd(ctx, instr, ops):
  return [s for o in ops for s in o]


def _leaf_range(shape, index: int) -> tuple[int, int]:
  start = sum(num_leaves(s) for s in shape.tuple_shapes[:index])
  return start, start + num_leaves(shape.tuple_shapes[index])


@_backward(O.kTuple)
def _tuple_bwd(ctx, instr, i, leaves):
  a, b = _leaf_range(instr.shape, i)
  return leaves[a:b]


@_forward(O.kGetTupleElement)
def _gte_fwd(ctx, instr, ops):
  a, b = _leaf_range(instr.operand(0).shape, instr.tuple_index)
  return ops[0][a:b]


@_backward(O.kGetTupleElement)
def _gte_bwd(ctx, instr, i, leaves):
  shape = instr.operand(0).shape
  a, b = _leaf_range(shape, instr.tuple_index)
  out = [None] * num_leaves(shape)
  out[a:b] = leaves
  return out


@_forward(O.kWhile, O.kOptimizationBarrier)
def _passthrough_fwd(ctx, instr, ops):
  return list(ops[0])


@_backward(O.kWhile, O.kOptimizationBarrier)
def _passthrough_bwd(ctx, instr, i, leaves):
  return list(leaves)


@_forward(O.kCustomCall)
def _custom_call_fwd(ctx, instr, ops):
  # A Sharding custom call with unspecified dimensions takes its
  # operand's sharding on those (see `_merged`).
  if instr.custom_call_target == SHARDING_TARGET and len(ops) == 1:
    return list(ops[0])
  return None


def _unspecified_dims(instr) -> frozenset[int]:
  """The dimensions a `Sharding` custom call leaves to propagation
  (`backend_config="unspecified_dims=[0,1]"`, as JAX writes it)."""
  if (instr.opcode != O.kCustomCall or
      instr.custom_call_target != SHARDING_TARGET):
    return frozenset()
  config = str(instr.backend_config or "")
  if not config.startswith("unspecified_dims=["):
    return frozenset()
  inside = config[len("unspecified_dims=["):].split("]", 1)[0]
  try:
    return frozenset(int(x) for x in inside.split(",") if x.strip())
  except ValueError:
    return frozenset()


def _merged(c: HloSharding, annotated: HloSharding, open_dims, shape,
            n: int) -> Optional[HloSharding]:
  """`annotated` along the dimensions not in `open_dims`, `c` along those:
  each device takes its tile index of `annotated` on the first and of `c`
  on the others. None where no sharding does that (some tile would have
  no device, or tiles different numbers of them)."""
  if c.is_manual or c.is_tuple or not shape.is_array():
    return None
  rank = len(shape.dimensions)

  def index(s, device):
    if s.is_replicated:
      return (0,) * rank
    if not s.is_tiled or not s.uses_device(device):
      return None
    return s.tile_index_for_device(device)

  def tiles(s):
    return (1,) * rank if s.is_replicated else tuple(
        s.tile_assignment.dimensions[:rank])

  ta, tc = tiles(annotated), tiles(c)
  dims = tuple(tc[d] if d in open_dims else ta[d] for d in range(rank))
  groups: dict[tuple[int, ...], list[int]] = {}
  for device in range(n):
    a, b = index(annotated, device), index(c, device)
    if a is None or b is None:
      return None
    key = tuple(b[d] if d in open_dims else a[d] for d in range(rank))
    groups.setdefault(key, []).append(device)
  count = int(np.prod(dims)) if dims else 1
  sizes = {len(g) for g in groups.values()}
  if len(groups) != count or len(sizes) != 1:
    return None
  per_tile = sizes.pop()
  array = np.empty(dims + (per_tile,), dtype=np.int64)
  for key, devices in groups.items():
    array[key] = sorted(devices)
  if per_tile == 1:
    return HloSharding.tile(array.reshape(dims))
  return HloSharding.partial_tile(array)


@_backward(O.kCustomCall)
def _custom_call_bwd(ctx, instr, i, leaves):
  target = instr.custom_call_target
  if target == SHARDING_TARGET:
    return list(leaves)
  if target == SHARD_TO_FULL_TARGET:
    return [HloSharding.manual()]
  return None


# -- the pass ------------------------------------------------------------------


def _bool_at(flags: Sequence[bool], i: int) -> bool:
  flags = tuple(flags)
  if not flags:
    return False
  return bool(flags[i] if len(flags) > 1 and i < len(flags) else flags[0])


class ShardingPropagation(hlo_pass_interface.HloModulePass):
  """See the module docstring. `num_partitions` defaults to the module
  config's, or the largest device count of an annotation."""

  def __init__(self, num_partitions: Optional[int] = None):
    self.num_partitions = num_partitions

  @property
  def name(self) -> str:
    return "sharding-propagation"

  def run(self, module, execution_threads=frozenset()) -> bool:
    entry = module.entry_computation
    if entry is None:
      raise support.FailedPreconditionError(
          f"module {module.name} has no entry computation")
    comps = _partitioned_computations(entry)
    n = self._num_devices(module, comps)
    ctx = _Ctx(n)
    sh: dict[int, _Leaves] = {}
    fixed: dict[int, list[bool]] = {}
    instrs = [i for c in comps for i in c.instructions]
    # Sharding custom calls with unspecified dimensions: (annotation,
    # those dimensions); propagation may split them further.
    partial: dict[int, tuple[HloSharding, frozenset[int]]] = {}
    for instr in instrs:
      s = hlo_sharding.of(instr)
      # `{unknown}` leaves (an entry result without a sharding next to
      # others with one) are left to propagation, as unannotated ones.
      leaves = [None if x is not None and x.is_unknown else x
                for x in leaves_of(s, instr.shape)]
      sh[id(instr)] = leaves
      fixed[id(instr)] = [x is not None for x in leaves]
      open_dims = _unspecified_dims(instr)
      # Before SPMDFullToShardShape the annotation says how the value is
      # cut into the manual shards: it stays as it is.
      if (open_dims and s is not None and not s.is_tuple and
          not s.is_manual and not any(
              u.opcode == O.kCustomCall and
              u.custom_call_target == FULL_TO_SHARD_TARGET
              for u in instr.users)):
        partial[id(instr)] = (s, open_dims)
        fixed[id(instr)] = [False]
    config = module.config
    for p in entry.parameter_instructions:
      if not _bool_at(config.allow_spmd_sharding_propagation_to_parameters,
                      p.parameter_number):
        self._fix_replicated(p, sh, fixed)
    root = entry.root_instruction
    outputs = config.allow_spmd_sharding_propagation_to_output
    for k in range(num_leaves(root.shape)):
      if not _bool_at(outputs, k):
        self._fix_replicated(root, sh, fixed, k)
    # Instructions of shapes with nothing to shard.
    for instr in instrs:
      for k, leaf in enumerate(leaf_shapes(instr.shape)):
        if not leaf.is_array() or not leaf.dimensions:
          if sh[id(instr)][k] is None:
            sh[id(instr)][k] = HloSharding.replicate()
    # An unreduced constraint on a contraction or sum (its only user) is
    # the contraction's own sharding: the partitioner then keeps its
    # partial results, as XLA does, instead of reducing and re-splitting.
    for instr in instrs:
      if not (instr.opcode == O.kCustomCall and
              instr.custom_call_target == SHARDING_TARGET):
        continue
      s = sh[id(instr)][0]
      op = instr.operand(0)
      if (s is None or s.is_tuple or not _has_unreduced(s) or
          op.opcode not in (O.kDot, O.kReduce) or op.shape.is_tuple() or
          len(op.users) != 1 or fixed[id(op)][0]):
        continue
      sh[id(op)] = [s]
      fixed[id(op)] = [True]

    orders = {id(c): c.make_instruction_post_order() for c in comps}

    def offer(instr, cands: Optional[_Leaves]) -> bool:
      if not cands:
        return False
      cur = sh[id(instr)]
      fx = fixed[id(instr)]
      if len(cands) != len(cur):
        return False
      changed = False
      spec = partial.get(id(instr))
      for k, c in enumerate(cands):
        # A `{maximal device=D}` leaf (a host callback's) stays where it
        # is annotated: its operands and users are not pulled onto D.
        if c is None or fx[k] or c.is_maximal:
          continue
        if spec is not None:
          c = _merged(c, *spec, instr.shape, n)
          if c is None:
            continue
        if su.sharding_score(c) > su.sharding_score(cur[k]):
          cur[k] = c
          changed = True
      return changed

    def forward(instr) -> Optional[_Leaves]:
      rule = FORWARD.get(instr.opcode)
      if rule is None and _elementwise_like(instr):
        rule = _elementwise_forward
      if rule is None:
        # Inside a manual region (shard_map) everything is manual, the
        # collectives and other ops without a rule included.
        if any(x is not None and x.is_manual
               for o in instr.operands for x in sh[id(o)]):
          return [HloSharding.manual()] * num_leaves(instr.shape)
        return None
      try:
        return rule(ctx, instr, [sh[id(o)] for o in instr.operands])
      except support.XlaError:
        return None

    def backward(user, i) -> Optional[_Leaves]:
      rule = BACKWARD.get(user.opcode)
      if rule is None and _elementwise_like(user):
        rule = _elementwise_backward
      if rule is None and any(x is not None and x.is_manual
                              for x in sh[id(user)]):
        return [HloSharding.manual()] * num_leaves(user.operand(i).shape)
      if rule is None or all(s is None for s in sh[id(user)]):
        return None
      try:
        return rule(ctx, user, i, sh[id(user)])
      except support.XlaError:
        return None

    changed = True
    rounds = 0
    while changed:
      changed = False
      rounds += 1
      if rounds > 10_000:
        raise support.InternalError("sharding propagation did not converge")
      for comp in comps:
        order = orders[id(comp)]
        for instr in order:
          changed |= offer(instr, forward(instr))
        for instr in reversed(order):
          for user in instr.users:
            if user.parent is not comp:
              continue
            for i, op in enumerate(user.operands):
              if op is instr:
                changed |= offer(instr, backward(user, i))
      changed |= self._sync_calls(comps, sh, offer)

    # What the entry's callers hold (parameters and outputs left to
    # propagation) must split evenly: a framework cannot make or take
    # uneven shards (XLA replicates those too).
    for instr in [*entry.parameter_instructions, entry.root_instruction]:
      shapes = leaf_shapes(instr.shape)
      for k, leaf in enumerate(sh[id(instr)]):
        if (leaf is not None and not fixed[id(instr)][k] and
            not _divides_evenly(leaf, shapes[k])):
          sh[id(instr)][k] = HloSharding.replicate()

    changed_text = False
    for instr in instrs:
      leaves = [s if s is not None else HloSharding.replicate()
                for s in sh[id(instr)]]
      text = str(from_leaves(leaves, instr.shape))
      if instr.sharding is None or str(instr.sharding) != text:
        instr.sharding = hlo_attrs.RawText(text)
        changed_text = True
    return changed_text

  def _num_devices(self, module, comps) -> int:
    n = self.num_partitions or module.config.num_partitions or 1
    for c in comps:
      for instr in c.instructions:
        s = hlo_sharding.of(instr)
        if s is None:
          continue
        for leaf in (s.tuple_elements if s.is_tuple else (s,)):
          n = max(n, leaf.num_devices)
    return n

  @staticmethod
  def _fix_replicated(instr, sh, fixed, leaf: Optional[int] = None) -> None:
    """Fixes the leaves of `instr` (only leaf `leaf` if given) as they
    are, replicated where they have no sharding."""
    leaves = sh[id(instr)]
    for k, s in enumerate(leaves):
      if leaf is not None and k != leaf:
        continue
      if s is None:
        leaves[k] = HloSharding.replicate()
      fixed[id(instr)][k] = True

  @staticmethod
  def _sync_calls(comps, sh, offer) -> bool:
    """Makes while loops, calls and conditionals agree with the computations
    they run (see the module docstring)."""
    changed = False
    for comp in comps:
      for instr in comp.instructions:
        if instr.opcode == O.kWhile:
          body, cond = instr.while_body, instr.while_condition
          members = [instr, body.parameter_instruction(0),
                     cond.parameter_instruction(0), body.root_instruction]
          n = len(sh[id(instr)])
          merged = [_best([sh[id(m)][k] for m in members]) for k in range(n)]
          for m in members:
            changed |= offer(m, merged)
        elif instr.opcode == O.kCall:
          callee = instr.to_apply
          for i, op in enumerate(instr.operands):
            p = callee.parameter_instruction(i)
            changed |= offer(p, sh[id(op)])
            changed |= offer(op, sh[id(p)])
          changed |= offer(instr, sh[id(callee.root_instruction)])
          changed |= offer(callee.root_instruction, sh[id(instr)])
        elif instr.opcode == O.kConditional:
          for b, branch in enumerate(instr.branch_computations):
            op = instr.operand(b + 1)
            p = branch.parameter_instruction(0)
            changed |= offer(p, sh[id(op)])
            changed |= offer(branch.root_instruction, sh[id(instr)])
    return changed


def _divides_evenly(s: HloSharding, shape) -> bool:
  """Whether tiled sharding `s` cuts every dimension of array `shape` into
  equal tiles (true of any sharding that is not tiled)."""
  if not s.is_tiled or not shape.is_array():
    return True
  return all(size % tiles == 0 for size, tiles in zip(
      shape.dimensions, s.tile_assignment.dimensions))


def _partitioned_computations(entry) -> list:
  """The entry and the computations its while loops, calls and conditionals
  run, transitively (scalar reducers and comparators are left out)."""
  out = []
  seen = set()
  stack = [entry]
  while stack:
    comp = stack.pop()
    if id(comp) in seen:
      continue
    seen.add(id(comp))
    out.append(comp)
    for instr in comp.instructions:
      if instr.opcode == O.kWhile:
        stack += [instr.while_condition, instr.while_body]
      elif instr.opcode == O.kCall:
        stack.append(instr.to_apply)
      elif instr.opcode == O.kConditional:
        stack += list(instr.branch_computations)
  return out
