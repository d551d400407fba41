"""A small builder that writes HLO text, for expanders that emit loops.

XLA's expanders (QrExpander, EighExpander) build their expansions with the
XlaBuilder client library and clone the result into the module. We have no
XlaBuilder; this is the minimum needed instead: each method appends one HLO
instruction (with its result shape, computed here) to a computation, nested
computations (while bodies, reducers, comparators) are separate builders, and
`module_text()` prints an HLO module that `hlo_parser` reads back. The text
goes through the parser and the verifier, so a wrong shape computed here is
caught there rather than producing a wrong program.

Values are `Val(name, et, dims)`; `et` is the HLO element type name ("f32",
"c64", "s32", "pred").
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

_COMPLEX_PART = {"c64": "f32", "c128": "f64"}


def real_type(et: str) -> str:
  """The component type of a complex type; `et` itself otherwise."""
  return _COMPLEX_PART.get(et, et)


def is_complex(et: str) -> bool:
  return et in _COMPLEX_PART


@dataclasses.dataclass(frozen=True)
class Val:
  name: str
  et: str
  dims: tuple[int, ...]

  @property
  def shape(self) -> str:
    return f"{self.et}[{','.join(str(d) for d in self.dims)}]"

  @property
  def rank(self) -> int:
    return len(self.dims)


def _tuple_shape(vals: Sequence[Val]) -> str:
  return "(" + ", ".join(v.shape for v in vals) + ")"


def _ints(xs) -> str:
  return "{" + ",".join(str(int(x)) for x in xs) + "}"


class Computation:
  """One HLO computation under construction."""

  def __init__(self, module: "ModuleBuilder", name: str):
    self.module = module
    self.name = name
    self.lines: list[str] = []
    self._params = 0
    self.root_text: str | None = None
    self.uses: list[str] = []  # computations this one calls

  def _emit(self, shape: str, text: str, base: str = "v") -> str:
    name = self.module.fresh(base)
    self.lines.append(f"  {name} = {shape} {text}")
    return name

  def _op(self, et: str, dims, text: str, base: str = "v") -> Val:
    dims = tuple(int(d) for d in dims)
    v = Val("", et, dims)
    return Val(self._emit(v.shape, text, base), et, dims)

  # Leaves.
  def param(self, et: str, dims) -> Val:
    n = self._params
    self._params += 1
    return self._op(et, dims, f"parameter({n})", "p")

  def tuple_param(self, vals: Sequence[Val]) -> list[Val]:
    """A tuple parameter shaped like `vals`; returns its elements."""
    n = self._params
    self._params += 1
    name = self._emit(_tuple_shape(vals), f"parameter({n})", "state")
    return [self._op(v.et, v.dims, f"get-tuple-element({name}), index={i}")
            for i, v in enumerate(vals)]

  def scalar(self, et: str, value) -> Val:
    if is_complex(et):
      value = complex(value)
      lit = f"({value.real!r}, {value.imag!r})"
    elif et == "pred":
      lit = "true" if value else "false"
    elif et.startswith(("s", "u")):
      lit = str(int(value))
    else:
      lit = repr(float(value))
    return self._op(et, (), f"constant({lit})", "c")

  def full(self, et: str, dims, value) -> Val:
    return self.broadcast(self.scalar(et, value), dims, ())

  def s32_table(self, rows: Sequence[Sequence[int]]) -> Val:
    body = ",".join("{" + ",".join(str(int(x)) for x in r) + "}"
                    for r in rows)
    cols = len(rows[0])
    return self._op("s32", (len(rows), cols), f"constant({{{body}}})", "tbl")

  def iota(self, et: str, dims, dim: int) -> Val:
    return self._op(et, dims, f"iota(), iota_dimension={dim}")

  # Shape ops.
  def broadcast(self, x: Val, dims, bdims) -> Val:
    return self._op(x.et, dims,
                    f"broadcast({x.name}), dimensions={_ints(bdims)}")

  def reshape(self, x: Val, dims) -> Val:
    return self._op(x.et, dims, f"reshape({x.name})")

  def transpose(self, x: Val, perm) -> Val:
    dims = [x.dims[p] for p in perm]
    return self._op(x.et, dims,
                    f"transpose({x.name}), dimensions={_ints(perm)}")

  def slice(self, x: Val, starts, limits) -> Val:
    dims = [l - s for s, l in zip(starts, limits)]
    spec = ", ".join(f"[{s}:{l}]" for s, l in zip(starts, limits))
    return self._op(x.et, dims, f"slice({x.name}), slice={{{spec}}}")

  def dynamic_slice(self, x: Val, starts: Sequence[Val], sizes) -> Val:
    idx = ", ".join(s.name for s in starts)
    return self._op(x.et, sizes, f"dynamic-slice({x.name}, {idx}), "
                    f"dynamic_slice_sizes={_ints(sizes)}")

  def dynamic_update_slice(self, x: Val, upd: Val,
                           starts: Sequence[Val]) -> Val:
    idx = ", ".join(s.name for s in starts)
    return self._op(x.et, x.dims,
                    f"dynamic-update-slice({x.name}, {upd.name}, {idx})")

  def concat(self, xs: Sequence[Val], dim: int) -> Val:
    dims = list(xs[0].dims)
    dims[dim] = sum(x.dims[dim] for x in xs)
    names = ", ".join(x.name for x in xs)
    return self._op(xs[0].et, dims,
                    f"concatenate({names}), dimensions={{{dim}}}")

  # Elementwise.
  def unary(self, op: str, x: Val, et: str | None = None) -> Val:
    return self._op(et or x.et, x.dims, f"{op}({x.name})")

  def binary(self, op: str, x: Val, y: Val) -> Val:
    assert x.dims == y.dims and x.et == y.et, (op, x, y)
    return self._op(x.et, x.dims, f"{op}({x.name}, {y.name})")

  def add(self, x, y):
    return self.binary("add", x, y)

  def sub(self, x, y):
    return self.binary("subtract", x, y)

  def mul(self, x, y):
    return self.binary("multiply", x, y)

  def div(self, x, y):
    return self.binary("divide", x, y)

  def max(self, x, y):
    return self.binary("maximum", x, y)

  def and_(self, x, y):
    return self.binary("and", x, y)

  def or_(self, x, y):
    return self.binary("or", x, y)

  def compare(self, x: Val, y: Val, direction: str) -> Val:
    assert x.dims == y.dims and x.et == y.et, (x, y)
    return self._op("pred", x.dims, f"compare({x.name}, {y.name}), "
                    f"direction={direction}")

  def select(self, p: Val, x: Val, y: Val) -> Val:
    assert p.dims == x.dims == y.dims and x.et == y.et, (p, x, y)
    return self._op(x.et, x.dims, f"select({p.name}, {x.name}, {y.name})")

  def convert(self, x: Val, et: str) -> Val:
    if x.et == et:
      return x
    return self._op(et, x.dims, f"convert({x.name})")

  def real(self, x: Val) -> Val:
    return self.unary("real", x, real_type(x.et)) if is_complex(x.et) else x

  def imag(self, x: Val) -> Val:
    return self.unary("imag", x, real_type(x.et))

  def complex(self, re: Val, im: Val, et: str) -> Val:
    return self._op(et, re.dims, f"complex({re.name}, {im.name})")

  def conj(self, x: Val) -> Val:
    if not is_complex(x.et):
      return x
    return self.complex(self.real(x), self.unary("negate", self.imag(x)),
                        x.et)

  def to_type(self, x: Val, et: str) -> Val:
    """A real value as type `et` (complex with zero imaginary part)."""
    if is_complex(et) and not is_complex(x.et):
      x = self.convert(x, real_type(et))
      zero = self.full(x.et, x.dims, 0)
      return self.complex(x, zero, et)
    return self.convert(x, et)

  def abs_sq(self, x: Val) -> Val:
    """|x|^2 in the real type."""
    if is_complex(x.et):
      re, im = self.real(x), self.imag(x)
      return self.add(self.mul(re, re), self.mul(im, im))
    return self.mul(x, x)

  # Reductions, contractions, control flow.
  def reduce_sum(self, x: Val, dims: Sequence[int]) -> Val:
    out = [d for i, d in enumerate(x.dims) if i not in dims]
    zero = self.scalar(x.et, 0)
    adder = self.module.adder(x.et)
    self.uses.append(adder)
    return self._op(x.et, out, f"reduce({x.name}, {zero.name}), "
                    f"dimensions={_ints(dims)}, to_apply={adder}")

  def reduce_max(self, x: Val, dims: Sequence[int], init: float) -> Val:
    """Maximum over `dims` of a real `x`, starting from `init`."""
    out = [d for i, d in enumerate(x.dims) if i not in dims]
    start = self.scalar(x.et, init)
    fn = self.module.max_reducer(x.et)
    self.uses.append(fn)
    return self._op(x.et, out, f"reduce({x.name}, {start.name}), "
                    f"dimensions={_ints(dims)}, to_apply={fn}")

  def reduce_or(self, x: Val, dims: Sequence[int]) -> Val:
    out = [d for i, d in enumerate(x.dims) if i not in dims]
    false = self.scalar("pred", False)
    fn = self.module.or_reducer()
    self.uses.append(fn)
    return self._op("pred", out, f"reduce({x.name}, {false.name}), "
                    f"dimensions={_ints(dims)}, to_apply={fn}")

  def dot(self, x: Val, y: Val, batch: Sequence[int], lc: int, rc: int) -> Val:
    """dot with the same batch dimensions on both sides and one contracting
    dimension each; result: batch, lhs free, rhs free."""
    lf = [d for i, d in enumerate(x.dims) if i not in batch and i != lc]
    rf = [d for i, d in enumerate(y.dims) if i not in batch and i != rc]
    dims = [x.dims[b] for b in batch] + lf + rf
    return self._op(
        x.et, dims,
        f"dot({x.name}, {y.name}), lhs_batch_dims={_ints(batch)}, "
        f"lhs_contracting_dims={{{lc}}}, rhs_batch_dims={_ints(batch)}, "
        f"rhs_contracting_dims={{{rc}}}")

  def tuple(self, vals: Sequence[Val]) -> str:
    names = ", ".join(v.name for v in vals)
    return self._emit(_tuple_shape(vals), f"tuple({names})", "t")

  def while_loop(self, init: Sequence[Val], cond: "Computation",
                 body: "Computation") -> list[Val]:
    t = self.tuple(init)
    self.uses += [cond.name, body.name]
    w = self._emit(_tuple_shape(init), f"while({t}), condition={cond.name}, "
                   f"body={body.name}", "while")
    return [self._op(v.et, v.dims, f"get-tuple-element({w}), index={i}")
            for i, v in enumerate(init)]

  def sort_by_first(self, keys: Val, vals: Val, dim: int) -> tuple[Val, Val]:
    """Sorts `keys` ascending along `dim`, `vals` with them (stable)."""
    cmp = self.module.less_than(keys.et, vals.et)
    self.uses.append(cmp)
    s = self._emit(_tuple_shape([keys, vals]),
                   f"sort({keys.name}, {vals.name}), dimensions={{{dim}}}, "
                   f"is_stable=true, to_apply={cmp}", "sort")
    return (self._op(keys.et, keys.dims, f"get-tuple-element({s}), index=0"),
            self._op(vals.et, vals.dims, f"get-tuple-element({s}), index=1"))

  def set_root(self, vals: Sequence[Val] | Val) -> None:
    if isinstance(vals, Val):
      self.root_text = vals.name
    else:
      self.root_text = self.tuple(vals)

  def text(self, entry: bool = False) -> str:
    assert self.root_text is not None, self.name
    lines = list(self.lines)
    for i, line in enumerate(lines):
      if line.startswith(f"  {self.root_text} ="):
        lines[i] = "  ROOT " + line[2:]
    head = ("ENTRY " if entry else "") + self.name
    return head + " {\n" + "\n".join(lines) + "\n}\n"


class ModuleBuilder:
  """Computations of one expansion; the entry is `main`."""

  def __init__(self, name: str):
    self.name = name
    self._count = 0
    self.computations: list[Computation] = []
    self._helpers: dict[str, str] = {}
    self.main = Computation(self, "main")

  def fresh(self, base: str) -> str:
    self._count += 1
    return f"{base}.{self._count}"

  def computation(self, base: str) -> Computation:
    c = Computation(self, self.fresh(base))
    self.computations.append(c)
    return c

  def _helper(self, key: str, build) -> str:
    if key not in self._helpers:
      c = self.computation(key)
      build(c)
      self._helpers[key] = c.name
    return self._helpers[key]

  def adder(self, et: str) -> str:
    def build(c):
      c.set_root(c.add(c.param(et, ()), c.param(et, ())))
    return self._helper(f"add_{et}", build)

  def max_reducer(self, et: str) -> str:
    def build(c):
      c.set_root(c.max(c.param(et, ()), c.param(et, ())))
    return self._helper(f"max_{et}", build)

  def or_reducer(self) -> str:
    def build(c):
      c.set_root(c.or_(c.param("pred", ()), c.param("pred", ())))
    return self._helper("or_pred", build)

  def less_than(self, et: str, other: str) -> str:
    def build(c):
      a, b = c.param(et, ()), c.param(et, ())
      c.param(other, ())
      c.param(other, ())
      c.set_root(c.compare(a, b, "LT"))
    return self._helper(f"lt_{et}_{other}", build)

  def module_text(self) -> str:
    """The module, each computation printed after those it calls (the
    parser wants them defined first)."""
    by_name = {c.name: c for c in self.computations}
    order: list[Computation] = []
    seen: set[str] = set()

    def visit(c: Computation) -> None:
      for u in c.uses:
        if u not in seen:
          seen.add(u)
          visit(by_name[u])
      if c is not self.main:
        order.append(c)

    visit(self.main)
    parts = [f"HloModule {self.name}\n"]
    parts += [c.text() for c in order]
    parts.append(self.main.text(entry=True))
    return "\n".join(parts)
