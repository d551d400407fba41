"""Loop and index helpers for the CPU backend's core kernel emitters.

`Index` is a position in a row-major array: its multi-dimensional form
(one i64 per dimension) and/or its linear form (one i64), each computed from
the other on demand. Keeping the linear form lets reshape / bitcast /
elementwise chains address memory as `base + linear`, an affine function of
the innermost loop variable, which LLVM's loop vectorizer widens into
consecutive vector loads and stores.

`for_range` is the backend's one counted-loop emitter (a guarded rotated
loop by default, or a test-first loop; named blocks; phi induction
variable); `loop_nest` nests one loop per dimension.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence

from llvmlite import ir

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8_PTR = I8.as_pointer()


def i64(v: int) -> ir.Constant:
  return ir.Constant(I64, int(v))


def as_i64(v) -> ir.Value:
  return i64(v) if isinstance(v, int) else v


def strides_of(dims: Sequence[int]) -> list[int]:
  """Row-major element strides."""
  strides = [1] * len(dims)
  for d in range(len(dims) - 2, -1, -1):
    strides[d] = strides[d + 1] * dims[d + 1]
  return strides


def is_const(v, value: Optional[int] = None) -> bool:
  if not isinstance(v, ir.Constant) or not isinstance(v.type, ir.IntType):
    return False
  return value is None or v.constant == value


def add(b: ir.IRBuilder, x, y) -> ir.Value:
  """x + y, folding constants (x, y: i64 values or ints)."""
  x, y = as_i64(x), as_i64(y)
  if is_const(x) and is_const(y):
    return i64(x.constant + y.constant)
  if is_const(x, 0):
    return y
  if is_const(y, 0):
    return x
  return b.add(x, y)


def mul(b: ir.IRBuilder, x, c: int) -> ir.Value:
  """x * c for a Python int c, folding the trivial cases."""
  x = as_i64(x)
  if c == 0:
    return i64(0)
  if c == 1:
    return x
  if is_const(x):
    return i64(x.constant * c)
  return b.mul(x, i64(c))


def udiv(b: ir.IRBuilder, x, c: int) -> ir.Value:
  x = as_i64(x)
  if c == 0:
    # Only reached while emitting index math for an array with a zero-size
    # dimension: the loop around it runs no iterations, so any value will do.
    return i64(0)
  if c == 1:
    return x
  if is_const(x):
    return i64(x.constant // c)
  return b.udiv(x, i64(c))


def urem(b: ir.IRBuilder, x, c: int) -> ir.Value:
  x = as_i64(x)
  if c in (0, 1):  # 0: a zero-size dimension, see udiv
    return i64(0)
  if is_const(x):
    return i64(x.constant % c)
  return b.urem(x, i64(c))


class Index:
  """A position in a row-major array of dimensions `dims`."""

  def __init__(self, dims: Sequence[int],
               multi: Optional[Sequence[ir.Value]] = None,
               linear: Optional[ir.Value] = None):
    self.dims = tuple(int(d) for d in dims)
    self._multi = None if multi is None else [as_i64(m) for m in multi]
    self._linear = None if linear is None else as_i64(linear)
    if self._multi is not None:
      assert len(self._multi) == len(self.dims), (self._multi, self.dims)
    # Dimensions of size 1 are always at index 0.
    if self._multi is not None:
      self._multi = [i64(0) if d == 1 else m
                     for m, d in zip(self._multi, self.dims)]

  @classmethod
  def scalar(cls) -> "Index":
    return cls((), [], i64(0))

  @property
  def rank(self) -> int:
    return len(self.dims)

  def linear_if_known(self) -> Optional[ir.Value]:
    """The linear form if it was given or computed, else None (emits
    nothing)."""
    return self._linear

  def multi_if_known(self) -> Optional[list[ir.Value]]:
    """The multi-dimensional form if it was given or computed, else None
    (emits nothing)."""
    return self._multi

  def multi(self, b: ir.IRBuilder) -> list[ir.Value]:
    if self._multi is None:
      out = []
      for d, s in zip(self.dims, strides_of(self.dims)):
        out.append(i64(0) if d == 1 else urem(b, udiv(b, self._linear, s), d))
      self._multi = out
    return self._multi

  def linear(self, b: ir.IRBuilder) -> ir.Value:
    if self._linear is None:
      lin = i64(0)
      for m, s in zip(self._multi, strides_of(self.dims)):
        lin = add(b, lin, mul(b, m, s))
      self._linear = lin
    return self._linear


def element_ptr(b: ir.IRBuilder, base: ir.Value, index: Index) -> ir.Value:
  lin = index.linear(b)
  if is_const(lin, 0):
    return base
  return b.gep(base, [lin])


def entry_alloca(b: ir.IRBuilder, ty: ir.Type, name: str = "") -> ir.Value:
  """An alloca in the function's entry block (so mem2reg can promote it)."""
  fn = b.function
  entry = fn.entry_basic_block
  saved = b.block
  with b.goto_block(entry):
    if entry.instructions:
      b.position_before(entry.instructions[0])
    slot = b.alloca(ty, name=name)
  b.position_at_end(saved)
  return slot


def module_cache(module: ir.Module, name: str) -> dict:
  """The dict named `name` that `module` carries for values built once per
  LLVM module (metadata nodes). llvmlite's Module has no place for such
  data, so the dicts live in one attribute set here (and die with the
  module)."""
  caches = getattr(module, "xla_cpu_caches", None)
  if caches is None:
    caches = module.xla_cpu_caches = {}
  return caches.setdefault(name, {})


def no_unroll_metadata(module: ir.Module):
  """`!llvm.loop` metadata asking LLVM not to unroll a loop (one node per
  module). Put on the innermost loop of a nest whose trip count is small and
  static (a short last dimension), it keeps LoopFullUnroll from flattening
  that loop before the loop vectorizer runs, which would otherwise vectorize
  the next loop out with strided gathers and scatters (measured 3-4x slower
  on a 32-wide last dimension); the vectorizer still widens (and
  interleaves) the loop itself."""
  cache = module_cache(module, "loop_metadata")
  md = cache.get("no_unroll")
  if md is None:
    prop = module.add_metadata(
        [ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    # A loop ID's first operand is the node itself (LLVM matches loops to
    # their metadata by that self-reference); llvmlite has no distinct
    # nodes, so the cycle is closed by hand.
    md = module.add_metadata([prop, ir.MetaDataString(module, "xla.loop")])
    md.operands = (md, prop)
    cache["no_unroll"] = md
  return md


@contextlib.contextmanager
def for_range(b: ir.IRBuilder, begin, end, name: str = "i",
              step: int = 1, loop_metadata=None, *, test_first: bool = False,
              nsw: bool = True) -> Iterator[ir.Value]:
  """`for (i = begin; i < end; i += step) { body }`: yields the i64
  induction variable (a phi; signed compares); the builder is left after
  the loop. `begin` / `end` are i64 values or Python ints.

  By default the loop is rotated: a guard before it (omitted when both
  bounds are constants) so the body never runs when begin >= end, and the
  test at the bottom (blocks `{name}.body`, `{name}.exit`); a statically
  empty range emits the body into an unreachable block. `test_first=True`
  emits the plain form instead: a header block tests `i < end` before
  every iteration (blocks `{name}.header`, `{name}.body`, `{name}.done`).
  `nsw` puts the no-signed-wrap flag on the increment. `loop_metadata`
  (e.g. `no_unroll_metadata`) goes on the loop's back edge as
  `!llvm.loop`."""
  begin, end = as_i64(begin), as_i64(end)
  flags = ["nsw"] if nsw else []
  if test_first:
    pre = b.block
    header = b.append_basic_block(f"{name}.header")
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(I64, name=name)
    iv.add_incoming(begin, pre)
    b.cbranch(b.icmp_signed("<", iv, end), body, done)
    b.position_at_end(body)
    yield iv
    nxt = b.add(iv, i64(step), name=f"{name}.next", flags=flags)
    iv.add_incoming(nxt, b.block)
    br = b.branch(header)
    if loop_metadata is not None:
      br.set_metadata("llvm.loop", loop_metadata)
    b.position_at_end(done)
    return
  if is_const(begin) and is_const(end) and begin.constant >= end.constant:
    # Statically empty: emit the body into an unreachable block.
    dead = b.append_basic_block(f"{name}.dead")
    after = b.append_basic_block(f"{name}.after")
    b.branch(after)
    b.position_at_end(dead)
    yield begin
    b.branch(after)
    b.position_at_end(after)
    return
  pre = b.block
  header = b.append_basic_block(f"{name}.body")
  latch_exit = b.append_basic_block(f"{name}.exit")
  if is_const(begin) and is_const(end):
    b.branch(header)
  else:
    b.cbranch(b.icmp_signed("<", begin, end), header, latch_exit)
  b.position_at_end(header)
  iv = b.phi(I64, name=name)
  iv.add_incoming(begin, pre)
  yield iv
  nxt = b.add(iv, i64(step), name=f"{name}.next", flags=flags)
  iv.add_incoming(nxt, b.block)
  br = b.cbranch(b.icmp_signed("<", nxt, end), header, latch_exit)
  if loop_metadata is not None:
    br.set_metadata("llvm.loop", loop_metadata)
  b.position_at_end(latch_exit)


@contextlib.contextmanager
def loop_nest(b: ir.IRBuilder, dims: Sequence[int], name: str = "d",
              **loop_kwargs) -> Iterator[list[ir.Value]]:
  """Nested loops over static `dims` (outermost first); size-1 dimensions
  emit no loop (their index is constant 0). Yields the list of indices.
  `loop_kwargs` (e.g. `test_first`, `nsw`) go to each `for_range`."""
  with contextlib.ExitStack() as stack:
    idx = []
    for k, d in enumerate(dims):
      if d == 1:
        idx.append(i64(0))
      else:
        idx.append(stack.enter_context(
            for_range(b, 0, d, f"{name}{k}", **loop_kwargs)))
    yield idx


def min_i64(b: ir.IRBuilder, x: ir.Value, c: int) -> ir.Value:
  """min(x, c) on signed i64 (e.g. a chunk's end clipped to its array's)."""
  return b.select(b.icmp_signed("<", x, i64(c)), x, i64(c))


def clamp_i64(b: ir.IRBuilder, x: ir.Value, lo: int, hi: int) -> ir.Value:
  """min(max(x, lo), hi) on signed i64 (hi >= lo)."""
  x = b.select(b.icmp_signed("<", x, i64(lo)), i64(lo), x)
  return b.select(b.icmp_signed(">", x, i64(hi)), i64(hi), x)


def to_i64(b: ir.IRBuilder, v: ir.Value, signed: bool) -> ir.Value:
  """An integer value of any width as i64 (sign- or zero-extended)."""
  w = v.type.width
  if w == 64:
    return v
  if w > 64:
    return b.trunc(v, I64)
  return b.sext(v, I64) if signed else b.zext(v, I64)
