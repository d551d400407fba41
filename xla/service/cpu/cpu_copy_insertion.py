"""Control-flow preparation for the CPU runtime: call inlining, call-graph
flattening, copy insertion, and the donation analysis.

The dataflow analysis makes a while loop's carry one buffer per index
(shared by the condition and body parameters, the body root and the loop
output) and a conditional's output one buffer per index shared by every
branch root. That only works when writing a new value into the shared
buffer never destroys a value still needed; XLA guarantees it with copy
insertion, and so do we (modelled on xla/service/copy_insertion.h, with a
simpler, local rule):

* while body, per carry index i, with root value v:
    - v is the parameter's own element i: nothing to do;
    - v is produced by a real instruction D of the body (not a parameter
      element, not a constant, not at two root indices): D may write the
      carry in place when every other reader of parameter element i can run
      before it (a control edge is added; refused if D reaches that reader)
      and D itself reads element i only where an in-place write is safe
      (dynamic-update-slice operand 0, or an elementwise loop over the same
      shape); otherwise the root takes `copy(v)`, ordered after all readers
      of element i;
    - v is another parameter element: `copy(copy(v))` (the inner copy is a
      temporary, so swaps cannot deadlock), v a constant: `copy(v)`.
* conditional branches: a root element that is a branch parameter value, a
  constant, or repeated within the root is copied, so each branch defines
  its own output values.
* while init: an element repeated in the init tuple is copied (buffer
  assignment may move each init element into the carry in place).

`inline_calls` replaces kCall by the callee body (as XLA's CallInliner);
`flatten_call_graph` clones while / conditional computations that are
called from several sites (XLA's FlattenCallGraph), since the dataflow
analysis needs one caller per computation.
"""

from __future__ import annotations

from xla import shape_util
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir import hlo_module as hm
from xla.hlo.ir.hlo_attrs import FusionKind
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.transforms.simplifiers import while_loop_simplifier as wls
from xla.service import buffer_assignment as ba_lib
from xla.service import hlo_dataflow_analysis as dfa
from xla.service.multi_output_fusion import reaches

O = HloOpcode

_FORWARDING = frozenset({O.kBitcast, O.kAddDependency, O.kDomain,
                         O.kOptimizationBarrier})


# -- call graph -----------------------------------------------------------------


def _control_flow_order(module):
  """Entry plus computations reached through while / conditional / call."""
  order, seen, stack = [], set(), [module.entry_computation]
  while stack:
    comp = stack.pop()
    if id(comp) in seen:
      continue
    seen.add(id(comp))
    order.append(comp)
    for instr in comp.instructions:
      stack.extend(dfa.control_flow_callees(instr))
  return order


def inline_calls(module) -> bool:
  """Inlines every kCall of the control-flow computations."""
  changed = False
  progress = True
  while progress:
    progress = False
    for comp in _control_flow_order(module):
      for instr in list(comp.instructions):
        if instr.opcode != O.kCall or instr.parent is not comp:
          continue
        if instr.control_predecessors or instr.control_successors:
          continue
        new_root = wls.inline_computation(comp, instr.to_apply,
                                          list(instr.operands))
        comp.replace_instruction(instr, new_root)
        changed = progress = True
  if changed:
    _remove_dead_computations(module)
  return changed


def unfuse(module) -> bool:
  """Inlines fusions already present in the input (e.g. HLO printed after
  XLA's own pipeline) back into their computations, so the CPU pipeline
  fuses what its emitters support."""
  changed = False
  for comp in _control_flow_order(module):
    for instr in list(comp.instructions):
      if instr.opcode != O.kFusion or instr.parent is not comp:
        continue
      if instr.control_predecessors or instr.control_successors:
        continue
      new_root = wls.inline_computation(comp, instr.fused_computation,
                                        list(instr.operands))
      comp.replace_instruction(instr, new_root)
      changed = True
  if changed:
    _remove_dead_computations(module)
  return changed


def convert_async(module) -> bool:
  """Rewrites async-start -> async-update* -> async-done chains into a
  call of the wrapped computation (then inlined): the CPU runtime runs
  everything synchronously."""
  changed = False
  for comp in _control_flow_order(module):
    for done in list(comp.instructions):
      if done.opcode != O.kAsyncDone or done.parent is not comp:
        continue
      chain = []
      x = done.operand(0)
      while x.opcode == O.kAsyncUpdate:
        chain.append(x)
        x = x.operand(0)
      if x.opcode != O.kAsyncStart:
        continue
      links = [x] + chain[::-1]
      if any(len(l.users) != 1 for l in links):
        continue
      call = comp.add_instruction(hi.create_call(
          done.shape, list(x.operands), x.attr("calls")))
      comp.replace_instruction(done, call)
      changed = True
  if changed:
    _remove_dead_computations(module)
  return changed


def _remove_dead_computations(module) -> None:
  while True:
    called = {id(c) for i in module.instructions()
              for c in i.called_computations()}
    dead = [c for c in module.computations
            if c is not module.entry_computation and id(c) not in called]
    if not dead:
      return
    for c in dead:
      module.remove_computation(c)


def _clone_control_flow(module, comp):
  """A copy of `comp` (added to `module`) whose control-flow callees are
  cloned too; fusion bodies and appliers stay shared."""
  comp_map = {}
  for c in module.computations:
    comp_map[id(c)] = c
  for instr in comp.instructions:
    for callee in dfa.control_flow_callees(instr):
      comp_map[id(callee)] = _clone_control_flow(module, callee)
  clone = hm.clone_computation(comp, comp_map)
  module.add_embedded_computation(clone)
  return clone


def flatten_call_graph(module) -> bool:
  """Gives every while / conditional computation exactly one call site."""
  changed = False
  seen: set[int] = set()
  for comp in _control_flow_order(module):
    for instr in comp.instructions:
      if instr.opcode == O.kWhile:
        for attr in ("condition", "body"):
          callee = instr.attr(attr)
          if id(callee) in seen:
            instr.set_attr(attr, _clone_control_flow(module, callee))
            changed = True
          seen.add(id(instr.attr(attr)))
      elif instr.opcode == O.kConditional:
        branches = list(instr.branch_computations)
        new = []
        for callee in branches:
          if id(callee) in seen:
            callee = _clone_control_flow(module, callee)
            changed = True
          seen.add(id(callee))
          new.append(callee)
        if any(a is not b for a, b in zip(new, branches)):
          if instr.attrs.get("branch_computations") is not None:
            instr.set_attr("branch_computations", tuple(new))
          else:
            instr.set_attr("true_computation", new[0])
            instr.set_attr("false_computation", new[1])
      elif instr.opcode == O.kCall:
        callee = instr.to_apply
        if id(callee) in seen:
          instr.set_attr("to_apply", _clone_control_flow(module, callee))
          changed = True
        seen.add(id(instr.to_apply))
  return changed


# -- value sources ----------------------------------------------------------------


def source(instr, index=()) -> tuple:
  """(defining instruction, index) of the value at a position, following
  tuple / get-tuple-element / bitcast forwarding."""
  index = tuple(index)
  while True:
    op = instr.opcode
    if op == O.kGetTupleElement:
      index = (instr.tuple_index,) + index
      instr = instr.operand(0)
    elif op == O.kTuple and index:
      instr, index = instr.operand(index[0]), index[1:]
    elif op in _FORWARDING:
      instr = instr.operand(0)
    else:
      return instr, index


def _key(src) -> tuple:
  return (id(src[0]), src[1])


def readers(comp, value_key) -> list:
  """Non-forwarding instructions of `comp` with an operand position holding
  the value `value_key`, with the operand numbers where they read it."""
  out = []
  for instr in comp.instructions:
    if instr.opcode in (O.kTuple, O.kGetTupleElement) or (
        instr.opcode in _FORWARDING):
      continue
    ks = []
    for k, o in enumerate(instr.operands):
      for idx, _ in shape_util.leaf_shapes(o.shape):
        if _key(source(o, idx)) == value_key:
          ks.append(k)
    if ks:
      out.append((instr, sorted(set(ks))))
  return out


# -- in-place safety -----------------------------------------------------------------


def _elementwise_paths(param, dims) -> bool:
  stack = [param]
  seen = set()
  while stack:
    x = stack.pop()
    if id(x) in seen:
      continue
    seen.add(id(x))
    for u in x.users:
      if u.opcode == O.kTuple and u.is_root():
        continue
      if not (u.is_elementwise() or u.opcode == O.kCopy):
        return False
      if tuple(u.shape.dimensions) != dims:
        return False
      if any(o.shape.dimensions and tuple(o.shape.dimensions) != dims
             for o in u.operands):
        return False
      stack.append(u)
  return True


def writes_in_place_safely(instr, operand_numbers) -> bool:
  """Whether `instr` may write its output into the storage of the operands
  `operand_numbers` (read element i before writing element i only)."""
  op = instr.opcode
  ks = set(operand_numbers)
  if op == O.kDynamicUpdateSlice:
    return ks == {0}
  if instr.shape.is_tuple() and op != O.kFusion:
    return False
  if op == O.kCopy or (instr.is_elementwise() and op != O.kMap):
    dims = tuple(instr.shape.dimensions)
    return all(tuple(instr.operand(k).shape.dimensions) == dims for k in ks)
  if op == O.kFusion and instr.fusion_kind == FusionKind.kLoop:
    comp = instr.fused_computation
    root = comp.root_instruction
    elems = list(root.operands) if root.opcode == O.kTuple else [root]
    for k in ks:
      dims = tuple(instr.operand(k).shape.dimensions)
      if any(e.shape.is_tuple() or tuple(e.shape.dimensions) != dims
             for e in elems):
        return False
      if not _elementwise_paths(comp.parameter_instruction(k), dims):
        return False
    return True
  return False


# -- copy insertion ------------------------------------------------------------------


def _copy_of(comp, instr):
  return comp.add_instruction(hi.create(O.kCopy, instr.shape, [instr]))


def _leaf_value(comp, root, index):
  """An instruction holding the root's value at leaf `index`."""
  x = root
  for i in index:
    if x.opcode == O.kTuple:
      x = x.operand(i)
    else:
      x = comp.add_instruction(hi.create_get_tuple_element(x, i))
  return x


def _rebuild(comp, shape, leaves, index=()):
  if not shape.is_tuple():
    return leaves[index]
  elems = [_rebuild(comp, s, leaves, index + (k,))
           for k, s in enumerate(shape.tuple_shapes)]
  return comp.add_instruction(hi.create_tuple(elems))


def _array_leaves(shape):
  return [idx for idx, s in shape_util.leaf_shapes(shape)]


def _buffer_leaves(shape) -> set:
  """The leaves that have a buffer (not tokens): only those are copied."""
  return {idx for idx, s in shape_util.leaf_shapes(shape) if s.is_array()}


# Ops that update their operand 0 in place (its buffer becomes theirs).
_UPDATES_OPERAND_0 = frozenset({O.kScatter, O.kDynamicUpdateSlice})


def _update_chain(d, value_key) -> list:
  """[d, ..., w]: the in-place updates that lead from the value `value_key`
  to `d` through operand 0 (scatter of a scatter of the value, ...); just
  [d] when d does not update such a chain."""
  chain = [d]
  x = d
  while x.opcode in _UPDATES_OPERAND_0 and x.operands:
    if _key(source(x.operand(0))) == value_key:
      return chain
    nxt, _ = source(x.operand(0))
    if nxt.opcode not in _UPDATES_OPERAND_0:
      return [d]
    chain.append(nxt)
    x = nxt
  return [d]


def _fix_while_body(body) -> bool:
  param = body.parameter_instruction(0)
  root = body.root_instruction
  leaves = _array_leaves(param.shape)
  srcs = {idx: source(root, idx) for idx in leaves}
  counts: dict[tuple, int] = {}
  for s in srcs.values():
    counts[_key(s)] = counts.get(_key(s), 0) + 1
  new_leaves = {}
  plan = {}
  buffered = _buffer_leaves(param.shape)
  for idx in leaves:
    s = srcs[idx]
    if (s[0] is param and s[1] == idx) or idx not in buffered:
      plan[idx] = "pass"
    elif s[0] is param or (s[0].opcode == O.kParameter):
      plan[idx] = "copy2"
    elif s[0].opcode == O.kConstant or counts[_key(s)] > 1:
      plan[idx] = "copy"
    else:
      plan[idx] = "inplace"
  if all(p == "pass" for p in plan.values()):
    return False
  # Phase 1: copies that read parameter elements (temporaries).
  for idx in leaves:
    value = _leaf_value(body, root, idx)
    if plan[idx] == "copy2":
      new_leaves[idx] = _copy_of(body, value)
    else:
      new_leaves[idx] = value
  # Phase 2: in-place writers get control edges, the rest final copies.
  final = {}
  for idx in leaves:
    if plan[idx] == "pass":
      final[idx] = new_leaves[idx]
      continue
    rs = readers(body, (id(param), idx))
    if plan[idx] == "inplace":
      d = srcs[idx][0]
      chain = _update_chain(d, (id(param), idx))
      first = chain[-1]
      own = [ks for r, ks in rs if r is d]
      others = [r for r, _ in rs if all(r is not w for w in chain)]
      ok = (not own or writes_in_place_safely(d, own[0])) and not any(
          reaches(d, r) or reaches(first, r) for r in others)
      if ok:
        # Every other reader of the carried value runs before the first
        # update of its buffer (not only before the last one, `d`).
        for r in others:
          r.add_control_dependency_to(d)
          if first is not d:
            r.add_control_dependency_to(first)
        final[idx] = new_leaves[idx]
        continue
    c = _copy_of(body, new_leaves[idx])
    for r, _ in rs:
      r.add_control_dependency_to(c)
    final[idx] = c
  leaf_map = {idx: final[idx] for idx in leaves}
  body.set_root_instruction(_rebuild(body, param.shape, leaf_map))
  _drop_if_dead(body, root)
  return True


def _drop_if_dead(comp, instr) -> None:
  """Removes a replaced root / operand left unused (the dataflow analysis
  checks every instruction, dead ones too)."""
  if not instr.users and instr is not comp.root_instruction and (
      instr.opcode == O.kTuple):
    comp.remove_instruction_and_unused_operands(instr)


def _fix_branch(branch) -> bool:
  root = branch.root_instruction
  leaves = _array_leaves(root.shape)
  srcs = {idx: source(root, idx) for idx in leaves}
  counts: dict[tuple, int] = {}
  for s in srcs.values():
    counts[_key(s)] = counts.get(_key(s), 0) + 1
  buffered = _buffer_leaves(root.shape)
  need = {idx for idx, s in srcs.items()
          if idx in buffered and (s[0].opcode in (O.kParameter, O.kConstant)
                                  or counts[_key(s)] > 1)}
  if not need:
    return False
  leaf_map = {}
  for idx in leaves:
    v = _leaf_value(branch, root, idx)
    leaf_map[idx] = _copy_of(branch, v) if idx in need else v
  branch.set_root_instruction(_rebuild(branch, root.shape, leaf_map))
  _drop_if_dead(branch, root)
  return True


def _dedupe_tuple_operand(comp, instr, number: int) -> bool:
  """Copies the leaves of tuple operand `number` of `instr` whose value
  already appears at an earlier leaf: the callee's parameter gives every
  leaf a buffer of its own (a while's carry, a branch's argument), and two
  leaves of one parameter cannot share one."""
  init = instr.operand(number)
  leaves = _array_leaves(init.shape)
  seen = set()
  dup = []
  buffered = _buffer_leaves(init.shape)
  for idx in leaves:
    if idx not in buffered:
      continue
    k = _key(source(init, idx))
    if k in seen:
      dup.append(idx)
    seen.add(k)
  if not dup:
    return False
  leaf_map = {}
  for idx in leaves:
    v = _leaf_value(comp, init, idx)
    leaf_map[idx] = _copy_of(comp, v) if idx in dup else v
  instr.replace_operand_with(number, _rebuild(comp, init.shape, leaf_map))
  _drop_if_dead(comp, init)
  return True


def insert_copies(module) -> bool:
  changed = False
  for comp in _control_flow_order(module):
    for instr in list(comp.instructions):
      if instr.opcode == O.kWhile:
        changed |= _dedupe_tuple_operand(comp, instr, 0)
        changed |= _fix_while_body(instr.while_body)
      elif instr.opcode == O.kConditional:
        for number in range(1, len(instr.operands)):
          if instr.operand(number).shape.is_tuple():
            changed |= _dedupe_tuple_operand(comp, instr, number)
        for branch in instr.branch_computations:
          changed |= _fix_branch(branch)
  return changed


# -- as passes ---------------------------------------------------------------------


class _FunctionPass(hpi.HloModulePass):
  """A module rewrite of this file as a pass of the CPU pipeline."""

  _name = ""

  @property
  def name(self) -> str:
    return self._name

  def _rewrite(self, module) -> bool:
    raise NotImplementedError

  def run(self, module, execution_threads=frozenset()) -> bool:
    del execution_threads
    return bool(self._rewrite(module))


class ConvertAsync(_FunctionPass):
  """`convert_async`: async chains become calls."""
  _name = "cpu-convert-async"

  def _rewrite(self, module) -> bool:
    return convert_async(module)


class Unfuse(_FunctionPass):
  """`unfuse`: fusions present in the input are inlined."""
  _name = "cpu-unfuse"

  def _rewrite(self, module) -> bool:
    return unfuse(module)


class InlineCalls(_FunctionPass):
  """`inline_calls`: every kCall of the control-flow computations."""
  _name = "cpu-inline-calls"

  def _rewrite(self, module) -> bool:
    return inline_calls(module)


class FlattenCallGraph(_FunctionPass):
  """`flatten_call_graph`: one computation per control-flow call site."""
  _name = "cpu-flatten-call-graph"

  def _rewrite(self, module) -> bool:
    return flatten_call_graph(module)


class CopyInsertion(_FunctionPass):
  """`insert_copies`: copies for loop carries and branch results."""
  _name = "cpu-copy-insertion"

  def _rewrite(self, module) -> bool:
    return insert_copies(module)


# -- donation --------------------------------------------------------------------------


def donation_candidates(module, ba: ba_lib.BufferAssignment,
                        allocations: list[dict]) -> list[dict]:
  """For each entry parameter leaf: the output allocations its caller
  memory may stand in for when the parameter is donated. Safe when every
  read of the parameter happens before the output's first write, or at
  that write by an instruction that updates in place (e.g.
  dynamic-update-slice operand 0); parameters reaching the output are
  never donated. Aliases named by the module's input_output_alias come
  first."""
  analysis = ba.analysis
  entry = module.entry_computation
  root = entry.root_instruction
  aliased: dict[tuple, list[tuple]] = {}
  for a in module.input_output_aliases:
    aliased.setdefault((a.parameter_number, tuple(a.parameter_index)),
                       []).append(tuple(a.output_index))
  out = []
  outputs = [i for i, a in enumerate(allocations) if a["kind"] == "output"]
  for p in entry.parameter_instructions:
    for idx in _array_leaves(p.shape):
      g = ba.group_at(p, idx)
      if g.allocation < 0:
        continue
      values = [v for b in g.buffers for v in b.values]
      if any(analysis.is_live_out(v) for v in values):
        continue
      last, last_readers = -1, []
      for v in values:
        for u in analysis.uses(v):
          t = ba.time[id(u)]
          if t > last:
            last, last_readers = t, [u]
          elif t == last:
            last_readers.append(u)
      prefer = []
      for oidx in aliased.get((p.parameter_number, tuple(idx)), []):
        if shape_util.is_valid_index(root.shape, oidx):
          og = ba.group_at(root, oidx)
          if og.allocation >= 0:
            prefer.append(og.allocation)
      cands = []
      for a in prefer + outputs:
        if a in cands or allocations[a]["kind"] != "output":
          continue
        if allocations[a]["size"] != g.size:
          continue
        og = ba.allocations[a].members[0]
        if last < og.start:
          cands.append(a)
        elif last == og.start and len(last_readers) == 1:
          u = last_readers[0]
          ks = [k for k, o in enumerate(u.operands)
                for i2, _ in shape_util.leaf_shapes(o.shape)
                if ba.group_at(o, i2) is g]
          writes_og = any(ba.group_at(u, i2) is og
                          for i2, _ in shape_util.leaf_shapes(u.shape))
          if ks and writes_og and writes_in_place_safely(u, ks):
            cands.append(a)
      if cands:
        out.append({"param": p.parameter_number, "index": list(idx),
                    "outputs": cands})
  return out

