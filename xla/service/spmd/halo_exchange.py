"""Windowed ops sharded along their windowed dimensions: halo exchange.

A convolution or reduce-window whose input is tiled along a dimension the
window slides over needs, on each partition, a few rows of its neighbours'
tiles (the halo) besides its own. As XLA's SPMD partitioner does
(`ExchangeHalo` / `ExchangeHaloAndGetValidData` in
spmd_partitioner_util.cc, used by its convolution and reduce-window
handlers), each partition here

  1. receives the `left` rows before its tile and the `right` rows after
     it from its neighbours, with one collective-permute per neighbouring
     tile they come from (one on each side unless a halo is wider than a
     tile), and concatenates them around its own tile;
  2. replaces every row that lies outside the global value (before row 0,
     past the end, and the junk rows of an uneven last tile) with the
     value the op pads with (zero for a convolution, the init value for a
     reduce-window), which also stands for the op's own edge padding;
  3. slices, at a per-partition offset, exactly the rows its tile of the
     output reads ((output tile - 1) * stride + window span), and
  4. runs the op on that with no padding along the dimension, so the
     output is tiled along the same dimension by the same devices.

The output tile of partition i along a dimension holds outputs
[i * T, (i + 1) * T) with T = ceil(outputs / tiles), the padded tile shape
the rest of the partitioner uses; rows of it past the end are padding.

A dilated window reads its first to last row and keeps its dilation on
the local op. A dilated input (base dilation) is read as the rows its
span covers, spread apart locally with filler between them (a pad with
interior padding) and cut at a per-partition offset, so the local op
runs without it. A window with no output leaves its dimension to be made
whole (an all-gather along it), and an op with no tiled dimension left
runs whole (`replicated_fallback`), as before.

A convolution runs so with its batch and spatial dimensions tiled as the
input's, the input feature dimension and the kernel whole;
`batch_group_count` > 1 runs whole. Where the input and the kernel are
tiled alike along spatial dimensions and nowhere else (a kernel gradient,
whose window spans the input), each partition instead convolves its
kernel rows with the input rows they meet (its tile and halos) into the
whole output, and an all-reduce sums the partial outputs.

A reduce-window of one operand keeps every tiling of its operand.

An input that is whole along those dimensions while the output is split
is first cut to the output's tiling (a local slice), as XLA aligns it,
and then exchanges halos.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import support
from xla import xla_data
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.service.spmd import partitioned_hlo as ph_lib
from xla.service.spmd import sharding_util as su
from xla.service.spmd import spmd_handlers
from xla.service.spmd.partitioned_hlo import PartitionedHlo
from xla.service.spmd.partitioned_hlo import register_handler
from xla.xla_data import PrimitiveType

O = HloOpcode
P = PrimitiveType


@dataclasses.dataclass(frozen=True)
class HaloPlan:
  """How one tiled dimension of size `size` in `count` tiles of `tile`
  rows is widened for a window: `left` / `right` rows come from the
  neighbours, `pad_low` / `pad_high` filler rows go outside those, and
  tile i's window input starts at `offsets[i]` of the widened rows and is
  `need` rows long, giving `out_tile` outputs. With an input (base)
  dilation > 1 those rows are dilated first and the window input is the
  `dilated_need` positions from `dilated_offsets[i]` of them."""

  size: int
  count: int
  tile: int
  left: int
  right: int
  pad_low: int
  pad_high: int
  offsets: tuple[int, ...]
  need: int
  out_tile: int
  dilation: int = 1
  dilated_offsets: tuple[int, ...] = ()
  dilated_need: int = 0

  @property
  def widened(self) -> int:
    return self.pad_low + self.left + self.tile + self.right + self.pad_high

  def start(self, i: int) -> int:
    """Where the widened rows of tile i start in the global dimension."""
    return i * self.tile - self.left - self.pad_low

  @property
  def trivial(self) -> bool:
    """No rows move, no row needs masking, and the op runs on the tile as
    it is."""
    return (self.widened == self.tile and self.need == self.tile and
            not any(self.offsets) and self.count * self.tile == self.size
            and self.dilation == 1)


def plan_dim(size: int, count: int, wd: xla_data.WindowDimension
             ) -> Optional[HaloPlan]:
  """The halo plan of one dimension, or None where the window has no
  output. A dilated window reads its first to last row (the local op
  keeps its dilation); a dilated input is read as the rows that fall in
  the window's span, dilated locally."""
  if wd.base_dilation < 1 or wd.window_dilation < 1 or wd.stride < 1:
    return None
  w, s = (wd.size - 1) * wd.window_dilation + 1, wd.stride
  bd = wd.base_dilation
  span = (size - 1) * bd + 1 + wd.padding_low + wd.padding_high
  if size < 1 or span < w or w < 1:
    return None
  outputs = (span - w) // s + 1
  out_tile = su.ceil_div(outputs, count)
  need = (out_tile - 1) * s + w
  # Tile i reads positions [lo[i], lo[i] + need) of the (dilated) input
  # (negative and past-the-end ones are the op's padding).
  lo = [i * out_tile * s - wd.padding_low for i in range(count)]
  live = [i for i in range(count) if i * out_tile < outputs]
  if bd == 1:
    return plan_reads(size, count, lo, need, live, out_tile)
  # The rows from the one at or before each span's start to the last
  # inside it, dilated locally; the span starts `skip` positions in.
  first = [a // bd for a in lo]
  rows = max([1] + [(lo[i] + need - 1) // bd - first[i] + 1 for i in live])
  plan = plan_reads(size, count, first, rows, live, out_tile)
  skip = [lo[i] - first[i] * bd for i in range(count)]
  return dataclasses.replace(plan, dilation=bd, dilated_offsets=tuple(skip),
                             dilated_need=need)


def plan_reads(size: int, count: int, lo: Sequence[int], need: int,
               live: Sequence[int], out_tile: int) -> HaloPlan:
  """The plan by which tile i (of `count` over `size` rows) gets global
  rows [lo[i], lo[i] + need); only the tiles in `live` must get them
  right."""
  tile = su.ceil_div(size, count)
  left = max([0] + [i * tile - max(lo[i], 0) for i in live])
  right = max([0] + [min(lo[i] + need, size) - (i + 1) * tile
                     for i in live])
  # Offsets into [left halo | tile | right halo]; filler extends it.
  rel = [lo[i] - i * tile + left for i in range(count)]
  pad_low = max([0] + [-rel[i] for i in live])
  base = left + tile + right
  pad_high = max([0] + [pad_low + rel[i] + need - base for i in live])
  widened = pad_low + base + pad_high
  offsets = tuple(min(max(pad_low + r, 0), widened - need) for r in rel)
  return HaloPlan(size, count, tile, left, right, pad_low, pad_high,
                  offsets, need, out_tile)


def _neighbour_pairs(m: su.TileMap, dim: int, step: int
                     ) -> list[tuple[int, int]]:
  """(source, target) pairs sending each device the tile `step` away
  along `dim` (the holder of the same rank among the replicas)."""
  holders = m.holders()
  pairs = []
  for idx, targets in holders.items():
    src_idx = list(idx)
    src_idx[dim] += step
    sources = holders.get(tuple(src_idx))
    if sources is None:
      continue
    pairs += list(zip(sources, targets))
  return sorted(pairs)


def _in_range_mask(b: ph_lib.Builder, x, m: su.TileMap, dim: int,
                   plan: HaloPlan):
  """pred[x's shape]: whether each widened row lies in [0, size)."""
  n = m.num_devices
  dims = x.shape.dimensions
  lower = [-plan.start(m.index[p][dim]) for p in range(n)]
  upper = [plan.size - plan.start(m.index[p][dim]) for p in range(n)]
  s32 = ph_lib.array_shape(P.S32, dims)
  pred = ph_lib.array_shape(P.PRED, dims)
  iota = b.emit(O.kIota, s32, iota_dimension=dim)
  ge = b.add(hi.create_compare(
      pred, iota, b.broadcast_scalar(b.per_partition(lower), s32),
      xla_data.ComparisonDirection.GE))
  lt = b.add(hi.create_compare(
      pred, iota, b.broadcast_scalar(b.per_partition(upper), s32),
      xla_data.ComparisonDirection.LT))
  return b.emit(O.kAnd, pred, (ge, lt))


def _slice_dim(b: ph_lib.Builder, x, dim: int, start: int, limit: int):
  dims = x.shape.dimensions
  starts = [0] * len(dims)
  limits = list(dims)
  starts[dim], limits[dim] = start, limit
  return b.slice(x, starts, limits)


def widen(b: ph_lib.Builder, x, m: su.TileMap, dim: int, plan: HaloPlan,
          fill):
  """The local tile `x` widened along `dim` by the halos of its
  neighbours and filler, with every row outside the global value set to
  the scalar `fill` (steps 1 and 2 of the module docstring)."""
  t = plan.tile
  parts = []
  # A halo wider than a tile comes from several tiles on that side, one
  # collective-permute per tile (the nearest sends a whole tile).
  for hop in range(su.ceil_div(plan.left, t), 0, -1):
    rows = min(t, plan.left - (hop - 1) * t)
    send = _slice_dim(b, x, dim, t - rows, t)
    parts.append(ph_lib.collective_permute(
        b, send, _neighbour_pairs(m, dim, -hop)))
  parts.append(x)
  for hop in range(1, su.ceil_div(plan.right, t) + 1):
    rows = min(t, plan.right - (hop - 1) * t)
    send = _slice_dim(b, x, dim, 0, rows)
    parts.append(ph_lib.collective_permute(
        b, send, _neighbour_pairs(m, dim, hop)))
  et = x.shape.element_type
  if len(parts) > 1:
    dims = list(x.shape.dimensions)
    dims[dim] = sum(p.shape.dimensions[dim] for p in parts)
    x = b.emit(O.kConcatenate, ph_lib.array_shape(et, dims), parts,
               dimensions=(dim,))
  if plan.pad_low or plan.pad_high:
    dims = list(x.shape.dimensions)
    cfg = xla_data.PaddingConfig(tuple(
        xla_data.PaddingDimension(plan.pad_low if d == dim else 0,
                                  plan.pad_high if d == dim else 0, 0)
        for d in range(len(dims))))
    dims[dim] += plan.pad_low + plan.pad_high
    x = b.emit(O.kPad, ph_lib.array_shape(et, dims), (x, fill), padding=cfg)
  outside = (plan.left or plan.right or plan.pad_low or plan.pad_high or
             plan.count * plan.tile != plan.size)
  if outside:
    mask = _in_range_mask(b, x, m, dim, plan)
    x = b.emit(O.kSelect, x.shape,
               (mask, x, b.broadcast_scalar(fill, x.shape)))
  return x


def window_input(b: ph_lib.Builder, x, m: su.TileMap,
                 plans: dict[int, HaloPlan], fill):
  """`x` (a tile under map `m`) widened along every planned dimension and
  cut to the rows this partition's output tile reads (steps 1 to 3)."""
  for dim in sorted(plans):
    if not plans[dim].trivial:
      x = widen(b, x, m, dim, plans[dim], fill)
  dims = list(x.shape.dimensions)
  starts = [[0] * m.num_devices for _ in dims]
  for dim, plan in plans.items():
    dims[dim] = plan.need
    starts[dim] = [plan.offsets[m.index[p][dim]]
                   for p in range(m.num_devices)]
  x = _cut(b, x, dims, starts)
  dilated = {d: p for d, p in plans.items() if p.dilation > 1}
  if not dilated:
    return x
  # Input dilation, done here: the rows spread apart with filler between
  # (and after, for the window's reach), then each partition's span.
  dims = list(x.shape.dimensions)
  starts = [[0] * m.num_devices for _ in dims]
  cfg = []
  for d, size in enumerate(dims):
    plan = dilated.get(d)
    if plan is None:
      cfg.append(xla_data.PaddingDimension(0, 0, 0))
      continue
    spread = (size - 1) * plan.dilation + 1
    high = max(0, max(o + plan.dilated_need for o in plan.dilated_offsets)
               - spread)
    cfg.append(xla_data.PaddingDimension(0, high, plan.dilation - 1))
    dims[d] = spread + high
  x = b.emit(O.kPad, ph_lib.array_shape(x.shape.element_type, dims),
             (x, fill), padding=xla_data.PaddingConfig(tuple(cfg)))
  for d, plan in dilated.items():
    dims[d] = plan.dilated_need
    starts[d] = [plan.dilated_offsets[m.index[p][d]]
                 for p in range(m.num_devices)]
  return _cut(b, x, dims, starts)


def _cut(b: ph_lib.Builder, x, dims: Sequence[int],
         starts: Sequence[Sequence[int]]):
  """`x` cut to `dims` from per-device `starts` (a slice where all devices
  agree, else a dynamic-slice)."""
  if tuple(dims) == x.shape.dimensions:
    return x
  et = x.shape.element_type
  if all(len(set(s)) == 1 for s in starts):
    begin = [s[0] for s in starts]
    return b.slice(x, begin, [a + d for a, d in zip(begin, dims)])
  return b.emit(O.kDynamicSlice, ph_lib.array_shape(et, dims),
                [x] + [b.per_partition(s) for s in starts],
                dynamic_slice_sizes=tuple(dims))


def _unpadded_window(window: xla_data.Window, dims: Sequence[int]
                     ) -> xla_data.Window:
  """`window` with no padding or input dilation along `dims` (window
  dimension numbers): the window input holds them already."""
  return xla_data.Window(tuple(
      dataclasses.replace(wd, padding_low=0, padding_high=0, base_dilation=1)
      if i in dims else wd for i, wd in enumerate(window.dimensions)))


def plan_dims(m: su.TileMap, shape_dims: Sequence[int],
              windowed: dict[int, xla_data.WindowDimension]
              ) -> tuple[su.TileMap, dict[int, HaloPlan]]:
  """Halo plans for the tiled dimensions of `m` in `windowed` (operand
  dim -> its window dimension); dims without one are untiled in the
  returned map (they are made whole)."""
  plans = {}
  whole = []
  for dim, wd in windowed.items():
    if m.counts[dim] == 1:
      continue
    plan = plan_dim(shape_dims[dim], m.counts[dim], wd)
    if plan is None:
      whole.append(dim)
    else:
      plans[dim] = plan
  return m.replicate_dims(whole), plans


def _map_of(cp, s, rank: int) -> Optional[su.TileMap]:
  if s.is_manual or s.is_tuple or ph_lib.has_unreduced(s):
    return None
  try:
    return su.tile_map(s, rank, cp.n)
  except support.XlaError:
    return None


def _input_map(cp, instr, operand: PartitionedHlo, src: Sequence[int],
               dst: Sequence[int]) -> Optional[su.TileMap]:
  """The tiling the op runs under: the operand's on the dims `src` (the
  others made whole), or, where that leaves the operand whole, the
  target's on the output dims `dst` (the operand is cut to it locally,
  as XLA aligns a replicated input with the output)."""
  m = _map_of(cp, operand.sharding, operand.rank)
  if m is None:
    return None
  rank = operand.rank
  m = m.replicate_dims([d for d in range(rank) if d not in src])
  if m.is_replicated:
    tm = _map_of(cp, cp.target(instr), instr.shape.rank)
    if tm is not None:
      m = tm.project(dst).embed(rank, src)
  return m


# -- handlers ------------------------------------------------------------------


@register_handler(O.kReduceWindow)
def handle_reduce_window(cp, instr) -> PartitionedHlo:
  target = cp.target(instr)
  if target.is_manual:
    return cp.manual_clone(instr)
  if instr.operand_count != 2 or instr.shape.is_tuple():
    return cp.replicated_fallback(instr)
  b = cp.b
  operand = cp.operand(0)
  dims = list(range(operand.rank))
  m = _input_map(cp, instr, operand, dims, dims)
  if m is None or m.is_replicated:
    return cp.replicated_fallback(instr)
  window = instr.window
  shape_dims = instr.operand(0).shape.dimensions
  m, plans = plan_dims(m, shape_dims, dict(enumerate(window.dimensions)))
  if not plans:
    return cp.replicated_fallback(instr)
  operand = ph_lib.reshard(b, operand, m.to_sharding())
  init = ph_lib.replicate(b, cp.operand(1)).hlo
  x = window_input(b, operand.hlo, m, plans, init)
  out_sharding = m.to_sharding()
  new = spmd_handlers.clone(
      b, instr, ph_lib.local_shape(instr.shape, out_sharding), [x, init],
      window=_unpadded_window(window, plans))
  return spmd_handlers.finish(
      cp, instr, PartitionedHlo(new, instr.shape, out_sharding))


def _partial_spatial_conv(cp, instr) -> Optional[PartitionedHlo]:
  """A convolution whose input and kernel are tiled alike along spatial
  dimensions (and nowhere else), as the kernel gradient of a spatially
  split convolution is: each partition convolves its kernel rows with the
  input rows they meet (its tile and halos) into the whole output, and an
  all-reduce sums the partial outputs (XLA's
  PartitionConvolutionWithSpatialDimensionHaloExchangeOnLHS). None where
  the operands are not tiled so."""
  dn = instr.convolution_dimension_numbers
  if instr.feature_group_count != 1:
    return None
  lhs, rhs = cp.operand(0), cp.operand(1)
  lm = _map_of(cp, lhs.sharding, lhs.rank)
  rm = _map_of(cp, rhs.sharding, rhs.rank)
  if lm is None or rm is None:
    return None
  spatial = list(dn.input_spatial_dimensions)
  kspatial = list(dn.kernel_spatial_dimensions)
  tiled = [j for j, kd in enumerate(kspatial) if rm.counts[kd] > 1]
  kdims = [kspatial[j] for j in tiled]
  if not tiled or any(rm.counts[d] > 1 for d in range(rhs.rank)
                      if d not in kdims):
    return None
  if lm != rm.project(kdims).embed(lhs.rank, [spatial[j] for j in tiled]):
    return None
  window = instr.window
  lshape = instr.operand(0).shape.dimensions
  kshape = instr.operand(1).shape.dimensions
  plans = {}
  local_window = list(window.dimensions)
  for j in tiled:
    wd = window.dimensions[j]
    if wd.base_dilation != 1 or wd.window_reversal:
      return None
    k, size, ksize = rm.counts[kspatial[j]], lshape[spatial[j]], kshape[
        kspatial[j]]
    dil = wd.window_dilation
    span = size + wd.padding_low + wd.padding_high - ((ksize - 1) * dil + 1)
    if span < 0:
      return None
    outputs = span // wd.stride + 1
    r = su.ceil_div(ksize, k)
    # Kernel rows [i * r, (i + 1) * r) meet input rows from
    # i * r * dilation - low, (r - 1) * dilation + 1 of them per output.
    lo = [i * r * dil - wd.padding_low for i in range(k)]
    live = [i for i in range(k) if i * r < ksize]
    plans[spatial[j]] = plan_reads(
        size, k, lo, (r - 1) * dil + 1 + (outputs - 1) * wd.stride, live,
        outputs)
    local_window[j] = dataclasses.replace(wd, size=r, padding_low=0,
                                          padding_high=0)
  groups = su.reduction_groups(rm, kdims)
  if groups is None:
    return None
  b = cp.b
  x = window_input(b, lhs.hlo, lm, plans,
                   b.scalar(0, instr.operand(0).shape.element_type))
  # Kernel rows past the end (an uneven last tile) must add nothing.
  kernel = ph_lib.mask_padding(
      b, rhs, kdims, b.scalar(0, instr.operand(1).shape.element_type))
  new = spmd_handlers.clone(b, instr, instr.shape, [x, kernel.hlo],
                            window=xla_data.Window(tuple(local_window)))
  new = ph_lib.all_reduce(b, new, groups,
                          cp.state.sum_reducer(instr.shape.element_type))
  return spmd_handlers.finish(
      cp, instr, PartitionedHlo(new, instr.shape, HloSharding.replicate()))


@register_handler(O.kConvolution)
def handle_convolution(cp, instr) -> PartitionedHlo:
  target = cp.target(instr)
  if target.is_manual:
    return cp.manual_clone(instr)
  dn = instr.convolution_dimension_numbers
  if instr.batch_group_count != 1 or dn is None:
    return cp.replicated_fallback(instr)
  partial = _partial_spatial_conv(cp, instr)
  if partial is not None:
    return partial
  b = cp.b
  lhs = cp.operand(0)
  spatial = list(dn.input_spatial_dimensions)
  # Batch and spatial dims keep their tiling; the input feature dimension
  # is contracted and made whole.
  m = _input_map(cp, instr, lhs, [dn.input_batch_dimension] + spatial,
                 [dn.output_batch_dimension] +
                 list(dn.output_spatial_dimensions))
  if m is None or m.is_replicated:
    return cp.replicated_fallback(instr)
  window = instr.window
  m, plans = plan_dims(m, instr.operand(0).shape.dimensions,
                       {d: window.dimensions[i]
                        for i, d in enumerate(spatial)})
  if not plans and m.counts[dn.input_batch_dimension] == 1:
    return cp.replicated_fallback(instr)
  lhs = ph_lib.reshard(b, lhs, m.to_sharding())
  rhs = ph_lib.replicate(b, cp.operand(1)).hlo
  zero = b.scalar(0, instr.operand(0).shape.element_type)
  x = window_input(b, lhs.hlo, m, plans, zero)
  # The output is tiled as the input: batch to batch, spatial to spatial.
  src = ([dn.input_batch_dimension, dn.input_feature_dimension] + spatial)
  dst = ([dn.output_batch_dimension, dn.output_feature_dimension] +
         list(dn.output_spatial_dimensions))
  rank = instr.shape.rank

  def out_index(idx):
    out = [0] * rank
    for s, d in zip(src, dst):
      out[d] = idx[s]
    return out

  out_map = m.with_dims(out_index(m.counts), out_index)
  out_sharding = out_map.to_sharding()
  windowed = [i for i, d in enumerate(spatial) if d in plans]
  new = spmd_handlers.clone(
      b, instr, ph_lib.local_shape(instr.shape, out_sharding), [x, rhs],
      window=_unpadded_window(window, windowed))
  return spmd_handlers.finish(
      cp, instr, PartitionedHlo(new, instr.shape, out_sharding))
