"""Tests for the sort + slice -> topk rewrite."""

import numpy as np
import pytest

from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser
from xla.service.cpu import topk_rewriter

_RNG = np.random.default_rng(3)


def _module(ty="f32", dims=(4, 40), k=5, direction="GT",
            ctype="TOTALORDER", swap=False, iota=True, slices=None,
            extra_use=""):
  d = ",".join(str(x) for x in dims)
  r = len(dims) - 1
  out = ",".join(str(x) for x in dims[:-1] + (k,))
  full = ", ".join(f"[0:{x}]" for x in dims[:-1])
  full = full + ", " if full else ""
  cmp_type = f", type={ctype}" if ctype else ""
  lhs, rhs = ("b", "a") if swap else ("a", "b")
  if slices is None:
    slices = [f"{{{full}[0:{k}]}}"] * 2
  if iota:
    params = f"""  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)"""
    body = f"""  x = {ty}[{d}] parameter(0)
  io = s32[{d}] iota(), iota_dimension={r}
  s = ({ty}[{d}], s32[{d}]) sort(x, io), dimensions={{{r}}}, to_apply=cmp
  g0 = {ty}[{d}] get-tuple-element(s), index=0
  g1 = s32[{d}] get-tuple-element(s), index=1
  v = {ty}[{out}] slice(g0), slice={slices[0]}
  w = s32[{out}] slice(g1), slice={slices[1]}{extra_use}
  ROOT t = ({ty}[{out}], s32[{out}]) tuple(v, w)"""
  else:
    params = f"""  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)"""
    body = f"""  x = {ty}[{d}] parameter(0)
  s = {ty}[{d}] sort(x), dimensions={{{r}}}, to_apply=cmp
  ROOT v = {ty}[{out}] slice(s), slice={slices[0]}"""
  return f"""HloModule m
cmp {{
{params}
  ROOT c = pred[] compare({lhs}, {rhs}), direction={direction}{cmp_type}
}}
ENTRY e {{
{body}
}}"""


def _run(text):
  module = hlo_parser.parse_and_return_unverified_module(text)
  changed = topk_rewriter.TopkRewriter().run(module)
  opcodes = [i.opcode for i in module.entry_computation.instructions]
  return module, changed, opcodes


def _evaluate(module, args):
  return hlo_evaluator.HloEvaluator().evaluate(module, args)


def _check_same(text, args):
  module, changed, opcodes = _run(text)
  want = _evaluate(hlo_parser.parse_and_return_unverified_module(text), args)
  got = _evaluate(module, args)
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.shape == w.shape
    np.testing.assert_array_equal(g, w)
  return changed, opcodes


def _floats(shape):
  x = _RNG.standard_normal(shape).astype(np.float32)
  x.flat[:4] = [np.nan, -np.inf, np.inf, -0.0]
  return np.round(x * 2) / 2  # ties


@pytest.mark.parametrize("direction,swap", [("GT", False), ("LT", False),
                                            ("GT", True)])
def test_rewrites_jax_top_k(direction, swap):
  text = _module(direction=direction, swap=swap)
  changed, opcodes = _check_same(text, [_floats((4, 40))])
  assert changed
  assert HloOpcode.kTopK in opcodes
  assert HloOpcode.kSort not in opcodes


def test_largest_flag():
  module, _, _ = _run(_module(direction="LT", swap=True))
  topk = [i for i in module.entry_computation.instructions
          if i.opcode == HloOpcode.kTopK][0]
  assert topk.attr("largest") is True
  assert topk.attr("k") == 5


def test_values_only_sort_and_integer_types():
  x = _RNG.integers(-9, 9, (3, 30)).astype(np.int32)
  text = _module(ty="s32", dims=(3, 30), k=4, ctype=None, iota=False,
                 slices=["{[0:3], [0:4]}"])
  changed, opcodes = _check_same(text, [x])
  assert changed and HloOpcode.kTopK in opcodes
  y = _RNG.integers(0, 9, (3, 30)).astype(np.uint8)
  text = _module(ty="u8", dims=(3, 30), k=4, ctype="UNSIGNED", iota=False,
                 slices=["{[0:3], [0:4]}"])
  changed, _ = _check_same(text, [y])
  assert changed


def test_partial_slices_keep_a_slice_of_the_topk():
  # Different prefixes and a slice of the batch dimension: k = max prefix.
  text = _module(k=3, slices=["{[1:3], [0:3]}", "{[0:4], [0:2]}"])
  text = text.replace("v = f32[4,3]", "v = f32[2,3]").replace(
      "w = s32[4,3]", "w = s32[4,2]").replace(
          "tuple(v, w)", "tuple(v, w)").replace(
              "ROOT t = (f32[4,3], s32[4,3])", "ROOT t = (f32[2,3], s32[4,2])")
  changed, opcodes = _check_same(text, [_floats((4, 40))])
  assert changed
  assert opcodes.count(HloOpcode.kSlice) >= 1


@pytest.mark.parametrize("kwargs", [
    dict(ctype="FLOAT"),  # partial order: NaNs don't order like topk's
    dict(ctype=None),  # float default is FLOAT too
    dict(direction="GE"),  # not a strict order
    dict(ty="s32", ctype="UNSIGNED"),  # not the order of s32
    dict(slices=["{[0:4], [1:6]}", "{[0:4], [0:5]}"]),  # not a prefix
    dict(k=40),  # keeps every element
])
def test_not_rewritten(kwargs):
  _, changed, opcodes = _run(_module(**kwargs))
  assert not changed
  assert HloOpcode.kSort in opcodes


def test_other_use_of_sorted_values_blocks_rewrite():
  text = _module(extra_use="\n  z = f32[4,40] negate(g0)")
  _, changed, _ = _run(text)
  assert not changed


def test_sort_of_non_minor_dimension_not_rewritten():
  text = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT, type=TOTALORDER
}
ENTRY e {
  x = f32[40,4] parameter(0)
  s = f32[40,4] sort(x), dimensions={0}, to_apply=cmp
  ROOT v = f32[5,4] slice(s), slice={[0:5], [0:4]}
}"""
  _, changed, _ = _run(text)
  assert not changed
