"""Verifier tests for shape ops."""

import pytest

from stablehlo._src.ops import testing as tt
from stablehlo._src.ops import verify
from stablehlo._src.ops.testing import T, dense, i64, i64s, op, quant

QA = quant("i8", "f32", (0.5, 0.5), axis=0)


def check(o, cid):
  msg = tt.error_of(o)
  if cid is None:
    assert msg is None, msg
  else:
    assert msg is not None and cid in msg, msg


def bid(src, dst, dims):
  return op("stablehlo.broadcast_in_dim", [T(src)], [T(dst)],
            broadcast_dimensions=i64s(*dims))


@pytest.mark.parametrize("o,cid", [
    (bid("1x3xf32", "2x4x3xf32", (0, 2)), None),
    (bid("?x3xf32", "2x4x3xf32", (0, 2)), None),
    (bid("3xf32", "2x3xi32", (1,)), "broadcast_in_dim_c1"),
    (bid("3xf32", "2x3xf32", (0, 1)), "broadcast_in_dim_c2"),
    (bid("3xf32", "2x3xf32", (2,)), "broadcast_in_dim_c3"),
    (bid("3x3xf32", "3x3xf32", (1, 1)), "broadcast_in_dim_c4"),
    (bid("3xf32", "2x4xf32", (1,)), "broadcast_in_dim_c5"),
    (op("stablehlo.broadcast_in_dim", [T("2x3", QA)],
        [T("2x2x3", QA)],
        broadcast_dimensions=i64s(1, 2)), "broadcast_in_dim_c6"),
])
def test_broadcast_in_dim(o, cid):
  check(o, cid)


def dbid(src, dst, dims, n, **kw):
  return op("stablehlo.dynamic_broadcast_in_dim", [T(src), T(f"{n}xi64")],
            [T(dst)], broadcast_dimensions=i64s(*dims), **kw)


@pytest.mark.parametrize("o,cid", [
    (dbid("?x3xf32", "?x?x3xf32", (1, 2), 3), None),
    (dbid("3xf32", "?x3xf32", (1,), 3), "dynamic_broadcast_in_dim_c7"),
    (dbid("3xf32", "?x3xf32", (1,), 2, known_expanding_dimensions=i64s(0),
          known_nonexpanding_dimensions=i64s(0)),
     "dynamic_broadcast_in_dim_c8"),
    (dbid("3xf32", "?x3xf32", (1,), 2, known_expanding_dimensions=i64s(1)),
     "dynamic_broadcast_in_dim_c9"),
    (dbid("3xf32", "?x3xf32", (1,), 2,
          known_nonexpanding_dimensions=i64s(4)),
     "dynamic_broadcast_in_dim_c10"),
    (dbid("3xf32", "?x3xf32", (5,), 2), "dynamic_broadcast_in_dim_c3"),
])
def test_dynamic_broadcast_in_dim(o, cid):
  check(o, cid)


@pytest.mark.parametrize("src,dst,cid", [
    ("2x3xf32", "6xf32", None), ("2x?xf32", "6xf32", None),
    ("2x3xf32", "6xi32", "reshape_c1"), ("2x3xf32", "5xf32", "reshape_c2")])
def test_reshape(src, dst, cid):
  check(op("stablehlo.reshape", [T(src)], [T(dst)]), cid)


def test_reshape_per_axis():
  q1 = quant("i8", "f32", (0.5, 0.5), axis=1)
  check(op("stablehlo.reshape", [T("2x3", QA)], [T("2x3x1", QA)]), None)
  check(op("stablehlo.reshape", [T("2x3", QA)], [T("3x2", q1)]),
        "reshape_c3")


def test_dynamic_reshape():
  check(op("stablehlo.dynamic_reshape", [T("2x3xf32"), T("2xi64")],
           [T("?x?xf32")]), None)
  check(op("stablehlo.dynamic_reshape", [T("2x3xf32"), T("3xi64")],
           [T("?x?xf32")]), "dynamic_reshape_c4")


@pytest.mark.parametrize("perm,dst,cid", [
    ((1, 0), "3x2xf32", None), ((0, 0), "2x2xf32", "transpose_c2"),
    ((1, 0), "2x3xf32", "transpose_c3"), ((1, 0), "3x2xi8", "transpose_c1")])
def test_transpose(perm, dst, cid):
  check(op("stablehlo.transpose", [T("2x3xf32")], [T(dst)],
           permutation=i64s(*perm)), cid)


def test_transpose_per_axis():
  q1 = quant("i8", "f32", (0.5, 0.5), axis=1)
  check(op("stablehlo.transpose", [T("2x3", QA)], [T("3x2", q1)],
           permutation=i64s(1, 0)), None)
  check(op("stablehlo.transpose", [T("2x2", QA)], [T("2x2", QA)],
           permutation=i64s(1, 0)), "transpose_c4")


@pytest.mark.parametrize("dims,dst,cid", [
    ((0,), "2x3xf32", None), ((0,), "3x2xf32", "reverse_c1"),
    ((1, 1), "2x3xf32", "reverse_c2"), ((2,), "2x3xf32", "reverse_c3")])
def test_reverse(dims, dst, cid):
  check(op("stablehlo.reverse", [T("2x3xf32")], [T(dst)],
           dimensions=i64s(*dims)), cid)


def sl(start, limit, strides, dst="2x2xi64", src="3x4xi64"):
  return op("stablehlo.slice", [T(src)], [T(dst)],
            start_indices=i64s(*start), limit_indices=i64s(*limit),
            strides=i64s(*strides))


@pytest.mark.parametrize("o,cid", [
    (sl((1, 2), (3, 4), (1, 1)), None),
    (sl((0, 0), (3, 4), (2, 3), "2x2xi64"), None),
    (sl((1, 2), (3, 4), (1, 1), "2x2xf32"), "slice_c1"),
    (sl((1,), (3,), (1,)), "slice_c2"),
    (sl((2, 2), (1, 4), (1, 1)), "slice_c3"),
    (sl((1, 2), (3, 5), (1, 1)), "slice_c3"),
    (sl((1, 2), (3, 4), (1, 0)), "slice_c4"),
    (sl((1, 2), (3, 4), (1, 1), "2x3xi64"), "slice_c5"),
])
def test_slice(o, cid):
  check(o, cid)


def test_slice_location_and_message():
  o = sl((1, 2), (3, 5), (1, 1))
  o.location = tt.loc("prog.mlir", 12, 5)
  with pytest.raises(verify.VerificationError) as e:
    verify.verify_op(o)
  msg = str(e.value)
  assert msg.startswith("prog.mlir:12:5: error: 'stablehlo.slice' op "
                        "slice_c3: ")
  assert "(5)" in msg and "(4)" in msg
  assert e.value.constraint == "slice_c3"
  assert isinstance(e.value, ValueError)


def ds(src, idx, sizes, dst):
  return op("stablehlo.dynamic_slice", [T(src)] + [T(x) for x in idx],
            [T(dst)], slice_sizes=i64s(*sizes))


@pytest.mark.parametrize("o,cid", [
    (ds("4x4xf32", ["i32", "i32"], (2, 2), "2x2xf32"), None),
    (ds("4x4xf32", ["i32", "i32"], (2, 2), "2x2xi32"), "dynamic_slice_c1"),
    (ds("4x4xf32", ["i32"], (2, 2), "2x2xf32"), "dynamic_slice_c2"),
    (ds("4x4xf32", ["i32", "i64"], (2, 2), "2x2xf32"), "dynamic_slice_c3"),
    (ds("4x4xf32", ["i32", "i32"], (2, 5), "2x5xf32"), "dynamic_slice_c4"),
    (ds("4x4xf32", ["i32", "i32"], (2, 2), "2x3xf32"), "dynamic_slice_c5"),
])
def test_dynamic_slice(o, cid):
  check(o, cid)


def dus(src, upd, idx, dst):
  return op("stablehlo.dynamic_update_slice",
            [T(src), T(upd)] + [T(x) for x in idx], [T(dst)])


@pytest.mark.parametrize("o,cid", [
    (dus("4x4xf32", "2x2xf32", ["i32", "i32"], "4x4xf32"), None),
    (dus("4x4xf32", "2x2xf32", ["i32", "i32"], "4x5xf32"),
     "dynamic_update_slice_c1"),
    (dus("4x4xf32", "2x2xi32", ["i32", "i32"], "4x4xf32"),
     "dynamic_update_slice_c2"),
    (dus("4x4xf32", "2xf32", ["i32", "i32"], "4x4xf32"),
     "dynamic_update_slice_c3"),
    (dus("4x4xf32", "2x2xf32", ["i32"], "4x4xf32"),
     "dynamic_update_slice_c4"),
    (dus("4x4xf32", "2x2xf32", ["i32", "i64"], "4x4xf32"),
     "dynamic_update_slice_c5"),
    (dus("4x4xf32", "2x5xf32", ["i32", "i32"], "4x4xf32"),
     "dynamic_update_slice_c6"),
])
def test_dynamic_update_slice(o, cid):
  check(o, cid)


def pad(src, pv, lo, hi, interior, dst):
  return op("stablehlo.pad", [T(src), T(pv)], [T(dst)],
            edge_padding_low=i64s(*lo), edge_padding_high=i64s(*hi),
            interior_padding=i64s(*interior))


@pytest.mark.parametrize("o,cid", [
    (pad("2x3xf32", "f32", (0, 1), (2, 1), (1, 0), "5x5xf32"), None),
    (pad("2x3xf32", "f32", (-1, 0), (0, 0), (0, 0), "1x3xf32"), None),
    (pad("2x3xf32", "i32", (0, 0), (0, 0), (0, 0), "2x3xf32"), "pad_c1"),
    (pad("2x3xf32", "f32", (0,), (0, 0), (0, 0), "2x3xf32"), "pad_c2"),
    (pad("2x3xf32", "f32", (0, 0), (0, 0), (0, -1), "2x1xf32"), "pad_c3"),
    (pad("2x3xf32", "f32", (0, 0), (0, 0), (0, 0), "2x4xf32"), "pad_c4"),
])
def test_pad(o, cid):
  check(o, cid)


def test_dynamic_pad():
  def dp(src, pv, n, dst):
    return op("stablehlo.dynamic_pad",
              [T(src), T(pv)] + [T(f"{n}xi64")] * 3, [T(dst)])
  check(dp("2x3xf32", "f32", 2, "?x?xf32"), None)
  check(dp("2x3xf32", "i32", 2, "?x?xf32"), "dynamic_pad_c1")
  check(dp("2x3xf32", "f32", 3, "?x?xf32"), "dynamic_pad_c2")
  check(dp("2x3xf32", "f32", 2, "?xf32"), "dynamic_pad_c4")


def cat(srcs, dim, dst):
  return op("stablehlo.concatenate", [T(s) for s in srcs], [T(dst)],
            dimension=i64(dim))


@pytest.mark.parametrize("o,cid", [
    (cat(["2x3xf32", "4x3xf32"], 0, "6x3xf32"), None),
    (cat(["2x3xf32", "?x3xf32"], 0, "?x3xf32"), None),
    (cat(["2x3xf32", "4x3xi32"], 0, "6x3xf32"), "concatenate_c1"),
    (cat(["2x3xf32", "4x2xf32"], 0, "6x3xf32"), "concatenate_c2"),
    (cat([], 0, "6x3xf32"), "concatenate_c3"),
    (cat(["2x3xf32", "4x3xf32"], 2, "6x3xf32"), "concatenate_c4"),
    (cat(["2x3xf32", "4x3xf32"], 0, "6x3xi32"), "concatenate_c5"),
    (cat(["2x3xf32", "4x3xf32"], 0, "7x3xf32"), "concatenate_c6"),
])
def test_concatenate(o, cid):
  check(o, cid)


def test_iota_and_friends():
  check(op("stablehlo.iota", [], [T("2x3xf32")], iota_dimension=i64(1)),
        None)
  check(op("stablehlo.iota", [], [T("2x3xf32")], iota_dimension=i64(2)),
        "iota_c1")
  check(op("stablehlo.dynamic_iota", [T("2xi64")], [T("?x?xf32")],
           iota_dimension=i64(1)), None)
  check(op("stablehlo.dynamic_iota", [T("2xi64")], [T("?x?xf32")],
           iota_dimension=i64(2)), "dynamic_iota_c1")
  check(op("stablehlo.dynamic_iota", [T("2xi64")], [T("?xf32")],
           iota_dimension=i64(0)), "dynamic_iota_c2")
  check(op("stablehlo.get_dimension_size", [T("2x3xf32")], [T("i32")],
           dimension=i64(1)), None)
  check(op("stablehlo.get_dimension_size", [T("2x3xf32")], [T("i32")],
           dimension=i64(2)), "get_dimension_size_c1")


def test_schema_errors():
  check(op("stablehlo.slice", [T("3xf32")], [T("1xf32")]), "slice_schema")
  check(op("stablehlo.transpose", [T("3xf32"), T("3xf32")], [T("3xf32")],
           permutation=i64s(0)), "transpose_schema")
  check(op("stablehlo.slice", [T("3xf32")], [T("1xf32")],
           start_indices=dense([0]), limit_indices=dense([1]),
           strides=dense([1])), None)


def test_infer_result_types():
  o = sl((0, 0), (3, 4), (2, 3))
  assert verify.infer_result_types(o) == [T("2x2xi64")]
  o = pad("2x3xf32", "f32", (0, 1), (2, 1), (1, 0), "5x5xf32")
  assert verify.infer_result_types(o) == [T("5x5xf32")]
  assert verify.infer_result_types(
      cat(["2x3xf32", "?x3xf32"], 0, "?x3xf32")) == [T("?x3xf32")]
  assert verify.infer_result_types(op("stablehlo.iota", [], [T("2xf32")],
                                      iota_dimension=i64(0))) is None
