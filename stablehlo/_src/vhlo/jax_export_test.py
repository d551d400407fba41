"""Tests of the jax.export blob reader against jax's own exporter."""

import contextlib
import random

import numpy as np
import pytest

import support
from stablehlo._src.vhlo import jax_export

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from stablehlo._src import interpreter  # pylint: disable=g-import-not-at-top


@contextlib.contextmanager
def _no_source_locations():
  # Without traceback frames jax writes name locations only (smaller
  # blobs for the truncation / bit-flip sweeps).
  old = jax.config.jax_traceback_in_locations_limit
  jax.config.update("jax_traceback_in_locations_limit", 0)
  try:
    yield
  finally:
    jax.config.update("jax_traceback_in_locations_limit", old)


def _mlp(params, x):
  for w, b in params[:-1]:
    x = jnp.tanh(x @ w + b)
  w, b = params[-1]
  return jax.nn.softmax(x @ w + b, axis=-1)


def _mlp_inputs():
  rng = np.random.default_rng(0)
  dims = [(4, 8), (8, 3)]
  params = [(rng.standard_normal(d).astype(np.float32),
             rng.standard_normal(d[1]).astype(np.float32)) for d in dims]
  x = rng.standard_normal((2, 4)).astype(np.float32)
  return params, x


@pytest.fixture(scope="module")
def mlp_blob():
  params, x = _mlp_inputs()
  with _no_source_locations():
    exp = jax.export.export(jax.jit(_mlp))(params, x)
  return exp, bytes(exp.serialize())


def test_fields_match_jax(mlp_blob):
  exp, blob = mlp_blob
  got = jax_export.read_jax_exported(blob)
  theirs = jax.export.deserialize(bytearray(blob))
  assert got.function_name == theirs.fun_name == "_mlp"
  assert got.platforms == tuple(theirs.platforms) == ("cpu",)
  assert got.nr_devices == theirs.nr_devices == 1
  assert (got.calling_convention_version ==
          theirs.calling_convention_version)
  assert got.mlir_module_serialized == bytes(exp.mlir_module_serialized)
  assert got.module_kept_var_idx == tuple(theirs.module_kept_var_idx)
  assert [a.shape for a in got.in_avals] == [
      (4, 8), (8,), (8, 3), (3,), (2, 4)]
  assert [(a.shape, a.dtype) for a in got.in_avals] == [
      (tuple(a.shape), str(a.dtype)) for a in theirs.in_avals]
  assert [(a.shape, a.dtype) for a in got.out_avals] == [((2, 3), "float32")]
  assert got.serialization_version > 0
  assert got.vjp is None


def test_run_in_interpreter_matches_jax(mlp_blob):
  _, blob = mlp_blob
  params, x = _mlp_inputs()
  flat = [a for wb in params for a in wb] + [x]
  got = jax_export.read_jax_exported(blob)
  kept = [flat[i] for i in got.module_kept_var_idx]
  (out,) = interpreter.Interpreter(got.module()).run("main", kept)
  want = np.asarray(jax.jit(_mlp)(params, x))
  np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
  # Softmax rows sum to one: an independent check of the result.
  np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-5)


def test_raw_mlir_module_serialized(mlp_blob):
  exp, _ = mlp_blob
  from stablehlo._src import vhlo  # pylint: disable=g-import-not-at-top
  module = vhlo.deserialize_portable_artifact(
      bytes(exp.mlir_module_serialized))
  params, x = _mlp_inputs()
  flat = [a for wb in params for a in wb] + [x]
  (out,) = interpreter.Interpreter(module).run("main", flat)
  np.testing.assert_allclose(out, np.asarray(_mlp(params, x)), rtol=1e-5,
                             atol=1e-6)


def test_symbolic_shapes_and_vjp():
  def f(x):
    return jnp.sin(x) * 2.0
  spec = jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 3"), jnp.float32)
  with _no_source_locations():
    exp = jax.export.export(jax.jit(f))(spec)
    blob = bytes(exp.serialize(vjp_order=1))
  got = jax_export.read_jax_exported(blob)
  assert got.in_avals[0].shape == ("b", 3)
  assert got.out_avals[0].shape == ("b", 3)
  assert got.vjp is not None and got.vjp.vjp is None
  assert got.vjp.mlir_module_serialized


def _jaxlib_locations(data):
  """Location spellings of every op below the module, as jaxlib reads them."""
  from jaxlib.mlir import ir  # pylint: disable=g-import-not-at-top
  from jaxlib.mlir.dialects import stablehlo as jstablehlo  # pylint: disable=g-import-not-at-top
  out = []

  def walk(op):
    out.append((op.name, str(op.location)))
    for region in op.regions:
      for block in region.blocks:
        for child in block.operations:
          walk(child.operation)

  with ir.Context() as ctx:
    jstablehlo.register_dialect(ctx)
    module = jstablehlo.deserialize_portable_artifact(ctx, data)
    for op in module.body.operations:
      walk(op.operation)
  return out


def _sin_cos(x):
  y = jnp.sin(x)
  return y * 2.0 + jnp.cos(
      x)


def test_default_locations():
  # Default exports carry `file:line:col to line:col` ranges.
  exp = jax.export.export(jax.jit(_sin_cos))(np.zeros(3, np.float32))
  raw = bytes(exp.mlir_module_serialized)
  module = jax_export.read_jax_exported(bytes(exp.serialize())).module()
  from stablehlo._src import vhlo  # pylint: disable=g-import-not-at-top
  ours = [(op.name, f"loc({op.location.text or 'unknown'})")
          for op in module.walk() if op.name != "builtin.module"]
  assert ours == _jaxlib_locations(raw)
  assert any(" to " in text for _, text in ours)
  again = vhlo.serialize_portable_artifact(
      module, vhlo.get_portable_artifact_version(raw),
      producer_version="1.17.0")
  assert again == raw
  x = np.linspace(-1, 1, 3).astype(np.float32)
  (out,) = interpreter.Interpreter(module).run("main", [x])
  np.testing.assert_allclose(out, 2 * np.sin(x) + np.cos(x), rtol=1e-6)


@pytest.mark.parametrize("blob,message", [
    (b"", "too short"),
    (b"\x01\x02", "too short"),
    (b"ML\xefR\x06abc", "portable artifact"),
    (b"\xff\xff\xff\x7f" + bytes(8), "out of bounds"),
    (b"\x08\x00\x00\x00" + bytes(8), "vtable"),
])
def test_bad_blobs(blob, message):
  with pytest.raises(support.InvalidArgumentError, match=message):
    jax_export.read_jax_exported(blob)


def test_not_bytes():
  with pytest.raises(support.InvalidArgumentError, match="expected bytes"):
    jax_export.read_jax_exported("abc")


def test_truncations_and_flips_raise_support_errors(mlp_blob):
  _, blob = mlp_blob
  failures = 0
  full = jax_export.read_jax_exported(blob)
  for n in range(0, len(blob), 7):
    # Cutting only trailing padding leaves a readable blob; anything else
    # must be reported.
    try:
      got = jax_export.read_jax_exported(blob[:n])
    except support.InvalidArgumentError:
      continue
    assert got == full, n
  rng = random.Random(0)
  for _ in range(300):
    data = bytearray(blob)
    for _ in range(rng.randint(1, 4)):
      i = rng.randrange(len(data))
      data[i] ^= 1 << rng.randrange(8)
    try:
      jax_export.read_jax_exported(bytes(data))
    except (support.InvalidArgumentError, support.UnimplementedError):
      failures += 1
  assert failures > 0
