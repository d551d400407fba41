"""Folds transposes into their users
(xla/hlo/transforms/simplifiers/transpose_folding.h, plus the
transpose-of-broadcast rule of the algebraic simplifier).

  dot(transpose(x, p), y)  -> dot(x, y) with the lhs contracting and batch
                              dimensions renumbered through p (dimension d of
                              the transpose is dimension p[d] of x);
                              likewise for the rhs.
  transpose(broadcast(x))  -> broadcast(x) with the operand dimensions sent
                              where the transpose puts them.

A dot fold is only done when it keeps the dot's result as it was: the
dot's result lists the batch dimensions (in the order of the batch list),
then the lhs, then the rhs non-contracting dimensions in increasing order,
so the transpose must keep its non-contracting dimensions in the same
relative order. Dots with other precision settings keep them. The broadcast
fold needs the new broadcast dimensions to stay increasing (otherwise the
operand would need a transpose of its own). A transpose with other users
stays for them.
"""

from __future__ import annotations

from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi


def _inverse(perm):
  inv = [0] * len(perm)
  for i, p in enumerate(perm):
    inv[p] = i
  return inv


def _fold_operand(dot, side: str):
  """New (operand, contracting, batch) for `side` of the dot, or None."""
  index = 0 if side == "lhs" else 1
  t = dot.operand(index)
  if t.opcode != HloOpcode.kTranspose:
    return None
  perm = t.dimensions
  contracting = tuple(dot.attr(f"{side}_contracting_dims") or ())
  batch = tuple(dot.attr(f"{side}_batch_dims") or ())
  free = [d for d in range(t.shape.rank)
          if d not in contracting and d not in batch]
  mapped_free = [perm[d] for d in free]
  if mapped_free != sorted(mapped_free):
    return None
  return (t.operand(0), tuple(perm[d] for d in contracting),
          tuple(perm[d] for d in batch))


class TransposeFolding(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "transpose-folding"

  def _dot(self, comp, dot) -> bool:
    folds = {side: _fold_operand(dot, side) for side in ("lhs", "rhs")}
    if not any(folds.values()):
      return False
    operands = list(dot.operands)
    new = hi.HloInstruction(HloOpcode.kDot, dot.shape, operands,
                            dict(dot.attrs))
    for idx, side in enumerate(("lhs", "rhs")):
      if folds[side] is None:
        continue
      x, contracting, batch = folds[side]
      new.replace_operand_with(idx, x)
      new.set_attr(f"{side}_contracting_dims", contracting)
      new.set_attr(f"{side}_batch_dims", batch or None)
    new.metadata = dot.metadata
    comp.add_instruction(new)
    comp.replace_instruction(dot, new)
    return True

  def _transpose(self, comp, t) -> bool:
    b = t.operand(0)
    if b.opcode != HloOpcode.kBroadcast:
      return False
    inv = _inverse(t.dimensions)
    dims = tuple(inv[d] for d in b.dimensions)
    if list(dims) != sorted(dims):
      return False
    new = comp.add_instruction(
        hi.create_broadcast(t.shape, b.operand(0), dims))
    new.metadata = t.metadata
    comp.replace_instruction(t, new)
    return True

  skip_fusion_computations = False

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for instr in comp.make_instruction_post_order():
      if instr.parent is not comp:
        continue
      if instr.opcode == HloOpcode.kDot:
        changed |= self._dot(comp, instr)
      elif instr.opcode == HloOpcode.kTranspose:
        changed |= self._transpose(comp, instr)
    return changed
