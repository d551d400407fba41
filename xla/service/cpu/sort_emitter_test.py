"""Tests for the sort and topk kernels against the HLO evaluator and numpy."""

import ml_dtypes
import numpy as np
import pytest

from xla.service.cpu import op_emitter_testing as t
from xla.service.cpu import sort_emitter  # pylint: disable=unused-import

_RNG = np.random.default_rng(7)


def _sort_hlo(types, dims, dim, cmp_body, stable=True):
  d = ",".join(str(x) for x in dims)
  params = "\n".join(f"  p{i} = {ty}[{d}] parameter({i})"
                     for i, ty in enumerate(types))
  cparams = "\n".join(
      f"  c{2 * i} = {ty}[] parameter({2 * i})\n"
      f"  c{2 * i + 1} = {ty}[] parameter({2 * i + 1})"
      for i, ty in enumerate(types))
  ops = ", ".join(f"p{i}" for i in range(len(types)))
  if len(types) == 1:
    rshape = f"{types[0]}[{d}]"
  else:
    rshape = "(" + ", ".join(f"{ty}[{d}]" for ty in types) + ")"
  st = ", is_stable=true" if stable else ""
  return f"""HloModule m
cmp {{
{cparams}
{cmp_body}
}}
ENTRY e {{
{params}
  ROOT s = {rshape} sort({ops}), dimensions={{{dim}}}{st}, to_apply=cmp
}}"""


_LT_TOTAL = "  ROOT lt = pred[] compare(c0, c1), direction=LT, type=TOTALORDER"
_GT = "  ROOT gt = pred[] compare(c0, c1), direction=GT"


def _check(text, args):
  got = t.run_instruction(text, args)
  want = t.evaluate(text, args)
  t.assert_same(got, want)
  return got


def _floats_with_specials(n, dtype=np.float32):
  x = _RNG.standard_normal(n).astype(dtype)
  specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 1.0],
                      dtype)
  k = min(n, len(specials))
  x[_RNG.choice(n, k, replace=False)] = specials[:k]
  return x


@pytest.mark.parametrize("n", [1, 5, 16, 17, 40, 100, 300])
def test_total_order_nans(n):
  x = _floats_with_specials(n)
  got = _check(_sort_hlo(["f32"], [n], 0, _LT_TOTAL), [x])[0]
  # -NaN < -inf < ... < -0 < +0 < ... < inf < NaN
  bits = got.view(np.int32)
  key = np.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
  assert np.all(np.diff(key.astype(np.int64)) >= 0)


@pytest.mark.parametrize("dims,dim", [((7, 33), 0), ((7, 33), 1),
                                      ((3, 20, 5), 1), ((1,), 0), ((0, 4), 1),
                                      ((4, 0), 1)])
def test_dims_and_strides(dims, dim):
  x = _RNG.integers(-50, 50, dims).astype(np.int32)
  body = "  ROOT lt = pred[] compare(c0, c1), direction=LT"
  text = _sort_hlo(["s32"], dims if dims else [], dim, body)
  if x.size == 0:  # (the evaluator cannot sort a size-0 sort dimension)
    got = t.run_instruction(text, [x])[0]
    assert got.shape == x.shape
    return
  got = _check(text, [x])[0]
  np.testing.assert_array_equal(got, np.sort(x, axis=dim))


def test_multi_operand_stability():
  n = 257
  keys = _RNG.integers(0, 5, n).astype(np.int32)
  vals = np.arange(n, dtype=np.float32)
  idx = np.arange(n, dtype=np.uint16)[::-1].copy()
  body = "  ROOT lt = pred[] compare(c0, c1), direction=LT"
  text = _sort_hlo(["s32", "f32", "u16"], [n], 0, body)
  got = _check(text, [keys, vals, idx])
  order = np.argsort(keys, kind="stable")
  np.testing.assert_array_equal(got[0], keys[order])
  np.testing.assert_array_equal(got[1], vals[order])
  np.testing.assert_array_equal(got[2], idx[order])


def test_lexicographic_comparator_uses_both_operands():
  n = 90
  a = _RNG.integers(0, 4, (3, n)).astype(np.int8)
  bb = _RNG.standard_normal((3, n)).astype(np.float64)
  body = """  lt0 = pred[] compare(c0, c1), direction=LT
  eq0 = pred[] compare(c0, c1), direction=EQ
  lt1 = pred[] compare(c2, c3), direction=LT
  tie = pred[] and(eq0, lt1)
  ROOT r = pred[] or(lt0, tie)"""
  text = _sort_hlo(["s8", "f64"], [3, n], 1, body)
  got = _check(text, [a, bb])
  for r in range(3):
    order = np.lexsort((bb[r], a[r]))
    np.testing.assert_array_equal(got[0][r], a[r][order])
    np.testing.assert_array_equal(got[1][r], bb[r][order])


@pytest.mark.parametrize("ty,dtype", [("u8", np.uint8), ("f16", np.float16),
                                      ("bf16", ml_dtypes.bfloat16),
                                      ("s64", np.int64), ("pred", np.bool_)])
def test_descending_types(ty, dtype):
  n = 50
  x = (_RNG.standard_normal((2, n)) * 20).astype(np.float32)
  x = x.astype(dtype) if dtype != np.uint8 else np.abs(x).astype(dtype)
  got = _check(_sort_hlo([ty], [2, n], 1, _GT), [x])[0]
  want = -np.sort(-x.astype(np.float64), axis=1)
  np.testing.assert_array_equal(got.astype(np.float64), want)


def test_large_row_uses_heap_scratch():
  n = 20000  # 8n + 4n bytes of scratch > 64 KiB: malloc'ed
  x = _floats_with_specials(n)
  got = t.run_instruction(_sort_hlo(["f32"], [2, n], 1, _LT_TOTAL),
                          [np.stack([x, -x])])[0]
  for r, row in enumerate([x, -x]):
    bits = row.view(np.int32)
    key = np.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    np.testing.assert_array_equal(got[r].view(np.int32),
                                  row[np.argsort(key, kind="stable")].view(
                                      np.int32))


def test_complex_keys_with_custom_comparator():
  n = 30
  x = (_RNG.standard_normal(n) + 1j * _RNG.standard_normal(n)).astype(
      np.complex64)
  body = """  r0 = f32[] real(c0)
  r1 = f32[] real(c1)
  ROOT lt = pred[] compare(r0, r1), direction=LT"""
  got = _check(_sort_hlo(["c64"], [n], 0, body), [x])[0]
  np.testing.assert_array_equal(got, x[np.argsort(x.real, kind="stable")])


def test_sort_in_place_alias():
  text = _sort_hlo(["f32", "s32"], [2, 40], 1, _LT_TOTAL)
  k = t.compile_instruction(text)
  x = _floats_with_specials(80).reshape(2, 40)
  y = np.arange(80, dtype=np.int32).reshape(2, 40)
  want = t.evaluate(text, [x, y])
  xs, ys = x.copy(), y.copy()
  k.call([xs, ys], [(0, k.spec.parallel_extent)], results=[xs, ys])
  t.assert_same([xs, ys], want)


def _topk_hlo(ty, dims, k, largest):
  d = ",".join(str(x) for x in dims)
  od = ",".join(str(x) for x in dims[:-1] + [k])
  return f"""HloModule m
ENTRY e {{
  p = {ty}[{d}] parameter(0)
  ROOT t = ({ty}[{od}], s32[{od}]) topk(p), k={k}, largest={largest}
}}"""


@pytest.mark.parametrize("largest", ["true", "false"])
@pytest.mark.parametrize("ty,dtype", [("f32", np.float32), ("s32", np.int32),
                                      ("bf16", ml_dtypes.bfloat16),
                                      ("u8", np.uint8)])
def test_topk(largest, ty, dtype):
  if dtype in (np.float32, ml_dtypes.bfloat16):
    x = np.stack([_floats_with_specials(37) for _ in range(3)]).astype(dtype)
  else:
    x = _RNG.integers(0, 9, (3, 37)).astype(dtype)
  for k in (1, 5, 37):
    text = _topk_hlo(ty, [3, 37], k, largest)
    _check(text, [x])


def _total_key(x):
  """numpy: integer keys ordering floats as IEEE totalOrder."""
  x = np.asarray(x)
  if x.dtype.kind != "f" and x.dtype != ml_dtypes.bfloat16:
    return x.astype(np.int64) if x.dtype.kind != "b" else x.astype(np.int64)
  bits = x.view({2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize])
  bits = bits.astype(np.int64)
  mag = (1 << (8 * x.dtype.itemsize - 1)) - 1
  return np.where(bits < 0, bits ^ mag, bits)


def _numpy_topk(x, k, largest):
  key = _total_key(x)
  # ~key reverses the order without overflowing at INT64_MIN.
  order = np.argsort(np.invert(key) if largest else key, axis=-1,
                     kind="stable")
  order = order[..., :k]
  return np.take_along_axis(x, order, -1), order.astype(np.int32)


@pytest.mark.parametrize("n,k", [(300, 16), (300, 1), (37, 20), (8, 8),
                                 (130, 64), (130, 65), (1000, 7)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_selection_f32(n, k, largest):
  # Specials, many ties (rounded values) and both ordered extremes.
  rows = [_floats_with_specials(n), np.round(_floats_with_specials(n)),
          np.sort(_RNG.standard_normal(n)).astype(np.float32),
          -np.sort(_RNG.standard_normal(n)).astype(np.float32),
          np.zeros(n, np.float32)]
  x = np.stack(rows).astype(np.float32)
  text = _topk_hlo("f32", [5, n], k, str(largest).lower())
  got = _check(text, [x])
  vals, idx = _numpy_topk(x, k, largest)
  np.testing.assert_array_equal(got[0].view(np.int32), vals.view(np.int32))
  np.testing.assert_array_equal(got[1], idx)


@pytest.mark.parametrize("ty,dtype", [("f64", np.float64), ("f16", np.float16),
                                      ("bf16", ml_dtypes.bfloat16),
                                      ("s8", np.int8), ("u16", np.uint16),
                                      ("s64", np.int64), ("u32", np.uint32)])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_selection_types(ty, dtype, largest):
  n, k = 200, 9
  if np.dtype(dtype).kind in "iu":
    info = np.iinfo(dtype)
    x = _RNG.integers(max(info.min, -1000), min(info.max, 1000), (3, n))
    x[0, :5] = info.max
    x[1, :5] = info.min
    x = x.astype(dtype)
  else:
    x = np.stack([_floats_with_specials(n) for _ in range(3)]).astype(dtype)
    x[2] = np.round(x[2])  # ties
  text = _topk_hlo(ty, [3, n], k, str(largest).lower())
  got = _check(text, [x])
  vals, idx = _numpy_topk(x, k, largest)
  np.testing.assert_array_equal(got[1], idx)
  np.testing.assert_array_equal(_total_key(got[0]), _total_key(vals))


def test_topk_batch_dims_and_rank1():
  x = _RNG.standard_normal((2, 3, 70)).astype(np.float32)
  got = _check(_topk_hlo("f32", [2, 3, 70], 5, "true"), [x])
  vals, idx = _numpy_topk(x, 5, True)
  np.testing.assert_array_equal(got[0], vals)
  np.testing.assert_array_equal(got[1], idx)
  y = _RNG.standard_normal(70).astype(np.float32)
  got = _check(_topk_hlo("f32", [70], 3, "false"), [y])
  np.testing.assert_array_equal(got[1], np.argsort(y, kind="stable")[:3])
