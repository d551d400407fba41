"""Tests for the op registry and the spec constraint table."""

import inspect

import pytest

import support
from stablehlo._src.ops import registry
from stablehlo._src.ops import spec_constraints as sc


def test_every_spec_op_is_registered():
  assert len(sc.SPEC_OPS) == 108
  for name in sc.SPEC_OPS:
    d = registry.get("stablehlo." + name)
    assert d.spec == name


def test_dialect_interop_ops_registered():
  for name in ("func.func", "func.call", "func.return", "stablehlo.composite",
               "stablehlo.return", "chlo.erf", "chlo.erfc", "chlo.top_k",
               "chlo.mulhi", "chlo.ragged_dot", "chlo.scan", "chlo.lgamma",
               "ml_program.global", "ml_program.global_load",
               "ml_program.global_store", "ml_program.global_load_const",
               "check.expect_eq", "check.expect_eq_const",
               "check.expect_almost_eq", "check.expect_almost_eq_const",
               "check.expect_close", "check.expect_serialized_eq",
               "interpreter.run_parallel", "interpreter.probe",
               "interpreter.print", "builtin.module"):
    assert registry.lookup(name) is not None, name


def test_verifier_ids_exist_in_spec_table():
  for d in registry.all_ops():
    for cid in d.checks:
      assert cid in sc.SUMMARY, (d.name, cid)
      assert cid.startswith(d.short_name + "_c"), (d.name, cid)


def test_spec_ops_have_verifiers_and_coverage():
  checked = total = 0
  for name in sc.SPEC_OPS:
    d = registry.get("stablehlo." + name)
    assert d.verify is not None, name
    checked += len(d.checks)
    total += len(sc.CONSTRAINTS[name])
  assert total == 453
  assert checked >= 400


def test_a_search_for_the_full_name_finds_the_definition():
  # define_op takes the full name, so the family module that defines a
  # StableHLO op spells it out ("stablehlo.slice", not "slice").
  for d in registry.all_ops():
    if d.dialect != "stablehlo" or d.verify is None:
      continue
    source = inspect.getsource(inspect.getmodule(d.verify))
    assert f'"{d.name}"' in source, (d.name, d.verify.__module__)


def test_lookup_and_errors():
  assert registry.lookup("nope.op") is None
  with pytest.raises(support.NotFoundError):
    registry.get("nope.op")
  with pytest.raises(support.AlreadyExistsError):
    registry.register(registry.OpDef("stablehlo.add"))
  assert [d.name for d in registry.all_ops()] == sorted(
      d.name for d in registry.all_ops())
  assert "stablehlo.add" in {d.name for d in
                             registry.with_trait(registry.COMMUTATIVE)}


def test_slots():
  d = registry.get("stablehlo.negate")
  old = (d.pretty, d.interpreter, d.unsupported.copy())
  try:
    registry.set_pretty("stablehlo.negate", "unary")
    registry.register_interpreter("stablehlo.negate", lambda *a: None)
    assert d.pretty == "unary" and d.interpreter is not None
    assert "stablehlo.negate" not in registry.missing(
        "interpreter", ["stablehlo.negate"])
    registry.mark_unsupported("stablehlo.negate", "cpu_codegen", "test")
    assert registry.missing("cpu_codegen", ["stablehlo.negate"]) == []
    with pytest.raises(support.InvalidArgumentError):
      registry.set_slot("stablehlo.negate", "bogus", 1)
  finally:
    d.pretty, d.interpreter, d.unsupported = old
