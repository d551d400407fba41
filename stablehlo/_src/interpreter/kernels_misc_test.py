"""Tests for the misc kernels: tuples and random numbers. Expectations come
from the spec's examples, value ranges and distributions, or from jax when
installed."""

import numpy as np
import pytest

from stablehlo._src import interpreter
from stablehlo._src import text
from stablehlo._src.interpreter import runtime


def _run(src, *args):
  module = text.parse_module(src, "t.mlir")
  return interpreter.Interpreter(module).run("main", list(args))


def _ts(shape, et):
  return "tensor<" + "".join(f"{d}x" for d in shape) + et + ">"


# --- tuples (with tokens and a barrier) ---------------------------------------


def test_tuple_get_tuple_element_barrier_and_tokens():
  out = _run("""
  func.func @main(%a: tensor<2xf32>, %b: tensor<i8>)
      -> (tensor<i8>, tensor<2xf32>, !stablehlo.token) {
    %t = stablehlo.tuple %a, %b : tuple<tensor<2xf32>, tensor<i8>>
    %n = stablehlo.tuple %t : tuple<tuple<tensor<2xf32>, tensor<i8>>>
    %i = stablehlo.get_tuple_element %n[0]
        : (tuple<tuple<tensor<2xf32>, tensor<i8>>>)
        -> tuple<tensor<2xf32>, tensor<i8>>
    %x = stablehlo.get_tuple_element %i[1]
        : (tuple<tensor<2xf32>, tensor<i8>>) -> tensor<i8>
    %k0 = stablehlo.create_token : !stablehlo.token
    %k1 = stablehlo.after_all : !stablehlo.token
    %k2 = stablehlo.after_all %k0, %k1 : !stablehlo.token
    %r:3 = stablehlo.optimization_barrier %x, %a, %k2
        : tensor<i8>, tensor<2xf32>, !stablehlo.token
    return %r#0, %r#1, %r#2 : tensor<i8>, tensor<2xf32>, !stablehlo.token
  }""", np.array([1.0, 2.0], np.float32), np.array(-7, np.int8))
  assert int(out[0]) == -7 and out[1].tolist() == [1.0, 2.0]
  assert out[2] is runtime.TOKEN


# --- rng / rng_bit_generator ----------------------------------------------------------------


def test_rng_uniform_and_normal_ranges():
  (u,) = _run("""
  func.func @main(%a: tensor<i32>, %b: tensor<i32>, %s: tensor<2xi64>) -> tensor<50x40xi32> {
    %0 = "stablehlo.rng"(%a, %b, %s) {rng_distribution = #stablehlo<rng_distribution UNIFORM>}
        : (tensor<i32>, tensor<i32>, tensor<2xi64>) -> tensor<50x40xi32>
    return %0 : tensor<50x40xi32>
  }""", np.array(-2, np.int32), np.array(3, np.int32),
              np.array([50, 40], np.int64))
  assert u.dtype == np.int32 and u.min() >= -2 and u.max() <= 2
  assert set(np.unique(u).tolist()) == {-2, -1, 0, 1, 2}
  (f,) = _run("""
  func.func @main(%a: tensor<f32>, %b: tensor<f32>, %s: tensor<1xi64>) -> tensor<1000xf32> {
    %0 = "stablehlo.rng"(%a, %b, %s) {rng_distribution = #stablehlo<rng_distribution NORMAL>}
        : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<1000xf32>
    return %0 : tensor<1000xf32>
  }""", np.array(10, np.float32), np.array(0.5, np.float32),
              np.array([1000], np.int64))
  assert f.dtype == np.float32 and abs(f.mean() - 10) < 0.2
  assert 0.3 < f.std() < 0.7


@pytest.mark.parametrize("algorithm,et,np_dt,shape", [
    ("THREE_FRY", "ui32", np.uint32, (3, 1, 5)),
    ("THREE_FRY", "ui64", np.uint64, ()),
    ("THREE_FRY", "ui8", np.uint8, (5,)),
    ("PHILOX", "ui32", np.uint32, (3, 4)),
    ("PHILOX", "ui64", np.uint64, (5,)),
    ("DEFAULT", "ui16", np.uint16, (3, 1, 5)),
])
def test_rng_bit_generator_matches_xla(algorithm, et, np_dt, shape):
  jax = pytest.importorskip("jax")
  jax.config.update("jax_enable_x64", True)
  algos = {"THREE_FRY": jax.lax.RandomAlgorithm.RNG_THREE_FRY,
           "PHILOX": jax.lax.RandomAlgorithm.RNG_PHILOX,
           "DEFAULT": jax.lax.RandomAlgorithm.RNG_DEFAULT}
  state = np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFE], np.uint64)
  out_t = _ts(shape, et)
  new_state, bits = _run(f"""
  func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, {out_t}) {{
    %0, %1 = stablehlo.rng_bit_generator %s, algorithm = {algorithm}
        : (tensor<2xui64>) -> (tensor<2xui64>, {out_t})
    return %0, %1 : tensor<2xui64>, {out_t}
  }}""", state)
  want_state, want_bits = jax.lax.rng_bit_generator(
      jax.numpy.asarray(state), shape, np_dt, algorithm=algos[algorithm])
  assert new_state.tolist() == np.asarray(want_state).tolist()
  assert bits.dtype == np_dt
  assert bits.tolist() == np.asarray(want_bits).tolist()


def test_rng_bit_generator_spec_example_and_signed_outputs():
  # The spec's THREE_FRY example (state [1, 2]).
  state, bits = _run("""
  func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<2x2xui64>) {
    %0, %1 = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY
        : (tensor<2xui64>) -> (tensor<2xui64>, tensor<2x2xui64>)
    return %0, %1 : tensor<2xui64>, tensor<2x2xui64>
  }""", np.array([1, 2], np.uint64))
  assert state.tolist() == [1, 6]
  assert bits.tolist() == [[9236835810183407956, 16087790271692313299],
                           [18212823393184779219, 2658481902456610144]]
  # Signed / float outputs carry the same bits.
  _, signed = _run("""
  func.func @main(%s: tensor<2xui64>) -> (tensor<2xui64>, tensor<2x2xi64>) {
    %0, %1 = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY
        : (tensor<2xui64>) -> (tensor<2xui64>, tensor<2x2xi64>)
    return %0, %1 : tensor<2xui64>, tensor<2x2xi64>
  }""", np.array([1, 2], np.uint64))
  assert signed.view(np.uint64).tolist() == bits.tolist()
