"""Tests for the VHLO op table."""

from stablehlo._src.vhlo import ops
from stablehlo._src.vhlo import version as v


def test_table_size():
  # StableHLO 1.20.0 defines 145 VHLO ops over 120 op names.
  assert len(ops.OPS) == 145
  assert len(ops.VERSIONS) == 120
  assert sum(len(d) > 1 for d in ops.VERSIONS.values()) == 25


def test_versions_are_contiguous_and_end_current():
  for base, defs in ops.VERSIONS.items():
    assert defs[-1].max_version is None, base
    assert [d.number for d in defs] == list(range(1, len(defs) + 1)), base
    for older, newer in zip(defs, defs[1:]):
      assert older.max_version < newer.min_version, base


def test_known_definitions():
  dot2 = ops.lookup("vhlo.dot_general_v2")
  assert dot2.min_version == v.Version(1, 6, 0)
  assert dot2.attributes[:4] == ("lhs_batching_dimensions",
                                 "rhs_batching_dimensions",
                                 "lhs_contracting_dimensions",
                                 "rhs_contracting_dimensions")
  assert len(dot2.attributes) == 12
  assert ops.lookup("compare_v1").property_names == ("compare_type",
                                                     "comparison_direction")
  assert ops.lookup("func_v1").property_names == (
      "arg_attrs", "function_type", "res_attrs", "sym_name", "sym_visibility")
  assert ops.lookup("add_v1").attributes == ()
  assert ops.lookup("nope_v1") is None


def test_version_selection():
  assert ops.latest("all_reduce").name == "all_reduce_v2"
  assert ops.for_target("cbrt", v.Version(1, 9, 0)).name == "cbrt_v1"
  assert ops.for_target("cbrt", v.Version(1, 10, 0)).name == "cbrt_v2"
  assert ops.for_target("exponential", v.Version(1, 9, 0)).name == \
      "exponential_v2"
  # A patch release uses the op set of its minor version.
  assert ops.for_target("all_to_all", v.Version(1, 4, 1)).name == \
      "all_to_all_v1"
  assert ops.for_target("collective_reduce", v.Version(1, 18, 0)) is None
  assert ops.for_target("tan", v.Version(1, 3, 0)) is None


def test_name_mapping():
  assert ops.vhlo_base("stablehlo.add") == "add"
  assert ops.vhlo_base("stablehlo.cross-replica-sum") == "cross-replica-sum"
  assert ops.vhlo_base("func.func") == "func"
  assert ops.vhlo_base("func.call") == "call"
  assert ops.vhlo_base("func.return") == "return"
  assert ops.vhlo_base("stablehlo.return") == "return"
  assert ops.vhlo_base("chlo.erf") is None
  assert ops.vhlo_base("stablehlo.func") is None
  assert ops.stablehlo_name("func") == "func.func"
  assert ops.stablehlo_name("dot_general") == "stablehlo.dot_general"
