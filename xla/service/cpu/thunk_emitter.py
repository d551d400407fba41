"""Turns a scheduled, buffer-assigned HLO module into a *thunk plan* plus
the LLVM kernels it calls.

The plan is plain data (JSON-serialisable: the disk cache stores it next
to the object code):

  allocations   one per buffer-assignment allocation, plus a trailing
                "null" one for empty arrays and tuple tables:
                {"kind": "temp"|"output"|"parameter"|"constant"|"null",
                 "size", "param", "index", "data" (constants, base64)}
  slots         [allocation, byte offset] pairs; thunks name memory by slot
  thunks        the entry computation's thunk list; a thunk is a dict:
                kernel {"fn", "slot", "extent", "cost"} | copy {"src",
                "dst", "bytes"} | while {"init": [copy...], "cond": [...],
                "pred", "body": [...]} | conditional {"index", "pred",
                "branches"} | sequence {"thunks"} | custom_call {"call",
                "operands", "results"} | collective {"op", "config",
                "operands", "results"} (a program of several participants:
                its collectives, replica-id and partition-id; the config
                is collective_emitter.collective_config's)
  params / outputs / donation   see cpu_executable.py
  participants  [replicas, partitions] of a program of several participants

No thunk is emitted for parameters, constants (their buffers are filled at
load time), tuples, get-tuple-element, bitcasts and the other forwarding
ops: buffer assignment already gave them their operands' storage.
"""

from __future__ import annotations

import base64

import numpy as np

from xla import primitive_util
from xla import shape_util
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service import buffer_assignment as ba_lib
from xla.service.cpu import collective_emitter
from xla.service.cpu import cpu_copy_insertion
from xla.service.cpu import ir_emitter
from xla.service.cpu import kernel_api
from xla.service.cpu.elemental_generator import constant_bytes

O = HloOpcode

NO_THUNK = frozenset({
    O.kParameter, O.kConstant, O.kTuple, O.kGetTupleElement, O.kBitcast,
    O.kAddDependency, O.kAfterAll, O.kDomain, O.kOptimizationBarrier,
})


def dtype_name(element_type) -> str:
  return primitive_util.lowercase_name(element_type)


def numpy_dtype(name: str) -> np.dtype:
  return np.dtype(primitive_util.numpy_dtype(primitive_util.from_name(name)))


class ThunkEmitter:
  """See the module docstring. `emit()` returns the plan."""

  def __init__(self, module, assignment: ba_lib.BufferAssignment,
               ctx: kernel_api.KernelContext, on_kernels=None):
    self.module = module
    # Called with the names of each instruction's kernels once they are
    # emitted (the compiler starts compiling them then).
    self.on_kernels = on_kernels
    self.ba = assignment
    self.analysis = assignment.analysis
    self.ctx = ctx
    self.slots: list[list[int]] = []
    self._slot_of: dict[tuple[int, int], int] = {}
    self.kernels: list[str] = []
    self.custom_calls: list = []  # custom-call instructions, by plan index
    self.allocations = self._allocations()
    self.null = len(self.allocations) - 1
    config = getattr(module, "config", None)
    self.participants = (int(getattr(config, "replica_count", 1) or 1),
                         int(getattr(config, "num_partitions", 1) or 1))
    # Collectives and the ids run in the runtime, between the instances of
    # the participants, when there is more than one.
    self.multi = self.participants[0] * self.participants[1] > 1

  # -- allocations -------------------------------------------------------------

  def _allocations(self) -> list[dict]:
    out = []
    for a in self.ba.allocations:
      g = a.members[0]
      values = [v for b in g.buffers for v in b.values]
      arrays = [v for v in values if v.shape.is_array()]
      if a.kind == ba_lib.TEMP:
        out.append({"kind": "temp", "size": a.size})
      elif not arrays:
        out.append({"kind": "null", "size": 0})
      elif a.kind == ba_lib.OUTPUT:
        out.append({"kind": "output", "size": a.size})
      elif a.kind == ba_lib.PARAMETER:
        p = [v for v in arrays
             if self.analysis.entry_parameter_value(v) is not None]
        v = p[0]
        out.append({"kind": "parameter", "size": a.size,
                    "param": self.analysis.entry_parameter_value(v),
                    "index": list(v.defining_index)})
      else:
        consts = [v for v in arrays
                  if v.defining_instruction.opcode == O.kConstant]
        v = consts[0]
        lit = v.defining_instruction.literal
        for i in v.defining_index:
          lit = lit.elements[i]
        data = constant_bytes(lit, v.shape)
        out.append({"kind": "constant", "size": a.size,
                    "data": base64.b64encode(data).decode("ascii")})
    out.append({"kind": "null", "size": 0})
    return out

  def location(self, instr, index=()) -> tuple[int, int]:
    """(allocation, byte offset) of a position."""
    g = self.ba.group_at(instr, tuple(index))
    if g.allocation < 0 or g.size == 0:
      return self.null, 0
    kind = self.allocations[g.allocation]["kind"]
    if kind == "null":
      return self.null, 0
    return g.allocation, g.offset if kind == "temp" else 0

  def slot(self, instr, index=()) -> int:
    """A shared slot for a position (for non-kernel thunks)."""
    loc = self.location(instr, index)
    s = self._slot_of.get(loc)
    if s is None:
      s = self._slot_of[loc] = len(self.slots)
      self.slots.append(list(loc))
    return s

  def _slot_range(self, positions) -> int:
    start = len(self.slots)
    for instr, index in positions:
      self.slots.append(list(self.location(instr, index)))
    return start

  # -- computations -------------------------------------------------------------

  def emit_computation(self, comp) -> list[dict]:
    thunks = []
    for instr in self.ba.schedule.sequence(comp):
      thunks.extend(self.emit_instruction(instr))
    return thunks

  def emit_instruction(self, instr) -> list[dict]:
    op = instr.opcode
    if op in NO_THUNK:
      return []
    if op == O.kCopy:
      return self._copy(instr)
    if op == O.kCopyStart:
      return (self._copy_leaves(instr.operand(0), (), instr, (0,)) +
              self._copy_leaves(instr.operand(0), (), instr, (1,)))
    if op == O.kCopyDone:
      return self._copy_leaves(instr.operand(0), (1,), instr, ())
    if op == O.kWhile:
      return [self._while(instr)]
    if op == O.kConditional:
      return [self._conditional(instr)]
    if op == O.kCall:
      return [{"kind": "sequence", "name": instr.name,
               "thunks": self.emit_computation(instr.to_apply)}]
    if self.multi and op in collective_emitter.RUNTIME_OPCODES:
      return [self._collective(instr)]
    if op == O.kCustomCall:
      specs = ir_emitter.emit_custom_call(self.ctx, instr)
      if specs is not None:
        return self._kernels(instr, specs)
      return [self._custom_call(instr)]
    if instr.shape.is_tuple() and not any(
        s.is_array() for _, s in shape_util.leaf_shapes(instr.shape)):
      return []
    return self._kernels(instr, ir_emitter.emit_instruction(self.ctx, instr))

  def _kernels(self, instr, specs) -> list[dict]:
    """Kernel thunks running `specs`, which compute `instr` (their arguments:
    its operands' array leaves, then its own)."""
    positions = []
    for o in instr.operands:
      positions.extend((o, idx) for idx, s in _leaves(o.shape))
    positions.extend((instr, idx) for idx, s in _leaves(instr.shape))
    start = self._slot_range(positions)
    out = []
    if self.on_kernels is not None and specs:
      self.on_kernels([spec.name for spec in specs],
                      [int(spec.cost) for spec in specs])
    for spec in specs:
      self.kernels.append(spec.name)
      out.append({"kind": "kernel", "name": instr.name, "fn": spec.name,
                  "slot": start, "extent": int(spec.parallel_extent),
                  "cost": int(spec.cost)})
    return out

  def _copy(self, instr) -> list[dict]:
    return self._copy_leaves(instr.operand(0), (), instr, ())

  def _copy_leaves(self, src, src_prefix, dst, dst_prefix) -> list[dict]:
    """Copies every array leaf of `src` at `src_prefix` to the same leaf of
    `dst` at `dst_prefix`, skipping leaves that share storage."""
    out = []
    shape = shape_util.get_subshape(src.shape, src_prefix)
    for idx, s in _leaves(shape):
      if not s.is_array():
        continue
      si, di = tuple(src_prefix) + idx, tuple(dst_prefix) + idx
      if self.ba.shares_storage(src, si, dst, di):
        continue
      nbytes = storage_bytes(s)
      if nbytes:
        out.append({"kind": "copy", "name": dst.name,
                    "src": self.slot(src, si), "dst": self.slot(dst, di),
                    "bytes": nbytes})
    return out

  def _while(self, instr) -> dict:
    init = instr.operand(0)
    copies = []
    for idx, s in _leaves(instr.shape):
      if not s.is_array():
        continue
      nbytes = storage_bytes(s)
      if not nbytes or self.ba.shares_storage(init, idx, instr, idx):
        continue
      copies.append({"kind": "copy", "name": f"{instr.name}.init",
                     "src": self.slot(init, idx), "dst": self.slot(instr, idx),
                     "bytes": nbytes})
    cond, body = instr.while_condition, instr.while_body
    return {"kind": "while", "name": instr.name, "init": copies,
            "cond": self.emit_computation(cond),
            "pred": self.slot(cond.root_instruction, ()),
            "body": self.emit_computation(body)}

  def _conditional(self, instr) -> dict:
    sel = instr.operand(0)
    return {"kind": "conditional", "name": instr.name,
            "index": self.slot(sel, ()),
            "pred": sel.shape.element_type == primitive_util.from_name("pred"),
            "branches": [self.emit_computation(c)
                         for c in instr.branch_computations]}

  def _leaf_spec(self, instr, index, shape):
    if shape.is_tuple():
      return [self._leaf_spec(instr, index + (k,), s)
              for k, s in enumerate(shape.tuple_shapes)]
    if not shape.is_array():
      return None
    return {"slot": self.slot(instr, index),
            "dtype": dtype_name(shape.element_type),
            "dims": list(shape.dimensions)}

  def _custom_call(self, instr) -> dict:
    self.custom_calls.append(instr)
    results = []
    for idx, s in _leaves(instr.shape):
      results.append(self._leaf_spec(instr, idx, s))
    return {"kind": "custom_call", "name": instr.name,
            "call": len(self.custom_calls) - 1,
            "target": instr.custom_call_target,
            "operands": [self._leaf_spec(o, (), o.shape)
                         for o in instr.operands],
            "results": results}

  def _array_specs(self, instr) -> list[dict]:
    """Leaf specs of `instr`'s array leaves, depth first."""
    return [{"slot": self.slot(instr, idx),
             "dtype": dtype_name(s.element_type),
             "dims": list(s.dimensions)}
            for idx, s in _leaves(instr.shape) if s.is_array()]

  def _collective(self, instr) -> dict:
    config, kernels = collective_emitter.collective_config(self.ctx, instr)
    if self.on_kernels is not None and kernels:
      self.on_kernels(kernels)
    self.kernels.extend(kernels)
    operands = [spec for o in instr.operands for spec in self._array_specs(o)]
    return {"kind": "collective", "name": instr.name,
            "op": instr.opcode.value, "config": config,
            "operands": operands, "results": self._array_specs(instr)}

  # -- the plan -------------------------------------------------------------------

  def emit(self) -> dict:
    entry = self.module.entry_computation
    thunks = self.emit_computation(entry)
    params = []
    for p in entry.parameter_instructions:
      leaves = []
      for idx, s in _leaves(p.shape):
        if not s.is_array():
          leaves.append(None)
          continue
        alloc, _ = self.location(p, idx)
        leaves.append({"index": list(idx), "dtype": dtype_name(s.element_type),
                       "dims": list(s.dimensions), "alloc": alloc})
      params.append({"number": p.parameter_number,
                     "shape": p.shape.to_string(), "leaves": leaves})
    root = entry.root_instruction
    outputs = []
    for idx, s in _leaves(root.shape):
      if not s.is_array():
        outputs.append(None)
        continue
      alloc, offset = self.location(root, idx)
      outputs.append({"slot": self.slot(root, idx), "alloc": alloc,
                      "dtype": dtype_name(s.element_type),
                      "dims": list(s.dimensions)})
    plan = {
        "allocations": self.allocations,
        "slots": self.slots,
        "thunks": thunks,
        "params": params,
        "outputs": outputs,
        "donation": cpu_copy_insertion.donation_candidates(
            self.module, self.ba, self.allocations),
        "kernels": sorted(set(self.kernels)),
    }
    if self.multi:
      plan["participants"] = list(self.participants)
    return plan


def storage_bytes(shape) -> int:
  """Bytes of an array in the CPU backend's storage: sub-byte types take a
  byte per element (as numpy / ml_dtypes hold them)."""
  if not shape.is_array():
    return 0
  n = 1
  for d in shape.dimensions:
    n *= d
  return n * max(1, primitive_util.bit_width(shape.element_type) // 8)


def _leaves(shape):
  """(index, leaf shape) for the array / token leaves of `shape`."""
  return shape_util.leaf_shapes(shape)
