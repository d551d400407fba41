"""Tests for the HLO evaluator's non-elementwise opcodes, with expected
values from numpy formulas or by hand."""

import ml_dtypes
import numpy as np

from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.parser import hlo_parser

ADD_F32 = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""
MAX_F32 = """max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}
"""


def run(text, *args):
  module = hlo_parser.parse_and_return_unverified_module(text)
  return hlo_evaluator.HloEvaluator().evaluate(module, list(args))


def test_shape_ops():
  text = """HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  b = f32[4,2,3] broadcast(p), dimensions={1,2}
  t = f32[3,2] transpose(p), dimensions={1,0}
  r = f32[6] reshape(t)
  s = f32[2] slice(r), slice={[1:5:2]}
  v = f32[2,3] reverse(p), dimensions={1}
  c = f32[4,3] concatenate(p, v), dimensions={0}
  z = f32[] constant(-1)
  pd = f32[3,4] pad(p, z), padding=1_0x0_-1_1
  i = s32[2,3] iota(), iota_dimension=1
  ROOT o = (f32[4,2,3], f32[6], f32[2], f32[4,3], f32[3,4], s32[2,3]) tuple(b, r, s, c, pd, i)
}"""
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  b, r, s, c, pd, i = run(text, x)
  np.testing.assert_array_equal(b, np.broadcast_to(x, (4, 2, 3)))
  np.testing.assert_array_equal(r, x.T.reshape(6))
  np.testing.assert_array_equal(s, x.T.reshape(6)[1:5:2])
  np.testing.assert_array_equal(c, np.concatenate([x, x[:, ::-1]]))
  # Rows: one low pad row. Columns: interior 1 gives width 5, high -1
  # drops the last column.
  want = np.full((3, 4), -1, np.float32)
  for row in range(2):
    full = np.full(5, -1, np.float32)
    full[::2] = x[row]
    want[1 + row] = full[:4]
  np.testing.assert_array_equal(pd, want)
  np.testing.assert_array_equal(i, [[0, 1, 2], [0, 1, 2]])


def test_dynamic_slice_and_update_clamp_starts():
  text = """HloModule m
ENTRY e {
  p = s32[5] parameter(0)
  i = s32[] parameter(1)
  d = s32[2] dynamic-slice(p, i), dynamic_slice_sizes={2}
  u = s32[5] dynamic-update-slice(p, d, i)
  ROOT t = (s32[2], s32[5]) tuple(d, u)
}"""
  x = np.array([10, 11, 12, 13, 14], np.int32)
  d, u = run(text, x, np.int32(9))
  np.testing.assert_array_equal(d, [13, 14])
  np.testing.assert_array_equal(u, x)
  d, u = run(text, x, np.int32(-3))
  np.testing.assert_array_equal(d, [10, 11])


def test_bitcast_uses_layouts():
  text = """HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  ROOT b = f32[3,2]{0,1} bitcast(p)
}"""
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  np.testing.assert_array_equal(run(text, x)[0], x.T)


def test_reduce_simple_and_variadic_argmax():
  text = """HloModule m
""" + ADD_F32 + """argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = f32[] select(pick, a, b)
  i = s32[] select(pick, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  p = f32[3,4] parameter(0)
  z = f32[] constant(0)
  s = f32[4] reduce(p, z), dimensions={0}, to_apply=add
  io = s32[3,4] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zi = s32[] constant(0)
  am = (f32[3], s32[3]) reduce(p, io, ninf, zi), dimensions={1}, to_apply=argmax
  v = f32[3] get-tuple-element(am), index=0
  i = s32[3] get-tuple-element(am), index=1
  ROOT t = (f32[4], f32[3], s32[3]) tuple(s, v, i)
}"""
  x = np.array([[1, 5, 5, 2], [9, 0, 1, 9], [-1, -2, -3, -4]], np.float32)
  s, v, i = run(text, x)
  np.testing.assert_allclose(s, x.sum(0))
  np.testing.assert_array_equal(v, x.max(1))
  np.testing.assert_array_equal(i, x.argmax(1))


def test_reduce_window_max_pool_and_generic_body():
  text = """HloModule m
""" + MAX_F32 + """addmul {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  bb = f32[] multiply(b, two)
  ROOT c = f32[] add(a, bb)
}
ENTRY e {
  p = f32[4,4] parameter(0)
  ninf = f32[] constant(-inf)
  z = f32[] constant(0)
  m = f32[2,2] reduce-window(p, ninf), window={size=2x2 stride=2x2}, to_apply=max
  s = f32[4,4] reduce-window(p, z), window={size=3x1 pad=1_1x0_0}, to_apply=addmul
  ROOT t = (f32[2,2], f32[4,4]) tuple(m, s)
}"""
  x = np.arange(16, dtype=np.float32).reshape(4, 4)
  m, s = run(text, x)
  np.testing.assert_array_equal(m, x.reshape(2, 2, 2, 2).max(axis=(1, 3)))
  xp = np.pad(x, ((1, 1), (0, 0)))
  want = 2 * (xp[:-2] + xp[1:-1] + xp[2:])
  np.testing.assert_allclose(s, want)


def test_select_and_scatter_max_pool_gradient():
  text = """HloModule m
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
""" + ADD_F32 + """ENTRY e {
  p = f32[4,4] parameter(0)
  s = f32[2,2] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[4,4] select-and-scatter(p, s, z), window={size=2x2 stride=2x2}, select=ge, scatter=add
}"""
  x = np.array([[1, 2, 0, 0], [3, 4, 9, 1], [0, 0, 5, 5], [0, 7, 5, 5]],
               np.float32)
  src = np.array([[10, 20], [30, 40]], np.float32)
  want = np.zeros((4, 4), np.float32)
  want[1, 1] = 10
  want[1, 2] = 20
  want[3, 1] = 30
  want[2, 2] = 40  # ties: the first element (GE keeps the current one)
  np.testing.assert_array_equal(run(text, x, src)[0], want)


def test_sort_fast_and_generic_comparators():
  text = """HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
bykey_desc {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  av = f32[] parameter(2)
  bv = f32[] parameter(3)
  na = s32[] negate(a)
  nb = s32[] negate(b)
  ROOT c = pred[] compare(na, nb), direction=LT
}
ENTRY e {
  p = f32[2,5] parameter(0)
  k = s32[6] parameter(1)
  v = f32[6] parameter(2)
  s = f32[2,5] sort(p), dimensions={1}, to_apply=lt
  kv = (s32[6], f32[6]) sort(k, v), dimensions={0}, is_stable=true, to_apply=bykey_desc
  k2 = s32[6] get-tuple-element(kv), index=0
  v2 = f32[6] get-tuple-element(kv), index=1
  ROOT t = (f32[2,5], s32[6], f32[6]) tuple(s, k2, v2)
}"""
  x = np.array([[3, -0.0, np.nan, 0.0, -1], [5, 4, 3, 2, 1]], np.float32)
  k = np.array([1, 3, 2, 3, 1, 2], np.int32)
  v = np.arange(6, dtype=np.float32)
  s, k2, v2 = run(text, x, k, v)
  np.testing.assert_array_equal(s[1], [1, 2, 3, 4, 5])
  assert s[0][0] == -1 and np.signbit(s[0][1]) and not np.signbit(s[0][2])
  assert s[0][3] == 3 and np.isnan(s[0][4])
  np.testing.assert_array_equal(k2, [3, 3, 2, 2, 1, 1])
  np.testing.assert_array_equal(v2, [1, 3, 2, 5, 0, 4])  # stable


def test_gather_rows():
  text = """HloModule m
ENTRY e {
  p = f32[4,3] parameter(0)
  i = s32[2,1] parameter(1)
  ROOT g = f32[2,3] gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
}"""
  x = np.arange(12, dtype=np.float32).reshape(4, 3)
  idx = np.array([[2], [9]], np.int32)  # 9 clamps to 3
  np.testing.assert_array_equal(run(text, x, idx)[0], x[[2, 3]])


def test_scatter_add_duplicates_and_generic_combiner():
  text = """HloModule m
""" + ADD_F32 + """keep_new_times_ten {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ten = f32[] constant(10)
  t = f32[] multiply(a, ten)
  ROOT c = f32[] add(t, b)
}
ENTRY e {
  p = f32[5] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4] parameter(2)
  a = f32[5] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  g = f32[5] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=keep_new_times_ten
  ROOT t = (f32[5], f32[5]) tuple(a, g)
}"""
  x = np.zeros(5, np.float32)
  idx = np.array([[1], [3], [1], [7]], np.int32)  # 7 is out of bounds
  u = np.array([1, 2, 3, 4], np.float32)
  a, g = run(text, x, idx, u)
  np.testing.assert_array_equal(a, [0, 4, 0, 2, 0])
  # Index 1 combines twice in order: (0*10+1)*10+3 = 13.
  np.testing.assert_array_equal(g, [0, 13, 0, 2, 0])


def test_dot_batch_and_int_wrap():
  text = """HloModule m
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[2,4,5] parameter(1)
  d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  x = s8[2] parameter(2)
  y = s8[] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (f32[2,3,5], s8[]) tuple(d, y)
}"""
  rng = np.random.default_rng(0)
  a = rng.standard_normal((2, 3, 4)).astype(np.float32)
  b = rng.standard_normal((2, 4, 5)).astype(np.float32)
  d, y = run(text, a, b, np.int8([10, 10]))
  np.testing.assert_allclose(d, a @ b, rtol=1e-5)
  assert int(y) == (200 - 256)


def _conv_ref(x, k, stride, pad):
  """NHWC x HWIO direct convolution."""
  x = np.pad(x, ((0, 0), pad[0], pad[1], (0, 0)))
  n, h, w, _ = x.shape
  kh, kw, _, co = k.shape
  oh = (h - kh) // stride[0] + 1
  ow = (w - kw) // stride[1] + 1
  out = np.zeros((n, oh, ow, co))
  for i in range(oh):
    for j in range(ow):
      patch = x[:, i * stride[0]:i * stride[0] + kh,
                j * stride[1]:j * stride[1] + kw, :]
      out[:, i, j, :] = np.einsum("nhwc,hwco->no", patch, k)
  return out


def test_convolution_nhwc():
  text = """HloModule m
ENTRY e {
  x = f32[1,5,5,2] parameter(0)
  k = f32[3,3,2,4] parameter(1)
  ROOT c = f32[1,3,3,4] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}"""
  rng = np.random.default_rng(1)
  x = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
  k = rng.standard_normal((3, 3, 2, 4)).astype(np.float32)
  np.testing.assert_allclose(run(text, x, k)[0],
                             _conv_ref(x, k, (2, 2), ((1, 1), (1, 1))),
                             rtol=1e-5, atol=1e-5)


def test_fft_triangular_solve_cholesky():
  text = """HloModule m
ENTRY e {
  x = c64[4] parameter(0)
  f = c64[4] fft(x), fft_type=FFT, fft_length={4}
  a = f32[3,3] parameter(1)
  b = f32[3,2] parameter(2)
  s = f32[3,2] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  l = f32[3,3] cholesky(a), lower=true
  ROOT t = (c64[4], f32[3,2], f32[3,3]) tuple(f, s, l)
}"""
  x = np.array([1, 2j, -1, 0.5], np.complex64)
  m = np.array([[2, 0, 0], [1, 3, 0], [0.5, 1, 4]], np.float32)
  spd = (m @ m.T).astype(np.float32)
  b = np.arange(6, dtype=np.float32).reshape(3, 2)
  f, s, l = run(text, x, np.tril(spd), b)
  np.testing.assert_allclose(f, np.fft.fft(x), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(np.tril(spd) @ s, b, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(l, np.linalg.cholesky(spd), rtol=1e-4,
                             atol=1e-5)


def test_rng_bit_generator_shapes_and_state():
  text = """HloModule m
ENTRY e {
  s = u64[2] parameter(0)
  ROOT r = (u64[2], u32[2,3]) rng-bit-generator(s), algorithm=rng_three_fry
}"""
  st = np.array([1, 0], np.uint64)
  s1, bits = run(text, st)
  s2, bits2 = run(text, st)
  assert bits.dtype == np.uint32 and bits.shape == (2, 3)
  np.testing.assert_array_equal(bits, bits2)
  assert s1.dtype == np.uint64 and not np.array_equal(s1, st)
  assert len(set(bits.ravel().tolist())) == 6


def test_reduce_narrow_types_wrap_and_round():
  text = """HloModule m
add4 {
  a = s4[] parameter(0)
  b = s4[] parameter(1)
  ROOT c = s4[] add(a, b)
}
addbf {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT c = bf16[] add(a, b)
}
ENTRY e {
  p = s4[3] parameter(0)
  z = s4[] constant(0)
  r = s4[] reduce(p, z), dimensions={0}, to_apply=add4
  q = bf16[3] parameter(1)
  zb = bf16[] constant(0)
  rb = bf16[] reduce(q, zb), dimensions={0}, to_apply=addbf
  ROOT t = (s4[], bf16[]) tuple(r, rb)
}"""
  r, rb = run(text, np.array([7, 7, 1], ml_dtypes.int4),
              np.array([1, 2, 0.5], ml_dtypes.bfloat16))
  assert int(r) == -1  # 15 wraps to -1 in 4 bits
  assert rb.dtype == ml_dtypes.bfloat16 and float(rb) == 3.5


def _left_fold(values, dtype, init=0.0):
  """init + v0 + v1 + ..., rounding to `dtype` after every addition."""
  acc = dtype(init)
  for v in values:
    acc = dtype(float(acc) + float(v))
  return acc


def test_reduce_window_float_add_folds_in_window_order():
  # Regression: the window was summed by numpy's multi-axis reduce (blocked
  # pairwise for 8+ elements), not the row-major left fold from init that
  # XLA and the StableHLO interpreter use; the testdata reduce_window_add
  # files caught it at 4 ULP. Here: 7 + 1e8 rounds to 1e8 + 8 in order, so
  # the fold gives 8; pairwise partial sums give 0.
  text = "HloModule m\n" + ADD_F32 + """
ENTRY e {
  x = f32[3,3] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[1,1] reduce-window(x, z), window={size=3x3}, to_apply=add
}"""
  x = np.array([[1, 1, 1], [1, 1, 1], [1, 1e8, -1e8]], np.float32)
  (r,) = run(text, x)
  assert r.shape == (1, 1)
  assert r[0, 0] == _left_fold(x.reshape(-1), np.float32) == 8.0


def test_bf16_reductions_round_every_step():
  # Regression: bf16 sums were accumulated in f32 and rounded once. In
  # bf16, 1 + 2^-8 rounds back to 1 (ties to even) at every step.
  text = """HloModule m
addbf {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT c = bf16[] add(a, b)
}
ENTRY e {
  q = bf16[5] parameter(0)
  zb = bf16[] constant(0)
  r = bf16[] reduce(q, zb), dimensions={0}, to_apply=addbf
  w = bf16[1] reduce-window(q, zb), window={size=5}, to_apply=addbf
  ROOT t = (bf16[], bf16[1]) tuple(r, w)
}"""
  q = np.array([1] + [2.0**-8] * 4, ml_dtypes.bfloat16)
  r, w = run(text, q)
  want = _left_fold(q, ml_dtypes.bfloat16)
  assert float(want) == 1.0  # an f32 accumulator would give 1 + 2^-6
  assert r.dtype == ml_dtypes.bfloat16 and float(r) == float(want)
  assert float(w[0]) == float(want)
