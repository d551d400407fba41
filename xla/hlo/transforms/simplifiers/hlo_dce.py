"""Dead code elimination (xla/hlo/transforms/simplifiers/hlo_dce.h).

In every computation on the requested threads, removes instructions whose
value nobody uses: not the root, not a parameter, no users, and no side
effect. An instruction has a side effect if its opcode is in the opcode
table's SIDE_EFFECTING set (send/recv, infeed/outfeed, rng, collectives,
...), if it is a custom-call marked custom_call_has_side_effect=true, or if
it calls a computation containing such an instruction (a `call`, `while`,
`conditional` or `fusion` around an outfeed must stay).

A removed instruction's control dependencies are bridged: each of its
control predecessors becomes a predecessor of each of its control
successors, so the ordering they implied survives.

Then removes computations that the entry computation no longer reaches
(directly or through other computations), e.g. the body of a dead `call`.
Computations on other execution threads are left alone.
"""

from __future__ import annotations

from xla.hlo.ir import hlo_attrs
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi


class SideEffectCache:
  """Memoised "has a side effect, including in called computations".

  A computation's answer is kept for the cache's lifetime: use one cache
  while no side-effecting instruction is added to a computation already
  asked about (passes keep one per run)."""

  def __init__(self):
    # id -> (computation, answer); the computation is kept so that its id
    # cannot be reused by another one while cached.
    self._computations: dict[int, tuple[object, bool]] = {}

  def instruction(self, instr) -> bool:
    if instr.has_side_effect():
      return True
    return any(self.computation(c) for c in instr.called_computations())

  def computation(self, comp) -> bool:
    hit = self._computations.get(id(comp))
    if hit is None or hit[0] is not comp:
      self._computations[id(comp)] = (comp, False)  # breaks call cycles
      answer = any(self.instruction(i) for i in comp.instructions)
      self._computations[id(comp)] = (comp, answer)
      return answer
    return hit[1]


def has_side_effect_recursive(instr) -> bool:
  """True if `instr`, or any computation it calls, has a side effect."""
  return SideEffectCache().instruction(instr)


def _is_dead(instr, side_effects: SideEffectCache) -> bool:
  return (not instr.users and not instr.is_root() and
          instr.opcode != HloOpcode.kParameter and
          not side_effects.instruction(instr))


def _remove_bridging_control_deps(comp, instr) -> None:
  preds = list(instr.control_predecessors)
  succs = list(instr.control_successors)
  instr.drop_all_control_deps()
  for p in preds:
    for s in succs:
      p.add_control_dependency_to(s)
  comp.remove_instruction(instr)


class HloDCE(hpi.HloComputationPass):
  """See the module docstring."""

  skip_fusion_computations = False

  def __init__(self, remove_dead_computations: bool = True):
    self.remove_dead_computations = remove_dead_computations

  @property
  def name(self) -> str:
    return "dce"

  def run_on_computation(self, comp, side_effects=None) -> bool:
    """Removes the dead instructions of one computation."""
    side_effects = side_effects or SideEffectCache()
    changed = False
    # Users come before their operands in the reversed post order, so
    # operands left unused by a removal are seen (and removed) afterwards.
    for instr in reversed(comp.make_instruction_post_order()):
      if _is_dead(instr, side_effects):
        _remove_bridging_control_deps(comp, instr)
        changed = True
    return changed

  def module_context(self, module):
    return SideEffectCache()

  def finish_module(self, module, execution_threads, changed) -> bool:
    if self.remove_dead_computations:
      changed |= remove_dead_computations(module, execution_threads)
    return changed


def remove_dead_computations(module, execution_threads=frozenset()) -> bool:
  """Removes the computations the entry does not reach; True if any."""
  if module.entry_computation is None:
    return False
  live: set[int] = set()
  calling = hlo_attrs.CALLING_OPCODES
  stack = [module.entry_computation]
  while stack:
    comp = stack.pop()
    if id(comp) in live:
      continue
    live.add(id(comp))
    for instr in comp.iter_instructions():
      if instr.opcode in calling:
        stack.extend(instr.called_computations())
  dead = [c for c in module.computations
          if id(c) not in live and
          hpi.thread_included(c.execution_thread, execution_threads)]
  # Keep dead computations still called from kept ones (on other threads).
  while True:
    dead_ids = {id(c) for c in dead}
    called_by_kept = {id(callee) for c in module.computations
                      if id(c) not in dead_ids
                      for i in c.iter_instructions() if i.opcode in calling
                      for callee in i.called_computations()}
    kept_now = [c for c in dead if id(c) in called_by_kept]
    if not kept_now:
      break
    dead = [c for c in dead if id(c) not in called_by_kept]
  # Callers before callees: remove_computation refuses a called computation.
  order = {id(c): i for i, c in enumerate(module.make_computation_post_order())}
  for comp in sorted(dead, key=lambda c: -order[id(c)]):
    module.remove_computation(comp)
  return bool(dead)
