"""Batches a loop's per-iteration dots of slices into one dot before it.

A scan (`lax.scan`, an RNN's input projection, ...) is a while loop whose
body takes row `i` of a loop-invariant array X and multiplies it with a
loop-invariant matrix W:

    x = reshape(dynamic-slice(X, i, 0, ..), sizes={1, rest of X})
    d = dot(x, W)

Row `i` of dot(X, W) (X's leading dimension kept as a free dimension) is
exactly d, so the body can read

    d = reshape(dynamic-slice(dot(X, W), .., i, ..))

whose dot has only loop-invariant operands: loop-invariant code motion
(which this pass runs on the loop it rewrote) computes it once before the
loop, as one large matrix product, instead of one small product per
iteration. Should code motion leave the product in the loop, the rewrite
is undone (N rows per iteration would be far worse). The index is
clamped the same way in both forms (the sliced dimension has the same size
N in X and in the product; the other dimensions are sliced whole), so the
rewrite holds for any index and any trip count. It is done only when it
cannot add work: the loop's static trip count is at least N (every row of
the product costs one iteration's dot). Up to floating-point summation
order inside the product (which BLAS blocks differently for a taller
matrix), results are unchanged.

X must be a loop-invariant element of the loop state (the body passes it
through) and W one as well, or a constant; the dot may have no batch
dimensions and X's sliced dimension must be its leading one.
"""

from __future__ import annotations

from typing import Optional

from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.transforms.simplifiers import while_loop_invariant_code_motion
from xla.hlo.transforms.simplifiers import while_loop_simplifier as wls
from xla.literal import Literal
from xla.shape import Shape

O = HloOpcode


def _invariant_elements(body) -> set[int]:
  root = body.root_instruction
  if root.opcode != O.kTuple:
    return set()
  return {k for k, op in enumerate(root.operands)
          if wls.gte_of_param(op, body) == k}


def _row_slice(x, body, invariant) -> Optional[tuple]:
  """(X, index) if `x` is row `index` of loop-invariant X with the unit
  leading dimension dropped: reshape/bitcast(dynamic-slice(X, index, ..))
  slicing X's first dimension to 1 and the others whole."""
  if x.opcode not in (O.kReshape, O.kBitcast) or not x.shape.is_array():
    return None
  ds = x.operand(0)
  if ds.opcode != O.kDynamicSlice or len(ds.users) != 1:
    return None
  big = ds.operand(0)
  k = wls.gte_of_param(big, body)
  if k is None or k not in invariant or not big.shape.is_array():
    return None
  dims = tuple(big.shape.dimensions)
  if len(dims) < 2:
    return None
  sizes = ds.dynamic_slice_sizes
  if sizes != (1,) + dims[1:]:
    return None
  if tuple(x.shape.dimensions) != dims[1:]:
    return None
  if x.shape.element_type != big.shape.element_type:
    return None
  return big, ds.operand(1)


def _loop_invariant_operand(w, body, invariant) -> bool:
  if w.opcode == O.kConstant:
    return True
  k = wls.gte_of_param(w, body)
  return k is not None and k in invariant


class SlicedDotHoisting(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "sliced-dot-hoisting"

  def _rewrite(self, body, dot, trip: int, invariant):
    """Rewrites `dot`'s uses to read a row of the full product; returns
    (product, replacement) or None."""
    dn = dot.dot_dimension_numbers
    if dn.lhs_batch_dimensions or dn.rhs_batch_dimensions:
      return False
    if dot.control_predecessors or dot.control_successors:
      return False
    for side in (0, 1):
      found = _row_slice(dot.operand(side), body, invariant)
      other = dot.operand(1 - side)
      if found is None or not _loop_invariant_operand(other, body, invariant):
        continue
      big, index = found
      n = big.shape.dimensions[0]
      if trip < n:
        continue
      lhs_c = list(dn.lhs_contracting_dimensions)
      rhs_c = list(dn.rhs_contracting_dimensions)
      if side == 0:
        lhs_c = [c + 1 for c in lhs_c]
        operands = [big, other]
        row_dim = 0  # X's rows lead the lhs free dimensions
      else:
        rhs_c = [c + 1 for c in rhs_c]
        operands = [other, big]
        row_dim = other.shape.rank - len(lhs_c)  # after the lhs free dims
      out_dims = list(dot.shape.dimensions)
      out_dims.insert(row_dim, n)
      et = dot.shape.element_type
      product = hi.HloInstruction(O.kDot, Shape.array(et, out_dims),
                                  operands, name=f"{dot.name}.rows")
      for key, value in dot.attrs.items():
        product.set_attr(key, value)
      product.set_attr("lhs_contracting_dims", tuple(lhs_c))
      product.set_attr("rhs_contracting_dims", tuple(rhs_c))
      product = body.add_instruction(product)
      zero = body.add_instruction(hi.create_constant(
          Literal.scalar(0, index.shape.element_type)))
      starts = [zero] * len(out_dims)
      starts[row_dim] = index
      sizes = list(out_dims)
      sizes[row_dim] = 1
      row = body.add_instruction(hi.create(
          O.kDynamicSlice, Shape.array(et, sizes), [product] + starts,
          dynamic_slice_sizes=tuple(sizes)))
      new = body.add_instruction(hi.create_reshape(
          Shape.array(et, dot.shape.dimensions), row))
      # The old dot stays (dead) until code motion has run; see _run_loop.
      dot.replace_all_uses_with(new)
      return product, new
    return None

  def _run_loop(self, comp, w, callers=None) -> bool:
    if not wls.calls_only_from(w, callers):
      return False
    trip = wls.static_trip_count(w)
    if not trip:
      return False
    body = w.while_body
    invariant = _invariant_elements(body)
    if not invariant:
      return False
    rewrites = []
    for dot in [i for i in body.instructions if i.opcode == O.kDot]:
      done = self._rewrite(body, dot, trip, invariant)
      if done is not None:
        rewrites.append((dot, done))
    if not rewrites:
      return False
    licm = while_loop_invariant_code_motion.WhileLoopInvariantCodeMotion()
    licm.run_on_loop(comp, w)
    hoisted = False
    for dot, (product, new) in rewrites:
      if product.parent is body:  # not hoisted: put the dot back
        new.replace_all_uses_with(dot)
        body.remove_instruction_and_unused_operands(new)
      else:
        hoisted = True
        if dot.parent is body and not dot.users:
          body.remove_instruction_and_unused_operands(dot)
    return hoisted

  def module_context(self, module) -> wls.CallerIndex:
    return wls.CallerIndex(module)

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for w in [i for i in comp.instructions if i.opcode == O.kWhile]:
      if self._run_loop(comp, w, context):
        changed = True
        if context is not None:
          context.invalidate()
    return changed
