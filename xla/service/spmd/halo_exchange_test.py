"""Tests for halo exchange: convolution and reduce-window tiled along a
windowed dimension.

Each program is partitioned and run on every partition, with junk (NaN)
in the padding of uneven tiles, and compared with the global program
(`spmd_testing.check_partitioning`). The halo cases must move rows with
collective-permutes only; the cases the exchange does not handle must
still be right (they make the dimension whole).
"""

import os
import random

import pytest

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.spmd import halo_exchange
from xla.service.spmd import spmd_testing
from xla.xla_data import WindowDimension

O = HloOpcode

COMPS = """
add {
  ax = f32[] parameter(0)
  ay = f32[] parameter(1)
  ROOT sum = f32[] add(ax, ay)
}
max {
  mx = f32[] parameter(0)
  my = f32[] parameter(1)
  ROOT mm = f32[] maximum(mx, my)
}
"""


def _module(body: str) -> str:
  return f"HloModule m\n{COMPS}\nENTRY e {{\n{body}\n}}\n"


def _opcodes(module) -> list[HloOpcode]:
  return [i.opcode for c in module.computations for i in c.instructions]


def _assert_halo(module, expect_permute: bool = True) -> None:
  ops = _opcodes(module)
  assert O.kAllGather not in ops
  assert O.kAllReduce not in ops
  assert O.kAllToAll not in ops
  assert (O.kCollectivePermute in ops) == expect_permute


def _out_size(size: int, w: int, s: int, pad: str) -> tuple[int, int, int]:
  """(outputs, padding low, padding high) of a window as JAX / TF pad."""
  if pad == "VALID":
    return (size - w) // s + 1, 0, 0
  out = -(-size // s)
  total = max((out - 1) * s + w - size, 0)
  return out, total // 2, total - total // 2


def _sharding(rank: int, dim: int, n: int) -> str:
  tiles = [1] * rank
  tiles[dim] = n
  return "{devices=[" + ",".join(map(str, tiles)) + f"]<=[{n}]}}"


def test_bundled_example():
  path = os.path.join(os.path.dirname(__file__), "..", "..", "..",
                      "examples", "spmd_conv_halo.hlo")
  if not os.path.exists(path):
    pytest.skip("bundled examples not found")
  with open(path) as f:
    m = spmd_testing.check_partitioning(f.read(), 4)
  _assert_halo(m)


# -- the plan ------------------------------------------------------------------


def test_plan_of_a_same_window():
  # 16 rows in 4 tiles of 4, window 3, SAME padding: one row each side.
  plan = halo_exchange.plan_dim(16, 4, WindowDimension(
      size=3, stride=1, padding_low=1, padding_high=1))
  assert (plan.left, plan.right, plan.pad_low, plan.pad_high) == (1, 1, 0, 0)
  assert plan.offsets == (0, 0, 0, 0) and plan.need == 6
  assert plan.out_tile == 4


def test_plan_of_strided_valid_window():
  # 16 rows, 4 tiles, window 3 stride 2 VALID: 7 outputs in tiles of 2,
  # tile i reads rows [4i, 4i + 5): one row from the right neighbour.
  plan = halo_exchange.plan_dim(16, 4, WindowDimension(size=3, stride=2))
  assert (plan.left, plan.right) == (0, 1)
  assert plan.need == 5 and plan.out_tile == 2


def test_plan_of_a_dilated_input():
  # 16 rows dilated by 2 (31 positions), window 3: tile i's 8 outputs read
  # positions [8i, 8i + 10), the rows 4i .. 4i + 4: one from the right.
  plan = halo_exchange.plan_dim(16, 4, WindowDimension(
      size=3, base_dilation=2))
  assert (plan.left, plan.right, plan.need) == (0, 1, 5)
  assert plan.dilation == 2 and plan.dilated_need == 10
  assert plan.dilated_offsets == (0, 0, 0, 0)


def test_no_plan_without_output():
  assert halo_exchange.plan_dim(2, 2, WindowDimension(size=5)) is None


def test_plan_of_a_dilated_window():
  # Window 3 dilated by 2 reads 5 rows: two on each side with SAME padding.
  plan = halo_exchange.plan_dim(16, 4, WindowDimension(
      size=3, window_dilation=2, padding_low=2, padding_high=2))
  assert (plan.left, plan.right, plan.need) == (2, 2, 8)


def test_plan_of_a_halo_wider_than_a_tile():
  # A window of 11 over tiles of 4 reads 5 rows on each side.
  plan = halo_exchange.plan_dim(16, 4, WindowDimension(
      size=11, padding_low=5, padding_high=5))
  assert (plan.left, plan.right, plan.need) == (5, 5, 14)


# -- convolution ---------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("w", [3, 5])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("pad", ["SAME", "VALID"])
@pytest.mark.parametrize("size", [16, 13])
def test_conv_1d_spatial(n, w, stride, pad, size):
  out, lo, hi = _out_size(size, w, stride, pad)
  s = _sharding(3, 2, n)
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,3,{size}] parameter(0), sharding={s}
  k = f32[4,3,{w}] parameter(1), sharding={{replicated}}
  ROOT c = f32[2,4,{out}] convolution(x, k), window={{size={w} stride={stride} pad={lo}_{hi}}}, dim_labels=bf0_oi0->bf0, sharding={s}"""),
      n)
  _assert_halo(m)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("w", [3, 5])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("pad", ["SAME", "VALID"])
@pytest.mark.parametrize("dim", [1, 2])
def test_conv_2d_nhwc_spatial(n, w, stride, pad, dim):
  h, wd = 12, 10
  oh, hlo, hhi = _out_size(h, w, stride, pad)
  ow, wlo, whi = _out_size(wd, w, stride, pad)
  s = _sharding(4, dim, n)
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,{h},{wd},3] parameter(0), sharding={s}
  k = f32[{w},{w},3,4] parameter(1), sharding={{replicated}}
  ROOT c = f32[2,{oh},{ow},4] convolution(x, k), window={{size={w}x{w} stride={stride}x{stride} pad={hlo}_{hhi}x{wlo}_{whi}}}, dim_labels=b01f_01io->b01f, sharding={s}"""),
      n)
  _assert_halo(m)


def test_conv_2d_nchw_uneven_and_asymmetric():
  # 11 rows over 4 tiles of 3 (the last has 2), stride 2, padding 2_1.
  s = "{devices=[1,1,4,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,3,11,7] parameter(0), sharding={s}
  k = f32[5,3,3,3] parameter(1)
  ROOT c = f32[2,5,6,7] convolution(x, k), window={{size=3x3 stride=2x1 pad=2_1x1_1}}, dim_labels=bf01_oi01->bf01, sharding={s}"""),
      4)
  _assert_halo(m)


def test_conv_batch_and_spatial_tiled():
  s = "{devices=[2,2,1,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[4,12,10,3] parameter(0), sharding={s}
  k = f32[3,3,3,2] parameter(1)
  ROOT c = f32[4,12,10,2] convolution(x, k), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, sharding={s}"""),
      4)
  _assert_halo(m)


def test_conv_both_spatial_dims_tiled():
  # Corners come with the second exchange (of rows widened by the first).
  s = "{devices=[1,2,2,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[1,12,10,3] parameter(0), sharding={s}
  k = f32[3,3,3,2] parameter(1)
  ROOT c = f32[1,12,10,2] convolution(x, k), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, sharding={s}"""),
      4)
  _assert_halo(m)


def test_conv_partially_replicated_spatial():
  s = "{devices=[1,2,1,2]<=[4] last_tile_dim_replicate}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,12,3] parameter(0), sharding={s}
  k = f32[3,3,4] parameter(1)
  ROOT c = f32[2,12,4] convolution(x, k), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f, sharding={s}"""),
      4)
  _assert_halo(m)


def test_conv_sharding_propagates_from_the_input():
  # Only the parameter and the root are annotated.
  s = "{devices=[1,4,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,16,3] parameter(0), sharding={s}
  k = f32[3,3,4] parameter(1)
  c = f32[2,16,4] convolution(x, k), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f
  ROOT r = f32[2,16,4] maximum(c, c), sharding={s}"""), 4)
  _assert_halo(m)


def test_conv_replicated_input_split_output():
  # The input is cut to the output's tiling locally, then halos move.
  s = "{devices=[1,4,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,16,3] parameter(0), sharding={{replicated}}
  k = f32[3,3,4] parameter(1)
  ROOT c = f32[2,16,4] convolution(x, k), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f, sharding={s}"""),
      4)
  _assert_halo(m)


def test_reduce_window_replicated_input_split_output():
  s = "{devices=[4,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[14,3] parameter(0), sharding={{replicated}}
  i = f32[] constant(0)
  ROOT r = f32[7,3] reduce-window(x, i), window={{size=3x1 stride=2x1 pad=1_1x0_0}}, to_apply=add, sharding={s}"""),
      4)
  _assert_halo(m)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("size,window,out", [
    (16, "size=3 pad=1_1 lhs_dilate=2", 31),
    (8, "size=3 pad=2_1 lhs_dilate=2", 16),     # input gradient, stride 2
    (7, "size=4 stride=3 pad=1_2 lhs_dilate=3", 7),
])
def test_conv_dilated_input(n, size, window, out):
  s = _sharding(3, 1, n)
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,{size},3] parameter(0), sharding={s}
  k = f32[{window.split()[0][5:]},3,4] parameter(1)
  ROOT c = f32[2,{out},4] convolution(x, k), window={{{window}}}, dim_labels=b0f_0io->b0f, sharding={s}"""),
      n)
  _assert_halo(m)


def test_conv_batch_group_count_runs_whole():
  s = "{devices=[1,4,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[4,16,3] parameter(0), sharding={s}
  k = f32[3,3,4] parameter(1)
  ROOT c = f32[1,16,4] convolution(x, k), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f, batch_group_count=4, sharding={s}"""),
      4)
  assert O.kAllGather in _opcodes(m)


def test_conv_halo_wider_than_a_tile():
  # Tiles of 4 rows, a window of 11: 5 rows from each side, two
  # collective-permutes per side.
  s = "{devices=[1,4,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,16,3] parameter(0), sharding={s}
  k = f32[11,3,4] parameter(1)
  ROOT c = f32[2,16,4] convolution(x, k), window={{size=11 pad=5_5}}, dim_labels=b0f_0io->b0f, sharding={s}"""),
      4)
  _assert_halo(m)
  assert _opcodes(m).count(O.kCollectivePermute) == 4


def test_conv_feature_group_count():
  s = "{devices=[1,4,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,16,4] parameter(0), sharding={s}
  k = f32[3,1,4] parameter(1)
  ROOT c = f32[2,16,4] convolution(x, k), window={{size=3 pad=1_1}}, dim_labels=b0f_0io->b0f, feature_group_count=4, sharding={s}"""),
      4)
  _assert_halo(m)


# -- reduce-window -------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("reducer,init", [("max", "-inf"), ("add", "0")])
@pytest.mark.parametrize("w,stride,pad", [
    (2, 2, "VALID"), (3, 1, "SAME"), (3, 2, "SAME"), (3, 2, "VALID"),
    (5, 1, "SAME"), (3, 1, "VALID")])
@pytest.mark.parametrize("size", [16, 14])
def test_reduce_window_pooling(n, reducer, init, w, stride, pad, size):
  out, lo, hi = _out_size(size, w, stride, pad)
  s = _sharding(4, 1, n)
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,{size},6,3] parameter(0), sharding={s}
  i = f32[] constant({init})
  ROOT r = f32[2,{out},6,3] reduce-window(x, i), window={{size=1x{w}x1x1 stride=1x{stride}x1x1 pad=0_0x{lo}_{hi}x0_0x0_0}}, to_apply={reducer}, sharding={s}"""),
      n)
  # 2x2 stride 2 reads only the partition's own rows where an output tile
  # covers exactly an input tile.
  local = (w, stride) == (2, 2) and 2 * -(-out // n) == -(-size // n)
  _assert_halo(m, expect_permute=not local)


def test_reduce_window_2d_pool_over_both_dims():
  s = "{devices=[1,2,2,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,13,10,3] parameter(0), sharding={s}
  i = f32[] constant(-inf)
  ROOT r = f32[2,7,5,3] reduce-window(x, i), window={{size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}}, to_apply=max, sharding={s}"""),
      4)
  _assert_halo(m)


def test_reduce_window_init_value_not_identity():
  # Padding rows hold the init value, as the op pads with it.
  s = "{devices=[4]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[15] parameter(0), sharding={s}
  i = f32[] constant(1.5)
  ROOT r = f32[15] reduce-window(x, i), window={{size=3 pad=1_1}}, to_apply=add, sharding={s}"""),
      4)
  _assert_halo(m)


def test_reduce_window_dilated_input():
  # The gradient of a strided average pool pads a dilated input.
  s = "{devices=[4]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[7] parameter(0), sharding={s}
  i = f32[] constant(0)
  ROOT r = f32[13] reduce-window(x, i), window={{size=3 pad=1_1 lhs_dilate=2}}, to_apply=add, sharding={s}"""),
      4)
  _assert_halo(m)


@pytest.mark.parametrize("size,n", [(16, 4), (13, 4), (9, 2)])
def test_dilated_windows(size, n):
  s = _sharding(3, 1, n)
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,{size},3] parameter(0), sharding={s}
  k = f32[3,3,4] parameter(1)
  ROOT c = f32[2,{size},4] convolution(x, k), window={{size=3 pad=2_2 rhs_dilate=2}}, dim_labels=b0f_0io->b0f, sharding={s}"""),
      n)
  _assert_halo(m)
  out = (size + 1 - 5) // 2 + 1
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,{size},3] parameter(0), sharding={s}
  i = f32[] constant(-inf)
  ROOT r = f32[2,{out},3] reduce-window(x, i), window={{size=1x3x1 stride=1x2x1 pad=0_0x0_1x0_0 rhs_dilate=1x2x1}}, to_apply=max, sharding={s}"""),
      n)
  _assert_halo(m)


@pytest.mark.parametrize("n", [2, 4])
def test_kernel_gradient_of_a_strided_conv(n):
  # The kernel gradient of a stride-2 convolution dilates the window.
  s = _sharding(3, 1, n)
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,16,3] parameter(0), sharding={s}
  dy = f32[2,8,4] parameter(1), sharding={s}
  ROOT g = f32[3,3,4] convolution(x, dy), window={{size=8 pad=1_0 rhs_dilate=2}}, dim_labels=f0b_i0o->0bf, sharding={{replicated}}"""),
      n, propagate=False)
  ops = _opcodes(m)
  assert O.kAllGather not in ops and O.kAllReduce in ops


def test_reduce_window_integer_max():
  s = "{devices=[1,4]<=[4]}"
  m = spmd_testing.check_partitioning(f"""HloModule m
imax {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] maximum(a, b)
}}
ENTRY e {{
  x = s32[3,10] parameter(0), sharding={s}
  i = s32[] constant(-2147483648)
  ROOT r = s32[3,10] reduce-window(x, i), window={{size=1x3 pad=0_0x1_1}}, to_apply=imax, sharding={s}
}}
""", 4)
  _assert_halo(m)


# -- input and kernel split alike: partial convolutions ------------------------


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("size,pad", [(16, "1_1"), (14, "0_0"), (13, "2_1")])
def test_kernel_gradient_conv_partials(n, size, pad):
  # The kernel gradient of a convolution over rows split n ways: the
  # activations (f01b) and the output gradient (i01o) are split alike along
  # the rows; the window spans them all.
  lo, hi = map(int, pad.split("_"))
  k = size + lo + hi - 2        # 3 output rows
  xs = _sharding(4, 1, n)
  ks = _sharding(4, 1, n)
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,{size},5,3] parameter(0), sharding={xs}
  dy = f32[2,{k},5,4] parameter(1), sharding={ks}
  ROOT g = f32[3,3,3,4] convolution(x, dy), window={{size={k}x5 pad={pad}x1_1}}, dim_labels=f01b_i01o->01bf, sharding={{replicated}}"""),
      n, propagate=False)
  ops = _opcodes(m)
  assert O.kAllGather not in ops and O.kAllReduce in ops


def test_kernel_gradient_uneven_input_without_halo():
  # Each partition's kernel rows meet exactly its own input rows (no
  # halo), but the last input tile ends in junk, which must be masked.
  s = "{devices=[1,4,1]<=[4]}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,19,3] parameter(0), sharding={s}
  dy = f32[2,20,4] parameter(1), sharding={s}
  ROOT g = f32[1,3,4] convolution(x, dy), window={{size=20 stride=2 pad=0_2}}, dim_labels=f0b_i0o->0bf, sharding={{replicated}}"""),
      4, propagate=False)
  assert O.kCollectivePermute not in _opcodes(m)


# -- a sweep of sizes, windows, strides and paddings --------------------------


def _sweep_cases(count: int, seed: int, dilate: bool = False):
  rng = random.Random(seed)
  cases = []
  while len(cases) < count:
    n = rng.choice([2, 4])
    size, w = rng.randint(1, 20), rng.randint(1, 7)
    stride, lo, hi = rng.randint(1, 4), rng.randint(0, 4), rng.randint(0, 4)
    base, wdil = (rng.randint(1, 3), rng.randint(1, 2)) if dilate else (1, 1)
    if (size - 1) * base + 1 + lo + hi >= (w - 1) * wdil + 1:
      cases.append((n, size, w, stride, lo, hi, base, wdil))
  return cases


@pytest.mark.parametrize("n,size,w,stride,lo,hi,base,wdil",
                         _sweep_cases(40, 1, dilate=True))
def test_sweep_reduce_window_and_conv(n, size, w, stride, lo, hi, base,
                                      wdil):
  out = ((size - 1) * base + 1 + lo + hi - (w - 1) * wdil - 1) // stride + 1
  window = (f"size={w} stride={stride} pad={lo}_{hi} lhs_dilate={base} "
            f"rhs_dilate={wdil}")
  s = f"{{devices=[{n}]<=[{n}]}}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[{size}] parameter(0), sharding={s}
  i = f32[] constant(0.5)
  ROOT r = f32[{out}] reduce-window(x, i), window={{{window}}}, to_apply=add, sharding={s}"""),
      n)
  assert O.kAllGather not in _opcodes(m)
  s = f"{{devices=[1,{n},1]<=[{n}]}}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[1,{size},2] parameter(0), sharding={s}
  k = f32[{w},2,3] parameter(1)
  ROOT c = f32[1,{out},3] convolution(x, k), window={{{window}}}, dim_labels=b0f_0io->b0f, sharding={s}"""),
      n)
  assert O.kAllGather not in _opcodes(m)


@pytest.mark.parametrize("n,size,w,stride,lo,hi,base,wdil",
                         _sweep_cases(20, 2))
def test_sweep_kernel_gradient(n, size, w, stride, lo, hi, base, wdil):
  del base, wdil
  k = max(1, size + lo + hi - w)   # the window spans most of the input
  out = (size + lo + hi - k) // stride + 1
  s = f"{{devices=[1,{n},1]<=[{n}]}}"
  m = spmd_testing.check_partitioning(_module(f"""
  x = f32[2,{size},3] parameter(0), sharding={s}
  dy = f32[2,{k},4] parameter(1), sharding={s}
  ROOT g = f32[{out},3,4] convolution(x, dy), window={{size={k} stride={stride} pad={lo}_{hi}}}, dim_labels=f0b_i0o->0bf, sharding={{replicated}}"""),
      n, propagate=False)
  assert O.kAllGather not in _opcodes(m)
