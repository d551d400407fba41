"""Verifier tests for collectives, communication and async ops."""

import pytest

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.ops import testing as tt
from stablehlo._src.ops import typeutil
from stablehlo._src.ops.testing import T, dattr, dense, i64, op, reducer


def check(o, cid):
  msg = tt.error_of(o)
  if cid is None:
    assert msg is None, msg
  else:
    assert msg is not None and cid in msg, msg


G = dense([[0, 1], [2, 3]])


def ch(handle, type_=1):
  return dattr("stablehlo.channel_handle", handle=handle, type=type_)


def ag(src="2x3xf32", dst="2x6xf32", dim=1, groups=G, **kw):
  return op("stablehlo.all_gather", [T(src)], [T(dst)],
            all_gather_dim=i64(dim), replica_groups=groups, **kw)


@pytest.mark.parametrize("o,cid", [
    (ag(), None),
    (ag(dim=2), "all_gather_c1"),
    (ag(groups=dense([[0, 1], [1, 3]])), "all_gather_c2"),
    (ag(groups=dense([[0, -2]])), "all_gather_c4"),
    (ag(use_global_device_ids=a.UnitAttr(), channel_handle=ch(0)),
     "all_gather_c5"),
    (ag(dst="2x5xf32"), "all_gather_c6"),
])
def test_all_gather(o, cid):
  check(o, cid)


def ar(src="4xf32", dst="4xf32", body=None, **kw):
  return op("stablehlo.all_reduce", [T(src)], [T(dst)],
            regions=[body or reducer("f32")], replica_groups=G, **kw)


def test_all_reduce():
  check(ar(), None)
  check(ar(src="4xbf16", dst="4xf32"), None)  # promotion
  check(op("stablehlo.all_reduce", [T("4xf32")], [T("4xf32")],
           regions=[reducer("f32")], replica_groups=dense([[0, 0]])),
        "all_reduce_c1")
  check(op("stablehlo.all_reduce", [T("4xf32")], [T("4xf32")],
           regions=[reducer("f32")], replica_groups=dense([[0, -3]])),
        "all_reduce_c3")
  check(ar(use_global_device_ids=a.UnitAttr()), "all_reduce_c4")
  check(ar(use_global_device_ids=a.UnitAttr(), channel_handle=ch(1)), None)
  check(ar(body=reducer("i32")), "all_reduce_c5")
  check(ar(dst="5xf32"), "all_reduce_c6")
  check(ar(dst="4xf64"), "all_reduce_c7")


def a2a(src="4x16xf32", dst="16x4xf32", sd=1, cd=0, n=4,
        groups=dense([[0, 1, 2, 3]])):
  return op("stablehlo.all_to_all", [T(src)], [T(dst)],
            split_dimension=i64(sd), concat_dimension=i64(cd),
            split_count=i64(n), replica_groups=groups)


@pytest.mark.parametrize("o,cid", [
    (a2a(), None),
    (a2a(sd=2), "all_to_all_c1"),
    (a2a(src="4x15xf32"), "all_to_all_c2"),
    (a2a(cd=-1), "all_to_all_c3"),
    (a2a(n=0), "all_to_all_c4"),
    (a2a(groups=dense([[0, 1, 2, 2]])), "all_to_all_c5"),
    (a2a(groups=dense([[0, 1, 2, -5]])), "all_to_all_c7"),
    (a2a(groups=dense([[0, 1]])), "all_to_all_c8"),
    (a2a(dst="4x16xf32"), "all_to_all_c9"),
])
def test_all_to_all(o, cid):
  check(o, cid)


def rs(src="4x8xf32", dst="4x4xf32", dim=1, groups=G, body=None, **kw):
  return op("stablehlo.reduce_scatter", [T(src)], [T(dst)],
            regions=[body or reducer("f32")], scatter_dimension=i64(dim),
            replica_groups=groups, **kw)


@pytest.mark.parametrize("o,cid", [
    (rs(), None),
    (rs(src="4x7xf32"), "reduce_scatter_c1"),
    (rs(dim=3), "reduce_scatter_c2"),
    (rs(groups=dense([[0, 0]])), "reduce_scatter_c3"),
    (rs(groups=dense([[0, -4]])), "reduce_scatter_c5"),
    (rs(body=reducer("i32")), "reduce_scatter_c7"),
    (rs(dst="4x8xf32"), "reduce_scatter_c8"),
    (rs(dst="4x4xf64"), "reduce_scatter_c9"),
])
def test_reduce_scatter(o, cid):
  check(o, cid)


def test_reduce_scatter_global_ids():
  check(rs(use_global_device_ids=a.UnitAttr(), channel_handle=ch(0)),
        "reduce_scatter_c6")


def test_collective_broadcast_permute_reduce():
  cb = lambda ins, outs, **kw: op(  # pylint: disable=g-long-lambda
      "stablehlo.collective_broadcast", [T(x) for x in ins],
      [T(x) for x in outs], replica_groups=kw.pop("groups", G), **kw)
  check(cb(["4xf32"], ["4xf32"]), None)
  check(cb(["4xf32"], ["4xf32"], groups=dense([[1, 1]])),
        "collective_broadcast_c1")
  check(cb(["4xf32"], ["4xf32"], groups=dense([[1, -7]])),
        "collective_broadcast_c2")
  check(cb(["4xf32"], ["5xf32"]), "collective_broadcast_c3")
  dyn = a.BoolAttr(True)
  check(cb(["4xf32", "1xi32"], ["4xf32"], has_dynamic_root=dyn), None)
  check(cb(["4xf32", "2xi32"], ["4xf32"], has_dynamic_root=dyn),
        "collective_broadcast_c4")
  check(cb(["4xf32", "1xi32"], ["4xf32", "1xi32"], has_dynamic_root=dyn),
        "collective_broadcast_c5")
  cp = lambda pairs, dst="4xf32": op(  # pylint: disable=g-long-lambda
      "stablehlo.collective_permute", [T("4xf32")], [T(dst)],
      source_target_pairs=dense(pairs))
  check(cp([[0, 1], [1, 0]]), None)
  check(cp([[0, 1, 2]]), "collective_permute_c1")
  check(cp([[0, 1], [0, 2]]), "collective_permute_c2")
  check(cp([[0, 1], [2, 1]]), "collective_permute_c3")
  check(cp([[0, -1]]), "collective_permute_c4")
  check(cp([[0, 1]], "5xf32"), "collective_permute_c5")
  cr = lambda body=None, dst="4xi64", groups=G: op(  # pylint: disable=g-long-lambda
      "stablehlo.collective_reduce", [T("4xi64")], [T(dst)],
      regions=[body or reducer("i64")], replica_groups=groups)
  check(cr(), None)
  check(cr(groups=dense([[0, 0]])), "collective_reduce_c1")
  check(cr(groups=dense([[0, -9]])), "collective_reduce_c2")
  check(cr(dst="2xi64"), "collective_reduce_c3")
  check(cr(body=reducer("f32")), "collective_reduce_c4")


@pytest.mark.parametrize("name", ["send", "recv"])
def test_send_recv(name):

  def mk(pairs=None, host=False, type_=1):
    attrs = {"channel_handle": ch(1, type_)}
    if pairs is not None:
      attrs["source_target_pairs"] = dense(pairs)
    if host:
      attrs["is_host_transfer"] = a.BoolAttr(True)
    if name == "send":
      return op("stablehlo.send", [T("4xf32"), t.token], [t.token], **attrs)
    return op("stablehlo.recv", [t.token], [T("4xf32"), t.token], **attrs)

  check(mk([[0, 1]]), None)
  check(mk(host=True, type_=2), None)
  check(mk([[0, 1, 1]]), f"{name}_c1")
  check(mk([[0, 1], [0, 2]]), f"{name}_c2")
  check(mk([[0, 1], [2, 1]]), f"{name}_c3")
  check(mk([[-1, 1]]), f"{name}_c4")
  check(mk(host=True, type_=1), f"{name}_c5")


def test_infeed_outfeed_tokens_ids():
  check(op("stablehlo.infeed", [t.token], [T("2xf32"), t.token]), None)
  check(op("stablehlo.infeed", [t.token], []), "infeed_c1")
  check(op("stablehlo.infeed", [t.token], [t.token, t.token]), "infeed_c2")
  check(op("stablehlo.infeed", [t.token], [T("2xf32")]), "infeed_c3")
  check(op("stablehlo.outfeed", [T("2xf32"), t.token], [t.token]), None)
  check(op("stablehlo.outfeed", [T("2xf32")], [t.token]), "outfeed_schema")
  check(op("stablehlo.after_all", [t.token, t.token], [t.token]), None)
  check(op("stablehlo.after_all", [T("f32")], [t.token]), "after_all_schema")
  check(op("stablehlo.replica_id", [], [T("ui32")]), None)
  check(op("stablehlo.partition_id", [], [T("2xui32")]),
        "partition_id_schema")


def _future(ty):
  return t.OpaqueType("stablehlo", f"future<{typeutil.fmt_type(ty)}>")


def test_async():
  def start(inner_name="stablehlo.all_gather", dst="8x8xf32", fut="8x8xf32",
            extra_op=False):
    block = core.Block([T("8x2xf32")])
    inner = op(inner_name, [block.arguments[0]], [T(dst)],
               all_gather_dim=i64(1), replica_groups=dense([[0, 1, 2, 3]]))
    block.append(inner)
    if extra_op:
      block.append(op("stablehlo.abs", [inner.result], [T(dst)]))
    block.append(op("stablehlo.return", [inner.result], []))
    return op("stablehlo.async_start", [T("8x2xf32")], [_future(T(fut))],
              regions=[core.Region([block])])

  check(start(), None)
  check(start(extra_op=True), "async_start_c1")
  check(start("stablehlo.abs"), "async_start_c2")
  check(start(fut="8x4xf32"), "async_start_c4")
  check(op("stablehlo.async_done", [_future(T("8x8xf32"))], [T("8x8xf32")]),
        None)
  check(op("stablehlo.async_done", [_future(T("8x8xf32"))], [T("8x4xf32")]),
        "async_done_c1")
