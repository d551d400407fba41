"""Splits reductions with few outputs so they run on several threads.

A reduction kernel is parallel over its output elements; a full reduction
(one output) or one with a handful of outputs runs on one thread. When the
input is large, this pass rewrites

    r = reduce(x, init), dimensions=D       (D has >= 2 dimensions)
into
    p = reduce(x, identity), dimensions=D - {d0}     (d0: first of D)
    r = reduce(p, init), dimensions={position of d0 in p}

so the big first step has `x.dimensions[d0]` times more outputs (and
threads to share them); the second step folds the partial results. A
single reduced dimension is first split in two with a reshape of the input.
Only reducers that are one associative op with an identity
(reduction_emitter.vector_reducer) qualify, so the partial results start
from the identity and the user's init value is applied once. This
reassociates the reduction, which the vectorized row kernel does anyway
(XLA's GPU backend has the same rewrite: ReductionSplitter /
TreeReductionRewriter).
"""

from __future__ import annotations

import math

from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.literal import Literal
from xla.service.cpu import reduction_emitter
from xla.shape import Shape

O = HloOpcode

MAX_OUTPUTS = 64           # only reductions with at most this many outputs
MIN_INPUT = 1 << 20        # ... and at least this many input elements
MIN_SPLIT = 8              # the split dimension gives >= this many partials


def _split_size(n: int) -> int:
  for p in (256, 128, 64, 32, 16, 8):
    if n % p == 0 and n // p >= 1024:
      return p
  return 0


class ReductionSplitter(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "cpu-reduction-splitter"

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for instr in list(comp.instructions):
      if instr.opcode == O.kReduce and instr.parent is comp:
        changed |= self._split(comp, instr)
    return changed

  def _split(self, comp, r) -> bool:
    if r.operand_count != 2 or r.shape.is_tuple():
      return False
    vr = reduction_emitter.vector_reducer(r)
    if vr is None:
      return False
    x, init = r.operand(0), r.operand(1)
    dims = list(x.shape.dimensions)
    red = sorted(r.dimensions)
    n_out = math.prod(r.shape.dimensions)
    if n_out > MAX_OUTPUTS or math.prod(dims) < MIN_INPUT or not red:
      return False
    et = r.shape.element_type
    if len(red) == 1:
      d = red[0]
      p = _split_size(dims[d])
      if not p:
        return False
      new_dims = dims[:d] + [p, dims[d] // p] + dims[d + 1:]
      x = comp.add_instruction(hi.create_reshape(
          Shape.array(x.shape.element_type, new_dims), x))
      dims = new_dims
      red = [d, d + 1]
    d0 = red[0]
    if dims[d0] < MIN_SPLIT:
      return False
    rest = red[1:]
    kept1 = [k for k in range(len(dims)) if k not in rest]
    p_shape = Shape.array(et, [dims[k] for k in kept1])
    ident = comp.add_instruction(hi.create_constant(
        Literal.scalar(vr[1], et)))
    partial = comp.add_instruction(hi.create_reduce(
        p_shape, [x], [ident], rest, r.to_apply))
    final = comp.add_instruction(hi.create_reduce(
        r.shape, [partial], [init], [kept1.index(d0)], r.to_apply))
    comp.replace_instruction(r, final)
    return True
