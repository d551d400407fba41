"""Verifier tests for control flow."""

from stablehlo._src.ops import testing as tt
from stablehlo._src.ops.testing import T, op
from stablehlo._src.ops.testing import region


def check(o, cid):
  msg = tt.error_of(o)
  if cid is None:
    assert msg is None, msg
  else:
    assert msg is not None and cid in msg, msg


def test_case_if():
  b = lambda rets: region([], [T(x) for x in rets])  # pylint: disable=g-long-lambda
  check(op("stablehlo.case", [T("i32")], [T("2xf32")],
           regions=[b(["2xf32"]), b(["2xf32"])]), None)
  check(op("stablehlo.case", [T("i32")], [], regions=[]), "case_c1")
  check(op("stablehlo.case", [T("i32")], [T("2xf32")],
           regions=[region([T("f32")], [T("2xf32")])]), "case_c2")
  check(op("stablehlo.case", [T("i32")], [T("2xf32")],
           regions=[b(["2xf32"]), b(["3xf32"])]), "case_c3")
  check(op("stablehlo.case", [T("i32")], [T("3xf32")],
           regions=[b(["2xf32"])]), "case_c4")
  check(op("stablehlo.if", [T("i1")], [T("2xf32")],
           regions=[b(["2xf32"]), b(["2xf32"])]), None)
  check(op("stablehlo.if", [T("i1")], [T("2xf32")],
           regions=[region([T("f32")], [T("2xf32")]), b(["2xf32"])]),
        "if_c1")
  check(op("stablehlo.if", [T("i1")], [T("2xf32")],
           regions=[b(["2xf32"]), b(["2xi32"])]), "if_c2")
  check(op("stablehlo.if", [T("i1")], [T("2xi32")],
           regions=[b(["2xf32"]), b(["2xf32"])]), "if_c3")
  check(op("stablehlo.if", [T("2xi1")], [T("2xf32")],
           regions=[b(["2xf32"]), b(["2xf32"])]), "if_schema")


def test_while_barrier():
  ts = [T("i32"), T("2xf32")]
  cond = region(ts, [T("i1")])
  body = region(ts, ts)
  check(op("stablehlo.while", ts, ts, regions=[cond, body]), None)
  check(op("stablehlo.while", ts, ts,
           regions=[region(ts, [T("i32")]), body]), "while_c1")
  check(op("stablehlo.while", ts, ts,
           regions=[cond, region(ts, ts[:1])]), "while_c2")
  check(op("stablehlo.while", ts, ts[:1], regions=[cond, body]), "while_c3")
  check(op("stablehlo.optimization_barrier", ts, ts), None)
  check(op("stablehlo.optimization_barrier", ts, ts[:1]),
        "optimization_barrier_c1")
