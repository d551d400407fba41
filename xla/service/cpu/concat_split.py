"""Splitting a kernel's loop at the piece boundaries of the concatenates it
generates.

Generated element by element, a concatenate chooses its operand with a
branch on the position along its axis (`ElementGenerator._concatenate`):
the loop around it carries control flow and reads through a phi of
addresses, so LLVM's loop vectorizer leaves it scalar. When the position
along the concatenate's axis is an iteration dimension of the loop plus a
constant, the range of that dimension splits into *segments* in which
every such concatenate reads one operand. The kernel then runs one loop
per segment (`Splitter.loop`; or one copy of the loop nest below per
segment, `Splitter.branch`, when the dimension is iterated further out),
generating the concatenates there as their operand alone
(`ElementGenerator.pinned`): the branches go away and the operand is read
at an affine index. XLA's emitters do the same for a concatenate (one loop
per operand).

`plan` finds, for the kernel's roots (values over the iteration shape),
the concatenates whose axis position is `i_d + c` on every path from the
roots, following the position through elementwise ops, broadcasts,
transposes, reshapes that keep the dimension, stride-1 slices, reverses
of other dimensions and other concatenates. A concatenate also reached
along a path where its position is not known that way (a pad, a
dynamic-slice, a gather, a broadcast dropping the dimension, a second
mapping) keeps its branches.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional, Sequence

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import elemental_generator
from xla.service.cpu import loop_emitter as le

O = HloOpcode

# At most this many segments per split (each segment has a loop, or a copy
# of a loop nest, of its own).
MAX_SEGMENTS = 16
# Each segment generates what the roots reach there, so whatever does not
# sit below a concatenate's pieces is emitted once per segment. A split
# may emit at most about twice the instructions of the unsplit loop body,
# or this many more.
EXTRA_INSTRUCTIONS = 256

# A position not `i_d + c` (or not depending on i_d): never pinned.
_UNKNOWN = None


@dataclasses.dataclass(frozen=True)
class Segment:
  lo: int
  hi: int
  pins: tuple  # (concatenate, operand number) pairs


@dataclasses.dataclass(frozen=True)
class SplitPlan:
  dim: int  # the iteration dimension split
  segments: tuple  # Segment, covering [0, dims[dim]) in order


def _dims(instr) -> tuple:
  return tuple(instr.shape.dimensions)


def _reshape_dim(out_dims, e, op_dims) -> Optional[int]:
  """The operand dimension of a reshape that dimension `e` of its result
  is (same size, same elements after it), else None."""
  size, after = out_dims[e], math.prod(out_dims[e + 1:])
  for k, s in enumerate(op_dims):
    if s == size and math.prod(op_dims[k + 1:]) == after:
      return k
  return None


def _operand_positions(instr, m) -> list:
  """(operand, its position mapping) for the array operands of `instr`
  whose element at an index of `instr` with position mapping `m` (a pair
  (dimension, offset): index along dimension = i_d + offset) is read."""
  # Scalars too: what they are computed from is generated in the segment
  # as well, at positions that do not follow i_d (a concatenate sliced to
  # a scalar and broadcast again, as jnp.stack of an RK4 stage makes it).
  ops = [o for o in instr.operands if not o.shape.is_tuple()]
  if m is _UNKNOWN:
    return [(o, _UNKNOWN) for o in ops]
  e, c = m
  op = instr.opcode
  if instr.shape.is_tuple():
    return [(o, _UNKNOWN) for o in ops]
  if op in (O.kCopy, O.kMap) or instr.is_elementwise():
    return [(o, m if _dims(o) == _dims(instr) else _UNKNOWN) for o in ops]
  if op == O.kBroadcast:
    dims = list(instr.dimensions)
    if e not in dims:
      return [(o, _UNKNOWN) for o in ops]
    k = dims.index(e)
    # (An operand dimension of size 1 stretched over the result's is read
    # at 0 whatever the position.)
    same = ops[0].shape.dimensions[k] == instr.shape.dimensions[e]
    return [(ops[0], (k, c) if same else _UNKNOWN)]
  if op == O.kTranspose:
    return [(ops[0], (instr.dimensions[e], c))]
  if op in (O.kReshape, O.kBitcast):
    k = _reshape_dim(_dims(instr), e, _dims(ops[0]))
    return [(ops[0], _UNKNOWN if k is None else (k, c))]
  if op == O.kSlice:
    if instr.slice_strides[e] != 1:
      return [(ops[0], _UNKNOWN)]
    return [(ops[0], (e, c + instr.slice_starts[e]))]
  if op == O.kReverse:
    return [(ops[0], _UNKNOWN if e in instr.dimensions else m)]
  if op == O.kConcatenate:
    axis = instr.dimensions[0]
    if axis != e:
      return [(o, m) for o in ops]
    out, off = [], 0
    for o in instr.operands:
      out.append((o, (e, c - off)))
      off += o.shape.dimensions[axis]
    return [(o, p) for o, p in out if o.shape.dimensions]
  return [(o, _UNKNOWN) for o in ops]


def _generated(roots, is_source, pins) -> int:
  """How many instructions the roots reach (not below sources) when each
  concatenate of `pins` reaches only its pinned operand."""
  pinned = {id(c): k for c, k in pins}
  seen, stack = set(), list(roots)
  while stack:
    instr = stack.pop()
    if id(instr) in seen:
      continue
    seen.add(id(instr))
    if is_source(instr):
      continue
    k = pinned.get(id(instr))
    stack.extend(instr.operands if k is None else [instr.operand(k)])
  return len(seen)


def _pieces(concat):
  """(operand number, start, end) of each non-empty operand along the
  axis."""
  axis = concat.dimensions[0]
  out, off = [], 0
  for k, o in enumerate(concat.operands):
    n = o.shape.dimensions[axis]
    if n:
      out.append((k, off, off + n))
    off += n
  return out


def _plan_dim(order, roots, dims, d, is_source) -> Optional[SplitPlan]:
  n = dims[d]
  positions: dict[int, set] = {}
  for r in roots:
    positions.setdefault(id(r), set()).add((d, 0))
  concats = []
  for instr in reversed(order):  # users before operands
    ms = positions.get(id(instr))
    if not ms:
      continue
    if instr.opcode == O.kConcatenate and len(ms) == 1:
      (m,) = ms
      if m is not _UNKNOWN and m[0] == instr.dimensions[0]:
        concats.append((instr, m[1]))
    for m in ms:
      for o, om in _operand_positions(instr, m):
        positions.setdefault(id(o), set()).add(om)
  # A concatenate reached along a second path keeps its branches.
  concats = [(c, off) for c, off in concats if len(positions[id(c)]) == 1]
  if not concats:
    return None
  cuts = {0, n}
  for c, off in concats:
    for _, lo, hi in _pieces(c):
      for x in (lo - off, hi - off):
        if 0 < x < n:
          cuts.add(x)
  cuts = sorted(cuts)
  if len(cuts) - 1 > MAX_SEGMENTS:
    return None
  segments = []
  for lo, hi in zip(cuts, cuts[1:]):
    pins = []
    for c, off in concats:
      for k, p_lo, p_hi in _pieces(c):
        if p_lo <= lo + off and hi + off <= p_hi:
          pins.append((c, k))
          break
    segments.append(Segment(lo, hi, tuple(pins)))
  whole = len(order)
  emitted = sum(_generated(roots, is_source, seg.pins) for seg in segments)
  if emitted > max(2 * whole, whole + EXTRA_INSTRUCTIONS):
    return None
  return SplitPlan(d, tuple(segments))


def plan(roots: Sequence, dims: Sequence[int], is_source: Callable,
         allowed: Optional[Sequence[int]] = None) -> Optional[SplitPlan]:
  """The split of the loop over `dims` whose body generates `roots`
  (instructions of shape `dims`): the innermost dimension of `allowed`
  (default: all) along which some concatenate can be pinned, or None."""
  dims = tuple(dims)
  if 0 in dims:
    return None
  order = elemental_generator.post_order_below(list(roots), is_source)
  if not any(i.opcode == O.kConcatenate for i in order):
    return None
  cands = range(len(dims)) if allowed is None else allowed
  for d in sorted(cands, reverse=True):
    if dims[d] < 2:
      continue
    p = _plan_dim(order, roots, dims, d, is_source)
    if p is not None:
      return p
  return None


class Splitter:
  """Emits the loops of a `SplitPlan` with the generator's pins."""

  def __init__(self, split: SplitPlan, gen):
    self.plan = split
    self.dim = split.dim
    self.gen = gen

  def loop(self, b, lo, hi, name: str, body: Callable,
           loop_metadata=None) -> None:
    """`for i in [lo, hi)` along the split dimension as one loop per
    segment; `body(i)` emits an iteration."""
    lo, hi = le.as_i64(lo), le.as_i64(hi)
    static = le.is_const(lo) and le.is_const(hi)
    for k, seg in enumerate(self.plan.segments):
      if static:
        s_lo = max(lo.constant, seg.lo)
        s_hi = min(hi.constant, seg.hi)
        if s_lo >= s_hi:
          continue
      else:
        s_lo = _max(b, lo, seg.lo)
        s_hi = le.min_i64(b, hi, seg.hi)
      with self.gen.pinned(seg.pins), self.gen.scope():
        with le.for_range(b, s_lo, s_hi, f"{name}.s{k}",
                          loop_metadata=loop_metadata) as i:
          body(i)

  def branch(self, b, v, body: Callable[[], None]) -> None:
    """Emits `body()` once per segment, run where `v` (the index along
    the split dimension) falls in that segment."""
    segs = self.plan.segments
    merge = b.append_basic_block("split.merge")
    for k, seg in enumerate(segs):
      last = k == len(segs) - 1
      if not last:
        take = b.append_basic_block(f"split.seg{k}")
        nxt = b.append_basic_block(f"split.next{k}")
        b.cbranch(b.icmp_signed("<", v, le.i64(seg.hi)), take, nxt)
        b.position_at_end(take)
      with self.gen.pinned(seg.pins), self.gen.scope():
        body()
      b.branch(merge)
      if not last:
        b.position_at_end(nxt)
    b.position_at_end(merge)


def _max(b, x, c: int):
  if c == 0:
    return x
  return b.select(b.icmp_signed(">", x, le.i64(c)), x, le.i64(c))

