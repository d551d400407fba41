"""While loop simplification
(xla/hlo/transforms/simplifiers/while_loop_simplifier.h), a subset.

For every `while` in the module (on the requested threads):

  * trip count 0: the loop is replaced by its init value. Needs a condition
    without side effects (it is no longer evaluated).
  * trip count 1: the body is inlined in place of the loop (its parameter
    becomes the init value). Needs a condition without side effects (it is
    no longer evaluated) and no fusion in the body.
  * dead carry elements: a tuple element of the loop state that the
    condition does not read, that nobody outside reads (every user of the
    loop is a get-tuple-element) and that, in the body, only feeds itself
    (or other dead elements) is dropped: the loop, its condition, body and
    init get a smaller tuple. Needs the body root to be a `tuple`, the
    parameters of body and condition to be used only by
    get-tuple-element, and elements read by a side-effecting body
    instruction stay.

The static trip count comes from the common counted-loop pattern:
the condition root is `compare(gte(param, k), constant N)` (or the operands
swapped) on integers, the init is a `tuple` whose element k is a constant
i0, and body root element k is `add(gte(param, k), constant s)` (either
order). LT/LE with s > 0, GT/GE with s < 0 and NE with the end reachable
exactly are understood; the count is rejected when the last value the
counter takes would overflow its type. `static_trip_count(while)` returns
the count or None.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from xla import primitive_util
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir import hlo_pattern as m
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.transforms.simplifiers import hlo_dce
from xla.shape import Shape
from xla.xla_data import ComparisonDirection


# -- helpers shared with the loop-invariant code motion pass -------------------


def clone_instruction(old, new_operands, name: Optional[str] = None):
  """An unattached copy of `old` (attributes and common fields) with
  `new_operands`. Called computations are shared, not copied."""
  new = hi.HloInstruction(old.opcode, old.shape, list(new_operands),
                          name=name or old.name)
  for key, value in old.attrs.items():
    new.set_attr(key, value)
  new.literal = old.literal
  new.parameter_number = old.parameter_number
  new.metadata = old.metadata
  new.frontend_attributes = dict(old.frontend_attributes)
  new.sharding = old.sharding
  new.backend_config = old.backend_config
  return new


def _is_scalar_int(instr) -> bool:
  return (instr.literal is not None and instr.shape.is_array() and
          instr.shape.rank == 0 and
          primitive_util.is_integral(instr.shape.element_type))


def _int_value(constant) -> int:
  return int(constant.literal.array.reshape(-1)[0])


def _scalar_int_constant(instr) -> Optional[int]:
  if instr.opcode != HloOpcode.kConstant or not _is_scalar_int(instr):
    return None
  return _int_value(instr)


def gte_of_param(instr, comp) -> Optional[int]:
  """k if `instr` is get-tuple-element(parameter 0 of comp, k)."""
  if (instr.opcode == HloOpcode.kGetTupleElement and
      instr.operand(0).opcode == HloOpcode.kParameter and
      instr.operand(0).parent is comp):
    return instr.tuple_index
  return None


_SWAPPED = {
    ComparisonDirection.LT: ComparisonDirection.GT,
    ComparisonDirection.LE: ComparisonDirection.GE,
    ComparisonDirection.GT: ComparisonDirection.LT,
    ComparisonDirection.GE: ComparisonDirection.LE,
    ComparisonDirection.EQ: ComparisonDirection.EQ,
    ComparisonDirection.NE: ComparisonDirection.NE,
}


def _count(i0: int, n: int, step: int, direction) -> Optional[int]:
  """Iterations of `for (i = i0; i <dir> n; i += step)`, or None."""
  D = ComparisonDirection
  if direction == D.LT:
    if i0 >= n:
      return 0
    return math.ceil((n - i0) / step) if step > 0 else None
  if direction == D.LE:
    if i0 > n:
      return 0
    return (n - i0) // step + 1 if step > 0 else None
  if direction == D.GT:
    if i0 <= n:
      return 0
    return math.ceil((i0 - n) / -step) if step < 0 else None
  if direction == D.GE:
    if i0 < n:
      return 0
    return (i0 - n) // -step + 1 if step < 0 else None
  if direction == D.NE:
    if i0 == n:
      return 0
    if step != 0 and (n - i0) % step == 0 and (n - i0) // step > 0:
      return (n - i0) // step
    return None
  return None


# The counted-loop pattern (see the module docstring). `i` is element k of
# the loop state as the condition or the body reads it.
def _int_constant(name: str) -> m.Pattern:
  return m.op(HloOpcode.kConstant, name=name, where=_is_scalar_int)


_COUNTER = m.op(HloOpcode.kGetTupleElement, m.op(HloOpcode.kParameter),
                name="i")
# compare(i, limit) as written, and compare(limit, i), whose direction seen
# from i is swapped.
_CONDITION = m.op(HloOpcode.kCompare, _COUNTER, _int_constant("limit"))
_CONDITION_SWAPPED = m.op(HloOpcode.kCompare, _int_constant("limit"),
                          _COUNTER)
# add(i, step) in either order.
_UPDATE = m.any_of(
    m.op(HloOpcode.kAdd, _COUNTER, _int_constant("step")),
    m.op(HloOpcode.kAdd, _int_constant("step"), _COUNTER))


def static_trip_count(while_instr) -> Optional[int]:
  """The loop's trip count for the counted-loop pattern, else None."""
  cond, body = while_instr.while_condition, while_instr.while_body
  init = while_instr.operand(0)
  root = cond.root_instruction
  if init.opcode != HloOpcode.kTuple:
    return None
  c, swapped = _CONDITION.match(root), False
  if c is None:
    c, swapped = _CONDITION_SWAPPED.match(root), True
  if c is None:
    return None
  direction = root.comparison_direction
  if swapped:
    direction = _SWAPPED.get(direction)
  if direction is None:
    return None
  k, limit = c["i"].tuple_index, _int_value(c["limit"])
  i0 = _scalar_int_constant(init.operand(k))
  body_root = body.root_instruction
  if i0 is None or body_root.opcode != HloOpcode.kTuple:
    return None
  u = _UPDATE.match(body_root.operand(k))
  if u is None or u["i"].tuple_index != k:
    return None
  step = _int_value(u["step"])
  count = _count(i0, limit, step, direction)
  if count is None:
    return None
  et = root.operand(0).shape.element_type
  ii = np.iinfo(primitive_util.numpy_dtype(et))
  lo, hi_ = int(ii.min), int(ii.max)
  last = i0 + count * step  # the value that ends the loop
  if not lo <= last <= hi_:
    return None
  return count


# -- rewrites ------------------------------------------------------------------


def _has_side_effect(comp) -> bool:
  return hlo_dce.SideEffectCache().computation(comp)


def inline_computation(caller_comp, comp, args):
  """Clones `comp` into `caller_comp` with parameter i := args[i]; returns
  the clone of its root."""
  mapping = {}
  for instr in comp.instructions_in_stable_order():
    if instr.opcode == HloOpcode.kParameter:
      mapping[id(instr)] = args[instr.parameter_number]
      continue
    new = clone_instruction(instr, [mapping[id(o)] for o in instr.operands],
                            name=instr.name)
    caller_comp.add_instruction(new)
    for pred in instr.control_predecessors:
      if id(pred) in mapping and pred.opcode != HloOpcode.kParameter:
        mapping[id(pred)].add_control_dependency_to(new)
    mapping[id(instr)] = new
  return mapping[id(comp.root_instruction)]


class CallerIndex:
  """How many instructions of a module call each computation, for
  `calls_only_from`: built on first use and again after `invalidate()`
  (a pass calls it once it changed the module). A pass makes one per run
  (its module context), so asking about every loop is not a scan of the
  module each."""

  def __init__(self, module):
    self._module = module
    self._counts: Optional[dict[int, int]] = None

  def invalidate(self) -> None:
    self._counts = None

  def only_from(self, instr) -> bool:
    if self._counts is None:
      counts: dict[int, int] = {}
      calls = hlo_attrs.calls_computations
      for other in self._module.instructions():
        if calls(other.opcode):
          for c in {id(c) for c in other.called_computations()}:
            counts[c] = counts.get(c, 0) + 1
      self._counts = counts
    return all(self._counts.get(c, 0) <= 1
               for c in {id(c) for c in instr.called_computations()})


def calls_only_from(instr, callers: Optional[CallerIndex] = None) -> bool:
  """True if no other instruction of the module calls `instr`'s
  computations (so they may be edited in place). `callers`: the pass's
  up-to-date index, if it keeps one."""
  if callers is not None:
    return callers.only_from(instr)
  mine = {id(c) for c in instr.called_computations()}
  module = instr.parent.parent
  calls = hlo_attrs.calls_computations
  for other in module.instructions():
    if other is not instr and calls(other.opcode) and any(
        id(c) in mine for c in other.called_computations()):
      return False
  return True


def _try_remove_loop(comp, w) -> bool:
  count = static_trip_count(w)
  if count not in (0, 1) or _has_side_effect(w.while_condition):
    return False
  if w.control_predecessors or w.control_successors:
    return False
  if count == 0:
    comp.replace_instruction(w, w.operand(0))
    return True
  body = w.while_body
  if any(i.opcode == HloOpcode.kFusion for i in body.instructions):
    return False
  new_root = inline_computation(comp, body, [w.operand(0)])
  comp.replace_instruction(w, new_root)
  return True


def _live_elements(w) -> Optional[set[int]]:
  """Indices of the carry that must stay, or None if unanalysable."""
  cond, body = w.while_condition, w.while_body
  n = len(w.shape.tuple_shapes)
  body_root = body.root_instruction
  if body_root.opcode != HloOpcode.kTuple:
    return None
  for c in (cond, body):
    for p in c.parameter_instructions:
      if any(u.opcode != HloOpcode.kGetTupleElement for u in p.users):
        return None
      if p is c.root_instruction:
        return None
  live: set[int] = set()
  for user in w.users:
    if user.opcode != HloOpcode.kGetTupleElement:
      return None
    live.add(user.tuple_index)
  if w.is_root():
    return None
  for p in cond.parameter_instructions:
    live.update(u.tuple_index for u in p.users)

  def reads(roots) -> set[int]:
    seen, out, stack = set(), set(), list(roots)
    while stack:
      i = stack.pop()
      if id(i) in seen:
        continue
      seen.add(id(i))
      k = gte_of_param(i, body)
      if k is not None:
        out.add(k)
        continue
      stack.extend(i.operands)
      stack.extend(i.control_predecessors)
    return out

  side = hlo_dce.SideEffectCache()
  effectful = [i for i in body.instructions if side.instruction(i)]
  live |= reads(effectful)
  frontier = set(live)
  while frontier:
    new = reads([body_root.operand(k) for k in frontier]) - live
    live |= new
    frontier = new
  return {k for k in live if k < n}


def _try_remove_dead_elements(comp, w,
                              callers: Optional[CallerIndex] = None) -> bool:
  if not calls_only_from(w, callers):
    return False
  live = _live_elements(w)
  n = len(w.shape.tuple_shapes)
  if live is None or len(live) == n:
    return False
  keep = sorted(live)
  new_index = {old: new for new, old in enumerate(keep)}
  new_shape = Shape.tuple_of(w.shape.tuple_shapes[k] for k in keep)
  cond, body = w.while_condition, w.while_body
  # Body root: a smaller tuple; parameters of body and condition re-typed
  # and their get-tuple-elements renumbered (dead ones lose their users).
  body_root = body.root_instruction
  new_root = body.add_instruction(
      hi.create_tuple([body_root.operand(k) for k in keep]))
  body.set_root_instruction(new_root)
  body.remove_instruction_and_unused_operands(body_root)
  for c in (cond, body):
    for p in c.parameter_instructions:
      for g in list(p.users):
        if g.tuple_index in new_index:
          g.set_attr("index", new_index[g.tuple_index])
        else:
          # Dead: its users are dead too (checked by the liveness).
          _remove_with_users(c, g)
      p.shape = new_shape
  hlo_dce.HloDCE(remove_dead_computations=False).run_on_computation(body)
  init = w.operand(0)
  elems = [comp.add_instruction(hi.create_get_tuple_element(init, k))
           if init.opcode != HloOpcode.kTuple else init.operand(k)
           for k in keep]
  new_init = comp.add_instruction(hi.create_tuple(elems))
  new_w = comp.add_instruction(
      hi.create_while(new_shape, cond, body, new_init))
  new_w.metadata = w.metadata
  new_w.frontend_attributes = dict(w.frontend_attributes)
  for g in list(w.users):
    g.set_attr("index", new_index[g.tuple_index])
    g.replace_operand_with(0, new_w)
  comp.remove_instruction_and_unused_operands(w)
  return True


def _remove_with_users(comp, instr) -> None:
  for user in list(instr.users):
    _remove_with_users(comp, user)
  if instr.parent is comp and not instr.users:
    if instr is comp.root_instruction:
      raise AssertionError(f"dead carry element reaches root {instr.name}")
    instr.drop_all_control_deps()
    comp.remove_instruction(instr)


class WhileLoopSimplifier(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "simplify-while-loops"

  skip_fusion_computations = False

  def module_context(self, module) -> CallerIndex:
    return CallerIndex(module)

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for w in [i for i in comp.instructions if i.opcode == HloOpcode.kWhile]:
      if w.parent is not comp:
        continue
      if (_try_remove_loop(comp, w) or
          _try_remove_dead_elements(comp, w, context)):
        changed = True
        if context is not None:
          context.invalidate()
    return changed

  def finish_module(self, module, execution_threads, changed) -> bool:
    if changed:
      hlo_dce.remove_dead_computations(module, execution_threads)
    return changed
