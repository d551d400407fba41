"""Tests of programs.py: formats, verification, entry signatures."""

import numpy as np
import pytest

import support
from pjrt._src import abi
# Imported for its side effect: it registers programs.py's HLO reader.
from pjrt._src.plugin import backends  # pylint: disable=unused-import
from pjrt._src.plugin import programs
from pjrt._src.plugin import testing
from stablehlo import text as mlir_text
from stablehlo import vhlo

_SIGNATURE = """
module @sig {
  func.func @main(%a: tensor<2x3xbf16> {tf.aliasing_output = 1 : i32},
                  %b: tensor<i1> {jax.buffer_donor = true},
                  %c: tensor<4xui8>) -> (tensor<f64>, tensor<2x3xbf16>) {
    %0 = stablehlo.constant dense<1.0> : tensor<f64>
    return %0, %a : tensor<f64>, tensor<2x3xbf16>
  }
}
"""


def test_signature_and_aliases():
  program = programs.load(_SIGNATURE.encode(), "mlir")
  assert program.name == "sig" and program.entry == "main"
  assert [p.element_type for p in program.parameters] == [
      abi.BufferType.BF16, abi.BufferType.PRED, abi.BufferType.U8]
  assert [p.shape for p in program.parameters] == [(2, 3), (), (4,)]
  assert [r.element_type for r in program.results] == [
      abi.BufferType.F64, abi.BufferType.BF16]
  assert program.aliases == {0: 1}
  assert program.donors == frozenset({1})
  assert program.donatable() == frozenset({0, 1})
  assert not program.uses_collectives


def test_portable_artifact_is_read():
  module = mlir_text.parse_module(testing.ADD_F32)
  data = vhlo.serialize_portable_artifact(module, "1.0.0")
  program = programs.load(data, "mlir")
  assert program.parameters[0].shape == (4,)
  assert program.code == data


def test_collectives_are_noticed():
  assert programs.load(testing.ALL_REDUCE_2.encode(), "mlir").uses_collectives


_SDY = """
module @sdy attributes {mhlo.num_partitions = 2 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func @main(%a: tensor<4xf32> {sdy.sharding = SHARDING})
      -> tensor<4xf32> {
    %0 = stablehlo.add %a, %a : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""


@pytest.mark.parametrize("sharding,is_global", [
    ('#sdy.sharding<@mesh, [{"x"}]>', True),
    ("#sdy.sharding<@mesh, [{}]>", False),
])
def test_shardy_shardings_make_a_global_program(sharding, is_global):
  text = _SDY.replace("SHARDING", sharding)
  for code in (text.encode(), vhlo.serialize_portable_artifact(
      mlir_text.parse_module(text), "1.0.0")):
    program = programs.load(code, "mlir")
    assert bool(program.shardings) == is_global, program.shardings


def test_mhlo_shardings_and_spmd_custom_calls():
  replicated = testing.ADD_F32.replace(
      "%a: tensor<4xf32>", '%a: tensor<4xf32> {mhlo.sharding = "{replicated}"}')
  assert not programs.load(replicated.encode(), "mlir").shardings
  tiled = replicated.replace("{replicated}", "{devices=[2]<=[2]}")
  assert programs.load(tiled.encode(), "mlir").shardings == (
      "func.func mhlo.sharding = {devices=[2]<=[2]}",)
  custom = testing.ADD_F32.replace(
      "return %0", '%1 = stablehlo.custom_call @Sharding(%0) : '
      "(tensor<4xf32>) -> tensor<4xf32>\n    return %1")
  assert programs.load(custom.encode(), "mlir").shardings == (
      "custom_call @Sharding",)
  hlo = backends.hlo_text_to_proto("""HloModule h, num_partitions=2
ENTRY e {
  x = f32[4] parameter(0), sharding={devices=[2]<=[2]}
  ROOT y = f32[4] add(x, x), sharding={replicated}
}""")
  assert programs.load(hlo, "hlo").shardings == ("x: {devices=[2]<=[2]}",)


@pytest.mark.parametrize("code,fmt,error", [
    (b"", "mlir", support.InvalidArgumentError),
    (b"not mlir", "mlir", support.InvalidArgumentError),
    (bytes(range(256)), "mlir", support.InvalidArgumentError),
    (b"ML\xefR\x00garbage", "mlir", support.XlaError),
    (testing.ADD_F32.encode(), "hlo", support.InvalidArgumentError),
    (testing.ADD_F32.encode(), "hlo_with_config",
     support.InvalidArgumentError),
    (b"", "hlo", support.InvalidArgumentError),
    (b"", "hlo_with_config", support.InvalidArgumentError),
    (testing.ADD_F32.encode(), "tflite", support.InvalidArgumentError),
])
def test_bad_programs(code, fmt, error):
  with pytest.raises(error):
    programs.load(code, fmt)


def test_main_is_required():
  text = testing.ADD_F32.replace("@main", "@other")
  with pytest.raises(support.InvalidArgumentError, match="@other"):
    programs.load(text.encode(), "mlir")


@pytest.mark.parametrize("result_type,error", [
    ("tensor<?xf32>", "dynamic"),
    ("tensor<*xf32>", "tensors and tokens only"),
])
def test_unsupported_signatures(result_type, error):
  text = f"""
  func.func @main(%a: {result_type}) -> {result_type} {{
    return %a : {result_type}
  }}"""
  with pytest.raises(support.UnimplementedError, match=error):
    programs.load(text.encode(), "mlir")


def test_tokens_are_token_buffers_of_no_bytes():
  text = """
  func.func @main(%a: tensor<2xf32>, %t: !stablehlo.token)
      -> (!stablehlo.token, tensor<2xf32>) {
    return %t, %a : !stablehlo.token, tensor<2xf32>
  }"""
  program = programs.load(text.encode(), "mlir")
  token = program.parameters[1]
  assert token.element_type == abi.BufferType.TOKEN
  assert token.shape == () and token.dtype.itemsize == 0
  assert program.results[0] == token


def test_fresh_module_is_a_new_copy():
  program = programs.load(testing.ADD_F32.encode(), "mlir")
  assert program.fresh_module() is not program.module
  assert "stablehlo.add" in program.text()
  assert len(program.fingerprint) == 64
  assert np.dtype(program.parameters[0].dtype) == np.float32


# -- HLO formats (HloModuleProto from JAX) -------------------------------------


def _jax():
  return pytest.importorskip("jax")


def _hlo_proto(fn, *args, **jit_kwargs) -> bytes:
  """The serialized HloModuleProto JAX makes of `fn` (jax.jit lowering)."""
  jax = _jax()
  lowered = jax.jit(fn, **jit_kwargs).lower(*args)
  return lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()


def _with_config(hlo: bytes, config: bytes = b"") -> bytes:
  """An HloModuleProtoWithConfig: field 1 the module, field 2 the config."""
  def field(number, payload):
    size, out = len(payload), bytearray([number << 3 | 2])
    while True:
      out.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
      size >>= 7
      if not size:
        return bytes(out) + payload
  return field(1, hlo) + field(2, config)


def _mix(x, y):
  jnp = _jax().numpy
  return jnp.sin(x) @ y + 1.0, x.sum()


def _mix_numpy(x, y):
  return (np.sin(x.astype(np.float64)) @ y + 1.0, x.astype(np.float64).sum())


def _mix_inputs():
  rng = np.random.default_rng(7)
  return (rng.standard_normal((2, 3)).astype(np.float32),
          rng.standard_normal((3, 4)).astype(np.float32))


def test_hlo_signature():
  x = np.zeros((2, 3), np.float32)
  code = _hlo_proto(lambda a, b: (a + b, b.astype("bfloat16")), x, x,
                    donate_argnums=0)
  for fmt, data in (("hlo", code), ("hlo_with_config", _with_config(code))):
    program = programs.load(data, fmt)
    assert program.is_hlo and program.module is None
    assert program.code == data and program.format == fmt
    assert [(p.element_type, p.shape) for p in program.parameters] == [
        (abi.BufferType.F32, (2, 3))] * 2
    assert [(r.element_type, r.shape) for r in program.results] == [
        (abi.BufferType.F32, (2, 3)), (abi.BufferType.BF16, (2, 3))]
    assert program.aliases == {0: 0}
    assert not program.uses_collectives
    assert program.text().startswith("HloModule ")
    assert program.fresh_hlo() is not program.hlo
    with pytest.raises(support.UnimplementedError, match="HLO"):
      program.fresh_module()


def test_hlo_without_a_reader_is_unimplemented():
  code = _hlo_proto(lambda a: a * 2, np.zeros(3, np.float32))
  programs.register_hlo_reader(None)
  try:
    with pytest.raises(support.UnimplementedError, match="HLO reader"):
      programs.load(code, "hlo")
  finally:
    programs.register_hlo_reader(backends.read_hlo_program)
  assert programs.load(code, "hlo").results[0].shape == (3,)


def test_malformed_hlo_is_invalid_argument():
  code = _hlo_proto(_mix, *_mix_inputs())
  rng = np.random.default_rng(3)
  bad = [code[:n] for n in (1, 7, len(code) // 2, len(code) - 1)]
  for _ in range(40):
    data = bytearray(code)
    for i in rng.integers(0, len(data), size=3):
      data[i] = int(rng.integers(0, 256))
    bad.append(bytes(data))
  errors = []
  for data in bad:
    for fmt, wrapped in (("hlo", data), ("hlo_with_config",
                                         _with_config(data))):
      try:
        programs.load(wrapped, fmt)
      except support.XlaError as e:  # Anything else fails the test.
        errors.append(e)
  # Truncations never read; corrupted bytes may still be a valid module.
  assert len(errors) >= 8
  assert all(isinstance(e, (support.InvalidArgumentError,
                            support.UnimplementedError)) for e in errors)
  with pytest.raises(support.InvalidArgumentError, match="hlo_module"):
    programs.load(b"\x12\x00", "hlo_with_config")  # Config only.


def _run(client, code, fmt, args):
  device = client.devices()[0]
  executable = client.compile(code, fmt)
  buffers = [client.buffer_from_numpy(a, device) for a in args]
  return [b.to_numpy() for b in executable.execute(buffers)]


@pytest.mark.parametrize("backend", ["cpu", "evaluator"])
def test_hlo_runs_through_the_client(backend):
  if backend == "cpu" and backends.cpu_compiler_module() is None:
    pytest.skip("the cpu backend cannot be imported")
  x, y = _mix_inputs()
  code = _hlo_proto(_mix, x, y)
  expected = _mix_numpy(x, y)
  client = testing.client(backend)
  for fmt, data in (("hlo", code), ("hlo_with_config", _with_config(code))):
    got = _run(client, data, fmt, [x, y])
    assert [g.dtype for g in got] == [np.float32, np.float32]
    for g, e in zip(got, expected):
      np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_client_compiles_jax_hlo_objects():
  jax = _jax()
  x, y = _mix_inputs()
  computation = jax.jit(_mix).lower(x, y).compiler_ir("hlo")
  client = testing.client("evaluator")
  device = client.devices()[0]
  executable = client.compile(computation)  # format inferred: "hlo"
  got = executable.execute([client.buffer_from_numpy(a, device)
                            for a in (x, y)])
  np.testing.assert_allclose(got[1].to_numpy(), _mix_numpy(x, y)[1],
                             rtol=1e-5)
  with pytest.raises(support.InvalidArgumentError, match="cannot compile"):
    client.compile(object())


def test_hlo_on_the_interpreter_is_unimplemented():
  code = _hlo_proto(_mix, *_mix_inputs())
  with pytest.raises(support.UnimplementedError, match="StableHLO only"):
    testing.client("interpreter").compile(code, "hlo")


def test_hlo_matches_the_real_xla_cpu_plugin():
  _jax()
  from pjrt.tools import plugin_choice  # pylint: disable=g-import-not-at-top
  path = plugin_choice.xla_cpu_pjrt_path()
  if path is None:
    pytest.skip("xla-cpu-pjrt is not installed")
  import pjrt  # pylint: disable=g-import-not-at-top
  x, y = _mix_inputs()
  code = _hlo_proto(_mix, x, y)
  real = _run(pjrt.Client(path), code, "hlo", [x, y])
  backend = "cpu" if backends.cpu_compiler_module() is not None else (
      "evaluator")
  ours = _run(testing.client(backend), code, "hlo", [x, y])
  for o, r, e in zip(ours, real, _mix_numpy(x, y)):
    np.testing.assert_allclose(r, e, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)


def test_take_module_hands_over_the_parsed_module_once():
  program = programs.load(_SIGNATURE.encode(), "mlir")
  parsed = program.module
  assert program.take_module() is parsed  # no second parse
  assert program.module is None and program.taken
  again = program.take_module()
  assert again is not parsed  # later takers get fresh copies
  restored = program.stablehlo()  # readers get it parsed again
  assert restored is not parsed and restored is not again
  assert not program.taken and program.module is restored
