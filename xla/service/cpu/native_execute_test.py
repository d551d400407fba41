"""Tests of native_execute: one native call against CpuExecutable.execute."""

import ctypes

from absl.testing import absltest
import numpy as np

from xla.service.cpu import blas
from xla.service.cpu import cpu_testing

_EXECUTE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p)


def _native_run(executable, args, donated=frozenset()):
  """Runs `executable` through its native plan; returns the results."""
  plan = executable.native_plan(donated)
  assert plan is not None
  outputs = [np.zeros(n, np.uint8) for n in plan.output_bytes]
  for j, k in enumerate(plan.donate_to):
    if k >= 0:
      outputs[k] = args[j].view(np.uint8).reshape(-1)
  arg_addresses = (ctypes.c_int64 * max(1, len(args)))(
      *[a.ctypes.data for a in args])
  out_addresses = (ctypes.c_int64 * max(1, len(outputs)))(
      *[o.ctypes.data for o in outputs])
  status = _EXECUTE(plan.entry)(plan.address, arg_addresses, out_addresses)
  assert status == 0, status
  return outputs


def _as(raw: np.ndarray, like: np.ndarray) -> np.ndarray:
  return raw[:like.nbytes].view(like.dtype).reshape(like.shape)


class NativeExecuteTest(absltest.TestCase):

  def check(self, text: str, args):
    _, executable = cpu_testing.compile_text(text)
    want = executable.execute(args)
    for _ in range(3):  # The second run takes the cached arena.
      got = _native_run(executable, args)
      self.assertLen(got, len(want))
      for g, w in zip(got, want):
        np.testing.assert_array_equal(_as(g, w), w)

  def test_elementwise_and_reduce(self):
    self.check("""
HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)
      ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[64,32] parameter(0)
  y = f32[64,32] parameter(1)
  m = f32[64,32] multiply(x, y)
  e = f32[64,32] exponential(m)
  z = f32[] constant(0)
  r = f32[64] reduce(e, z), dimensions={1}, to_apply=add
  ROOT t = (f32[64,32], f32[64]) tuple(e, r)
}""", [np.random.rand(64, 32).astype(np.float32),
       np.random.rand(64, 32).astype(np.float32)])

  def test_results_copied_from_parameters_and_constants(self):
    self.check("""
HloModule m
ENTRY e {
  x = s32[5] parameter(0)
  c = s32[3] constant({7, 8, 9})
  n = s32[5] negate(x)
  ROOT t = (s32[5], s32[3], s32[5], s32[5]) tuple(x, c, n, n)
}""", [np.arange(5, dtype=np.int32)])

  def test_while_loop_and_dot(self):
    self.check("""
HloModule m
cond { p = (s32[], f32[16,16]) parameter(0)
       i = s32[] get-tuple-element(p), index=0
       n = s32[] constant(4)
       ROOT lt = pred[] compare(i, n), direction=LT }
body { p = (s32[], f32[16,16]) parameter(0)
       i = s32[] get-tuple-element(p), index=0
       one = s32[] constant(1)
       i1 = s32[] add(i, one)
       m = f32[16,16] get-tuple-element(p), index=1
       d = f32[16,16] dot(m, m), lhs_contracting_dims={1}, rhs_contracting_dims={0}
       t = f32[16,16] tanh(d)
       ROOT r = (s32[], f32[16,16]) tuple(i1, t) }
ENTRY e {
  x = f32[16,16] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[16,16]) tuple(z, x)
  w = (s32[], f32[16,16]) while(init), condition=cond, body=body
  ROOT m = f32[16,16] get-tuple-element(w), index=1
}""", [np.random.rand(16, 16).astype(np.float32)])

  def test_donated_parameter_holds_the_result(self):
    _, executable = cpu_testing.compile_text("""
HloModule m, input_output_alias={ {0}: (1, {}, may-alias) }
ENTRY e {
  s = f32[] parameter(0)
  x = f32[256] parameter(1)
  b = f32[256] broadcast(s), dimensions={}
  y = f32[256] multiply(x, b)
  ROOT t = (f32[256], f32[]) tuple(y, s)
}""")
    self.assertEqual(executable.native_plan().donate_to, [-1, -1])
    self.assertEqual(executable.native_plan(frozenset({1})).donate_to,
                     [-1, 0])
    x = np.arange(256, dtype=np.float32)
    s = np.array(3.0, np.float32)
    want = executable.execute([s, x.copy()])
    got = _native_run(executable, [s, x], frozenset({1}))
    np.testing.assert_array_equal(x, want[0])  # Written in place.
    np.testing.assert_array_equal(_as(got[1], want[1]), want[1])

  def test_no_plan_for_custom_calls(self):
    _, executable = cpu_testing.compile_text("""
HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(x), custom_call_target="my_target"
}""")
    self.assertIsNone(executable.native_plan())

  def test_blas_pin_nests_and_restores(self):
    state = blas.pin_state()
    if not state:
      self.skipTest("no BLAS with a thread setter")
    before = blas.get_num_threads()
    blas.pin_single_thread()
    blas.pin_single_thread()
    self.assertEqual(blas.pin_depth(), 2)
    self.assertEqual(blas.get_num_threads(), 1)
    blas.unpin()
    self.assertEqual(blas.get_num_threads(), 1)
    blas.unpin()
    self.assertEqual(blas.pin_depth(), 0)
    self.assertEqual(blas.get_num_threads(), before)
    blas.unpin()  # An unmatched unpin changes nothing.
    self.assertEqual(blas.pin_depth(), 0)


if __name__ == "__main__":
  absltest.main()
