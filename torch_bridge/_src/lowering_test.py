"""Op tests of the lowering table: each case traces a small torch function
to ATen (with the decompositions the backend uses), lowers the whole graph
to one StableHLO program, runs it through our CPU plugin and compares with
eager PyTorch."""

import pytest

torch = pytest.importorskip(
    "torch", reason="torch (requirements-test.txt) is not installed")

# pylint: disable=g-import-not-at-top
from torch._decomp import core_aten_decompositions
from torch.fx.experimental.proxy_tensor import make_fx

import stablehlo.text
import support
import torch_bridge
from torch_bridge._src import capability
from torch_bridge._src import lowering
from torch_bridge._src import registry
from torch_bridge._src import runtime
from torch_bridge.testing import models
# pylint: enable=g-import-not-at-top


def _run(fn, *inputs):
  gm = make_fx(fn, decomposition_table=core_aten_decompositions(),
               tracing_mode="fake")(*inputs)
  text, arg_types, structure = lowering.lower_graph(gm)
  stablehlo.text.parse_module(text)  # The program is valid StableHLO text.
  assert len(arg_types) == len(inputs)
  exe, _, _ = runtime.compile_program(text)
  values = runtime.execute(exe, runtime.client(), inputs)
  return runtime.rebuild(structure, values), gm


def _f32(*shape):
  return torch.randn(*shape)


_CASES = {
    "add_broadcast_alpha": (lambda x, y: torch.add(x, y, alpha=2),
                            (_f32(3, 4), _f32(4))),
    "sub_scalar": (lambda x: x - 1.5, (_f32(5),)),
    "rsub": (lambda x: 1 - x, (_f32(5),)),
    "mul_div": (lambda x, y: x * y / (y.abs() + 1), (_f32(2, 3), _f32(2, 3))),
    "int_to_float_div": (lambda x: x / 2,
                         (torch.arange(6, dtype=torch.int64),)),
    "unary": (lambda x: (torch.exp(x) + torch.log(x.abs() + 1) +
                         torch.tanh(x) + torch.sigmoid(x) +
                         torch.rsqrt(x.abs() + 1) + torch.sqrt(x.abs()) -
                         x.neg() + x.pow(3) + x ** 2 + torch.erf(x)),
              (_f32(4, 4),)),
    "relu_gelu": (lambda x: torch.relu(x) + torch.nn.functional.gelu(x) +
                  torch.nn.functional.gelu(x, approximate="tanh"),
                  (_f32(8),)),
    "hardtanh_elu_leaky_relu": (lambda x: (
        torch.nn.functional.relu6(x * 4), torch.nn.functional.hardtanh(
            x, -0.5, 0.25), torch.nn.functional.elu(x),
        torch.nn.functional.elu(x, alpha=0.5), torch.nn.functional.selu(x),
        torch.nn.functional.leaky_relu(x), torch.nn.functional.leaky_relu(
            x, 0.2)), (torch.cat([_f32(20), torch.zeros(2)]),)),
    "clamp_where_cmp": (lambda x: torch.where(x > 0.1, x.clamp(-1, 1),
                                              (x <= -0.5).float()),
                        (_f32(10),)),
    "mm_addmm_bmm": (lambda a, b, c: (torch.addmm(c, a, b, beta=0.5,
                                                  alpha=2.0),
                                      torch.bmm(a[None], b[None])),
                     (_f32(3, 5), _f32(5, 2), _f32(2))),
    "shapes": (lambda x: torch.cat([x.permute(1, 0, 2).reshape(3, 8),
                                    x.transpose(0, 1)[:, 1, :].expand(
                                        3, 4).repeat(1, 2)], 0)
               .unsqueeze(0).squeeze(0), (_f32(2, 3, 4),)),
    "slice_select_split": (lambda x: sum(torch.split(x[:, 1:7:2], 1, dim=1))
                           + x[:, 2:3] + x.select(1, -1)[:, None],
                           (_f32(4, 8),)),
    "sum_amax": (lambda x: (x.sum(1), x.amax(-1), x.sum()), (_f32(3, 4, 5),)),
    "mean_keepdim": (lambda x: x.mean((0, 2), keepdim=True), (_f32(3, 4, 5),)),
    # SDPA's CPU decomposition tests its mask with any(); NaN is nonzero.
    "any_all": (lambda x, m: (
        (x > 1).any(1), (x > -3).all(-1, keepdim=True), m.any(), m.all(),
        torch.any(x, dim=(0, 2)), (x.abs() < 2.5).all((0, 1))),
                (_f32(3, 4, 5).where(torch.rand(3, 4, 5) > 0.1,
                                     torch.tensor(float("nan"))),
                 torch.tensor([[True, False], [False, False]]))),
    # RoPE's rotate_half backward: slices of a gradient put back in place.
    "slice_scatter": (lambda x, a, b: (
        torch.slice_scatter(x, a, 1, 2, 5), torch.slice_scatter(x, b, 1, 1,
                                                                 None, 3),
        torch.slice_scatter(x, a[:, :2], -1, -3, -1)),
                      (_f32(2, 8), _f32(2, 3), _f32(2, 3))),
    "as_strided_reshape": (lambda x: (
        torch.as_strided(x + 1, (2, 6), (6, 1)),
        torch.as_strided(x * 2, (5, 1), (1, 1)),
        torch.as_strided(x - 1, (2, 3), (3, 1), 4)), (_f32(3, 4),)),
    # Overlapping windows (Tensor.unfold's), a transposed read, a stride
    # of 0 and an offset.
    "as_strided_windows": (lambda x: (
        torch.as_strided(x + 1, (2, 2, 4), (4, 4, 1)),
        torch.as_strided(x * 2, (4, 3), (1, 4)),
        torch.as_strided(x - 1, (2, 5, 2), (0, 2, 1), 1)), (_f32(3, 4),)),
    "full_like": (lambda x: (torch.full_like(x, -2.5),
                             torch.full_like(x, 3, dtype=torch.int32),
                             x * torch.full_like(x, 0.5)),
                  (_f32(2, 3),)),
    "var_biased": (lambda x: x.var(1, correction=0), (_f32(3, 4, 5),)),
    "var_unbiased": (lambda x: x.var(2), (_f32(3, 4, 5),)),
    "softmaxes": (lambda x: (torch.softmax(x, -1),
                             torch.log_softmax(x, 1)), (_f32(4, 6),)),
    "full_ones_zeros": (lambda x: x + torch.ones(3) + torch.zeros(3) +
                        torch.full((3,), 2.5), (_f32(3),)),
    "to_dtype": (lambda x: (x.to(torch.int64) + 1, (x > 0).to(torch.float32),
                            x.double()), (_f32(6) * 4,)),
    "embedding": (lambda w, i: torch.nn.functional.embedding(i, w),
                  (_f32(10, 4), torch.tensor([[1, 9], [0, 3]]))),
    "index_rows_negative": (lambda x, i: x[i], (_f32(5, 3),
                                               torch.tensor([[0, -1], [4, 2]]))),
    "index_broadcast_2d": (lambda x, i, j: x[i, j],
                           (_f32(4, 6, 2), torch.tensor([[0], [3]]),
                            torch.tensor([1, 5, -2]))),
    # Advanced indexing with whole dims (None) before, between and after
    # the index tensors: adjacent ones keep their place, split ones go
    # first (torch's rule).
    "index_with_whole_dims": (lambda x, i, j, k: (
        x[:, :, i[:, None], j], x[:, k], x[k, :, i], x[:, :, -1:, j[:2]],
        x[..., j]),
                              (_f32(3, 3, 5, 4), torch.tensor([0, 3, -1]),
                               torch.tensor([1, 3, 0]),
                               torch.tensor([2, 0, -1]))),
    "index_put_accumulate_whole_dims": (lambda x, v, w, i, j: (
        torch.ops.aten.index_put(x, [None, i[:, None], j], v, True),
        torch.ops.aten.index_put(x, [i], w, True)),
                                        (_f32(2, 5, 4), _f32(2, 3, 3),
                                         _f32(3, 1, 4),
                                         torch.tensor([0, -1, 0]),
                                         torch.tensor([3, 1, 3]))),
    "cumsum_arange": (lambda x: x.cumsum(1) + torch.arange(5), (_f32(2, 5),)),
    "gather": (lambda x, i: torch.gather(x, 1, i),
               (_f32(3, 4), torch.tensor([[0, 3], [1, 1], [2, 0]]))),
    "conv_bias_stride": (lambda x, w, b: torch.nn.functional.conv2d(
        x, w, b, stride=2, padding=1), (_f32(2, 3, 9, 9), _f32(4, 3, 3, 3),
                                        _f32(4))),
    "conv_transpose_groups": (lambda x, w, b: torch.nn.functional
                              .conv_transpose2d(x, w, b, stride=2, padding=1,
                                                output_padding=1, groups=2),
                              (_f32(2, 4, 5, 5), _f32(4, 3, 3, 3), _f32(6))),
    "conv1d_groups_dilation": (lambda x, w: torch.nn.functional.conv1d(
        x, w, dilation=2, groups=2), (_f32(2, 4, 12), _f32(6, 2, 3))),
    "batch_norm_eval": (lambda x, m, v, w, b: torch.nn.functional.batch_norm(
        x, m, v, w, b, training=False, eps=1e-3),
                        (_f32(2, 3, 4, 4), _f32(3), _f32(3).abs() + 0.5,
                         _f32(3), _f32(3))),
    "layer_norm": (lambda x, w, b: torch.nn.functional.layer_norm(
        x, (6,), w, b), (_f32(2, 3, 6), _f32(6), _f32(6))),
    "avg_pool": (lambda x: torch.nn.functional.avg_pool2d(x, 2),
                 (_f32(1, 2, 6, 6),)),
    "max_pool": (lambda x: torch.nn.functional.max_pool2d(
        x, 2, return_indices=True), (_f32(2, 3, 6, 7),)),
    "max_pool_ties_padding_stride": (lambda x: torch.nn.functional.max_pool2d(
        x.floor().relu(), 3, stride=2, padding=1, return_indices=True),
                                     (_f32(2, 2, 9, 8),)),
    "max_pool_dilation_ceil_unbatched": (
        lambda x: torch.nn.functional.max_pool2d(
            x, (2, 3), stride=(2, 1), dilation=(2, 1), ceil_mode=True,
            return_indices=True), (_f32(3, 9, 7),)),
    "pow_small_exponents": (lambda x: (
        x.pow(3.0), x.pow(3), x.abs().add(0.5).pow(-0.5), (x + 3).pow(-1),
        (x + 3).pow(-2), x.abs().pow(2.5), x.pow(2.0),
        torch.arange(-3, 3).pow(3)), (_f32(3, 4),)),
    "max_min_along_a_dim_with_ties": (lambda x: (
        *torch.max(x.floor(), 1), *torch.min(x.floor(), 0, keepdim=True),
        torch.argmax(x.floor()), torch.argmin(x.floor(), -1, keepdim=True),
        torch.argmax(x.floor().to(torch.int32), 0)), (_f32(5, 6) * 2,)),
    "floor_and_trunc_division": (lambda x, y, i: (
        torch.div(x, y, rounding_mode="floor"),
        torch.div(x, y, rounding_mode="trunc"), x // 0.3, i // 3,
        torch.div(i, -4, rounding_mode="trunc"),
        torch.div(-i, i.abs() + 2, rounding_mode="floor")),
        (_f32(4, 5) * 10, _f32(4, 5) + 0.1,
         torch.arange(-10, 10, dtype=torch.int64))),
    "scatter_add_repeated_indices": (lambda x, src, i, j: (
        x.scatter_add(1, i, src), torch.zeros(4, 4).scatter_add(
            0, j, src[:2, :4] * 2)),
        (_f32(3, 6), _f32(3, 5),
         torch.tensor([[0, 2, 2, 5], [1, 1, 1, 0], [5, 4, 3, 2]]),
         torch.tensor([[3, 3, 0, 1], [3, 0, 0, 2]]))),
    "round_half_to_even_log2_log10_atan2": (lambda x: (
        torch.round(x), torch.round(x * 3.7), torch.log2(x.abs() + 1),
        torch.log10(x.abs() + 1), torch.atan2(x, x.flip(0) - 0.2)),
        (torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.2]),)),
    "fmod_and_remainder_signs": (lambda x, y, i, j: (
        torch.fmod(x, y), torch.remainder(x, y), x % 0.7, torch.fmod(x, -0.7),
        torch.fmod(i, j), torch.remainder(i, j), i % 3, torch.remainder(
            i, -3)), (_f32(4, 5) * 5, _f32(4, 5) + 0.3,
                      torch.arange(-10, 10).reshape(4, 5),
                      torch.tensor([3, -3, 4, -4, 7] * 4).reshape(4, 5))),
    "isnan_clamp_with_tensor_bounds": (lambda x, lo, hi: (
        torch.isnan(x / x.round()), torch.clamp(x, lo, hi),
        torch.clamp(x, min=lo[0]), torch.clamp(x, max=hi),
        torch.clamp_min(x, lo), torch.clamp_max(x, hi)),
        (_f32(3, 4), _f32(3, 4) - 0.5, _f32(4) + 0.5)),
    "prod_max_min_norms_cumprod_flip": (lambda x: (
        x.prod(), x.prod(1), x.prod(0, keepdim=True), x.max(), x.min(),
        torch.linalg.vector_norm(x), torch.linalg.vector_norm(x, 1, (0,)),
        torch.linalg.vector_norm(x, float("inf"), -1, keepdim=True),
        torch.linalg.vector_norm(x, float("-inf"), 1),
        torch.cumprod(x, 1), x.flip(0, 1), x.flip(-1)),
        (_f32(3, 4) + 0.5,)),
    "trig_hyperbolic_erfinv_gamma_through_chlo": (lambda x, y: (
        torch.tan(x), torch.sinh(x * 3), torch.cosh(x * 3), torch.asin(x),
        torch.acos(x), torch.atan(x * 5), torch.asinh(x * 5),
        torch.acosh(y + 1), torch.atanh(x), torch.erfc(x * 3),
        torch.erfinv(x), torch.lgamma(y), torch.digamma(y)),
        (torch.linspace(-0.95, 0.95, 41), torch.linspace(0.05, 6, 41))),
    "matmul_transposed_operands": (lambda a, b, c, d: (
        a @ b.t(), b.t() @ c, torch.nn.functional.linear(a, c, d[:5]),
        torch.bmm(a[None].expand(2, 4, 3),
                  b.permute(1, 0)[None].expand(2, 3, 5)),
        torch.bmm(c.t()[None], c[None]),
        torch.bmm(d.view(2, 2, 2).transpose(0, 2), d.view(2, 2, 2))),
        (_f32(4, 3), _f32(5, 3), _f32(5, 3), _f32(8))),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_op_matches_eager(name):
  fn, inputs = _CASES[name]
  got, _ = _run(fn, *inputs)
  want = fn(*inputs)
  got = got if isinstance(got, (list, tuple)) else [got]
  want = want if isinstance(want, (list, tuple)) else [want]
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
    if w.is_floating_point():
      assert models.max_relative_error(g, w) <= 1e-5, (g, w)
    else:
      assert torch.equal(g, w), (g, w)


def test_extrema_and_rounding_division_follow_torch_at_the_edges():
  # The first NaN is the maximum and the minimum (and its index); of
  # equal values the first index; floor division rounds torch's way
  # (signed zeros, infinities, NaN, division by zero).
  nan, inf = float("nan"), float("inf")
  x = torch.tensor([[1., nan, 2., nan], [5., 1., 5., 0.], [-inf] * 4])
  edges = torch.tensor([-7.5, -3., -1e-30, -0., 0., 0.7, 7.5, 1e30, inf,
                        -inf, nan, 0.1])
  a = edges.repeat_interleave(len(edges))
  b = edges.repeat(len(edges))

  def fn(x, a, b):
    return (*torch.max(x, 1), *torch.min(x, 1), torch.argmax(x, 1),
            torch.div(a, b, rounding_mode="floor"),
            torch.div(a, b, rounding_mode="trunc"))

  got, _ = _run(fn, x, a, b)
  _assert_same_values(got, fn(x, a, b))


def _assert_same_values(got, want):
  """Equal dtypes, shapes and values: NaN where eager has NaN, zeros of
  the same sign."""
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.dtype == w.dtype and g.shape == w.shape
    if w.is_floating_point():
      same = (g == w) & (torch.signbit(g) == torch.signbit(w))
      assert bool((same | (g.isnan() & w.isnan())).all()), (g, w)
    else:
      assert torch.equal(g, w), (g, w)


def test_sort_and_topk_follow_torch():
  # Stable sorts in torch's order (NaN above every number, equal values
  # and -0 / 0 in their original order); topk's values, and its indices
  # where no values tie (torch leaves the order of ties unspecified).
  nan = float("nan")
  x = torch.tensor([[3., nan, 1., 1., -0.0, 0.0], [2., 2., nan, nan, -1., 5.],
                    [0.5, 7., -3., 2., 1., 1.]])
  distinct = torch.randperm(24).reshape(4, 6).float()
  ints = torch.tensor([[3, 1, 3, 0, 2, 1], [5, 5, 5, 1, 0, 2]])

  def fn(x, distinct, ints):
    return (*torch.sort(x, 1), *torch.sort(x, 0, descending=True),
            torch.argsort(x, -1), torch.topk(x, 3, 1).values,
            *torch.topk(distinct, 3, 1),
            *torch.topk(distinct, 2, 0, largest=False),
            *torch.sort(ints, dim=1, stable=True))

  got, _ = _run(fn, x, distinct, ints)
  _assert_same_values(got, fn(x, distinct, ints))


def _bf16(*shape):
  return torch.randn(*shape).to(torch.bfloat16)


_BF16_CASES = {
    # A bf16 sum accumulates in f32, as torch's does: 4096 terms in bf16
    # would be off by far more than one rounding.
    "long_sum_mean": (lambda x: (x.sum(), x.mean(-1), x.amax(0)),
                      (_bf16(64, 64) + 3,)),
    "elementwise_scalars": (lambda x, y: (x * y + 0.1, torch.tanh(x) / 3,
                                          x.pow(3), torch.exp(-x)),
                            (_bf16(8, 9), _bf16(8, 9))),
    "matmul_softmax_layer_norm": (lambda a, b, w: (
        torch.softmax(a @ b, -1),
        torch.nn.functional.layer_norm(a, (32,), w, w)),
        (_bf16(16, 32), _bf16(32, 24), _bf16(32))),
    "casts": (lambda x: (x.float() * 3, (x.float() * 3).bfloat16(),
                         x.to(torch.int32)), (_bf16(5, 6) * 8,)),
}


@pytest.mark.parametrize("name", sorted(_BF16_CASES))
def test_bfloat16_op_matches_eager(name):
  """Each bf16 op computes in f32 and rounds its result once, as torch's
  CPU kernels do: results agree within one rounding of the largest."""
  fn, inputs = _BF16_CASES[name]
  got, _ = _run(fn, *inputs)
  want = fn(*inputs)
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
    if w.is_floating_point():
      assert models.max_relative_error(g, w) <= 2 ** -7, (g, w)
    else:
      assert torch.equal(g, w), (g, w)


def test_two_variances_over_different_dims():
  """Once failed to compile on our CPU plugin (two fusion kernels got the
  same symbol name)."""
  fn = lambda x: (x.var(1, correction=0), x.var(2))
  x = _f32(3, 4, 5)
  got, _ = _run(fn, x)
  for g, w in zip(got, fn(x)):
    assert models.max_relative_error(g, w) <= 1e-5


def test_training_ops_match_autograd():
  """The backward ops AOTAutograd emits (convolution_backward, the functional
  batch norm with its running statistics, avg_pool2d_backward, index_put)
  through the whole CNN + embedding training step."""
  from torch._functorch.aot_autograd import aot_function  # pylint: disable=g-import-not-at-top
  from functorch.compile import make_boxed_func  # pylint: disable=g-import-not-at-top
  lowered = []

  def compiler(gm, example_inputs):
    text, _, structure = lowering.lower_graph(gm)
    exe, _, _ = runtime.compile_program(text)
    lowered.append({str(n.target) for n in gm.graph.nodes
                    if n.op == "call_function"})

    def run(args):
      return runtime.rebuild(structure, runtime.execute(
          exe, runtime.client(), [a for a in args]))
    return make_boxed_func(lambda *a: run(a))

  def f(x, w, rm, rv, table, ids):
    y = torch.nn.functional.conv2d(x, w, stride=2, padding=1)
    y = torch.nn.functional.batch_norm(y, rm, rv, training=True)
    y = torch.nn.functional.avg_pool2d(y, 2)
    e = torch.nn.functional.embedding(ids, table)
    return (y.pow(2).sum() + e.sum(),)

  args = [_f32(2, 3, 9, 9), _f32(4, 3, 3, 3).requires_grad_(),
          torch.zeros(4), torch.ones(4), _f32(6, 3).requires_grad_(),
          torch.tensor([1, 1, 4])]
  ref_args = [a.detach().clone().requires_grad_(a.requires_grad)
              for a in args]
  compiled = aot_function(f, fw_compiler=compiler,
                          decompositions=core_aten_decompositions())
  compiled(*args)[0].backward()
  f(*ref_args)[0].backward()
  ops = set().union(*lowered)
  assert "aten.convolution_backward.default" in ops
  assert "aten._native_batch_norm_legit_functional.default" in ops
  for got, want in zip(args, ref_args):
    if want.requires_grad:
      assert models.max_relative_error(got.grad, want.grad) <= 1e-4


def test_matmul_reads_a_transposed_weight_without_a_transpose():
  """`x @ w.t()` (every nn.Linear) is one dot_general contracting `w`'s
  second dim: no transposed copy of the weight per call."""
  x, w = _f32(4, 3), _f32(5, 3)
  got, _ = _run(lambda x, w: x @ w.t(), x, w)
  assert models.max_relative_error(got, x @ w.t()) <= 1e-5
  gm = make_fx(lambda x, w: x @ w.t(),
               decomposition_table=core_aten_decompositions(),
               tracing_mode="fake")(x, w)
  text, _, _ = lowering.lower_graph(gm)
  (dot,) = [l for l in text.splitlines() if "stablehlo.dot_general" in l]
  assert "%arg1" in dot and "rhs_contracting_dimensions = [1]" in dot, dot


def test_max_pool_backward_matches_autograd():
  """max_pool2d_with_indices_backward adds each gradient at its index,
  also where windows overlap and ties pick the first maximum."""
  from torch._functorch.aot_autograd import aot_function  # pylint: disable=g-import-not-at-top
  from functorch.compile import make_boxed_func  # pylint: disable=g-import-not-at-top
  lowered = []

  def compiler(gm, example_inputs):
    text, _, structure = lowering.lower_graph(gm)
    exe, _, _ = runtime.compile_program(text)
    lowered.append({str(n.target) for n in gm.graph.nodes
                    if n.op == "call_function"})
    return make_boxed_func(lambda *a: runtime.rebuild(
        structure, runtime.execute(exe, runtime.client(), list(a))))

  def f(x):
    y = torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1)
    return ((y * torch.arange(y.numel()).view(y.shape)).sum(),)

  # Small integers: many windows hold equal maxima.
  x = torch.randint(-3, 4, (2, 2, 7, 7)).float().requires_grad_()
  ref = x.detach().clone().requires_grad_()
  aot_function(f, fw_compiler=compiler, bw_compiler=compiler,
               decompositions=core_aten_decompositions())(x)[0].backward()
  f(ref)[0].backward()
  ops = set().union(*lowered)
  assert "aten.max_pool2d_with_indices_backward.default" in ops
  assert models.max_relative_error(x.grad, ref.grad) <= 1e-6


@pytest.mark.parametrize("fn, why", [
    (lambda x: torch.as_strided(x + 1, (2, 3), (2, 2)), "past the end"),
    (lambda x: torch.as_strided(x.t(), (2, 2), (1, 2)), "non-contiguous"),
    (lambda x: torch.as_strided((x + 1)[1:], (2, 2), (1, 2), 1), "before"),
    (lambda x: torch.as_strided((x + 1)[1:], (2, 2), (1, 2), 3),
     "past the end"),
])
def test_as_strided_beyond_its_dense_input_is_refused(fn, why):
  # Fake tensors (as AOTAutograd's graphs carry) know a slice's offset.
  gm = make_fx(fn, tracing_mode="fake")(_f32(3, 2))
  node = next(n for n in gm.graph.nodes if "as_strided" in str(n.target))
  reason = capability.unsupported_reason(node)
  assert reason and why in reason


def test_unlowered_op_is_reported_by_name():
  gm = make_fx(lambda x: torch.cummax(x, 0).values)(_f32(4))
  with pytest.raises(support.UnimplementedError,
                     match="aten.cummax.default: no lowering"):
    lowering.lower_graph(gm)


def test_rejected_attribute_names_the_op_and_reason():
  gm = make_fx(lambda x: torch.max(x > 0, 0).values)(_f32(4))
  with pytest.raises(registry.LoweringError,
                     match="aten.max.dim.*non-bool"):
    lowering.lower_graph(gm)
  gm = make_fx(lambda x: torch.ops.aten.native_dropout(x, 0.5, True)[0])(
      _f32(4))
  with pytest.raises(registry.LoweringError,
                     match=r"aten.native_dropout.default: dropout with p=0.5"):
    lowering.lower_graph(gm)


def test_table_covers_the_ops_of_the_test_models():
  table = set(torch_bridge.lowered_ops())
  for op in ("aten.mm.default", "aten.addmm.default", "aten.bmm.default",
             "aten.convolution.default", "aten.convolution_backward.default",
             "aten._native_batch_norm_legit_functional.default",
             "aten.native_layer_norm.default", "aten.embedding.default",
             "aten._softmax.default", "aten.where.self", "aten.full.default",
             "aten._to_copy.default", "aten.index_put.default"):
    assert op in table
  assert "aten.cummax.default" not in table  # The deliberately missing op.
