"""Tests of the StableHLO -> HLO import."""

import pytest

import support
from stablehlo import text
from stablehlo.ops import registry
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser
from xla.service import hlo_verifier
from xla.translate import stablehlo_to_hlo as s2h


def _import(src, **kw):
  hlo = s2h.stablehlo_to_hlo(text.parse_module(src), **kw)
  hlo_verifier.verify(hlo)
  # Print -> parse -> verify must work for every imported module.
  hlo_verifier.verify(
      hlo_parser.parse_and_return_unverified_module(hlo.to_string()))
  return hlo


def _opcodes(comp):
  return [i.opcode for i in comp.instructions]


def test_elementwise_and_shapes():
  hlo = _import("""
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xi1> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  %1 = stablehlo.compare LT, %0, %b, FLOAT : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  return %1 : tensor<2x3xi1>
}""")
  entry = hlo.entry_computation
  assert _opcodes(entry) == [HloOpcode.kParameter, HloOpcode.kParameter,
                             HloOpcode.kAdd, HloOpcode.kCompare]
  assert entry.root_instruction.shape.to_string(True) == "pred[2,3]{1,0}"
  assert entry.root_instruction.comparison_direction.name == "LT"


def test_broadcast_in_dim_drops_expanded_unit_dims():
  hlo = _import("""
func.func @main(%a: tensor<1x3xf32>) -> tensor<4x3xf32> {
  %0 = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<1x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}""")
  root = hlo.entry_computation.root_instruction
  assert root.opcode == HloOpcode.kBroadcast
  assert root.dimensions == (1,)
  assert root.operand(0).opcode == HloOpcode.kReshape
  assert root.operand(0).shape.dimensions == (3,)


def test_call_is_inlined_and_multiple_results_tuple():
  hlo = _import("""
func.func @main(%a: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %0 = call @twice(%a) : (tensor<f32>) -> tensor<f32>
  return %0, %a : tensor<f32>, tensor<f32>
}
func.func private @twice(%x: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %x, %x : tensor<f32>
  return %0 : tensor<f32>
}""")
  assert hlo.computation_count == 1
  root = hlo.entry_computation.root_instruction
  assert root.opcode == HloOpcode.kTuple
  assert root.operand(0).opcode == HloOpcode.kAdd


def test_reduce_builds_to_apply():
  hlo = _import("""
func.func @main(%a: tensor<2x3xf32>) -> tensor<2xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}""")
  root = hlo.entry_computation.root_instruction
  assert root.opcode == HloOpcode.kReduce
  assert root.dimensions == (1,)
  body = root.to_apply
  assert body.num_parameters == 2
  assert body.root_instruction.opcode == HloOpcode.kAdd


def test_while_captures_outer_value():
  hlo = _import("""
func.func @main(%n: tensor<i32>, %step: tensor<i32>) -> tensor<i32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.while(%i = %c0) : tensor<i32>
   cond {
    %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %s = stablehlo.add %i, %step : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }
  return %0 : tensor<i32>
}""")
  loops = [i for i in hlo.entry_computation.instructions
           if i.opcode == HloOpcode.kWhile]
  assert len(loops) == 1
  # The loop state is (i, n, step): the loop variable plus two captures.
  assert len(loops[0].shape.tuple_shapes) == 3


def test_check_custom_call_is_side_effecting():
  hlo = _import("""
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  stablehlo.custom_call @check.expect_close(%a, %a) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
  return %a : tensor<2xf32>
}""")
  calls = [i for i in hlo.entry_computation.instructions
           if i.opcode == HloOpcode.kCustomCall]
  assert len(calls) == 1
  assert calls[0].custom_call_target == "check.expect_close"
  assert calls[0].has_side_effect()
  assert calls[0].shape.is_tuple() and not calls[0].shape.tuple_shapes


def test_typed_ffi_custom_call_keeps_its_attributes():
  """JAX's FFI calls carry their attributes in mhlo.backend_config (a
  dictionary, kept as its text as XLA does) and mhlo.frontend_attributes."""
  hlo = _import("""
func.func @main(%a: tensor<2x3x3xf32>) -> tensor<2x3x3xf32> {
  %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {backend_config = "", mhlo.backend_config = {uplo = 76 : ui8, flag = true}, mhlo.frontend_attributes = {num_batch_dims = "1"}} : (tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2xi32>)
  return %0#0 : tensor<2x3x3xf32>
}""")
  call, = [i for i in hlo.entry_computation.instructions
           if i.opcode == HloOpcode.kCustomCall]
  assert call.backend_config in ("{uplo = 76 : ui8, flag = true}",
                                 "{flag = true, uplo = 76 : ui8}")
  assert call.frontend_attributes == {"num_batch_dims": "1"}
  assert "API_VERSION_TYPED_FFI" in call.to_string()


def test_globals_become_parameters_and_outputs():
  hlo = _import("""
module {
  ml_program.global private mutable @counter(dense<1> : tensor<i32>) : tensor<i32>
  func.func @main() -> tensor<i32> {
    %0 = ml_program.global_load @counter : tensor<i32>
    %1 = stablehlo.add %0, %0 : tensor<i32>
    ml_program.global_store @counter = %1 : tensor<i32>
    return %0 : tensor<i32>
  }
}""")
  entry = hlo.entry_computation
  assert entry.num_parameters == 1
  root = entry.root_instruction
  assert root.opcode == HloOpcode.kTuple
  assert root.operand(0).opcode == HloOpcode.kParameter
  assert root.operand(1).opcode == HloOpcode.kAdd
  assert hlo.frontend_attributes[s2h.GLOBALS_ATTRIBUTE] == "counter"


def test_chlo_op_is_unimplemented_and_named():
  m = text.parse_module("""
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = chlo.erf %a : tensor<2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}""")
  with pytest.raises(support.UnimplementedError, match="chlo.erf"):
    s2h.stablehlo_to_hlo(m)


def test_every_interpreted_op_has_a_lowering_or_a_reason():
  s2h.stablehlo_to_hlo(text.parse_module(
      "func.func @main() -> () {\n  return\n}"))
  from stablehlo import interpreter  # pylint: disable=unused-import
  interpreted = [d.name for d in registry.all_ops()
                 if d.interpreter is not None]
  assert registry.missing("hlo_lowering", interpreted) == []


def test_entry_selection():
  m = text.parse_module("""
func.func @f(%a: tensor<f32>) -> tensor<f32> {
  return %a : tensor<f32>
}
func.func @g(%a: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.negate %a : tensor<f32>
  return %0 : tensor<f32>
}""")
  with pytest.raises(support.InvalidArgumentError):
    s2h.stablehlo_to_hlo(m)
  hlo = s2h.stablehlo_to_hlo(m, entry="g")
  assert hlo.entry_computation.root_instruction.opcode == HloOpcode.kNegate


def test_splat_constants_become_broadcast_scalars():
  # A splat, written as one value or spelled out element by element (as
  # CHLO legalization makes them), is a broadcast of a scalar constant; a
  # constant with distinct elements, or with NaNs of different bits, stays.
  hlo = _import("""
func.func @main() -> (tensor<64x32xf32>, tensor<3xf32>, tensor<2xf32>, tensor<1xf32>) {
  %a = stablehlo.constant dense<0.5> : tensor<64x32xf32>
  %b = stablehlo.constant dense<[7.0, 7.0, 7.0]> : tensor<3xf32>
  %c = stablehlo.constant dense<[0x7FC00000, 0x7FC00001]> : tensor<2xf32>
  %d = stablehlo.constant dense<[1.0]> : tensor<1xf32>
  return %a, %b, %c, %d : tensor<64x32xf32>, tensor<3xf32>, tensor<2xf32>, tensor<1xf32>
}""")
  outs = hlo.entry_computation.root_instruction.operands
  for out, value in zip(outs[:2], (0.5, 7.0)):
    assert out.opcode == HloOpcode.kBroadcast, out
    scalar = out.operand(0)
    assert scalar.opcode == HloOpcode.kConstant
    assert scalar.shape.dimensions == ()
    assert float(scalar.literal.array) == value
  assert outs[0].shape.dimensions == (64, 32)
  assert [o.opcode for o in outs[2:]] == [HloOpcode.kConstant] * 2


def test_collectives():
  hlo = _import("""
func.func @main(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<2x4xf32>,
                                         tensor<4x2xf32>, tensor<4x2xf32>) {
  %ar = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1], [2, -1]]> : tensor<2x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>,
      use_global_device_ids} : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %a2a = "stablehlo.all_to_all"(%x) {split_dimension = 0 : i64,
      concat_dimension = 1 : i64, split_count = 2 : i64,
      replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}
      : (tensor<4x2xf32>) -> tensor<2x4xf32>
  %cp = "stablehlo.collective_permute"(%x) {
      source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}
      : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %cb = "stablehlo.collective_broadcast"(%x) {
      replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>}
      : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %ar, %a2a, %cp, %cb : tensor<4x2xf32>, tensor<2x4xf32>,
      tensor<4x2xf32>, tensor<4x2xf32>
}""")
  by_op = {i.opcode: i for i in hlo.entry_computation.instructions}
  ar = by_op[HloOpcode.kAllReduce]
  assert ar.attr("replica_groups") == ((0, 1), (2,))
  assert ar.attr("channel_id") == 3 and ar.attr("use_global_device_ids")
  a2a = by_op[HloOpcode.kAllToAll]
  assert a2a.attr("dimensions") == (0,) and a2a.attr("channel_id") is None
  # split 0, concat 1: the received blocks move to dimension 1.
  assert by_op[HloOpcode.kTranspose].dimensions == (1, 0, 2)
  assert by_op[HloOpcode.kCollectivePermute].attr(
      "source_target_pairs") == ((0, 1), (1, 0))
  assert by_op[HloOpcode.kCollectiveBroadcast].attr("channel_id") == 1


def test_approx_top_k_is_a_sort_and_slices():
  # lax.approx_max_k as JAX lowers it; XLA's CPU compiler runs the exact
  # fallback: sort by the comparator, keep the first k.
  m = _import("""
func.func @cmp(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>) -> tensor<i1> {
  %0 = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
  stablehlo.return %0 : tensor<i1>
}
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xi32>) {
  %i = stablehlo.iota dim = 1 : tensor<2x4xi32>
  %c = stablehlo.constant dense<-1> : tensor<i32>
  %f = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0:2 = stablehlo.custom_call @ApproxTopK(%x, %i, %f, %c) {backend_config = "", called_computations = [@cmp], mhlo.backend_config = {aggregate_to_topk = true, is_fallback = true, recall_target = 0.95 : f32, reduction_dim = 1 : i64, reduction_input_size_override = -1 : i64, top_k = 2 : i64}} : (tensor<2x4xf32>, tensor<2x4xi32>, tensor<f32>, tensor<i32>) -> (tensor<2x2xf32>, tensor<2x2xi32>)
  return %0#0, %0#1 : tensor<2x2xf32>, tensor<2x2xi32>
}
""")
  ops = _opcodes(m.entry_computation)
  assert HloOpcode.kSort in ops and HloOpcode.kCustomCall not in ops
  assert ops.count(HloOpcode.kSlice) == 2
