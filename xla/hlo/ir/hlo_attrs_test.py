"""Tests for the per-opcode attribute table."""

from xla import xla_data
from xla.hlo.ir import hlo_attrs as ha
from xla.hlo.ir.hlo_attrs import AttrKind
from xla.hlo.ir.hlo_opcode import HloOpcode as O


def test_names_unique_per_opcode():
  for op, specs in ha.OPCODE_ATTRS.items():
    names = [s.name for s in specs]
    assert len(names) == len(set(names)), op
    common = {s.name for _, s in ha.COMMON_ATTRS}
    assert not set(names) & common, op


def test_enum_specs_have_defaults_in_their_enum():
  for specs in ha.OPCODE_ATTRS.values():
    for s in specs:
      if s.kind == AttrKind.ENUM and s.enum is not None and (
          s.default is not None):
        assert s.enum.parse(s.enum.text(s.default)) == s.default


def test_enum_spellings():
  assert ha.DISTRIBUTION.text(xla_data.RandomDistribution.RNG_UNIFORM) == (
      "rng_uniform")
  assert ha.RNG_ALGORITHM.parse("rng_three_fry") == (
      xla_data.RandomAlgorithm.RNG_THREE_FRY)
  assert ha.PRECISION_ALGORITHM.text(
      xla_data.PrecisionAlgorithm.ALG_DOT_BF16_BF16_F32) == "dot_bf16_bf16_f32"
  assert ha.PRECISION.parse("highest") == xla_data.Precision.HIGHEST
  assert ha.FUSION_KIND.parse("kLoop") == ha.FusionKind.kLoop
  assert ha.API_VERSION.parse("API_VERSION_UNSPECIFIED") is None


def test_should_print():
  stable = ha.attr_spec(O.kSort, "is_stable")
  assert not stable.should_print(False) and stable.should_print(True)
  largest = ha.attr_spec(O.kTopK, "largest")
  assert largest.should_print(None)  # printed even when unset
  dims = ha.attr_spec(O.kBroadcast, "dimensions")
  assert dims.should_print(()) and dims.should_print(None)
  prec = ha.attr_spec(O.kDot, "operand_precision")
  default = xla_data.Precision.DEFAULT
  assert not prec.should_print((default, default))
  assert prec.should_print((default, xla_data.Precision.HIGH))


def test_computation_attrs_and_unsupported():
  assert ha.computation_attr_names(O.kWhile) == ("condition", "body")
  assert ha.computation_attr_names(O.kConditional) == (
      "true_computation", "false_computation", "branch_computations")
  assert ha.attr_spec(O.kAdd, "dimensions") is None
  assert set(ha.UNSUPPORTED_OPCODES) == {O.kShuffle, O.kCollectiveReduce}


def test_lookup_tables_agree_with_the_schema():
  # attr_spec / computation_attr_names use tables built from OPCODE_ATTRS;
  # check them against a scan of the schema for every opcode.
  for op in O:
    specs = ha.OPCODE_ATTRS.get(op, ())
    for s in specs:
      assert ha.attr_spec(op, s.name) is s
    assert ha.attr_spec(op, "no_such_attribute") is None
    want = tuple(s.name for s in specs
                 if s.kind in (AttrKind.COMPUTATION, AttrKind.COMPUTATION_LIST))
    assert ha.computation_attr_names(op) == want, op
  assert ha.computation_attr_names(O.kAdd) == ()
  assert ha.computation_attr_names(O.kFusion) == ("calls",)
