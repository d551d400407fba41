"""Parsing of HLO literals: constant values and `literal=` attributes.

    literal       ::= shape value | '(' literal (',' literal)* ')'
    value         ::= scalar | '{' value (',' value)* '}' | '{...}'
                      | '(' value (',' value)* ')'          (tuples)
    scalar        ::= int | decimal | inf | -inf | nan('(0x' hex ')')?
                      | true | false | '(' real ',' imag ')'

Elements are range-checked against the literal's type as XLA does; a finite
value that overflows the type is an error, `-0` keeps its sign.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import ml_dtypes
import numpy as np

import support
from xla import primitive_util
from xla.hlo.parser.hlo_lexer import NanValue
from xla.hlo.parser.hlo_lexer import Tok
from xla.hlo.parser.hlo_lexer import Token
from xla.hlo.parser.parser_base import ParserBase
from xla.literal import Literal
from xla.shape import Shape
from xla.xla_data import PrimitiveType


class LiteralParser(ParserBase):
  """Adds literal parsing to ParserBase."""

  def parse_literal(self) -> Literal:
    """A literal with its shape: `f32[2] {1, 2}` or `( literal, ... )`."""
    start = self.tok
    if self.eat(Tok.LPAREN):
      elements = []
      if not self.is_tok(Tok.RPAREN):
        elements.append(self.parse_literal())
        while self.eat(Tok.COMMA):
          elements.append(self.parse_literal())
      self.expect(Tok.RPAREN, "')' at the end of a tuple literal")
      with self.at(start):
        return Literal.tuple_of(elements)
    shape = self.parse_shape(value_follows=True)
    return self.parse_literal_value(shape)

  def parse_literal_value(self, shape: Shape) -> Literal:
    """The value text of a literal of a known shape."""
    start = self.tok
    if shape.is_tuple():
      self.expect(Tok.LPAREN, "'(' to start a tuple literal")
      elements = []
      for i, element_shape in enumerate(shape.tuple_shapes):
        if i:
          self.expect(Tok.COMMA, "',' between tuple literal elements")
        elements.append(self.parse_literal_value(element_shape))
      self.expect(Tok.RPAREN,
                  f"')' after the {len(shape.tuple_shapes)} elements of the "
                  f"tuple literal")
      with self.at(start):
        return Literal(shape, elements=elements)
    if shape.is_token():
      with self.at(start):
        return Literal.token()
    if not shape.is_array():
      self.unimplemented(f"literal of shape {shape.to_string()}")
    if shape.is_dynamic():
      self.unimplemented(f"literal of dynamic shape {shape.to_string()}")
    if primitive_util.is_array_type(shape.element_type):
      try:
        primitive_util.numpy_dtype(shape.element_type)
      except support.UnimplementedError as e:
        self.unimplemented(str(e).removeprefix("Unimplemented: "), start)
    rank = shape.rank
    if rank and self.is_tok(Tok.LBRACE) and (
        self.lexer.look_ahead().kind == Tok.DOTS):
      self.advance()
      self.advance()
      self.expect(Tok.RBRACE, "'}' after '...'")
      with self.at(start):
        return Literal(shape, elided=True)
    values: list[tuple[Token, Any]] = []
    self._parse_dense(shape.dimensions, values, [])
    return self._make_literal(shape, values, start)

  def _parse_dense(self, dims, values, index) -> None:
    if not dims:
      values.append(self._parse_element())
      return
    self.expect(Tok.LBRACE, f"'{{' to start the elements of dimension "
                f"{len(index)}")
    count = 0
    if not self.is_tok(Tok.RBRACE):
      while True:
        if count >= dims[0]:
          self.error(f"expected {dims[0]} elements in dimension "
                     f"{len(index)}{_index_text(index)}, but saw more")
        self._parse_dense(dims[1:], values, index + [count])
        count += 1
        if not self.eat(Tok.COMMA):
          break
    if not self.is_tok(Tok.RBRACE):
      self.error(f"expected '}}' or ',', saw {self.describe()}")
    if count != dims[0]:
      self.error(f"expected {dims[0]} elements in dimension {len(index)}"
                 f"{_index_text(index)}, but saw {count}")
    self.advance()

  def _parse_element(self) -> tuple[Token, Any]:
    tok = self.tok
    if tok.kind == Tok.LPAREN:
      self.advance()
      real = self._parse_real_element()
      self.expect(Tok.COMMA, "',' after the real part of a complex number")
      imag = self._parse_real_element()
      self.expect(Tok.RPAREN, "')' after a complex number")
      return tok, ComplexElement(real, imag)
    return tok, self._parse_real_element()

  def _parse_real_element(self):
    tok = self.tok
    if tok.kind in (Tok.INT, Tok.DECIMAL):
      self.advance()
      return tok.value
    if self.eat(Tok.KEYWORD, "true"):
      return True
    if self.eat(Tok.KEYWORD, "false"):
      return False
    if self.eat(Tok.KEYWORD, "inf"):
      return math.inf
    if self.eat(Tok.NEG_INF):
      return -math.inf
    self.error(f"expected a literal element, saw {self.describe()}")

  def _make_literal(self, shape: Shape, values, start: Token) -> Literal:
    et = shape.element_type
    dtype = primitive_util.numpy_dtype(et)
    flat = np.empty(len(values), dtype)
    for i, (tok, v) in enumerate(values):
      flat[i] = self._convert_element(tok, v, et, dtype)
    with self.at(start):
      return Literal(shape, flat.reshape(shape.dimensions))

  def _convert_element(self, tok: Token, v, et: PrimitiveType,
                       dtype: np.dtype):
    name = primitive_util.lowercase_name(et).upper()
    if isinstance(v, ComplexElement):
      if not primitive_util.is_complex(et):
        self.error(f"unexpected '(' in a literal of primitive type {name}; "
                   f"parentheses are only valid for complex literals", tok)
      comp = primitive_util.component_type(et)
      part = primitive_util.numpy_dtype(comp)
      re = self._convert_element(tok, v.real, comp, part)
      im = self._convert_element(tok, v.imag, comp, part)
      return complex(float(re), float(im))
    if primitive_util.is_complex(et):
      self.error(f"expected (real, imag) for primitive type {name}", tok)
    if et == PrimitiveType.PRED:
      if isinstance(v, (bool, int)) and not isinstance(v, NanValue):
        return bool(v)
      self.error("expected true, false or an integer for PRED", tok)
    if primitive_util.is_integral(et):
      if isinstance(v, bool):
        v = int(v)
      if not isinstance(v, int):
        self.error(f"expected an integer for primitive type {name}", tok)
      info = (np.iinfo(dtype) if dtype.itemsize * 8 ==
              primitive_util.bit_width(et) else ml_dtypes.iinfo(dtype))
      if primitive_util.is_unsigned_integral(et) and v < 0 and (
          et == PrimitiveType.U64):
        v += 2**64  # XLA reads u64 values through int64
      if not info.min <= v <= info.max:
        self.error(f"value {v} is out of range for literal's primitive type "
                   f"{name} namely [{info.min}, {info.max}]", tok)
      return v
    if isinstance(v, NanValue):
      return _nan_of(dtype, v, lambda msg: self.error(msg, tok))
    if isinstance(v, bool):
      self.error(f"expected a number for primitive type {name}", tok)
    if v == 0 and isinstance(v, int) and self.text.startswith("-", tok.start):
      v = -0.0  # `-0` keeps its sign (XLA prints negative zero that way)
    with np.errstate(all="ignore"):
      converted = np.asarray(float(v)).astype(dtype)
    if math.isfinite(float(v)) and not np.isfinite(
        converted.astype(np.float64)):
      self.error(f"value {v} is out of range for literal's primitive type "
                 f"{name}", tok)
    return converted


@dataclasses.dataclass(frozen=True)
class ComplexElement:
  """A parsed `(real, imag)` literal element."""

  real: Any
  imag: Any


def _index_text(index: list[int]) -> str:
  return f" of element [{','.join(map(str, index))}]" if index else ""


def _nan_of(dtype: np.dtype, nan: NanValue, fail) -> Any:
  """A NaN of `dtype` with the sign and payload of `nan`."""
  value = np.asarray(-np.nan if nan.negative else np.nan).astype(dtype)
  if nan.payload is None:
    if not np.isnan(value.astype(np.float64)):
      fail(f"{dtype} has no NaN")
    return value
  if dtype.itemsize not in (2, 4, 8):
    fail(f"NaN payloads are not supported for {dtype}")
  info = (np.finfo(dtype) if dtype in (np.float16, np.float32, np.float64)
          else ml_dtypes.finfo(dtype))
  if nan.payload >= 1 << info.nmant:
    fail(f"NaN payload 0x{nan.payload:x} is out of range for {dtype}")
  uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
  exp_mask = ((1 << (dtype.itemsize * 8 - 1)) - 1) & ~((1 << info.nmant) - 1)
  bits = exp_mask | nan.payload
  if nan.negative:
    bits |= 1 << (dtype.itemsize * 8 - 1)
  return np.asarray(bits, uint).view(dtype)[()]
