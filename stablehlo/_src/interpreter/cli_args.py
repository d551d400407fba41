"""Parses the `--args` value of `stablehlo-translate --interpret`:
an MLIR array of dense elements attributes, e.g.

    --args="[dense<1> : tensor<2xi32>, dense<2.5> : tensor<f32>]"

The error texts match upstream's, since scripts grep for them.
"""

from __future__ import annotations

from stablehlo._src.interpreter import runtime
from stablehlo._src.ir import attributes as a
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import parser as parser_lib
import support

NOT_ARRAY = ("expectected array attribute string for args, i.e. "
             "--args=[dense<1> : tensor<2xi32>, ...]")
NOT_DENSE = ("expected dense elements attribute for args elements, i.e. "
             "--args=[dense<1> : tensor<2xi32>, ...]")


def parse_args(text: str) -> list:
  """The runtime values of `text`; InvalidArgumentError on bad input."""
  p = parser_lib.Parser(text, "<--args>")
  try:
    attr = p.parse_attribute()
    if p.peek().kind != lx.EOF:
      raise support.InvalidArgumentError(NOT_ARRAY)
  except support.XlaError as e:
    if isinstance(e, support.InvalidArgumentError) and str(e) == NOT_ARRAY:
      raise
    raise support.InvalidArgumentError(f"{NOT_ARRAY}\n{e}") from None
  except Exception as e:  # pylint: disable=broad-except
    raise support.InvalidArgumentError(f"{NOT_ARRAY}\n{e}") from None
  if not isinstance(attr, a.ArrayAttr):
    raise support.InvalidArgumentError(NOT_ARRAY)
  values = []
  for el in attr.elements:
    if not isinstance(el, a.DenseElementsAttr):
      raise support.InvalidArgumentError(NOT_DENSE)
    values.append(runtime.from_attr(el))
  return values
