"""Rewrites "sort, then keep the first k of each row" into `topk`.

jax's `lax.top_k` reaches HLO (through CHLO legalization) as

    iota = s32[..., n] iota(), iota_dimension=last
    s = (T[..., n], s32[..., n]) sort(x, iota), dimensions={last},
        to_apply={compare(p0, p1), direction=GT, type=TOTALORDER}
    v = slice(get-tuple-element(s, 0)), [..., 0:k]
    i = slice(get-tuple-element(s, 1)), [..., 0:k]

which sorts every row in full to keep k of its elements. This pass replaces
the sort by `topk(x), k=K, largest=...` (K: the largest prefix any slice
keeps) and the slices by (slices of) its results; the topk kernel
(sort_emitter.emit_topk) selects the K best of a row in one pass. XLA's
CPU pipeline does the same (TopkRewriter).

A sort qualifies when
  * it sorts the last dimension of one operand `x`, or of `x` and an s32
    iota along that dimension (the indices);
  * its comparator is `compare(p0, p1)` (or `compare(p1, p0)`) of the first
    operand's pair, direction GT or LT, with the order topk uses: IEEE
    totalOrder for F16 / BF16 / F32 / F64, signed for signed integers and
    unsigned for unsigned ones;
  * every use of a result is a slice keeping a prefix [0, k) of the sorted
    dimension (stride 1; any slicing of the other dimensions), with k < n.
Ties: topk puts equal elements in index order, which is what a stable sort
does and one of the orders an unstable one may produce.
"""

from __future__ import annotations

from typing import Optional

from xla import primitive_util
from xla import xla_data
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.shape import Shape

O = HloOpcode
P = xla_data.PrimitiveType
Dir = xla_data.ComparisonDirection
CmpType = xla_data.ComparisonType

_FLOATS = (P.F16, P.BF16, P.F32, P.F64)


def _order_type(et) -> Optional[CmpType]:
  """The comparison type topk orders `et` by, or None (not supported)."""
  if et in _FLOATS:
    return CmpType.TOTALORDER
  if et == P.PRED or not primitive_util.is_integral(et):
    return None
  if primitive_util.is_signed_integral(et):
    return CmpType.SIGNED
  return CmpType.UNSIGNED


def comparator_largest(sort) -> Optional[bool]:
  """True (descending) / False (ascending) when the sort's comparator is a
  plain compare of its first operand's pair in topk's order; else None."""
  comp = sort.to_apply
  root = comp.root_instruction
  et = sort.operand(0).shape.element_type
  want = _order_type(et)
  if want is None or root.opcode != O.kCompare:
    return None
  a, b = root.operand(0), root.operand(1)
  if a.opcode != O.kParameter or b.opcode != O.kParameter:
    return None
  pair = (a.parameter_number, b.parameter_number)
  if pair not in ((0, 1), (1, 0)):
    return None
  ctype = root.comparison_type
  if ctype is None:
    # The default type of an integer compare is its signedness.
    if et in _FLOATS:
      return None
  elif ctype != want:
    return None
  direction = root.comparison_direction
  if direction not in (Dir.GT, Dir.LT):
    return None
  descending = direction == Dir.GT
  if pair == (1, 0):
    descending = not descending
  return descending


def _is_index_iota(instr, shape, dim) -> bool:
  return (instr.opcode == O.kIota and instr.iota_dimension == dim and
          instr.shape.element_type == P.S32 and
          tuple(instr.shape.dimensions) == tuple(shape.dimensions))


def _prefix_slices(value, dim: int, n: int) -> Optional[list]:
  """The slices using `value`, each keeping [0, k) of `dim`; None when some
  use is anything else."""
  slices = []
  for user in value.users:
    if user.opcode != O.kSlice:
      return None
    start, limit, stride = (user.slice_starts[dim], user.slice_limits[dim],
                            user.slice_strides[dim])
    if start != 0 or stride != 1 or limit >= n:
      return None
    slices.append(user)
  return slices


def _rewrite(comp, sort) -> bool:
  if sort.control_predecessors or sort.control_successors:
    return False
  x = sort.operand(0)
  shape = x.shape
  if not shape.is_array() or shape.rank == 0:
    return False
  dim = shape.rank - 1
  if tuple(sort.dimensions) != (dim,):
    return False
  if sort.operand_count == 2:
    if not _is_index_iota(sort.operand(1), shape, dim):
      return False
  elif sort.operand_count != 1:
    return False
  largest = comparator_largest(sort)
  if largest is None:
    return False
  n = shape.dimensions[dim]
  # (result index, slices of it)
  uses = []
  if sort.operand_count == 1:
    slices = _prefix_slices(sort, dim, n)
    if slices is None:
      return False
    uses.append((0, slices))
  else:
    if sort is comp.root_instruction:
      return False
    for user in sort.users:
      if user.opcode != O.kGetTupleElement:
        return False
      if user is comp.root_instruction:
        return False
      slices = _prefix_slices(user, dim, n)
      if slices is None:
        return False
      uses.append((user.tuple_index, slices))
  all_slices = [s for _, ss in uses for s in ss]
  if not all_slices:
    return False
  k = max(s.slice_limits[dim] for s in all_slices)
  out_dims = tuple(shape.dimensions[:dim]) + (k,)
  topk_shape = Shape.tuple_of([Shape.array(shape.element_type, out_dims),
                               Shape.array(P.S32, out_dims)])
  topk = comp.add_instruction(hi.create(O.kTopK, topk_shape, [x], k=k,
                                        largest=largest))
  topk.metadata = sort.metadata
  results = {}
  for index, slices in uses:
    if index not in results:
      results[index] = comp.add_instruction(
          hi.create_get_tuple_element(topk, index))
    part = results[index]
    for s in slices:
      config = s.attr("slice")
      full = all(c == (0, d, 1) for c, d in zip(config, out_dims))
      if full:
        comp.replace_instruction(s, part)
      else:
        comp.replace_instruction(s, comp.add_instruction(hi.create_slice(
            s.shape, part, [c[0] for c in config], [c[1] for c in config],
            [c[2] for c in config])))
  return True


class TopkRewriter(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "cpu-topk-rewriter"

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for instr in list(comp.instructions):
      if instr.opcode == O.kSort and instr.parent is comp:
        changed |= _rewrite(comp, instr)
    return changed
