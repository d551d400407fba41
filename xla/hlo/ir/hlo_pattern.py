"""HLO pattern matching (in the spirit of xla/hlo/utils/pattern_matcher.h,
with rewrite rules kept as data).

A pattern describes an instruction tree; `pattern.match(instr)` returns a
dict of the instructions captured by name, or None:

  from xla.hlo.ir import hlo_pattern as m
  m.op(HloOpcode.kAdd, m.any("x"), m.constant_splat(0))
      # add(x, 0): {"x": <lhs>} when the rhs is a splat zero
  m.op(HloOpcode.kNegate, m.op(HloOpcode.kNegate, m.any("x")))

  any(name=None)                 any instruction
  op(opcode, *operands, name=None, where=None)
                                 an instruction of `opcode` whose operands
                                 match `operands` in order (given operands:
                                 the count must agree; none given: operands
                                 are not looked at); `where(instr)` must
                                 hold too
  constant_splat(value, name=None)
                                 a constant whose elements all equal `value`,
                                 or a broadcast (of a broadcast ...) of one
  any_of(*patterns, name=None)   the first of `patterns` that matches (with
                                 its captures only), e.g. both operand
                                 orders of a commutative op

A name bound twice must capture the same instruction both times.

`Rule(pattern, result)` pairs a pattern with what replaces the matched
instruction: a capture name, or a function `(captures, instr, context) ->
instruction or None` (None: the rule does not apply after all).
`PatternMatcher(rules)` tries the rules for an instruction's opcode in the
order given and returns the first replacement.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Optional, Union

import numpy as np

from xla.hlo.ir.hlo_opcode import HloOpcode

Captures = dict


def splat_value(instr) -> Optional[object]:
  """The value of every element if `instr` is a constant (or a broadcast of
  a constant) whose elements are all equal; else None."""
  while instr.opcode == HloOpcode.kBroadcast:
    instr = instr.operand(0)
  if instr.opcode != HloOpcode.kConstant or instr.literal is None:
    return None
  if not instr.shape.is_array() or instr.literal.elided:
    return None
  array = instr.literal.array
  if not is_splat_array(array):
    return None
  return array.reshape(-1)[0]


def is_splat_array(array) -> bool:
  """Whether `array` has elements and each has the bits of the first (so
  NaNs of equal bits count as equal, and -0.0 differs from 0.0)."""
  arr = np.asarray(array)
  if arr.size == 0 or arr.dtype.hasobject:
    return False
  rows = np.ascontiguousarray(arr).reshape(arr.size, 1).view(np.uint8)
  return bool((rows == rows[0]).all())


def is_all(instr, value) -> bool:
  """True if every element of constant/splat `instr` equals `value`."""
  v = splat_value(instr)
  if v is None:
    return False
  try:
    return bool(v == value)
  except (TypeError, ValueError):
    return False


class Pattern:
  """Base of the patterns; see the module docstring."""

  name: Optional[str] = None

  def _matches(self, instr, captures: Captures) -> bool:
    raise NotImplementedError

  def _bind(self, instr, captures: Captures) -> bool:
    if self.name is None:
      return True
    bound = captures.get(self.name)
    if bound is not None:
      return bound is instr
    captures[self.name] = instr
    return True

  def match_into(self, instr, captures: Captures) -> bool:
    """Whether `instr` matches, adding what it captures to `captures`
    (the step a pattern takes for each of its operand patterns)."""
    return self._matches(instr, captures) and self._bind(instr, captures)

  def match(self, instr) -> Optional[Captures]:
    """The captures if `instr` matches, else None."""
    captures: Captures = {}
    return captures if self.match_into(instr, captures) else None


class _Any(Pattern):

  def __init__(self, name):
    self.name = name

  def _matches(self, instr, captures) -> bool:
    return True

  def __repr__(self) -> str:
    return f"any({self.name!r})" if self.name else "any()"


class _Op(Pattern):

  def __init__(self, opcode, operands, name, where):
    self.opcode = opcode
    self.operands = tuple(operands)
    self.name = name
    self.where = where

  def _matches(self, instr, captures) -> bool:
    if instr.opcode != self.opcode:
      return False
    if self.operands:
      if instr.operand_count != len(self.operands):
        return False
      for p, o in zip(self.operands, instr.operands):
        if not p.match_into(o, captures):
          return False
    return self.where is None or bool(self.where(instr))

  def __repr__(self) -> str:
    args = ", ".join([self.opcode.name] + [repr(p) for p in self.operands])
    return f"op({args})"


class _ConstantSplat(Pattern):

  def __init__(self, value, name):
    self.value = value
    self.name = name

  def _matches(self, instr, captures) -> bool:
    return is_all(instr, self.value)

  def __repr__(self) -> str:
    return f"constant_splat({self.value!r})"


class _AnyOf(Pattern):

  def __init__(self, patterns, name):
    self.patterns = tuple(patterns)
    self.name = name

  def _matches(self, instr, captures) -> bool:
    for p in self.patterns:
      trial = dict(captures)
      if p.match_into(instr, trial):
        captures.update(trial)
        return True
    return False

  def __repr__(self) -> str:
    return f"any_of({', '.join(repr(p) for p in self.patterns)})"


def any(name: Optional[str] = None) -> Pattern:  # pylint: disable=redefined-builtin
  """Matches any instruction (captured as `name` if given)."""
  return _Any(name)


def op(opcode: HloOpcode, *operands: Pattern, name: Optional[str] = None,
       where: Optional[Callable] = None) -> Pattern:
  """Matches an `opcode` instruction; see the module docstring."""
  return _Op(opcode, operands, name, where)


def constant_splat(value, name: Optional[str] = None) -> Pattern:
  """Matches a constant, or broadcast constant, of all `value`s."""
  return _ConstantSplat(value, name)


def any_of(*patterns: Pattern, name: Optional[str] = None) -> Pattern:
  """Matches what the first matching of `patterns` matches."""
  return _AnyOf(patterns, name)


Result = Union[str, Callable]


@dataclasses.dataclass(frozen=True)
class Rule:
  """A pattern (whose root is an `op`) and its replacement."""
  pattern: Pattern
  result: Result

  def __post_init__(self):
    if not isinstance(self.pattern, _Op):
      raise TypeError(f"a rule's pattern must be an op(...), got "
                      f"{self.pattern!r}")

  @property
  def opcode(self) -> HloOpcode:
    return self.pattern.opcode

  def apply(self, instr, context=None):
    captures = self.pattern.match(instr)
    if captures is None:
      return None
    if isinstance(self.result, str):
      return captures[self.result]
    return self.result(captures, instr, context)


class PatternMatcher:
  """Rules grouped by root opcode, tried in order."""

  def __init__(self, rules: Iterable[Rule]):
    self.rules: dict[HloOpcode, list[Rule]] = {}
    for r in rules:
      self.rules.setdefault(r.opcode, []).append(r)

  @property
  def opcodes(self) -> frozenset:
    return frozenset(self.rules)

  def rewrite(self, instr, context=None):
    """The replacement of the first rule that applies to `instr`, or
    None."""
    for r in self.rules.get(instr.opcode, ()):
      new = r.apply(instr, context)
      if new is not None:
        return new
    return None
