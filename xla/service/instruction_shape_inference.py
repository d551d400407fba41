"""Shape inference for HLO instructions: one rule per opcode.

`infer_instruction_shape(instr, declared)` returns the shape an instruction
must have given its operands and attributes, or raises InvalidArgumentError
saying which operand or attribute is inconsistent (the shape functions are in
`shape_inference`). Some opcodes cannot determine their result alone
(broadcast, reshape, convert, ...); their rules check the `declared` shape
against the operands and return it, and raise "cannot infer shape" when no
shape is declared. Opcodes without a rule raise UnimplementedError naming
the opcode; `covered_opcodes()` lists those with one.
"""

from __future__ import annotations

from typing import Callable, Optional

import support
from xla import primitive_util
from xla import shape_util
from xla.hlo.ir import hlo_opcode
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service import shape_inference as si
from xla.shape import Shape
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType
_fail = si.fail
_s = si.shape_str
_need_array = si.need_array
_array = si.array_shape


def _need_declared(declared: Optional[Shape], opcode: HloOpcode) -> Shape:
  if declared is None:
    _fail(f"cannot infer shape for opcode: {opcode.value}")
  return declared


Rule = Callable[..., Optional[Shape]]
RULES: dict[HloOpcode, Rule] = {}


def _rule(*opcodes):
  def register(fn):
    for op in opcodes:
      RULES[op] = fn
    return fn
  return register


_UNARY_OPS = [op for op in hlo_opcode.opcodes_with(hlo_opcode.UNARY)
              if op not in (O.kConvert, O.kBitcastConvert)]


@_rule(*_UNARY_OPS, O.kCopy, O.kOptimizationBarrier)
def _unary(instr, declared):
  if instr.opcode == O.kOptimizationBarrier:
    return instr.operand(0).shape.without_layout()
  return si.infer_unary_op_shape(instr.opcode, instr.operand(0).shape)


@_rule(O.kStochasticConvert)
def _stochastic_convert(instr, declared):
  declared = _need_declared(declared, instr.opcode)
  operand, random = instr.operand(0).shape, instr.operand(1).shape
  _need_array(operand, "stochastic-convert operand")
  if random.dimensions != operand.dimensions or not (
      primitive_util.is_unsigned_integral(random.element_type)) or (
          primitive_util.bit_width(random.element_type) !=
          primitive_util.bit_width(operand.element_type)):
    _fail(f"stochastic-convert random bits {_s(random)} must be unsigned "
          f"integers as wide as, and shaped like, the operand {_s(operand)}")
  return _array(declared.element_type, operand.dimensions)


@_rule(*[op for op in hlo_opcode.opcodes_with(hlo_opcode.BINARY)
         if op != O.kStochasticConvert])
def _binary(instr, declared):
  return si.infer_binary_op_shape(instr.opcode, instr.operand(0).shape,
                               instr.operand(1).shape)


@_rule(O.kSelect)
def _select(instr, declared):
  return si.infer_select_shape(*(o.shape for o in instr.operands))


@_rule(O.kClamp)
def _clamp(instr, declared):
  return si.infer_clamp_shape(*(o.shape for o in instr.operands))


@_rule(O.kConvert, O.kBitcastConvert)
def _convert(instr, declared):
  declared = _need_declared(declared, instr.opcode)
  operand = instr.operand(0).shape
  _need_array(operand, f"{instr.opcode.value} operand")
  _need_array(declared, f"{instr.opcode.value} result")
  if instr.opcode == O.kConvert or primitive_util.bit_width(
      operand.element_type) == primitive_util.bit_width(
          declared.element_type):
    if operand.dimensions != declared.dimensions:
      _fail(f"{instr.opcode.value} changes dimensions: {_s(operand)} to "
            f"{_s(declared)}")
    return declared.without_layout()
  small, large = sorted((operand, declared),
                        key=lambda s: primitive_util.bit_width(s.element_type))
  ratio = (primitive_util.bit_width(large.element_type) //
           primitive_util.bit_width(small.element_type))
  if small.dimensions != large.dimensions + (ratio,):
    _fail(f"bitcast-convert from {_s(operand)} to {_s(declared)} needs a "
          f"trailing dimension of {ratio} on the narrower side")
  return declared.without_layout()


@_rule(O.kBroadcast)
def _broadcast(instr, declared):
  declared = _need_declared(declared, instr.opcode)
  operand = instr.operand(0).shape
  _need_array(operand, "broadcast operand")
  dims = instr.dimensions
  if len(dims) != operand.rank:
    _fail(f"broadcast dimensions {list(dims)} must have one entry per "
          f"operand dimension of {_s(operand)}")
  if declared.element_type != operand.element_type:
    _fail(f"broadcast changes the element type: {_s(operand)} to "
          f"{_s(declared)}")
  for i, d in enumerate(dims):
    if not 0 <= d < declared.rank or (declared.dimensions[d] !=
                                      operand.dimensions[i]):
      _fail(f"broadcast dimension {i} of {_s(operand)} maps to output "
            f"dimension {d} of {_s(declared)}, which does not match")
  return declared.without_layout()


@_rule(O.kReshape, O.kBitcast)
def _reshape(instr, declared):
  declared = _need_declared(declared, instr.opcode)
  operand = instr.operand(0).shape
  _need_array(operand, f"{instr.opcode.value} operand")
  if instr.opcode == O.kReshape:
    if operand.element_type != declared.element_type or (
        shape_util.element_count(operand) !=
        shape_util.element_count(declared)):
      _fail(f"reshape from {_s(operand)} to {_s(declared)} changes the "
            f"element type or element count")
  elif shape_util.byte_size_of(operand) != shape_util.byte_size_of(declared):
    _fail(f"bitcast from {_s(operand)} to {_s(declared)} changes the byte "
          f"size")
  return declared.without_layout()


@_rule(O.kTranspose)
def _transpose(instr, declared):
  return si.infer_transpose_shape(instr.operand(0).shape, instr.dimensions)


@_rule(O.kSlice)
def _slice(instr, declared):
  return si.infer_slice_shape(instr.operand(0).shape, instr.slice_starts,
                           instr.slice_limits, instr.slice_strides)


@_rule(O.kConcatenate)
def _concatenate(instr, declared):
  return si.infer_concatenate_shape([o.shape for o in instr.operands],
                                 instr.dimensions[0])


@_rule(O.kPad)
def _pad(instr, declared):
  return si.infer_pad_shape(instr.operand(0).shape, instr.operand(1).shape,
                         instr.padding_config)


@_rule(O.kReverse)
def _reverse(instr, declared):
  return si.infer_reverse_shape(instr.operand(0).shape, instr.dimensions)


@_rule(O.kDot)
def _dot(instr, declared):
  result_type = declared.element_type if declared is not None else None
  return si.infer_dot_shape(instr.operand(0).shape, instr.operand(1).shape,
                         instr.dot_dimension_numbers, result_type)


@_rule(O.kReduce)
def _reduce(instr, declared):
  n = instr.operand_count // 2
  shapes = [o.shape for o in instr.operands]
  return si.infer_reduce_shape(shapes[:n], shapes[n:], instr.dimensions,
                            instr.to_apply)


@_rule(O.kReduceWindow)
def _reduce_window(instr, declared):
  n = instr.operand_count // 2
  shapes = [o.shape for o in instr.operands]
  return si.infer_reduce_window_shape(shapes[:n], shapes[n:], instr.window,
                                   instr.to_apply)


@_rule(O.kConvolution)
def _convolution(instr, declared):
  return si.infer_convolution_shape(
      instr.operand(0).shape, instr.operand(1).shape, instr.window,
      instr.convolution_dimension_numbers,
      instr.feature_group_count, instr.batch_group_count,
      declared.element_type if declared is not None else None)


@_rule(O.kGather)
def _gather(instr, declared):
  return si.infer_gather_shape(instr.operand(0).shape, instr.operand(1).shape,
                            instr.gather_dimension_numbers,
                            instr.gather_slice_sizes)


@_rule(O.kTuple)
def _tuple(instr, declared):
  return Shape.tuple_of(o.shape for o in instr.operands)


@_rule(O.kGetTupleElement)
def _gte(instr, declared):
  operand = instr.operand(0).shape
  index = instr.tuple_index
  if not operand.is_tuple() or not 0 <= index < len(operand.tuple_shapes):
    _fail(f"get-tuple-element index {index} is out of range for "
          f"{_s(operand)}")
  return operand.tuple_shapes[index]


@_rule(O.kIota)
def _iota(instr, declared):
  declared = _need_declared(declared, instr.opcode)
  _need_array(declared, "iota result")
  if not 0 <= instr.iota_dimension < max(declared.rank, 1) or (
      declared.rank == 0):
    _fail(f"iota_dimension {instr.iota_dimension} is out of range "
          f"for {_s(declared)}")
  return declared.without_layout()


@_rule(O.kDynamicSlice)
def _dynamic_slice(instr, declared):
  operand = instr.operand(0).shape
  sizes = instr.dynamic_slice_sizes
  if len(sizes) != operand.rank:
    _fail(f"dynamic_slice_sizes {list(sizes)} must have one entry per "
          f"dimension of {_s(operand)}")
  for i, o in enumerate(instr.operands[1:], 1):
    if not primitive_util.is_integral(o.shape.element_type):
      _fail(f"dynamic-slice start index operand {i} must be integral")
  for d, (s, limit) in enumerate(zip(sizes, operand.dimensions)):
    if not 0 <= s <= limit:
      _fail(f"dynamic slice size {s} of dimension {d} is out of bounds for "
            f"{_s(operand)}")
  return _array(operand.element_type, sizes)


@_rule(O.kDynamicUpdateSlice)
def _dynamic_update_slice(instr, declared):
  operand, update = instr.operand(0).shape, instr.operand(1).shape
  if update.rank != operand.rank or (update.element_type !=
                                     operand.element_type):
    _fail(f"dynamic-update-slice update {_s(update)} does not match the "
          f"operand {_s(operand)}")
  for d, (u, o) in enumerate(zip(update.dimensions, operand.dimensions)):
    if u > o:
      _fail(f"dynamic-update-slice update dimension {d} ({u}) exceeds the "
            f"operand's ({o})")
  return operand.without_layout()


@_rule(O.kGetDimensionSize)
def _get_dimension_size(instr, declared):
  operand = instr.operand(0).shape
  if not 0 <= instr.dimensions[0] < operand.rank:
    _fail(f"dimension {instr.dimensions[0]} out of range for {_s(operand)}")
  return shape_util.scalar(P.S32)


@_rule(O.kAfterAll)
def _after_all(instr, declared):
  for o in instr.operands:
    if not o.shape.is_token():
      _fail(f"after-all operands must be tokens, got {_s(o.shape)}")
  return Shape.token()


@_rule(O.kAddDependency)
def _add_dependency(instr, declared):
  return instr.operand(0).shape.without_layout()


def _check_args(computation, operands, what: str) -> None:
  params = computation.parameter_instructions
  if len(params) != len(operands):
    _fail(f"{what} {computation.name} takes {len(params)} parameters but "
          f"gets {len(operands)} operands")
  for i, (p, o) in enumerate(zip(params, operands)):
    if not shape_util.compatible(p.shape, o.shape):
      _fail(f"{what} {computation.name} parameter {i} has shape "
            f"{_s(p.shape)}, but the operand is {_s(o.shape)}")


@_rule(O.kCall, O.kFusion)
def _call(instr, declared):
  comp = instr.to_apply if instr.opcode == O.kCall else instr.attrs["calls"]
  _check_args(comp, instr.operands, "called computation")
  return comp.root_instruction.shape.without_layout()


@_rule(O.kWhile)
def _while(instr, declared):
  init = instr.operand(0).shape
  cond, body = instr.while_condition, instr.while_body
  _check_args(cond, instr.operands, "while condition")
  _check_args(body, instr.operands, "while body")
  cond_result = cond.root_instruction.shape
  if not shape_util.compatible(cond_result, shape_util.scalar(P.PRED)):
    _fail(f"while condition {cond.name} must return pred[], returns "
          f"{_s(cond_result)}")
  body_result = body.root_instruction.shape
  if not shape_util.compatible(body_result, init):
    _fail(f"while body {body.name} returns {_s(body_result)}, but the loop "
          f"state is {_s(init)}")
  return init.without_layout()


@_rule(O.kConditional)
def _conditional(instr, declared):
  branches = instr.branch_computations
  result = None
  for i, comp in enumerate(branches):
    _check_args(comp, [instr.operand(i + 1)], f"branch {i}")
    root = comp.root_instruction.shape
    if result is None:
      result = root
    elif not shape_util.compatible(root, result):
      _fail(f"branch {i} ({comp.name}) returns {_s(root)}, branch 0 "
            f"returns {_s(result)}")
  return result.without_layout()


@_rule(O.kMap)
def _map(instr, declared):
  first = instr.operand(0).shape
  for o in instr.operands:
    if o.shape.dimensions != first.dimensions:
      _fail(f"map operands must have the same dimensions: {_s(o.shape)} vs "
            f"{_s(first)}")
  comp = instr.to_apply
  root = comp.root_instruction.shape
  if not root.is_scalar():
    _fail(f"mapped computation {comp.name} must return a scalar")
  return _array(root.element_type, first.dimensions)


@_rule(O.kSort)
def _sort(instr, declared):
  first = instr.operand(0).shape
  for o in instr.operands:
    if o.shape.dimensions != first.dimensions:
      _fail(f"sort operands must have the same dimensions: {_s(o.shape)} "
            f"vs {_s(first)}")
  if not 0 <= instr.dimensions[0] < max(first.rank, 1):
    _fail(f"sort dimension {instr.dimensions[0]} out of range")
  comp = instr.to_apply
  ps = comp.program_shape()
  if len(ps.parameters) != 2 * instr.operand_count or not (
      shape_util.compatible(ps.result, shape_util.scalar(P.PRED))):
    _fail(f"sort comparator {comp.name} must take {2 * instr.operand_count} "
          f"scalars and return pred[]")
  shapes = [o.shape.without_layout() for o in instr.operands]
  return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


@_rule(O.kReplicaId, O.kPartitionId)
def _device_id(instr, declared):
  return shape_util.scalar(P.U32)


@_rule(O.kDomain)
def _domain(instr, declared):
  return instr.operand(0).shape.without_layout()


@_rule(O.kTopK)
def _topk(instr, declared):
  operand = instr.operand(0).shape
  _need_array(operand, "topk operand")
  k = instr.k
  if operand.rank == 0 or not 0 <= k <= operand.dimensions[-1]:
    _fail(f"topk k={k} is out of range for {_s(operand)}")
  dims = operand.dimensions[:-1] + (k,)
  return Shape.tuple_of([_array(operand.element_type, dims),
                         _array(P.S32, dims)])


@_rule(O.kFft)
def _fft(instr, declared):
  operand = instr.operand(0).shape
  _need_array(operand, "fft operand")
  fft_type = instr.attr("fft_type")
  length = instr.attr("fft_length")
  if not 1 <= len(length) <= 3 or operand.rank < len(length):
    _fail(f"fft_length {list(length)} needs 1 to 3 entries and at most the "
          f"operand rank")
  t = operand.element_type
  tail = operand.dimensions[operand.rank - len(length):]
  name = fft_type.name
  if name in ("FFT", "IFFT"):
    if not primitive_util.is_complex(t) or tail != tuple(length):
      _fail(f"{name} needs a complex operand whose last dimensions are "
            f"{list(length)}; got {_s(operand)}")
    return operand.without_layout()
  if name == "RFFT":
    ct = primitive_util.complex_type_of(t)
    if ct is None or tail != tuple(length):
      _fail(f"RFFT needs an F32/F64 operand whose last dimensions are "
            f"{list(length)}; got {_s(operand)}")
    dims = operand.dimensions[:-1] + (length[-1] // 2 + 1,)
    return _array(ct, dims)
  if not primitive_util.is_complex(t) or tail[:-1] != tuple(length[:-1]) or (
      tail[-1] != length[-1] // 2 + 1):
    _fail(f"IRFFT needs a complex operand with last dimensions "
          f"{list(length[:-1]) + [length[-1] // 2 + 1]}; got {_s(operand)}")
  dims = operand.dimensions[:-1] + (length[-1],)
  return _array(primitive_util.component_type(t), dims)


@_rule(O.kCholesky)
def _cholesky(instr, declared):
  a = instr.operand(0).shape
  if a.rank < 2 or a.dimensions[-1] != a.dimensions[-2] or not (
      si.is_float_or_complex(a.element_type)):
    _fail(f"cholesky needs square floating matrices, got {_s(a)}")
  return a.without_layout()


@_rule(O.kTriangularSolve)
def _triangular_solve(instr, declared):
  a, b = instr.operand(0).shape, instr.operand(1).shape
  if a.rank < 2 or a.dimensions[-1] != a.dimensions[-2] or (
      a.rank != b.rank) or a.element_type != b.element_type:
    _fail(f"triangular-solve needs square a and b of the same rank and "
          f"type, got {_s(a)} and {_s(b)}")
  n = b.dimensions[-2] if instr.attr("left_side") else b.dimensions[-1]
  if n != a.dimensions[-1] or a.dimensions[:-2] != b.dimensions[:-2]:
    _fail(f"triangular-solve shapes do not match: a {_s(a)}, b {_s(b)}")
  return b.without_layout()


@_rule(O.kSetDimensionSize)
def _set_dimension_size(instr, declared):
  operand, size = instr.operand(0).shape, instr.operand(1).shape
  d = instr.dimensions[0]
  if not 0 <= d < operand.rank:
    _fail(f"dimension {d} out of range for {_s(operand)}")
  if not shape_util.compatible(size, shape_util.scalar(P.S32)):
    _fail(f"set-dimension-size size must be s32[], got {_s(size)}")
  dynamic = list(operand.dynamic_dimensions)
  dynamic[d] = True
  return _array(operand.element_type, operand.dimensions, dynamic)


@_rule(O.kScatter)
def _scatter(instr, declared):
  n = instr.operand_count // 2
  inputs = [o.shape for o in instr.operands[:n]]
  indices = instr.operand(n).shape
  updates = [o.shape for o in instr.operands[n + 1:]]
  d = instr.scatter_dimension_numbers
  first = inputs[0]
  for s in inputs + updates:
    _need_array(s, "scatter operand")
  if not primitive_util.is_integral(indices.element_type):
    _fail(f"scatter indices must be integral, got {_s(indices)}")
  ivd = d.index_vector_dim
  if not 0 <= ivd <= indices.rank:
    _fail(f"scatter index_vector_dim {ivd} out of bounds for "
          f"{_s(indices)}")
  scatter_dims = [x for i, x in enumerate(indices.dimensions) if i != ivd]
  window = len(d.update_window_dims)
  if len(d.inserted_window_dims) + len(d.input_batching_dims) + window != (
      first.rank):
    _fail(f"scatter: update_window_dims ({window}) + inserted_window_dims "
          f"+ input_batching_dims must equal the operand rank {first.rank}")
  index_len = indices.dimensions[ivd] if ivd < indices.rank else 1
  if len(d.scatter_dims_to_operand_dims) != index_len:
    _fail(f"scatter_dims_to_operand_dims has "
          f"{len(d.scatter_dims_to_operand_dims)} entries; the index vector "
          f"has {index_len}")
  for i, (inp, upd) in enumerate(zip(inputs, updates)):
    if inp.dimensions != first.dimensions:
      _fail(f"scatter input {i} {_s(inp)} differs from {_s(first)}")
    if upd.rank != len(scatter_dims) + window:
      _fail(f"scatter update {i} {_s(upd)} must have rank "
            f"{len(scatter_dims) + window}")
    upd_scatter = [x for j, x in enumerate(upd.dimensions)
                   if j not in d.update_window_dims]
    if upd_scatter != scatter_dims:
      _fail(f"scatter update {i} {_s(upd)} scatter dimensions "
            f"{upd_scatter} do not match the indices' {scatter_dims}")
  to_apply = instr.to_apply
  si.check_reducer(to_apply, [shape_util.scalar(s.element_type)
                            for s in inputs], "scatter")
  results = [s.without_layout() for s in inputs]
  return results[0] if n == 1 else Shape.tuple_of(results)


@_rule(O.kSelectAndScatter)
def _select_and_scatter(instr, declared):
  operand, source, init = (o.shape for o in instr.operands)
  window = instr.window
  if len(window.dimensions) != operand.rank:
    _fail(f"window has {len(window.dimensions)} dimensions, operand "
          f"{_s(operand)} has {operand.rank}")
  want = tuple(si.window_output_size(s, w)
               for s, w in zip(operand.dimensions, window.dimensions))
  if source.dimensions != want:
    _fail(f"select-and-scatter source {_s(source)} must have dimensions "
          f"{list(want)}")
  if not init.is_scalar() or init.element_type != source.element_type:
    _fail(f"select-and-scatter init value must be a scalar of the source "
          f"type, got {_s(init)}")
  select = instr.attr("select").program_shape()
  if not shape_util.compatible(select.result, shape_util.scalar(P.PRED)):
    _fail("select-and-scatter select computation must return pred[]")
  return operand.without_layout()


@_rule(O.kAllReduce, O.kAllReduceStart)
def _all_reduce(instr, declared):
  shapes = [o.shape.without_layout() for o in instr.operands]
  return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


@_rule(O.kBatchNormTraining, O.kBatchNormInference, O.kBatchNormGrad)
def _batch_norm(instr, declared):
  operand = instr.operand(0).shape
  index = instr.attr("feature_index")
  if not 0 <= index < operand.rank:
    _fail(f"feature_index {index} out of range for {_s(operand)}")
  feature = _array(operand.element_type, (operand.dimensions[index],))
  for i, o in enumerate(instr.operands[1:], 1):
    if instr.opcode == O.kBatchNormGrad and i == 4:
      want = operand
    else:
      want = feature
    if not shape_util.compatible(o.shape, want):
      _fail(f"batch norm operand {i} is {_s(o.shape)}, expected "
            f"{_s(want)}")
  if instr.opcode == O.kBatchNormInference:
    return operand.without_layout()
  return Shape.tuple_of([operand.without_layout(), feature, feature])


def infer_instruction_shape(instr, declared: Optional[Shape] = None) -> Shape:
  """The shape `instr` must have; see the module docstring."""
  rule = RULES.get(instr.opcode)
  if rule is None:
    if declared is None:
      _fail(f"cannot infer shape for opcode: {instr.opcode.value}")
    raise support.UnimplementedError(
        f"Unimplemented: shape inference for {instr.opcode.value}")
  arity = hlo_opcode.arity(instr.opcode)
  n = instr.operand_count
  if arity is not None and n != arity:
    _fail(f"expects {arity} operands, but has {n}")
  minimum = _MIN_OPERANDS.get(instr.opcode, 0)
  if n < minimum:
    _fail(f"expects at least {minimum} operands, but has {n}")
  if instr.opcode in (O.kReduce, O.kReduceWindow) and n % 2:
    _fail(f"expects an even number of operands, but has {n}")
  if instr.opcode == O.kScatter and n % 2 == 0:
    _fail(f"expects an odd number of operands, but has {n}")
  if instr.opcode in _ONE_DIMENSION and len(instr.dimensions) != 1:
    _fail(f"expects exactly one dimension, got {list(instr.dimensions)}")
  return rule(instr, declared)


# Structure every rule may rely on.
_MIN_OPERANDS = {
    O.kReduce: 2, O.kReduceWindow: 2, O.kScatter: 3, O.kSort: 1,
    O.kMap: 1, O.kConcatenate: 1, O.kDynamicSlice: 1,
    O.kDynamicUpdateSlice: 2, O.kAllReduce: 1, O.kAllReduceStart: 1,
    O.kConditional: 2,
}
_ONE_DIMENSION = frozenset({O.kConcatenate, O.kSort, O.kGetDimensionSize,
                            O.kSetDimensionSize})


def covered_opcodes() -> frozenset[HloOpcode]:
  return frozenset(RULES)
