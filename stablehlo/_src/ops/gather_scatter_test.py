"""Verifier tests for gather / dynamic_gather / scatter."""

import pytest

from stablehlo._src.ops import testing as tt
from stablehlo._src.ops import verify
from stablehlo._src.ops.testing import T, dattr, dense, i64s, op, reducer


def check(o, cid):
  msg = tt.error_of(o)
  if cid is None:
    assert msg is None, msg
  else:
    assert msg is not None and cid in msg, msg


def gdn(offset=(2, 3), collapsed=(0,), obatch=(1,), ibatch=(0,),
        sim=(2, 0), ivd=2):
  return dattr("stablehlo.gather", offset_dims=offset,
               collapsed_slice_dims=collapsed, operand_batching_dims=obatch,
               start_indices_batching_dims=ibatch, start_index_map=sim,
               index_vector_dim=ivd)


def gather(dst="2x3x2x2xi64", sizes=(1, 1, 2, 2), src="3x2x4x2xi64",
           idx="2x3x2xi64", **dn):
  return op("stablehlo.gather", [T(src), T(idx)], [T(dst)],
            dimension_numbers=gdn(**dn), slice_sizes=i64s(*sizes))


@pytest.mark.parametrize("o,cid", [
    (gather(), None),
    (gather(offset=(2,)), "gather_c1"),
    (gather(ivd=4), "gather_c2"),
    (gather(sim=(2,)), "gather_c3"),
    (gather(offset=(3, 2)), "gather_c4"),
    (gather(offset=(2, 4)), "gather_c5"),
    (gather(collapsed=(1,)), "gather_c6"),
    (gather(collapsed=(2, 0), obatch=(), ibatch=(), sizes=(1, 2, 1, 2),
            offset=(2, 3), sim=(2, 0), dst="2x3x2x2xi64"), "gather_c7"),
    (gather(collapsed=(5,)), "gather_c8"),
    (gather(sizes=(2, 1, 2, 2)), "gather_c9"),
    (gather(collapsed=(), obatch=(1, 0), ibatch=(0, 1), offset=(2, 3),
            sizes=(1, 1, 2, 2)), "gather_c10"),
    (gather(obatch=(7,)), "gather_c11"),
    (gather(sizes=(1, 2, 2, 2)), "gather_c12"),
    (gather(obatch=(1, 2), ibatch=(0, 0), collapsed=(0,), offset=(2,),
            sizes=(1, 1, 1, 2), dst="2x3x2xi64"), "gather_c13"),
    (gather(ibatch=(5,)), "gather_c14"),
    (gather(ibatch=(2,), ivd=2), "gather_c15"),
    (gather(ibatch=()), "gather_c16"),
    (gather(ibatch=(1,)), "gather_c17"),
    (gather(sim=(1, 0)), "gather_c18"),
    (gather(sim=(2, 9)), "gather_c19"),
    (gather(sizes=(1, 1, 2)), "gather_c20"),
    (gather(sizes=(1, 1, 5, 2), dst="2x3x5x2xi64"), "gather_c21"),
    (gather(dst="2x3x2x3xi64"), "gather_c22"),
    (gather(dst="2x3x2x2xf32"), "gather_c23"),
])
def test_gather(o, cid):
  check(o, cid)


def test_gather_infer():
  assert verify.infer_result_types(gather()) == [T("2x3x2x2xi64")]


def dyn_gather(dst="2x3x2x2xi64", ss="3xi64", **kw):
  dn = dict(offset=(2, 3), collapsed=(0,), obatch=(), ibatch=(),
            sim=(1, 0), ivd=2)
  dn.update(kw)
  return op("stablehlo.dynamic_gather",
            [T("3x4x2xi64"), T("2x3x2xi64"), T(ss)], [T(dst)],
            dimension_numbers=gdn(**dn))


@pytest.mark.parametrize("o,cid", [
    (dyn_gather(dst="2x3x?x?x?xi64", offset=(2, 3, 4)), "dynamic_gather_c1"),
    (dyn_gather(offset=(2, 3), collapsed=(0,), sim=(1, 0)), None),
    (dyn_gather(ivd=5), "dynamic_gather_c2"),
    (dyn_gather(sim=(1,)), "dynamic_gather_c3"),
    (dyn_gather(offset=(3, 2)), "dynamic_gather_c4"),
    (dyn_gather(offset=(2, 7)), "dynamic_gather_c5"),
    (dyn_gather(collapsed=(0, 0), offset=(2,), dst="2x3x2xi64"),
     "dynamic_gather_c6"),
    (dyn_gather(collapsed=(6,)), "dynamic_gather_c7"),
    (dyn_gather(sim=(1, 1)), "dynamic_gather_c9"),
    (dyn_gather(sim=(1, 8)), "dynamic_gather_c10"),
    (dyn_gather(ss="4xi64"), "dynamic_gather_c11"),
    (dyn_gather(dst="2x3x2x2xf32"), "dynamic_gather_c14"),
])
def test_dynamic_gather(o, cid):
  check(o, cid)


def test_dynamic_gather_constant_sizes():
  sizes = op("stablehlo.constant", [], [T("3xi64")],
             value=dense([1, 2, 2]))
  o = op("stablehlo.dynamic_gather",
         [T("3x4x2xi64"), T("2x3x2xi64"), sizes.result],
         [T("2x3x2x2x2xi64")],
         dimension_numbers=gdn(offset=(2, 3, 4), collapsed=(0,), obatch=(),
                               ibatch=(), sim=(1, 0), ivd=2))
  check(o, "dynamic_gather_c1")
  o = op("stablehlo.dynamic_gather",
         [T("3x4x2xi64"), T("2x3x2xi64"), sizes.result], [T("2x3x2x3xi64")],
         dimension_numbers=gdn(offset=(2, 3), collapsed=(0,), obatch=(),
                               ibatch=(), sim=(1, 0), ivd=2))
  check(o, "dynamic_gather_c13")


def sdn(uwd=(3, 4), iwd=(0,), ibd=(1,), sibd=(0,), sdod=(2, 0), ivd=3):
  return dattr("stablehlo.scatter", update_window_dims=uwd,
               inserted_window_dims=iwd, input_batching_dims=ibd,
               scatter_indices_batching_dims=sibd,
               scatter_dims_to_operand_dims=sdod, index_vector_dim=ivd)


def scatter(ins=("2x2x4x2xi64",), idx="2x2x3x2xi64",
            upds=("2x2x3x2x2xi64",), outs=None, body=None, **dn):
  outs = outs or ins
  return op("stablehlo.scatter", [T(x) for x in ins] + [T(idx)] +
            [T(x) for x in upds], [T(x) for x in outs],
            regions=[body or reducer("i64")],
            scatter_dimension_numbers=sdn(**dn))


@pytest.mark.parametrize("o,cid", [
    (scatter(), None),
    (scatter(ins=("2x2x4x2xi64", "2x2x4x3xi64"),
             upds=("2x2x3x2x2xi64",) * 2, body=reducer("i64", "i64")),
     "scatter_c1"),
    (scatter(uwd=(3,)), "scatter_c2"),
    (scatter(ins=("2x2x4x2xi64",) * 2, upds=("2x2x3x2x2xi64",
                                              "2x2x3x2x1xi64"),
             body=reducer("i64", "i64")), "scatter_c3"),
    (scatter(upds=("2x2x4x2x2xi64",)), "scatter_c4"),
    (scatter(upds=("2x2x3x2x3xi64",)), "scatter_c4"),
    (scatter(ins=(), upds=(), outs=()), "scatter_c5"),
    (scatter(upds=("2x2x3x2x2xf32",)), "scatter_c6"),
    (scatter(uwd=(4, 3)), "scatter_c7"),
    (scatter(uwd=(3, 5)), "scatter_c8"),
    (scatter(iwd=(1,)), "scatter_c9"),
    (scatter(iwd=(2, 0), ibd=(1,), uwd=(3,), upds=("2x2x3x2xi64",),
             sdod=(3, 0)), "scatter_c10"),
    (scatter(iwd=(7,)), "scatter_c11"),
    (scatter(ibd=(2, 1), sibd=(0, 1), iwd=(0,), uwd=(3,),
             upds=("2x2x3x2xi64",), sdod=(3,)), "scatter_c12"),
    (scatter(ibd=(8,)), "scatter_c13"),
    (scatter(ibd=(1, 2), sibd=(0, 0), iwd=(0,), uwd=(3,),
             upds=("2x2x3x2xi64",), sdod=(3,)), "scatter_c14"),
    (scatter(sibd=(7,)), "scatter_c15"),
    (scatter(sibd=(3,)), "scatter_c16"),
    (scatter(sibd=()), "scatter_c17"),
    (scatter(sibd=(2,)), "scatter_c18"),
    (scatter(sdod=(2,)), "scatter_c19"),
    (scatter(sdod=(2, 1)), "scatter_c20"),
    (scatter(sdod=(2, 9)), "scatter_c21"),
    (scatter(ivd=9), "scatter_c22"),
    (scatter(body=reducer("f32")), "scatter_c23"),
    (scatter(outs=("2x2x4x3xi64",)), "scatter_c24"),
    (scatter(outs=("2x2x4x2xi32",)), "scatter_c25"),
])
def test_scatter(o, cid):
  check(o, cid)
