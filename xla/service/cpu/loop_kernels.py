"""Kernel skeletons shared by the core emitters: argument unpacking and the
parallel loop over an output shape.

A loop kernel iterates its output shape in row-major order. The iteration
space is cut into *units* (the kernel's parallel extent): the dimensions
before a split dimension `p` are enumerated one by one, dimension `p` is cut
into chunks of `c` indices, and the dimensions after `p` are iterated whole
inside a unit. `p` and `c` are chosen so a unit holds about
`TARGET_UNIT_ELEMENTS` elements: enough work to amortise the per-unit index
arithmetic and the thread hand-off, small enough that the runtime can split
the extent evenly across threads. The innermost loop always runs over the
last (contiguous) dimension, so LLVM's loop vectorizer widens it.

Shapes whose generators only need the *linear* index (elementwise chains,
reshapes, scalar broadcasts) are iterated as one flat dimension instead,
which gives the vectorizer a single long loop.

A `concat_split.Splitter` splits one dimension's iteration at the pieces
of the concatenates the body generates: one loop per piece (or, for a
dimension enumerated by the unit number, one copy of the loops below per
piece).
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

from llvmlite import ir

from xla.service.cpu import kernel_api
from xla.service.cpu import loop_emitter as le
from xla.service.cpu.loop_emitter import Index

# Elements per parallel unit (see the module docstring).
TARGET_UNIT_ELEMENTS = 16384


class KernelArgs:
  """A new kernel-ABI function with its array pointers (operand leaves,
  then result leaves), each cast to a pointer to its storage type."""

  def __init__(self, ctx: kernel_api.KernelContext, base: str,
               operand_shapes: Sequence, result_shapes: Sequence):
    self.ctx = ctx
    self.fn, self.b = ctx.new_kernel(base)
    self.begin, self.end = self.fn.args[1], self.fn.args[2]
    self.operand_shapes = list(operand_shapes)
    self.result_shapes = list(result_shapes)
    n = len(self.operand_shapes)
    self.operands = [self._ptr(i, s) for i, s in
                     enumerate(self.operand_shapes)]
    self.results = [self._ptr(n + i, s) for i, s in
                    enumerate(self.result_shapes)]

  @classmethod
  def for_instruction(cls, ctx, instr, base: Optional[str] = None):
    ops = []
    for o in instr.operands:
      ops.extend(kernel_api.array_leaves(o.shape))
    return cls(ctx, base or instr.name, ops,
               kernel_api.array_leaves(instr.shape))

  def _ptr(self, index: int, shape) -> ir.Value:
    if shape.is_token() or shape.is_opaque():
      return None
    return kernel_api.KernelContext.arg_pointer(self.b, self.fn, index,
                                                shape.element_type)

  @property
  def name(self) -> str:
    return self.fn.name


def partition(dims: Sequence[int],
              target: int = TARGET_UNIT_ELEMENTS) -> tuple[int, int, int]:
  """(p, c, extent) for iterating `dims`: see the module docstring."""
  dims = list(dims)
  if not dims or 0 in dims:
    return 0, max(1, dims[0] if dims else 1), 0 if 0 in dims else 1
  total = math.prod(dims)
  if total <= target:
    return 0, dims[0], 1
  # Largest p with prod(dims[p:]) >= target.
  p = 0
  for k in range(len(dims)):
    if math.prod(dims[k:]) >= target:
      p = k
  inner = math.prod(dims[p + 1:])
  c = max(1, min(dims[p], -(-target // inner)))
  nb = -(-dims[p] // c)
  extent = math.prod(dims[:p]) * nb
  return p, c, extent


def loop_along(b: ir.IRBuilder, split, d: int, lo, hi, name: str,
               body: Callable[[ir.Value], None], loop_metadata=None) -> None:
  """`for i in [lo, hi)` over dimension `d`: one loop per segment where
  `split` (a `concat_split.Splitter`, or None) splits `d`, else one loop;
  `body(i)` emits an iteration."""
  if split is not None and split.dim == d:
    split.loop(b, lo, hi, name, body, loop_metadata=loop_metadata)
    return
  with le.for_range(b, lo, hi, name, loop_metadata=loop_metadata) as i:
    body(i)


def emit_parallel_loop(b: ir.IRBuilder, begin: ir.Value, end: ir.Value,
                       dims: Sequence[int], p: int, c: int,
                       body: Callable[[list[ir.Value]], None],
                       name: str = "loop", split=None) -> None:
  """Emits the units [begin, end) of the partition (p, c) of `dims`;
  `body(multi)` emits the work of one element at multi-index `multi`.
  `split` (a `concat_split.Splitter`) splits the iteration of its
  dimension into its segments."""
  dims = list(dims)
  rank = len(dims)
  if rank == 0:
    body([])
    return
  nb = -(-dims[p] // c)
  with le.for_range(b, begin, end, f"{name}.unit") as u:
    blk = le.urem(b, u, nb)
    rest = le.udiv(b, u, nb)
    outer: list[ir.Value] = [None] * p
    for d in range(p - 1, -1, -1):
      outer[d] = le.urem(b, rest, dims[d])
      rest = le.udiv(b, rest, dims[d])
    if nb == 1:
      lo, hi = le.i64(0), le.i64(dims[p])
    else:
      lo = le.mul(b, blk, c)
      hi_raw = b.add(lo, le.i64(c))
      hi = le.min_i64(b, hi_raw, dims[p])

    def unit_body():
      if dims[p] == 1:
        ip = le.i64(0)
        _inner(b, dims, p + 1, outer + [ip], body, name, split)
      else:
        loop_along(b, split, p, lo, hi, f"{name}.d{p}",
                   lambda ip: _inner(b, dims, p + 1, outer + [ip], body,
                                     name, split))

    if split is not None and split.dim < p:
      split.branch(b, outer[split.dim], unit_body)
    else:
      unit_body()


# A last dimension of this many elements or more (and at most
# NO_UNROLL_MAX) is kept a loop for the vectorizer: see
# loop_emitter.no_unroll_metadata.
NO_UNROLL_MIN = 8
NO_UNROLL_MAX = 256


def _vector_dim(dims: Sequence[int]) -> int:
  """The dimension whose loop LLVM vectorizes: the innermost one of at least
  NO_UNROLL_MIN elements once the dimensions inside it, together shorter
  than that, are fully unrolled. That loop is kept rolled. Unrolled too, a
  [4, 64, 3] transpose became 32 copies of a vectorized 3-way interleave,
  each a long shuffle sequence: 330 ms of LLVM code generation for a 768
  element copy, 17 ms kept rolled. -1 if there is none."""
  inner = 1
  for d in range(len(dims) - 1, -1, -1):
    if dims[d] >= NO_UNROLL_MIN:
      return d if inner < NO_UNROLL_MIN else -1
    inner *= dims[d]
    if inner >= NO_UNROLL_MIN:
      return -1
  return -1


def _inner(b, dims, d, prefix, body, name, split=None):
  if d == len(dims):
    body(prefix)
    return
  if dims[d] == 1:
    _inner(b, dims, d + 1, prefix + [le.i64(0)], body, name, split)
    return
  md = None
  if (d > 0 and d == _vector_dim(dims) and dims[d] <= NO_UNROLL_MAX):
    md = le.no_unroll_metadata(b.module)
  loop_along(b, split, d, 0, dims[d], f"{name}.d{d}",
             lambda i: _inner(b, dims, d + 1, prefix + [i], body, name,
                              split), loop_metadata=md)


def emit_elementwise_loop(b: ir.IRBuilder, begin: ir.Value, end: ir.Value,
                          dims: Sequence[int], linear: bool,
                          body: Callable[[Index], None],
                          name: str = "loop", split=None) -> int:
  """Emits a loop over every element of `dims`, calling `body(index)`.
  Returns the parallel extent the caller's kernel must declare. With
  `linear`, iterates one flat dimension and gives `body` indices that carry
  only their linear form. `split`: see `emit_parallel_loop` (not with
  `linear`)."""
  dims = tuple(dims)
  if split is not None:
    linear = False
  if linear and len(dims) != 1:
    total = math.prod(dims)
    p, c, extent = partition([total])
    emit_parallel_loop(b, begin, end, [total], p, c,
                       lambda m: body(Index(dims, linear=m[0])), name)
    return extent
  p, c, extent = partition(dims)
  emit_parallel_loop(b, begin, end, dims, p, c,
                     lambda m: body(Index(dims, m)), name, split)
  return extent


TILE = 32


def tile_count(dims: Sequence[int], tile: int) -> int:
  """How many tile x tile tiles of the last two dimensions `dims` has, over
  all indices of the others."""
  return (math.prod(dims[:-2]) * -(-dims[-2] // tile) *
          -(-dims[-1] // tile))


def tile_of_unit(b: ir.IRBuilder, u: ir.Value, dims: Sequence[int],
                 tile: int):
  """Unit `u` of `tile_count(dims, tile)` as (the indices of the dimensions
  before the last two, (row begin, row end), (column begin, column end)):
  units run along the columns' tiles, then the rows', then the others."""
  outer, rows, cols = list(dims[:-2]), dims[-2], dims[-1]
  tr, tc = -(-rows // tile), -(-cols // tile)
  tj = le.urem(b, u, tc)
  rest = le.udiv(b, u, tc)
  ti = le.urem(b, rest, tr)
  rest = le.udiv(b, rest, tr)
  multi: list = [None] * len(outer)
  for d in range(len(outer) - 1, -1, -1):
    multi[d] = le.urem(b, rest, outer[d])
    rest = le.udiv(b, rest, outer[d])

  def bounds(t, size):
    lo = le.mul(b, t, tile)
    return lo, le.min_i64(b, b.add(lo, le.i64(tile)), size)

  return multi, bounds(ti, rows), bounds(tj, cols)


def emit_tiled_loop(b: ir.IRBuilder, begin: ir.Value, end: ir.Value,
                    dims: Sequence[int], body: Callable[[Index], None],
                    name: str = "tile", split=None) -> int:
  """Iterates `dims` (rank >= 2) in TILE x TILE tiles of its last two
  dimensions; a unit is one tile. Used when an operand is read transposed
  (its contiguous dimension is not the output's), so both the reads and
  the writes of a tile stay within a few dozen cache lines and pages.
  `split`: see `emit_parallel_loop`."""
  dims = list(dims)
  rank = len(dims)
  extent = tile_count(dims, TILE)
  if extent == 0:
    return 0
  with le.for_range(b, begin, end, f"{name}.unit") as u:
    multi, (r_lo, r_hi), (c_lo, c_hi) = tile_of_unit(b, u, dims, TILE)

    def tile():
      loop_along(b, split, rank - 2, r_lo, r_hi, f"{name}.r",
                 lambda i: loop_along(b, split, rank - 1, c_lo, c_hi,
                                      f"{name}.c",
                                      lambda j: body(Index(dims,
                                                           multi + [i, j]))))

    if split is not None and split.dim < rank - 2:
      split.branch(b, multi[split.dim], tile)
    else:
      tile()
  return extent


def _root_pointer(v, known):
  """The first value of `known` (ids) that the pointer `v` is derived from
  through GEPs and bitcasts, else the root of that chain."""
  while True:
    if id(v) in known:
      return v
    if isinstance(v, ir.GEPInstr):
      v = v.pointer
    elif isinstance(v, ir.CastInstr) and v.opname == "bitcast":
      v = v.operands[0]
    else:
      return v


def annotate_noalias(args: KernelArgs) -> None:
  """Tags the kernel's loads and stores of its operand arrays and result
  arrays with two alias scopes that do not alias each other.

  Valid for the core's kernels: an output shares storage with an input
  only when the kernel updates it in place at the same index (copy
  insertion allows nothing else), so an element is always read before it
  is written, and no other element of the pair is touched. Without the
  tags LLVM's vectorizer guards every loop with an overlap check and runs
  in-place loops (loop-carried while state) scalar."""
  module = args.fn.module
  cache = le.module_cache(module, "alias_scopes")
  if not cache:
    domain = module.add_metadata([ir.MetaDataString(module,
                                                    "xla.cpu.kernel")])
    s_in = module.add_metadata([ir.MetaDataString(module, "xla.cpu.in"),
                                domain])
    s_out = module.add_metadata([ir.MetaDataString(module, "xla.cpu.out"),
                                 domain])
    cache["in"] = module.add_metadata([s_in])
    cache["out"] = module.add_metadata([s_out])
  ins = {id(p) for p in args.operands if p is not None}
  outs = {id(p) for p in args.results if p is not None}
  known = ins | outs
  for block in args.fn.blocks:
    for instr in block.instructions:
      if isinstance(instr, ir.LoadInstr):
        ptr = instr.operands[0]
      elif isinstance(instr, ir.StoreInstr):
        ptr = instr.operands[1]
      else:
        continue
      root = id(_root_pointer(ptr, known))
      if root in outs:
        mine, other = cache["out"], cache["in"]
      elif root in ins:
        mine, other = cache["in"], cache["out"]
      else:
        continue
      instr.set_metadata("alias.scope", mine)
      instr.set_metadata("noalias", other)
