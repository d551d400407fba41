"""Python host callbacks run as custom calls by the CPU backend."""

import numpy as np
import pytest

import support
from xla.service.cpu import cpu_testing as ct
from xla.service.cpu import host_callbacks


def _module(index: int, result: str = "f32[3]") -> str:
  return f"""
HloModule callback

ENTRY main {{
  x = f32[3] parameter(0)
  one = f32[3] broadcast(f32[] constant(1)), dimensions={{}}
  y = f32[3] add(x, one)
  cb = {result} custom-call(y), custom_call_target="{host_callbacks.TARGET}", custom_call_has_side_effect=true, backend_config="{{index = {index} : ui64}}"
  ROOT out = {result} multiply(cb, cb)
}}
"""


def test_callback_gets_operands_and_fills_results():
  seen = []

  def fn(a):
    seen.append(a.copy())
    return [a * 10]

  index = host_callbacks.register(fn)
  _, exe = ct.compile_text(_module(index))
  x = np.arange(3, dtype=np.float32)
  got = exe.execute([x])[0]
  np.testing.assert_array_equal(seen[0], x + 1)
  np.testing.assert_array_equal(got, ((x + 1) * 10) ** 2)
  assert host_callbacks.calls_host(exe.module.to_string())
  assert not host_callbacks.calls_host("custom_call @other")


def test_wrong_result_shape_is_an_error_naming_the_call():
  index = host_callbacks.register(lambda a: [np.zeros(4, np.float32)])
  _, exe = ct.compile_text(_module(index))
  with pytest.raises(support.XlaError, match="expects float32"):
    exe.execute([np.zeros(3, np.float32)])


def test_unknown_index_says_the_program_is_from_another_process():
  _, exe = ct.compile_text(_module(10**9))
  with pytest.raises(support.XlaError, match="another process"):
    exe.execute([np.zeros(3, np.float32)])


def test_ordered_callback_in_a_loop_threads_its_token():
  # The token the call takes and returns is part of the loop's carry; copy
  # insertion used to copy it like an array (an invalid `token[] copy`).
  seen = []
  index = host_callbacks.register(lambda i: seen.append(int(i)))
  text = f"""
HloModule token_carry

cond {{
  p = (s32[], token[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
}}

body {{
  p = (s32[], token[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  t = token[] get-tuple-element(p), index=1
  t2 = token[] custom-call(t, i), custom_call_target="{host_callbacks.TARGET}", custom_call_has_side_effect=true, backend_config="{{index = {index} : ui64}}"
  n = s32[] add(i, s32[] constant(1))
  ROOT r = (s32[], token[]) tuple(n, t2)
}}

ENTRY main {{
  x = s32[] parameter(0)
  t = token[] after-all()
  init = (s32[], token[]) tuple(x, t)
  w = (s32[], token[]) while(init), condition=cond, body=body
  ROOT r = s32[] get-tuple-element(w), index=0
}}
"""
  _, exe = ct.compile_text(text)
  assert exe.execute([np.int32(0)])[0] == 3
  assert seen == [0, 1, 2]
