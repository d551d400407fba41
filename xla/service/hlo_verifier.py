"""The HLO verifier (xla/service/hlo_verifier.cc).

`verify(module)` checks the module's structure and every instruction's shape
and raises `HloVerifierError` (a support.InvalidArgumentError) at the first
problem, naming the computation and instruction and showing its text:

  module:      an entry computation; computations and instruction names
               unique; called computations belong to the module; a fused
               computation is called by exactly one fusion; the entry
               computation layout matches the entry's parameters and root.
  computation: a root; parameters numbered 0..n-1; operands, users and
               control dependencies consistent and within the computation;
               no cycles.
  instruction: operand count (opcode table); required attributes present;
               result shape equal (layouts aside) to what shape inference
               derives from operands and attributes
               (`instruction_shape_inference`);
               constants' literal shapes match.

Opcodes without a shape-inference rule only get the structural checks;
`unchecked_opcodes()` lists them.
"""

from __future__ import annotations

from typing import Optional

import support
from xla import shape_util
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_opcode
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service import instruction_shape_inference as isi


class HloVerifierError(support.InvalidArgumentError):
  """The module violates an HLO invariant."""


def _fail(message: str, computation=None, instruction=None):
  where = []
  if computation is not None:
    where.append(f"computation {computation.name}")
  if instruction is not None:
    where.append(f"instruction {instruction.name} "
                 f"({instruction.opcode.value})")
  text = (", ".join(where) + ": " if where else "") + message
  if instruction is not None:
    text += f"\n  {instruction.to_string()}"
  raise HloVerifierError(text)


def unchecked_opcodes() -> frozenset[HloOpcode]:
  """Opcodes whose result shape the verifier does not check yet."""
  exempt = {HloOpcode.kParameter, HloOpcode.kConstant}
  return frozenset(op for op in HloOpcode
                   if op not in isi.covered_opcodes() and
                   op not in exempt)


def verify(module) -> None:
  """Raises HloVerifierError if `module` is malformed."""
  if module.entry_computation is None:
    _fail(f"module {module.name} has no entry computation")
  in_module = {id(c) for c in module.computations}
  comp_names: set[str] = set()
  instr_names: dict[str, object] = {}
  fusion_callers: dict[int, list] = {}
  calling = hlo_attrs.CALLING_OPCODES
  for comp in module.computations:
    if comp.parent is not module:
      _fail("computation does not point back to its module", comp)
    if comp.name in comp_names:
      _fail(f"duplicate computation name {comp.name}", comp)
    comp_names.add(comp.name)
    for instr in comp.instructions:
      if instr.name in instr_names:
        _fail(f"instruction name {instr.name} is not unique in the module "
              f"(also in computation {instr_names[instr.name].name})", comp,
              instr)
      instr_names[instr.name] = comp
      if instr.opcode not in calling:
        continue
      for callee in instr.called_computations():
        if id(callee) not in in_module:
          _fail(f"calls computation {callee.name}, which is not in the "
                f"module", comp, instr)
      if instr.opcode == HloOpcode.kFusion:
        fusion_callers.setdefault(id(instr.attrs["calls"]), []).append(instr)
  for comp in module.computations:
    callers = fusion_callers.get(id(comp), [])
    if len(callers) > 1:
      _fail(f"fused computation is called by {len(callers)} fusions "
            f"({', '.join(c.name for c in callers)})", comp)
    verify_computation(comp)
  _verify_entry_layout(module)


def _verify_entry_layout(module) -> None:
  layout = module.config.entry_computation_layout
  if layout is None:
    return
  entry = module.entry_computation
  params = entry.parameter_instructions
  if len(layout.parameters) != len(params):
    _fail(f"entry_computation_layout has {len(layout.parameters)} "
          f"parameters, the entry computation has {len(params)}", entry)
  for i, (shape, param) in enumerate(zip(layout.parameters, params)):
    if not shape_util.compatible(shape, param.shape):
      _fail(f"entry_computation_layout parameter {i} "
            f"{shape.to_string(True)} is not compatible with parameter "
            f"{param.name} {param.shape.to_string(True)}", entry)
  root = entry.root_instruction
  if not shape_util.compatible(layout.result, root.shape):
    _fail(f"entry_computation_layout result {layout.result.to_string(True)} "
          f"is not compatible with the root {root.name} "
          f"{root.shape.to_string(True)}", entry)


def verify_computation(comp) -> None:
  """Structure of one computation, then each of its instructions."""
  if comp.root_instruction is None:
    _fail("computation has no root", comp)
  members = {id(i) for i in comp.instructions}
  if id(comp.root_instruction) not in members:
    _fail(f"root {comp.root_instruction.name} is not in the computation",
          comp)
  params = comp.parameter_instructions
  for i, p in enumerate(params):
    if p.parameter_number != i:
      _fail(f"parameter numbers are not 0..{len(params) - 1}: found "
            f"{p.parameter_number} at position {i}", comp, p)
    if id(p) not in members:
      _fail("parameter is not in the computation", comp, p)
  counted = [i for i in comp.instructions
             if i.opcode == HloOpcode.kParameter]
  if len(counted) != len(params):
    _fail(f"{len(counted)} parameter instructions but {len(params)} "
          f"registered parameters", comp)
  for instr in comp.instructions:
    if instr.parent is not comp:
      _fail("instruction does not point back to its computation", comp,
            instr)
    for op in instr.operands:
      if id(op) not in members:
        _fail(f"operand {op.name} is not in the computation", comp, instr)
      if not op.has_user(instr):
        _fail(f"operand {op.name} does not list it as a user", comp, instr)
    for user in instr.users:
      if instr not in user.operands:
        _fail(f"user {user.name} does not use it", comp, instr)
    for pred in instr.control_predecessors:
      if id(pred) not in members or instr not in pred.control_successors:
        _fail(f"inconsistent control predecessor {pred.name}", comp, instr)
  try:
    comp.instructions_in_stable_order()
  except support.FailedPreconditionError as e:
    _fail(str(e), comp)
  for instr in comp.instructions:
    verify_instruction(instr)


def verify_instruction(instr, computation=None) -> None:
  """Operand count, required attributes and the result shape."""
  comp = computation or instr.parent
  arity = hlo_opcode.arity(instr.opcode)
  if arity is not None and instr.operand_count != arity:
    _fail(f"expects {arity} operands, but has {instr.operand_count}", comp,
          instr)
  for spec in hlo_attrs.attr_specs(instr.opcode):
    if spec.required and spec.name not in instr.attrs:
      _fail(f"attribute {spec.name} is missing", comp, instr)
  if instr.opcode == HloOpcode.kParameter:
    if instr.parameter_number is None:
      _fail("parameter has no number", comp, instr)
    return
  if instr.opcode == HloOpcode.kConstant:
    if instr.literal is None:
      _fail("constant has no literal", comp, instr)
    if not shape_util.compatible(instr.literal.shape, instr.shape):
      _fail(f"literal shape {instr.literal.shape.to_string()} does not "
            f"match the instruction shape {instr.shape.to_string()}", comp,
            instr)
    return
  if instr.opcode not in isi.covered_opcodes():
    return
  try:
    expected = isi.infer_instruction_shape(instr, instr.shape)
  except support.XlaError as e:
    _fail(str(e), comp, instr)
  if not shape_util.compatible(expected, instr.shape):
    _fail(f"shape mismatch: the instruction has shape "
          f"{instr.shape.to_string()}, but its operands and attributes give "
          f"{expected.to_string()}", comp, instr)


def verify_or_none(module) -> Optional[str]:
  """The verifier's message, or None if the module is valid."""
  try:
    verify(module)
  except HloVerifierError as e:
    return str(e)
  return None
