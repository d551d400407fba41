"""Loop-invariant code motion for while loops
(xla/hlo/transforms/simplifiers/while_loop_invariant_code_motion.h),
simplified.

In a while body, element k of the loop state is invariant if the body root
(a `tuple`) passes `get-tuple-element(param, k)` through unchanged. An
instruction is invariant if all its operands are invariant and it

  * has no side effect (itself or in what it calls), is not a parameter,
    a `tuple`/`get-tuple-element` of the loop state, or an instruction with
    control dependencies, and calls no computation other than a reducer-like
    `to_apply` (no nested loops, calls, conditionals or fusions);
  * when `hoist_size_inflating_ops` is False: its result is no larger
    (bytes) than `size_inflation_ratio` times the operands it reads from
    the loop state together (a broadcast that blows a scalar up to a large
    array is left in the body, as XLA does when hoisting would raise memory
    use); constants in the body count as free.

What is hoisted is the boundary of the invariant set: invariant values
that an instruction staying in the body (or the body root) reads. A boundary
value is hoisted, together with the invariant instructions it is computed
from, if that computation holds something worth hoisting: an op other than
the cheap rearranging ones (constant, broadcast, iota, reshape, bitcast,
transpose, slice, reverse, copy), or a constant when `hoist_constants`.
A rejected boundary value stays in the body and its operands become the
boundary. Each hoisted value is computed before the loop, appended to the
loop state as a pass-through element, and its uses in the body read that
element.

The loop's users are rewired to the larger loop (get-tuple-element users
keep their index; other users see a tuple of the original elements).
"""

from __future__ import annotations

from xla import shape_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.transforms.simplifiers import hlo_dce
from xla.hlo.transforms.simplifiers import while_loop_simplifier as wls
from xla.shape import Shape

_NOT_WORTH_ALONE = frozenset({
    HloOpcode.kConstant, HloOpcode.kBroadcast, HloOpcode.kIota,
    HloOpcode.kReshape, HloOpcode.kBitcast, HloOpcode.kTranspose,
    HloOpcode.kSlice, HloOpcode.kReverse, HloOpcode.kCopy,
    HloOpcode.kTuple, HloOpcode.kGetTupleElement,
})

# Opcodes whose called computation is a pure per-element function.
_PURE_CALLERS = frozenset({
    HloOpcode.kReduce, HloOpcode.kMap, HloOpcode.kReduceWindow,
    HloOpcode.kSort, HloOpcode.kScatter, HloOpcode.kSelectAndScatter,
    HloOpcode.kAllReduce,
})


class WhileLoopInvariantCodeMotion(hpi.HloComputationPass):
  """See the module docstring."""

  def __init__(self, hoist_constants: bool = False,
               hoist_size_inflating_ops: bool = True,
               size_inflation_ratio: float = 1.0):
    self.hoist_constants = hoist_constants
    self.hoist_size_inflating_ops = hoist_size_inflating_ops
    self.size_inflation_ratio = size_inflation_ratio

  @property
  def name(self) -> str:
    return "while-loop-invariant-code-motion"

  def _invariant_elements(self, body) -> set[int]:
    root = body.root_instruction
    out = set()
    for k, op in enumerate(root.operands):
      if wls.gte_of_param(op, body) == k:
        out.add(k)
    return out

  def _hoistable(self, instr, side) -> bool:
    if instr.opcode in (HloOpcode.kParameter, HloOpcode.kWhile,
                        HloOpcode.kCall, HloOpcode.kConditional,
                        HloOpcode.kFusion, HloOpcode.kCustomCall):
      return False
    if instr.control_predecessors or instr.control_successors:
      return False
    if instr.called_computations() and instr.opcode not in _PURE_CALLERS:
      return False
    if instr.opcode == HloOpcode.kAllReduce:
      return False
    return not side.instruction(instr)

  def _inflates(self, instr, invariant_gtes) -> bool:
    if self.hoist_size_inflating_ops:
      return False
    # Bytes read from the loop state, transitively through invariant ops.
    seen, inputs, stack = set(), 0, list(instr.operands)
    while stack:
      op = stack.pop()
      if id(op) in seen:
        continue
      seen.add(id(op))
      if id(op) in invariant_gtes:
        inputs += shape_util.byte_size_of(op.shape)
      else:
        stack.extend(op.operands)
    out = shape_util.byte_size_of(instr.shape)
    return out > self.size_inflation_ratio * inputs

  def _worth(self, instr, gtes) -> bool:
    """True if `instr`'s invariant closure holds an op worth hoisting."""
    seen, stack = set(), [instr]
    while stack:
      i = stack.pop()
      if id(i) in seen or id(i) in gtes:
        continue
      seen.add(id(i))
      if i.opcode == HloOpcode.kConstant:
        if self.hoist_constants:
          return True
      elif i.opcode not in _NOT_WORTH_ALONE:
        return True
      stack.extend(i.operands)
    return False

  def _select(self, body, root, invariant, gtes) -> list:
    """The boundary of the invariant set (invariant values some remaining
    body instruction reads) that is worth hoisting; a rejected boundary
    value stays in the body and its operands are reconsidered."""
    while True:
      boundary = [i for i in body.make_instruction_post_order()
                  if id(i) in invariant and id(i) not in gtes and
                  any(id(u) not in invariant or u is root for u in i.users)]
      rejected = [i for i in boundary
                  if not self._worth(i, gtes) or self._inflates(i, gtes)]
      if not rejected:
        return boundary
      for i in rejected:
        del invariant[id(i)]

  def run_on_loop(self, comp, w, callers=None) -> bool:
    body = w.while_body
    cond = w.while_condition
    root = body.root_instruction
    if (root.opcode != HloOpcode.kTuple or not wls.calls_only_from(w, callers) or
        w.control_predecessors or w.control_successors):
      return False
    for c in (cond, body):
      for p in c.parameter_instructions:
        if any(u.opcode != HloOpcode.kGetTupleElement for u in p.users):
          return False
    inv_elems = self._invariant_elements(body)
    side = hlo_dce.SideEffectCache()
    invariant: dict[int, object] = {}
    gtes: dict[int, object] = {}
    for instr in body.make_instruction_post_order():
      k = wls.gte_of_param(instr, body)
      if k is not None:
        if k in inv_elems:
          gtes[id(instr)] = instr
          invariant[id(instr)] = instr
        continue
      if instr is root or not self._hoistable(instr, side):
        continue
      if all(id(o) in invariant for o in instr.operands):
        invariant[id(instr)] = instr
    to_hoist = self._select(body, root, invariant, gtes)
    if not to_hoist:
      return False
    # Clone the invariant closure of to_hoist before the loop.
    init = w.operand(0)
    outside: dict[int, object] = {}

    def materialize(instr):
      if id(instr) in outside:
        return outside[id(instr)]
      k = wls.gte_of_param(instr, body)
      if k is not None:
        new = (init.operand(k) if init.opcode == HloOpcode.kTuple else
               comp.add_instruction(hi.create_get_tuple_element(init, k)))
      else:
        ops = [materialize(o) for o in instr.operands]
        new = comp.add_instruction(wls.clone_instruction(instr, ops))
      outside[id(instr)] = new
      return new

    hoisted = [materialize(i) for i in to_hoist]
    n = len(w.shape.tuple_shapes)
    new_shape = Shape.tuple_of(list(w.shape.tuple_shapes) +
                               [h.shape for h in hoisted])
    # Rewrite the body: parameters wider, hoisted values read from state.
    for c in (cond, body):
      for p in c.parameter_instructions:
        p.shape = new_shape
    param = body.parameter_instruction(0)
    new_elems = []
    for j, instr in enumerate(to_hoist):
      g = body.add_instruction(hi.create_get_tuple_element(param, n + j))
      new_elems.append(g)
      instr.replace_all_uses_with(g)
    new_root = body.add_instruction(
        hi.create_tuple(list(root.operands) + new_elems))
    body.set_root_instruction(new_root)
    body.remove_instruction(root)
    hlo_dce.HloDCE(remove_dead_computations=False).run_on_computation(body)
    elems = [(init.operand(k) if init.opcode == HloOpcode.kTuple else
              comp.add_instruction(hi.create_get_tuple_element(init, k)))
             for k in range(n)]
    new_init = comp.add_instruction(hi.create_tuple(elems + hoisted))
    new_w = comp.add_instruction(
        hi.create_while(new_shape, cond, body, new_init))
    new_w.metadata = w.metadata
    users = list(w.users)
    others = [u for u in users if u.opcode != HloOpcode.kGetTupleElement]
    for u in users:
      if u.opcode == HloOpcode.kGetTupleElement:
        u.replace_operand_with(0, new_w)
    if others or w.is_root():
      narrowed = comp.add_instruction(hi.create_tuple(
          [comp.add_instruction(hi.create_get_tuple_element(new_w, k))
           for k in range(n)]))
      w.replace_all_uses_with(narrowed)
    comp.remove_instruction_and_unused_operands(w)
    return True

  skip_fusion_computations = False

  def module_context(self, module) -> wls.CallerIndex:
    return wls.CallerIndex(module)

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for w in [i for i in comp.instructions if i.opcode == HloOpcode.kWhile]:
      if self.run_on_loop(comp, w, context):
        changed = True
        if context is not None:
          context.invalidate()
    return changed
