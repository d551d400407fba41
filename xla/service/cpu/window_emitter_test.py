"""Tests for the reduce-window and select-and-scatter kernels against the
HLO evaluator (and numpy for simple cases)."""

import numpy as np
import pytest

from xla.service.cpu import op_emitter_testing as t
from xla.service.cpu import window_emitter  # pylint: disable=unused-import

_RNG = np.random.default_rng(11)


def _f(s):
  return ",".join(str(x) for x in s)


def _rw(ty, in_shape, out_shape, window, body, init_ty=None):
  init_ty = init_ty or ty
  return f"""HloModule m
red {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
{body}
}}
ENTRY e {{
  x = {ty}[{_f(in_shape)}] parameter(0)
  i = {init_ty}[] parameter(1)
  ROOT r = {ty}[{_f(out_shape)}] reduce-window(x, i), window={{{window}}}, to_apply=red
}}"""


def _check(text, args, **tol):
  got = t.run_instruction(text, args)
  want = t.evaluate(text, args)
  t.assert_same(got, want, **tol)
  return got


def test_max_pool_2x2():
  x = _RNG.standard_normal((4, 6)).astype(np.float32)
  text = _rw("f32", (4, 6), (2, 3), "size=2x2 stride=2x2",
             "  ROOT m = f32[] maximum(a, b)")
  got = _check(text, [x, np.float32(-np.inf)])[0]
  np.testing.assert_array_equal(got, x.reshape(2, 2, 3, 2).max(axis=(1, 3)))


def test_sum_with_padding_counts_init():
  # init 1 at every padding position: a 3-window at the edges sums 1 pad.
  x = np.arange(1, 6, dtype=np.int32)
  text = _rw("s32", (5,), (5,), "size=3 pad=1_1", "  ROOT s = s32[] add(a, b)")
  got = _check(text, [x, np.int32(1)])[0]
  np.testing.assert_array_equal(got, [1 + 1 + 1 + 2, 1 + 1 + 2 + 3,
                                      1 + 2 + 3 + 4, 1 + 3 + 4 + 5,
                                      1 + 4 + 5 + 1])


# An order-dependent reducer: acc * 0.5 + x weighs each window position
# differently, so a wrong window order changes the result completely,
# while its rounding differences do not grow along the window. (In the
# kernel the multiply and add fuse into an FMA, as on XLA CPU: one rounding
# instead of two; squaring reducers, (a + b)^2, doubled that difference at
# every step.)
_ORDERED = """  h = f32[] constant(0.5)
  p = f32[] multiply(a, h)
  ROOT m = f32[] add(p, b)"""
ORDER_RTOL = 1e-6


@pytest.mark.parametrize("window,in_shape,out_shape", [
    ("size=3x2 stride=2x1 pad=1_2x0_1", (7, 5), (4, 5)),
    ("size=2x2 stride=1x1 lhs_dilate=2x3", (3, 4), (4, 9)),
    ("size=2x3 rhs_dilate=2x2 pad=2_1x1_1", (5, 6), (6, 4)),
    ("size=3x2 stride=2x3 pad=1_1x2_2 lhs_dilate=2x1 rhs_dilate=1x2",
     (4, 5), (4, 3)),
    ("size=2x1 pad=-1_0x0_0", (6, 3), (4, 3)),
    ("size=1x1", (0, 3), (0, 3)),
])
def test_padding_and_dilation(window, in_shape, out_shape):
  x = _RNG.standard_normal(in_shape).astype(np.float32)
  text = _rw("f32", in_shape, out_shape, window, _ORDERED)
  _check(text, [x, np.float32(0.5)], rtol=ORDER_RTOL)


def test_variadic_argmax():
  text = """HloModule m
red {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(bv, av), direction=GT
  v = f32[] select(gt, bv, av)
  i = s32[] select(gt, bi, ai)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[3,8] parameter(0)
  ix = s32[3,8] parameter(1)
  i0 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  ROOT r = (f32[3,3], s32[3,3]) reduce-window(x, ix, i0, i1), window={size=1x3 stride=1x3 pad=0_0x0_1}, to_apply=red
}"""
  x = _RNG.standard_normal((3, 8)).astype(np.float32)
  ix = np.arange(24, dtype=np.int32).reshape(3, 8)
  got = _check(text, [x, ix, np.float32(-np.inf), np.int32(-1)])
  xp = np.pad(x, ((0, 0), (0, 1)), constant_values=-np.inf)
  np.testing.assert_array_equal(got[0], xp.reshape(3, 3, 3).max(axis=2))


def test_large_output_parallel_blocks():
  x = _RNG.integers(-9, 9, (40, 50)).astype(np.int64)
  text = _rw("s64", (40, 50), (40, 50), "size=3x3 pad=1_1x1_1",
             "  ROOT s = s64[] add(a, b)")
  _check(text, [x, np.int64(0)])


def test_bad_output_shape():
  text = _rw("f32", (4,), (3,), "size=3", "  ROOT s = f32[] add(a, b)")
  with pytest.raises(ValueError):
    t.compile_instruction(text)


def _sas(ty, in_shape, src_shape, window, select_dir="GE"):
  return f"""HloModule m
sel {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={select_dir}
}}
sc {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT s = {ty}[] add(a, b)
}}
ENTRY e {{
  x = {ty}[{_f(in_shape)}] parameter(0)
  s = {ty}[{_f(src_shape)}] parameter(1)
  i = {ty}[] parameter(2)
  ROOT r = {ty}[{_f(in_shape)}] select-and-scatter(x, s, i), window={{{window}}}, select=sel, scatter=sc
}}"""


@pytest.mark.parametrize("window,in_shape,src_shape", [
    ("size=2x2 stride=2x2", (4, 6), (2, 3)),
    ("size=3x3 stride=1x1 pad=1_1x1_1", (5, 4), (5, 4)),
    ("size=3x2 stride=3x1 pad=3_2x0_1", (4, 3), (3, 3)),  # empty windows
    ("size=2x2 stride=2x2 rhs_dilate=2x1", (6, 4), (2, 2)),
])
def test_select_and_scatter(window, in_shape, src_shape):
  x = _RNG.integers(0, 4, in_shape).astype(np.float32)  # many ties
  s = _RNG.standard_normal(src_shape).astype(np.float32)
  text = _sas("f32", in_shape, src_shape, window)
  _check(text, [x, s, np.float32(0.25)], rtol=1e-6)


def test_select_and_scatter_min_int():
  x = _RNG.integers(0, 5, (6, 6)).astype(np.int32)
  s = _RNG.integers(1, 9, (3, 3)).astype(np.int32)
  text = _sas("s32", (6, 6), (3, 3), "size=2x2 stride=2x2", "LE")
  got = _check(text, [x, s, np.int32(0)])[0]
  assert got.sum() == s.sum()


@pytest.mark.parametrize("window,in_shape,out_shape", [
    ("size=1x2x2x1 stride=1x2x2x1", (2, 6, 8, 19), (2, 3, 4, 19)),  # NHWC
    ("size=1x3x3x1 stride=1x1x2x1 rhs_dilate=1x2x1x1", (2, 7, 7, 5),
     (2, 3, 3, 5)),
    ("size=1x5x6x1", (3, 5, 6, 33), (3, 1, 1, 33)),  # 30 positions
    ("size=2x1", (9, 40), (8, 40)),
])
def test_row_kernel_keeps_window_order(window, in_shape, out_shape):
  x = _RNG.standard_normal(in_shape).astype(np.float32)
  text = _rw("f32", in_shape, out_shape, window, _ORDERED)
  _check(text, [x * 0.3, np.float32(0.5)], rtol=ORDER_RTOL)


@pytest.mark.parametrize("ty,dtype", [("f32", np.float32), ("s16", np.int16),
                                      ("f64", np.float64)])
def test_row_kernel_max_pool(ty, dtype):
  x = (_RNG.standard_normal((3, 8, 8, 21)) * 100).astype(dtype)
  if dtype == np.float32:
    x.flat[::7] = np.nan
  text = _rw(ty, (3, 8, 8, 21), (3, 4, 4, 21), "size=1x2x2x1 stride=1x2x2x1",
             f"  ROOT m = {ty}[] maximum(a, b)")
  init = np.array(-np.inf if dtype != np.int16 else -32768, dtype)
  got = _check(text, [x, init])[0]
  want = x.reshape(3, 4, 2, 4, 2, 21).max(axis=(2, 4))
  np.testing.assert_array_equal(got, want)


def _scan_text(ty, shape, axis, op, init, reverse=False):
  n = shape[axis]
  size = "x".join(str(n) if d == axis else "1" for d in range(len(shape)))
  pads = "x".join((f"0_{n - 1}" if reverse else f"{n - 1}_0") if d == axis
                  else "0_0" for d in range(len(shape)))
  return f"""HloModule m
red {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT r = {ty}[] {op}(a, b)
}}
ENTRY e {{
  x = {ty}[{_f(shape)}] parameter(0)
  i = {ty}[] constant({init})
  ROOT r = {ty}[{_f(shape)}] reduce-window(x, i), window={{size={size} pad={pads}}}, to_apply=red
}}"""


@pytest.mark.parametrize("ty,dtype,shape,axis,op,init", [
    ("f32", np.float32, (16, 32), 1, "add", "0"),     # JAX's cumsum on CPU
    ("f32", np.float32, (5, 7, 3), 1, "add", "-0"),
    ("f32", np.float32, (40,), 0, "add", "0"),
    ("s32", np.int32, (9, 4), 0, "maximum", "-2147483648"),
    ("f64", np.float64, (3, 10), 1, "multiply", "1"),
    ("f32", np.float32, (6, 5), 1, "minimum", "inf"),
    ("f32", np.float32, (4, 6), 1, "add", "1.5"),     # not a scan: general
])
def test_prefix_scans_equal_the_evaluator(ty, dtype, shape, axis, op, init):
  x = _RNG.standard_normal(shape) * 10
  x = x.astype(dtype)
  text = _scan_text(ty, shape, axis, op, init)
  # The kernel reads the constant init through its own pointer.
  got = t.run_instruction(text, [x, np.array(float(init)).astype(dtype)])
  want = t.evaluate(text, [x])
  # The scan folds in the window's own order: bit for bit the same.
  np.testing.assert_array_equal(got[0], want[0])


def test_prefix_scan_detection():
  from xla.hlo.parser import hlo_parser  # pylint: disable=g-import-not-at-top

  def dim(text):
    instr = hlo_parser.parse_and_return_unverified_module(
        text).entry_computation.root_instruction
    win = window_emitter._Window(  # pylint: disable=protected-access
        instr, instr.operand(0).shape.dimensions, instr.shape.dimensions)
    return window_emitter._prefix_scan_dim(instr, win, 1)  # pylint: disable=protected-access

  assert dim(_scan_text("f32", (16, 32), 1, "add", "0")) == 1
  assert dim(_scan_text("f32", (8, 3), 0, "maximum", "0.5")) == 0
  assert dim(_scan_text("f32", (16, 32), 1, "add", "1")) is None
  assert dim(_scan_text("f32", (16, 32), 1, "add", "0", reverse=True)) is None
  assert dim(_scan_text("f32", (16, 32), 1, "subtract", "0")) is None
