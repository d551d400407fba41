"""Tests for --args parsing (upstream's error texts)."""

import pytest

from stablehlo._src.interpreter import cli_args
import support


def test_parses_dense_array():
  a, b = cli_args.parse_args(
      "[dense<1> : tensor<2xi32>, dense<[1.5, 2.0]> : tensor<2xf32>]")
  assert a.tolist() == [1, 1] and b.tolist() == [1.5, 2.0]


@pytest.mark.parametrize("text,msg", [
    ("not_array", cli_args.NOT_ARRAY),
    ("", cli_args.NOT_ARRAY),
    ("[dense<1> : tensor<2xi32>", cli_args.NOT_ARRAY),
    ("[4.0 : f32]", cli_args.NOT_DENSE),
])
def test_bad_args_give_upstream_messages(text, msg):
  with pytest.raises(support.InvalidArgumentError) as e:
    cli_args.parse_args(text)
  assert str(e.value).startswith(msg)
