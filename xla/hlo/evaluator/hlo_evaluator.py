"""A numpy evaluator for HLO modules (xla/hlo/evaluator/hlo_evaluator.h).

`HloEvaluator().evaluate(module, args)` runs the entry computation on numpy
arrays and returns the flattened results. Values are numpy arrays (of the
ml_dtypes / numpy dtype of the element type), Python tuples for tuple
shapes and None for tokens. Instructions are evaluated in post order by
the kernel registered for each opcode in `evaluator_registry`: those of
`elementwise.py` (elementwise math), `structural.py` (data movement,
reductions, linear algebra, control flow helpers) and the methods below
for the opcodes that call computations or build tuples. An opcode without
a kernel raises UnimplementedError naming it.

Called computations (reduce bodies, sort comparators, scatter combiners) are
evaluated on whole arrays when every instruction in them is elementwise, so
a reduction folds one axis step at a time over all outputs at once.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

import support
from xla import primitive_util
# elementwise and structural register their kernels when imported.
from xla.hlo.evaluator import elementwise  # pylint: disable=unused-import
from xla.hlo.evaluator import evaluator_registry
from xla.hlo.evaluator import structural
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.literal import Literal
from xla.shape import Shape

O = HloOpcode

# Opcodes whose instructions may run on arrays of any shape inside a
# batched computation (their result shape is that of their operands).
_BATCHABLE = evaluator_registry.elementwise_opcodes() | {
    O.kParameter, O.kConstant, O.kTuple, O.kGetTupleElement}

_KERNELS = evaluator_registry.KERNELS


def _flatten(value, out: list) -> list:
  if isinstance(value, tuple):
    for v in value:
      _flatten(v, out)
  else:
    out.append(value)
  return out


def zeros_of(shape: Shape):
  """A zero value of `shape` (tuples element by element)."""
  if shape.is_tuple():
    return tuple(zeros_of(s) for s in shape.tuple_shapes)
  if shape.is_token():
    return None
  return np.zeros(tuple(shape.dimensions),
                  primitive_util.numpy_dtype(shape.element_type))


def _literal_value(lit: Literal):
  if lit.is_tuple():
    return tuple(_literal_value(e) for e in lit.elements)
  if lit.shape.is_token():
    return None
  return np.array(lit.array, copy=True)


class HloEvaluator:
  """Evaluates HLO modules with numpy (see the module docstring)."""

  def __init__(self, custom_calls: Optional[dict[str, Callable]] = None,
               max_loop_iterations: Optional[int] = 10_000_000):
    self.custom_calls = dict(BUILTIN_CUSTOM_CALLS)
    self.custom_calls.update(custom_calls or {})
    self.max_loop_iterations = max_loop_iterations
    self._batchable: dict[int, bool] = {}

  # -- public API --------------------------------------------------------------

  def evaluate(self, module, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Runs the entry computation on `args`; tuple results are flattened."""
    comp = module.entry_computation
    params = comp.parameter_instructions
    if len(args) != len(params):
      raise support.InvalidArgumentError(
          f"{comp.name} takes {len(params)} arguments, got {len(args)}")
    values = []
    for p, a in zip(sorted(params, key=lambda p: p.parameter_number), args):
      values.append(self._coerce_arg(p.shape, a, p.name))
    with np.errstate(all="ignore"):
      result = self.evaluate_computation(comp, values)
    return _flatten(result, [])

  def _coerce_arg(self, shape: Shape, a, name: str):
    if shape.is_tuple():
      if not isinstance(a, (tuple, list)) or len(a) != len(
          shape.tuple_shapes):
        raise support.InvalidArgumentError(
            f"parameter {name} expects a tuple of {len(shape.tuple_shapes)}")
      return tuple(self._coerce_arg(s, v, name)
                   for s, v in zip(shape.tuple_shapes, a))
    if shape.is_token():
      return None
    if isinstance(a, Literal):
      a = a.array
    dt = primitive_util.numpy_dtype(shape.element_type)
    arr = np.asarray(a)
    if arr.dtype != dt:
      arr = arr.astype(dt)
    if arr.shape != tuple(shape.dimensions):
      raise support.InvalidArgumentError(
          f"parameter {name} has shape {shape}, got an array of shape "
          f"{arr.shape}")
    return arr

  # -- computations ------------------------------------------------------------

  def evaluate_computation(self, comp, args: Sequence) -> object:
    """The value of `comp`'s root given its parameter values."""
    env: dict[int, object] = {}
    for instr in comp.make_instruction_post_order():
      if instr.opcode == O.kParameter:
        env[instr.unique_id] = args[instr.parameter_number]
        continue
      operands = [env[o.unique_id] for o in instr.operands]
      env[instr.unique_id] = self.evaluate_instruction(instr, operands)
    return env[comp.root_instruction.unique_id]

  def is_batchable(self, comp) -> bool:
    """True if `comp` can run on arrays of any shape elementwise."""
    hit = self._batchable.get(id(comp))
    if hit is None:
      hit = all(
          i.opcode in _BATCHABLE and (i.opcode != O.kConstant or
                                      i.shape.is_array() and
                                      not i.shape.dimensions)
          for i in comp.instructions)
      self._batchable[id(comp)] = hit
    return hit

  def apply(self, comp, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Applies a scalar computation elementwise to same-shaped arrays;
    returns its results (a tuple root gives several)."""
    shape = np.broadcast_shapes(*[np.shape(a) for a in args])
    if self.is_batchable(comp):
      out = self.evaluate_computation(comp, list(args))
      outs = list(out) if isinstance(out, tuple) else [out]
      return [np.broadcast_to(np.asarray(o), shape).copy() for o in outs]
    # One call per element.
    args = [np.broadcast_to(a, shape) for a in args]
    root_shapes = (comp.root_instruction.shape.tuple_shapes
                   if comp.root_instruction.shape.is_tuple() else
                   (comp.root_instruction.shape,))
    outs = [np.empty(shape, primitive_util.numpy_dtype(s.element_type))
            for s in root_shapes]
    for idx in np.ndindex(*shape):
      r = self.evaluate_computation(comp, [np.asarray(a[idx]) for a in args])
      rs = r if isinstance(r, tuple) else (r,)
      for o, v in zip(outs, rs):
        o[idx] = v
    return outs

  # -- instructions ------------------------------------------------------------

  def evaluate_instruction(self, instr, operands: list):
    """The value of `instr` given its operand values."""
    kernel = _KERNELS.get(instr.opcode)
    if kernel is None:
      raise support.UnimplementedError(
          f"HLO evaluator: opcode {instr.opcode.value} is not implemented "
          f"({instr.name})")
    if kernel.elementwise:
      r = kernel.fn(instr, *operands)
      return np.asarray(r).astype(
          primitive_util.numpy_dtype(instr.shape.element_type), copy=False)
    return kernel.fn(self, instr, operands)

  @evaluator_registry.evaluator_kernel(O.kConstant)
  def _constant(self, instr, operands):
    return _literal_value(instr.literal)

  @evaluator_registry.evaluator_kernel(O.kTuple)
  def _tuple(self, instr, operands):
    return tuple(operands)

  @evaluator_registry.evaluator_kernel(O.kGetTupleElement)
  def _gte(self, instr, operands):
    return operands[0][instr.tuple_index]

  @evaluator_registry.evaluator_kernel(O.kCall)
  def _call(self, instr, operands):
    return self.evaluate_computation(instr.to_apply, operands)

  @evaluator_registry.evaluator_kernel(O.kFusion)
  def _fusion(self, instr, operands):
    return self.evaluate_computation(instr.fused_computation, operands)

  @evaluator_registry.evaluator_kernel(O.kWhile)
  def _while(self, instr, operands):
    state = operands[0]
    cond, body = instr.while_condition, instr.while_body
    n = 0
    while bool(np.asarray(self.evaluate_computation(cond, [state]))):
      if self.max_loop_iterations is not None and n >= (
          self.max_loop_iterations):
        raise support.ResourceExhaustedError(
            f"while loop {instr.name} ran past {self.max_loop_iterations} "
            "iterations")
      state = self.evaluate_computation(body, [state])
      n += 1
    return state

  @evaluator_registry.evaluator_kernel(O.kConditional)
  def _conditional(self, instr, operands):
    branches = instr.branch_computations
    sel = np.asarray(operands[0])
    if sel.dtype == np.bool_:
      index = 0 if bool(sel) else 1
    else:
      index = int(sel)
      if not 0 <= index < len(branches):
        index = len(branches) - 1  # XLA: out of range runs the last branch
    return self.evaluate_computation(branches[index], [operands[1 + index]])

  @evaluator_registry.evaluator_kernel(O.kAsyncStart)
  def _async_start(self, instr, operands):
    # ((operands...), result, context): the call runs eagerly.
    result = self.evaluate_computation(instr.attr("calls"), operands)
    return (tuple(operands), result, zeros_of(instr.shape.tuple_shapes[2]))

  @evaluator_registry.evaluator_kernel(O.kAsyncUpdate)
  def _async_update(self, instr, operands):
    return operands[0]

  @evaluator_registry.evaluator_kernel(O.kAsyncDone)
  def _async_done(self, instr, operands):
    return operands[0][1]

  @evaluator_registry.evaluator_kernel(O.kCopyStart)
  def _copy_start(self, instr, operands):
    return (operands[0], operands[0].copy(),
            zeros_of(instr.shape.tuple_shapes[2]))

  @evaluator_registry.evaluator_kernel(O.kCopyDone)
  def _copy_done(self, instr, operands):
    return operands[0][1]

  @evaluator_registry.evaluator_kernel(O.kCustomCall)
  def _custom_call(self, instr, operands):
    target = instr.custom_call_target
    fn = self.custom_calls.get(target)
    if fn is None:
      raise support.UnimplementedError(
          f"HLO evaluator: custom-call target '{target}' has no handler "
          f"({instr.name})")
    r = fn(instr, operands)
    if r is None:
      return zeros_of(instr.shape)
    return r

  @evaluator_registry.evaluator_kernel(O.kMap)
  def _map(self, instr, operands):
    outs = self.apply(instr.to_apply, operands)
    return outs[0].astype(
        primitive_util.numpy_dtype(instr.shape.element_type), copy=False)


def _linalg_expansion(instr, operands):
  """"Qr", "ProductOfElementaryHouseholderReflectors" and "Eigh" (JAX's
  platform-independent linear-algebra custom calls): evaluates the HLO that
  xla/service/linalg_expander.py replaces them with in compiled code."""
  from xla.service import linalg_expander  # pylint: disable=g-import-not-at-top
  outs = HloEvaluator().evaluate(linalg_expander.expansion_module(instr),
                                 list(operands))
  return outs[0] if len(outs) == 1 and not instr.shape.is_tuple() else (
      tuple(outs))


# Custom-call targets XLA's own passes emit, handled unless overridden.
BUILTIN_CUSTOM_CALLS: dict[str, Callable] = {
    "TopK": structural.top_k_custom_call,
    # Expanded into HLO by XLA's QrExpander / EighExpander.
    "Qr": _linalg_expansion,
    "ProductOfElementaryHouseholderReflectors": _linalg_expansion,
    "Eigh": _linalg_expansion,
}



def implemented_opcodes() -> frozenset[HloOpcode]:
  """Every opcode the evaluator has a kernel for."""
  return frozenset(evaluator_registry.KERNELS) | {O.kParameter}


# Opcodes a constant expression may not fold through.
_NOT_FOLDABLE = frozenset({
    O.kParameter, O.kCustomCall, O.kRng, O.kRngGetAndUpdateState,
    O.kInfeed, O.kOutfeed, O.kSend, O.kSendDone, O.kRecv, O.kRecvDone,
    O.kAfterAll, O.kAddDependency, O.kPartitionId, O.kReplicaId,
    O.kWhile, O.kOptimizationBarrier,
}) | frozenset(op for op in HloOpcode if op.value.startswith(
    ("all-", "collective-", "reduce-scatter", "ragged-all")))


def evaluate_constant_expression(instr) -> Optional[Literal]:
  """The value of `instr` if it depends only on constants, else None
  (also None when the evaluator cannot compute it)."""
  memo: dict[int, object] = {}
  evaluator = HloEvaluator()

  def value(i):
    hit = memo.get(i.unique_id, memo)
    if hit is not memo:
      return hit
    if i.opcode in _NOT_FOLDABLE or i.has_side_effect():
      raise _NotConstant()
    ops = [value(o) for o in i.operands]
    v = evaluator.evaluate_instruction(i, ops)
    memo[i.unique_id] = v
    return v

  try:
    with np.errstate(all="ignore"):
      v = value(instr)
  except (_NotConstant, support.XlaError):
    return None
  return _to_literal(v, instr.shape)


class _NotConstant(Exception):
  pass


def _to_literal(value, shape: Shape) -> Literal:
  if shape.is_tuple():
    return Literal.tuple_of([_to_literal(v, s)
                             for v, s in zip(value, shape.tuple_shapes)])
  if shape.is_token():
    return Literal.token()
  return Literal(shape, np.asarray(value))
