"""Verifier tests for the reductions, sort and chlo.top_k."""

import pytest

from stablehlo._src.ir import types as t
from stablehlo._src.ops import testing as tt
from stablehlo._src.ops.testing import T, dense, i64, i64s, op, reducer
from stablehlo._src.ops.testing import region


def check(o, cid):
  msg = tt.error_of(o)
  if cid is None:
    assert msg is None, msg
  else:
    assert msg is not None and cid in msg, msg


def red(ins, inits, outs, dims, body=None):
  return op("stablehlo.reduce", [T(x) for x in ins + inits],
            [T(x) for x in outs], regions=[body or reducer("f32")],
            dimensions=i64s(*dims))


@pytest.mark.parametrize("o,cid", [
    (red(["2x3xf32"], ["f32"], ["2xf32"], (1,)), None),
    (red(["2x3xf32", "2x3xf32"], ["f32", "f32"], ["3xf32", "3xf32"], (0,),
         reducer("f32", "f32")), None),
    (red(["2x3xi8"], ["i8"], ["2xi32"], (1,), reducer("i8",
                                                      result_elems=["i32"])),
     "reduce_c6"),
    (red(["2x3xf32", "2x4xf32"], ["f32", "f32"], ["2xf32", "2xf32"], (1,),
         reducer("f32", "f32")), "reduce_c1"),
    (red(["2x3xf32"], ["f64"], ["2xf32"], (1,)), "reduce_c2"),
    (red(["2x3xf32"], ["f32"], ["2xf32", "2xf32"], (1,)), "reduce_c3"),
    (red(["2x3xf32"], ["f32"], ["2xf32"], (2,)), "reduce_c4"),
    (red(["2x3xf32"], ["f32"], ["f32"], (1, 1)), "reduce_c5"),
    (red(["2x3xf32"], ["f32"], ["2xf32"], (1,), reducer("i32")), "reduce_c6"),
    (red(["2x3xf32"], ["f32"], ["3xf32"], (1,)), "reduce_c7"),
    (red(["2x3xbf16"], ["bf16"], ["2xf32"], (1,),
         reducer(t.FloatType("f32"))), None),  # promotion is allowed
])
def test_reduce(o, cid):
  check(o, cid)


def test_reduce_promotion_and_c8():
  # Body in f32 for bf16 inputs is a promotion (allowed); the result then
  # has the body's element type.
  body = tt.reducer("f32")
  o = op("stablehlo.reduce", [T("2x3xbf16"), T("bf16")], [T("2xf32")],
         regions=[body], dimensions=i64s(1))
  check(o, None)
  o = op("stablehlo.reduce", [T("2x3xf32"), T("f32")], [T("2xf64")],
         regions=[reducer("f32")], dimensions=i64s(1))
  check(o, "reduce_c8")


def rw(src, dst, wd, ws=None, bd=None, wdl=None, pad=None, init="f32",
       body=None):
  attrs = {"window_dimensions": i64s(*wd)}
  if ws is not None:
    attrs["window_strides"] = i64s(*ws)
  if bd is not None:
    attrs["base_dilations"] = i64s(*bd)
  if wdl is not None:
    attrs["window_dilations"] = i64s(*wdl)
  if pad is not None:
    attrs["padding"] = dense(pad)
  return op("stablehlo.reduce_window", [T(src), T(init)], [T(dst)],
            regions=[body or reducer("f32")], **attrs)


@pytest.mark.parametrize("o,cid", [
    (rw("4x6xf32", "3x5xf32", (2, 2)), None),
    (rw("4x6xf32", "2x3xf32", (2, 2), (2, 2)), None),
    (rw("4x6xf32", "5x7xf32", (2, 2), pad=[[1, 1], [1, 1]]), None),
    (rw("4x6xf32", "6x10xf32", (2, 2), bd=(2, 2)), None),
    (rw("4x6xf32", "1x3xf32", (2, 2), wdl=(3, 3)), None),
    (rw("4x6xf32", "3x5xf32", (2, 2), init="f64"), "reduce_window_c3"),
    (rw("4x6xf32", "3x5xf32", (2,)), "reduce_window_c4"),
    (rw("4x6xf32", "3x5xf32", (0, 2)), "reduce_window_c5"),
    (rw("4x6xf32", "3x5xf32", (2, 2), (1,)), "reduce_window_c6"),
    (rw("4x6xf32", "3x5xf32", (2, 2), (0, 1)), "reduce_window_c7"),
    (rw("4x6xf32", "3x5xf32", (2, 2), bd=(1,)), "reduce_window_c8"),
    (rw("4x6xf32", "3x5xf32", (2, 2), bd=(0, 1)), "reduce_window_c9"),
    (rw("4x6xf32", "3x5xf32", (2, 2), wdl=(1,)), "reduce_window_c10"),
    (rw("4x6xf32", "3x5xf32", (2, 2), wdl=(1, 0)), "reduce_window_c11"),
    (rw("4x6xf32", "3x5xf32", (2, 2), pad=[[0, 0]]), "reduce_window_c12"),
    (rw("4x6xf32", "3x5xf32", (2, 2), body=reducer("i32")),
     "reduce_window_c13"),
    (rw("4x6xf32", "3x4xf32", (2, 2)), "reduce_window_c15"),
])
def test_reduce_window(o, cid):
  check(o, cid)


def test_reduce_window_multi():
  o = op("stablehlo.reduce_window", [T("4xf32"), T("4xf32"), T("f32")],
         [T("3xf32")], regions=[reducer("f32")],
         window_dimensions=i64s(2))
  check(o, "reduce_window_c1")
  o = op("stablehlo.reduce_window",
         [T("4xf32"), T("5xf32"), T("f32"), T("f32")],
         [T("3xf32"), T("3xf32")], regions=[reducer("f32", "f32")],
         window_dimensions=i64s(2))
  check(o, "reduce_window_c2")
  o = op("stablehlo.reduce_window",
         [T("4xf32"), T("4xf32"), T("f32"), T("f32")],
         [T("3xf32"), T("2xf32")], regions=[reducer("f32", "f32")],
         window_dimensions=i64s(2))
  check(o, "reduce_window_c14")
  o = op("stablehlo.reduce_window", [T("4xf32"), T("f32")], [T("3xf64")],
         regions=[reducer("f32")], window_dimensions=i64s(2))
  check(o, "reduce_window_c16")


def sas(src="4x6xf32", source="2x3xf32", init="f32", wd=(2, 2), ws=(2, 2),
        pad=None, dst="4x6xf32", select=None, scatter=None):
  attrs = {"window_dimensions": i64s(*wd), "window_strides": i64s(*ws)}
  if pad is not None:
    attrs["padding"] = dense(pad)
  sel = select or region([T("f32"), T("f32")], [T("i1")])
  return op("stablehlo.select_and_scatter", [T(src), T(source), T(init)],
            [T(dst)], regions=[sel, scatter or reducer("f32")], **attrs)


@pytest.mark.parametrize("o,cid", [
    (sas(), None),
    (sas(source="2x3xf64"), "select_and_scatter_c1"),
    (sas(source="2x2xf32"), "select_and_scatter_c2"),
    (sas(init="f64"), "select_and_scatter_c3"),
    (sas(wd=(2,)), "select_and_scatter_c4"),
    (sas(wd=(0, 2)), "select_and_scatter_c5"),
    (sas(ws=(2,)), "select_and_scatter_c6"),
    (sas(ws=(0, 2)), "select_and_scatter_c7"),
    (sas(pad=[[0, 0]]), "select_and_scatter_c8"),
    (sas(select=region([T("f32"), T("f32")], [T("f32")])),
     "select_and_scatter_c9"),
    (sas(scatter=reducer("i32")), "select_and_scatter_c10"),
    (sas(dst="4x5xf32"), "select_and_scatter_c11"),
    (sas(dst="4x6xf64"), "select_and_scatter_c12"),
])
def test_select_and_scatter(o, cid):
  check(o, cid)


def srt(ins, outs, dim=0, comp=None):
  if comp is None:
    args = []
    for x in ins:
      args += [T("", T(x).element_type)] * 2
    comp = region(args, [T("i1")])
  return op("stablehlo.sort", [T(x) for x in ins], [T(x) for x in outs],
            regions=[comp], dimension=i64(dim))


@pytest.mark.parametrize("o,cid", [
    (srt(["4xf32", "4xi32"], ["4xf32", "4xi32"]), None),
    (srt(["4x3xf32"], ["4x3xf32"], -1), None),
    (srt([], []), "sort_c1"),
    (srt(["4xf32"], ["4xi32"]), "sort_c2"),
    (srt(["4xf32", "3xi32"], ["4xf32", "3xi32"]), "sort_c3"),
    (srt(["4xf32"], ["4xf32"], 1), "sort_c4"),
    (srt(["4xf32"], ["4xf32"], 0, region([T("f32"), T("f32")],
                                          [T("f32")])), "sort_c5"),
])
def test_sort(o, cid):
  check(o, cid)


def test_chlo_top_k():
  check(op("chlo.top_k", [T("5x8xf32")], [T("5x3xf32"), T("5x3xi32")],
           k=i64(3)), None)
  check(op("chlo.top_k", [T("5x2xf32")], [T("5x3xf32"), T("5x3xi32")],
           k=i64(3)), "chlo.top_k_schema")
