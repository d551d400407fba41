"""Tests for the gather and scatter kernels against the HLO evaluator."""

import numpy as np
import pytest

from xla.service.cpu import gather_scatter_emitter  # pylint: disable=unused-import
from xla.service.cpu import op_emitter_testing as t

_RNG = np.random.default_rng(3)


def _check(text, args):
  got = t.run_instruction(text, args)
  want = t.evaluate(text, args)
  t.assert_same(got, want)
  return got


def _gather(oty, oshape, ity, ishape, rshape, attrs):
  f = lambda s: ",".join(str(x) for x in s)
  return f"""HloModule m
ENTRY e {{
  o = {oty}[{f(oshape)}] parameter(0)
  i = {ity}[{f(ishape)}] parameter(1)
  ROOT g = {oty}[{f(rshape)}] gather(o, i), {attrs}
}}"""


def test_gather_rows_clamped():
  x = np.arange(20, dtype=np.float32).reshape(5, 4)
  ids = np.array([[0], [4], [-3], [10], [2]], np.int32)
  text = _gather("f32", (5, 4), "s32", (5, 1), (5, 4),
                 "offset_dims={1}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}")
  got = _check(text, [x, ids])[0]
  np.testing.assert_array_equal(got, x[np.clip(ids[:, 0], 0, 4)])


def test_gather_2d_windows_clamped():
  x = _RNG.standard_normal((6, 7)).astype(np.float64)
  ids = _RNG.integers(-3, 9, (2, 3, 2)).astype(np.int64)
  text = _gather("f64", (6, 7), "s64", (2, 3, 2), (2, 3, 2, 3),
                 "offset_dims={2,3}, collapsed_slice_dims={}, "
                 "start_index_map={0,1}, index_vector_dim=2, "
                 "slice_sizes={2,3}")
  _check(text, [x, ids])


def test_gather_offset_dims_interleaved_and_ivd_first():
  x = _RNG.integers(0, 100, (4, 5, 6)).astype(np.int16)
  ids = _RNG.integers(0, 7, (2, 3, 2)).astype(np.uint8)  # ivd = 0
  text = _gather("s16", (4, 5, 6), "u8", (2, 3, 2), (3, 3, 2, 4),
                 "offset_dims={0,3}, collapsed_slice_dims={0}, "
                 "start_index_map={0,2}, index_vector_dim=0, "
                 "slice_sizes={1,3,4}")
  _check(text, [x, ids])


def test_gather_implicit_index_vector_dim():
  x = np.arange(10, dtype=np.int8)
  ids = np.array([[9, 0], [3, 255]], np.uint32)
  text = _gather("s8", (10,), "u32", (2, 2), (2, 2),
                 "offset_dims={}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, index_vector_dim=2, slice_sizes={1}")
  got = _check(text, [x, ids])[0]
  np.testing.assert_array_equal(got, [[9, 0], [3, 9]])


def test_gather_batching_dims():
  x = _RNG.standard_normal((2, 5, 3)).astype(np.float32)
  ids = np.array([[[0], [4], [9], [-1]], [[1], [2], [3], [3]]], np.int32)
  text = _gather("f32", (2, 5, 3), "s32", (2, 4, 1), (2, 4, 3),
                 "offset_dims={2}, collapsed_slice_dims={1}, "
                 "start_index_map={1}, operand_batching_dims={0}, "
                 "start_indices_batching_dims={0}, index_vector_dim=2, "
                 "slice_sizes={1,1,3}")
  got = _check(text, [x, ids])[0]
  for bb in range(2):
    np.testing.assert_array_equal(got[bb], x[bb, np.clip(ids[bb, :, 0], 0,
                                                         4)])


def test_gather_batching_dims_not_leading():
  x = _RNG.standard_normal((5, 3, 2)).astype(np.float32)
  ids = _RNG.integers(-1, 6, (4, 2, 1)).astype(np.int32)
  text = _gather("f32", (5, 3, 2), "s32", (4, 2, 1), (4, 2, 3),
                 "offset_dims={2}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, operand_batching_dims={2}, "
                 "start_indices_batching_dims={1}, index_vector_dim=2, "
                 "slice_sizes={1,3,1}")
  _check(text, [x, ids])


@pytest.mark.parametrize("ty,dtype", [("pred", np.bool_), ("c64",
                                                           np.complex64),
                                      ("f16", np.float16)])
def test_gather_types(ty, dtype):
  x = (_RNG.standard_normal((8, 3)) > 0).astype(dtype)
  if dtype == np.complex64:
    x = x + 1j * _RNG.standard_normal((8, 3)).astype(np.float32)
  ids = _RNG.integers(0, 8, (6, 1)).astype(np.int32)
  text = _gather(ty, (8, 3), "s32", (6, 1), (6, 2),
                 "offset_dims={1}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}")
  _check(text, [x, ids])


def test_gather_empty():
  text = _gather("f32", (4, 3), "s32", (0, 1), (0, 3),
                 "offset_dims={1}, collapsed_slice_dims={0}, "
                 "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}")
  got = t.run_instruction(text, [np.ones((4, 3), np.float32),
                                 np.zeros((0, 1), np.int32)])[0]
  assert got.shape == (0, 3)


# --- scatter ------------------------------------------------------------------


def _scatter(tys, oshape, ity, ishape, ushape, attrs, body):
  f = lambda s: ",".join(str(x) for x in s)
  n = len(tys)
  params = [f"  o{k} = {ty}[{f(oshape)}] parameter({k})"
            for k, ty in enumerate(tys)]
  params.append(f"  i = {ity}[{f(ishape)}] parameter({n})")
  params += [f"  upd{k} = {ty}[{f(ushape)}] parameter({n + 1 + k})"
             for k, ty in enumerate(tys)]
  cparams = [f"  a{k} = {ty}[] parameter({k})" for k, ty in enumerate(tys)]
  cparams += [f"  b{k} = {ty}[] parameter({n + k})"
              for k, ty in enumerate(tys)]
  ops = ", ".join([f"o{k}" for k in range(n)] + ["i"] +
                  [f"upd{k}" for k in range(n)])
  rshape = (f"{tys[0]}[{f(oshape)}]" if n == 1 else
            "(" + ", ".join(f"{ty}[{f(oshape)}]" for ty in tys) + ")")
  nl = "\n"
  return f"""HloModule m
comb {{
{nl.join(cparams)}
{body}
}}
ENTRY e {{
{nl.join(params)}
  ROOT s = {rshape} scatter({ops}), {attrs}, to_apply=comb
}}"""


_ADD = "  ROOT r = f32[] add(a0, b0)"
_ROWS = ("update_window_dims={1}, inserted_window_dims={0}, "
         "scatter_dims_to_operand_dims={0}, index_vector_dim=1")


def test_scatter_add_duplicates_and_out_of_bounds():
  x = np.arange(15, dtype=np.float32).reshape(5, 3)
  ids = np.array([[1], [3], [1], [7], [-1], [4]], np.int32)
  upd = _RNG.standard_normal((6, 3)).astype(np.float32)
  text = _scatter(["f32"], (5, 3), "s32", (6, 1), (6, 3), _ROWS, _ADD)
  got = _check(text, [x, ids, upd])[0]
  want = x.copy()
  for k, i in enumerate(ids[:, 0]):
    if 0 <= i < 5:
      want[i] += upd[k]
  np.testing.assert_array_equal(got, want)


def test_scatter_order_matters():
  # comb(x, u) = 2x + u is neither commutative nor associative.
  body = """  two = s32[] constant(2)
  d = s32[] multiply(a0, two)
  ROOT r = s32[] add(d, b0)"""
  x = np.zeros((4, 2), np.int32)
  ids = np.array([[2], [2], [0], [2]], np.int32)
  upd = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.int32)
  text = _scatter(["s32"], (4, 2), "s32", (4, 1), (4, 2), _ROWS, body)
  got = _check(text, [x, ids, upd])[0]
  np.testing.assert_array_equal(got[2], [((1 * 2) + 3) * 2 + 7,
                                         ((2 * 2) + 4) * 2 + 8])


def test_scatter_replace_last_wins_partial_windows():
  body = "  ROOT r = f32[] add(b0, b0)"
  x = np.zeros((6, 6), np.float32)
  ids = np.array([[4, 4], [-1, 2], [0, 0], [4, 4]], np.int64)
  upd = _RNG.standard_normal((4, 3, 3)).astype(np.float32)
  attrs = ("update_window_dims={1,2}, inserted_window_dims={}, "
           "scatter_dims_to_operand_dims={0,1}, index_vector_dim=1")
  text = _scatter(["f32"], (6, 6), "s64", (4, 2), (4, 3, 3), attrs, body)
  got = _check(text, [x, ids, upd])[0]
  np.testing.assert_array_equal(got[4:, 4:], 2 * upd[3][:2, :2])
  np.testing.assert_array_equal(got[0:2, 3:5], 2 * upd[1][1:, 1:])
  np.testing.assert_array_equal(got[0:3, 0:3], 2 * upd[2])


def test_scatter_variadic():
  body = """  gt = pred[] compare(b0, a0), direction=GT
  k = s32[] select(gt, b0, a0)
  v = f32[] select(gt, b1, a1)
  ROOT r = (s32[], f32[]) tuple(k, v)"""
  keys = np.zeros(5, np.int32)
  vals = np.zeros(5, np.float32)
  ids = np.array([[0], [0], [3], [4], [9]], np.int32)
  uk = np.array([3, 5, 1, -2, 8], np.int32)
  uv = np.array([1.5, 2.5, 3.5, 4.5, 5.5], np.float32)
  attrs = ("update_window_dims={}, inserted_window_dims={0}, "
           "scatter_dims_to_operand_dims={0}, index_vector_dim=1")
  text = _scatter(["s32", "f32"], (5,), "s32", (5, 1), (5,), attrs, body)
  got = _check(text, [keys, vals, ids, uk, uv, ])
  np.testing.assert_array_equal(got[0], [5, 0, 0, 1, 0])
  np.testing.assert_array_equal(got[1], [2.5, 0, 0, 3.5, 0])


def test_scatter_batching_dims():
  x = np.zeros((2, 5), np.float32)
  ids = np.array([[[0], [4], [4]], [[1], [7], [2]]], np.int32)
  upd = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
  attrs = ("update_window_dims={}, inserted_window_dims={1}, "
           "input_batching_dims={0}, scatter_indices_batching_dims={0}, "
           "scatter_dims_to_operand_dims={1}, index_vector_dim=2")
  text = _scatter(["f32"], (2, 5), "s32", (2, 3, 1), (2, 3), attrs, _ADD)
  got = _check(text, [x, ids, upd])[0]
  np.testing.assert_array_equal(got, [[1, 0, 0, 0, 5], [0, 4, 6, 0, 0]])


def test_scatter_in_place():
  text = _scatter(["f32"], (5, 3), "s32", (3, 1), (3, 3), _ROWS, _ADD)
  k = t.compile_instruction(text)
  x = np.arange(15, dtype=np.float32).reshape(5, 3)
  ids = np.array([[4], [0], [4]], np.int32)
  upd = np.ones((3, 3), np.float32)
  want = t.evaluate(text, [x, ids, upd])
  xs = x.copy()
  k.call([xs, ids, upd], [(0, 1)], results=[xs])
  t.assert_same([xs], want)


def test_scatter_u8_indices_and_empty_updates():
  x = np.arange(6, dtype=np.int64)
  ids = np.array([[250], [5]], np.uint8)
  upd = np.array([10, 20], np.int64)
  attrs = ("update_window_dims={}, inserted_window_dims={0}, "
           "scatter_dims_to_operand_dims={0}, index_vector_dim=1")
  body = "  ROOT r = s64[] maximum(a0, b0)"
  got = _check(_scatter(["s64"], (6,), "u8", (2, 1), (2,), attrs, body),
               [x, ids, upd])[0]
  np.testing.assert_array_equal(got, [0, 1, 2, 3, 4, 20])
  text = _scatter(["s64"], (6,), "u8", (0, 1), (0,), attrs, body)
  got = t.run_instruction(text, [x, np.zeros((0, 1), np.uint8),
                                 np.zeros(0, np.int64)])[0]
  np.testing.assert_array_equal(got, x)
