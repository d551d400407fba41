"""Programs of several partitions / replicas through the PJRT C API slots, on
the cpu backend: compile options with num_partitions / num_replicas and a
device assignment, Execute with one argument list per device, collectives
between the devices' instances, and the errors of such executions."""

import ctypes

import numpy as np
import pytest

import pjrt
import support
from pjrt._src import compile_options as pjrt_co
from pjrt._src.plugin import backends
from pjrt._src.plugin import testing

_PER_DEVICE = """HloModule spmd, num_partitions=4
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  p = u32[] partition-id()
  ar = f32[4] all-reduce(x), channel_id=1, replica_groups={{0,1},{2,3}},
    use_global_device_ids=true, to_apply=sum
  ag = f32[16] all-gather(x), channel_id=2, replica_groups={{0,1,2,3}},
    dimensions={0}, use_global_device_ids=true
  rs = f32[1] reduce-scatter(x), channel_id=3, replica_groups={{0,1,2,3}},
    dimensions={0}, use_global_device_ids=true, to_apply=sum
  a2a = f32[4] all-to-all(x), channel_id=4, replica_groups={{0,1,2,3}},
    dimensions={0}
  cp = f32[4] collective-permute(x), channel_id=5,
    source_target_pairs={{0,1},{1,2},{2,3}}
  ROOT t = (u32[], f32[4], f32[16], f32[1], f32[4], f32[4])
    tuple(p, ar, ag, rs, a2a, cp)
}
"""


def _proto(text: str) -> bytes:
  return backends.hlo_text_to_proto(text)


@pytest.fixture(name="client")
def _client():
  c = testing.client(backend="cpu", num_devices=4)
  yield c
  c.close()


def _run(client, exe, per_device):
  devices = exe.addressable_devices()
  lists = [[client.buffer_from_numpy(x, d) for x in args]
           for args, d in zip(per_device, devices)]
  return [[b.to_numpy() for b in outs]
          for outs in exe.execute_sharded(lists)]


def test_collectives_between_partitions(client):
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  exe = client.compile(_proto(_PER_DEVICE), format="hlo",
                       compile_options=options)
  assert (exe.num_replicas, exe.num_partitions) == (1, 4)
  assert [d.id for d in exe.addressable_devices()] == [0, 1, 2, 3]
  xs = [np.arange(4, dtype=np.float32) + 10 * p for p in range(4)]
  got = _run(client, exe, [[x] for x in xs])
  total = sum(xs)
  for p, (pid, ar, ag, rs, a2a, cp) in enumerate(got):
    assert pid == p
    pair = (0, 1) if p < 2 else (2, 3)
    np.testing.assert_array_equal(ar, xs[pair[0]] + xs[pair[1]])
    np.testing.assert_array_equal(ag, np.concatenate(xs))
    np.testing.assert_array_equal(rs, total[p:p + 1])
    np.testing.assert_array_equal(a2a, [x[p] for x in xs])
    np.testing.assert_array_equal(cp, xs[p - 1] if p else np.zeros(4))


def test_the_device_assignment_decides_the_partition(client):
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True,
                                 device_assignment=[[3, 2, 1, 0]])
  exe = client.compile(_proto(_PER_DEVICE), format="hlo",
                       compile_options=options)
  devices = exe.addressable_devices()
  assert [d.id for d in devices] == [3, 2, 1, 0]
  xs = [np.full(4, p, np.float32) for p in range(4)]
  got = _run(client, exe, [[x] for x in xs])
  for p, outs in enumerate(got):  # argument list p is partition p's
    assert outs[0] == p
    np.testing.assert_array_equal(outs[5], xs[p - 1] if p else np.zeros(4))


def test_replicas_and_partitions(client):
  text = """HloModule m, replica_count=2, num_partitions=2
sum {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY e {
  x = s32[2] parameter(0)
  r = u32[] replica-id()
  p = u32[] partition-id()
  across_replicas = s32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=sum
  everyone = s32[2] all-reduce(x), channel_id=1, replica_groups={{0,1}},
    use_global_device_ids=false, to_apply=sum
  ROOT t = (u32[], u32[], s32[2], s32[2]) tuple(r, p, across_replicas,
    everyone)
}
"""
  options = pjrt.compile_options(num_replicas=2, num_partitions=2,
                                 device_assignment=[[0, 1], [2, 3]])
  exe = client.compile(_proto(text), format="hlo", compile_options=options)
  xs = [np.full(2, 10 ** k, np.int32) for k in range(4)]
  got = _run(client, exe, [[x] for x in xs])
  for k, (r, p, across, everyone) in enumerate(got):
    assert (r, p) == (k // 2, k % 2)
    np.testing.assert_array_equal(across, xs[k % 2] + xs[k % 2 + 2])
    np.testing.assert_array_equal(everyone, np.full(2, 1111))


def test_stablehlo_per_device_program(client):
  program = """
module @scale {
  func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %two = stablehlo.constant dense<2.0> : tensor<3xf32>
    %0 = stablehlo.multiply %a, %two : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
"""
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  exe = client.compile(program, compile_options=options)
  assert exe.num_partitions == 4
  xs = [np.full(3, p, np.float32) for p in range(4)]
  for p, (out,) in enumerate(_run(client, exe, [[x] for x in xs])):
    np.testing.assert_array_equal(out, 2 * xs[p])


def test_stablehlo_collectives_run_on_the_cpu_backend(client):
  # The client's backend is "cpu" (no fallback): the all_reduce is
  # imported into HLO and runs between the devices' instances.
  options = pjrt.compile_options(num_replicas=2,
                                 device_assignment=[[1], [3]])
  exe = client.compile(testing.ALL_REDUCE_2, compile_options=options)
  xs = [np.full(3, v, np.float32) for v in (1, 10)]
  for (out,) in _run(client, exe, [[x] for x in xs]):
    np.testing.assert_array_equal(out, np.full(3, 11))


# -- errors ------------------------------------------------------------------------


def test_argument_lists_must_match_the_devices(client):
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  exe = client.compile(_proto(_PER_DEVICE), format="hlo",
                       compile_options=options)
  devices = exe.addressable_devices()
  lists = [[client.buffer_from_numpy(np.ones(4, np.float32), d)]
           for d in devices]
  with pytest.raises(support.InvalidArgumentError,
                     match="4 device.*3 argument list"):
    exe.execute_sharded(lists[:3])
  bad = lists[:3] + [[client.buffer_from_numpy(np.ones(5, np.float32),
                                               devices[3])]]
  with pytest.raises(support.InvalidArgumentError, match="argument 0"):
    exe.execute_sharded(bad)
  # The executable still runs.
  got = exe.execute_sharded(lists)
  np.testing.assert_array_equal(got[2][1].to_numpy(), np.full(4, 2))


def test_a_failing_participant_fails_the_execution(client):
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  exe = client.compile(_proto(_PER_DEVICE), format="hlo",
                       compile_options=options)
  devices = exe.addressable_devices()
  args = testing.call(client, "Client_CreateErrorBuffer",
                      client=client.handle,
                      error_code=support.StatusCode.DATA_LOSS,
                      error_message=b"lost input", error_message_size=10,
                      shape_dims=[4], shape_num_dims=1,
                      shape_element_type=pjrt.BufferType.F32,
                      memory=devices[2].default_memory().handle)
  bad = pjrt.Buffer(client, args.buffer)
  lists = [[client.buffer_from_numpy(np.ones(4, np.float32), d)]
           for d in devices]
  lists[2] = [bad]
  # Partition 2 fails before it runs; the others stop waiting for it in
  # the all-reduce / all-gather instead of hanging.
  with pytest.raises(support.XlaError) as info:
    exe.execute_sharded(lists)
  assert isinstance(info.value, (support.DataLossError,
                                 support.CancelledError))
  assert "lost input" in str(info.value)
  lists[2] = [client.buffer_from_numpy(np.ones(4, np.float32), devices[2])]
  got = exe.execute_sharded(lists)
  np.testing.assert_array_equal(got[0][1].to_numpy(), np.full(4, 2))


def test_groups_outside_the_program_are_rejected(client):
  text = _PER_DEVICE.replace("replica_groups={{0,1},{2,3}}",
                             "replica_groups={{0,1},{2,5}}")
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  with pytest.raises(support.InvalidArgumentError,
                     match="participant 5, outside the program"):
    client.compile(_proto(text), format="hlo", compile_options=options)


def test_a_global_hlo_program_is_partitioned_or_refused(client):
  text = """HloModule g, num_partitions=4
ENTRY e {
  x = f32[8] parameter(0), sharding={devices=[4]<=[4]}
  ROOT y = f32[8] multiply(x, x), sharding={replicated}
}
"""
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  try:
    exe = client.compile(_proto(text), format="hlo", compile_options=options)
  except support.UnimplementedError as e:  # no partitioner in this build
    assert "partitioning is not available" in str(e)
    return
  x = np.arange(8, dtype=np.float32)
  for (y,) in _run(client, exe, [[x[2 * p:2 * p + 2]] for p in range(4)]):
    np.testing.assert_array_equal(y, x * x)


# -- global StableHLO programs --------------------------------------------------------

# A matmul whose operands and result are split over a 2x2 mesh, and a
# constraint in the middle: Shardy's form and GSPMD's.
_SHARDY_MATMUL = """
module @matmul attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(
      %a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
      %b: tensor<4x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>})
      -> (tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
          tensor<8x4xf32>) {
    %0 = stablehlo.sine %a : tensor<8x4xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"y"}]> : tensor<8x4xf32>
    %2 = stablehlo.dot_general %1, %b, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    return %2, %1 : tensor<8x6xf32>, tensor<8x4xf32>
  }
}
"""
_GSPMD_MATMUL = (
    _SHARDY_MATMUL.replace('  sdy.mesh @mesh = <["x"=2, "y"=2]>\n', "")
    .replace('#sdy.sharding<@mesh, [{"x"}, {"y"}]>',
             '"{devices=[2,2]<=[4]}"')
    .replace('#sdy.sharding<@mesh, [{"y"}, {}]>',
             '"{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"')
    .replace('#sdy.sharding<@mesh, [{"x"}, {}]>',
             '"{devices=[2,1,2]<=[4] last_tile_dim_replicate}"')
    .replace("sdy.sharding =", "mhlo.sharding =")
    .replace('sdy.sharding_constraint %0 <@mesh, [{}, {"y"}]> : tensor<8x4xf32>',
             'stablehlo.custom_call @Sharding(%0) {mhlo.sharding = '
             '"{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"} : '
             "(tensor<8x4xf32>) -> tensor<8x4xf32>"))


def _tile(x, rows, cols, p):
  """Partition p's block of `x` cut into rows x cols blocks, partitions
  numbered row-major."""
  r, c = x.shape[0] // rows, x.shape[1] // cols
  i, j = divmod(p, cols)
  return x[i * r:(i + 1) * r, j * c:(j + 1) * c]


def _shardings(client, exe, which: str) -> list:
  """The executable's parameter or output shardings, read through the
  plugin's Shardings extension as serialized OpSharding protos."""
  from pjrt._src import abi  # pylint: disable=g-import-not-at-top
  from pjrt._src.plugin import api  # pylint: disable=g-import-not-at-top
  address = abi.find_extension(api.get_api(), abi.ExtensionType.SHARDINGS)
  assert address is not None
  ext = abi.PJRT_Shardings_Extension.from_address(address)
  assert ext.base.struct_size == abi.PJRT_Shardings_Extension.STRUCT_SIZE
  name = f"PJRT_Shardings_PJRT_Executable_{which}Shardings"
  args_type = abi.SHARDINGS_FUNCTIONS[name]
  fn = abi.extension_function_type(args_type)(getattr(ext, name))
  handle = testing.call(client, "LoadedExecutable_GetExecutable",
                        loaded_executable=exe.handle).executable
  try:
    args = abi.make_args(args_type, executable=handle)
    error = fn(ctypes.byref(args))
    assert not error
    count = args.num_parameters if which == "Parameter" else args.num_outputs
    if not args.shardings:
      return None
    pointers = (ctypes.c_void_p * count).from_address(args.shardings)
    sizes = (ctypes.c_size_t * count).from_address(args.sharding_sizes)
    return [backends.op_sharding_text(ctypes.string_at(pointer, size))
            for pointer, size in zip(pointers, sizes)]
  finally:
    testing.call(client, "Executable_Destroy", executable=handle)


@pytest.mark.parametrize("program", [_SHARDY_MATMUL, _GSPMD_MATMUL],
                         ids=["shardy", "gspmd"])
def test_a_global_stablehlo_program_runs_partitioned(client, program):
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True,
                                 allow_spmd_sharding_propagation_to_output=[
                                     False, True])
  exe = client.compile(program, compile_options=options)
  rng = np.random.default_rng(0)
  a = rng.standard_normal((8, 4)).astype(np.float32)
  b = rng.standard_normal((4, 6)).astype(np.float32)
  # Each device takes its shards: a's 2x2 block, b's rows of its "y".
  lists = [[_tile(a, 2, 2, p), _tile(b, 2, 1, p % 2)] for p in range(4)]
  got = _run(client, exe, lists)
  want = np.sin(a) @ b
  for p, (c, s) in enumerate(got):
    np.testing.assert_allclose(c, _tile(want, 2, 1, p // 2), rtol=1e-5,
                               atol=1e-5)
    # The second output took the constraint's sharding: columns by "y".
    np.testing.assert_allclose(s, _tile(np.sin(a), 1, 2, p % 2), rtol=1e-6)
  assert _shardings(client, exe, "Parameter") == [
      "{devices=[2,2]<=[4]}",
      "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"]
  assert _shardings(client, exe, "Output") == [
      "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
      "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"]


def _optimized_program(client, exe) -> tuple[str, bytes]:
  """(format, code) from PJRT_Executable_OptimizedProgram."""
  from pjrt._src import abi  # pylint: disable=g-import-not-at-top
  handle = testing.call(client, "LoadedExecutable_GetExecutable",
                        loaded_executable=exe.handle).executable
  try:
    program = abi.make_args(abi.PJRT_Program)
    testing.call(client, "Executable_OptimizedProgram", executable=handle,
                 program=program)  # asks for the size
    code = ctypes.create_string_buffer(program.code_size)
    program.code = ctypes.addressof(code)
    testing.call(client, "Executable_OptimizedProgram", executable=handle,
                 program=program)
    fmt = ctypes.string_at(program.format, program.format_size).decode()
    return fmt, code.raw[:program.code_size]
  finally:
    testing.call(client, "Executable_Destroy", executable=handle)


def test_optimized_program_of_a_global_program_is_partitioned_hlo(client):
  # JAX's compiled.as_text() prints it; MLIR with sdy ops could not be
  # converted to HLO there.
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  exe = client.compile(_SHARDY_MATMUL, compile_options=options)
  fmt, code = _optimized_program(client, exe)
  assert fmt == "hlo_with_config"
  # HloModuleProtoWithConfig: field 1 is the module.
  fields = dict((f, v) for f, _, v in pjrt_co.iter_fields(code))
  info = backends.read_hlo_program(fields[1])
  # Each device's program: its 4x2 block of a and its 2x6 rows of b.
  assert [shape for _, shape in info.parameters] == [(4, 2), (2, 6)]
  assert info.uses_collectives
  # The same program again comes from the compilation cache, which keeps
  # no module: it is made again.
  again = client.compile(_SHARDY_MATMUL, compile_options=options)
  assert _optimized_program(client, again) == (fmt, code)
  one = client.compile(testing.ADD_F32)
  assert _optimized_program(client, one)[0] == "mlir"


def test_outputs_not_allowed_to_propagate_are_replicated(client):
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  exe = client.compile(_SHARDY_MATMUL, compile_options=options)
  assert _shardings(client, exe, "Output")[1] == "{replicated}"
  a = np.ones((8, 4), np.float32)
  b = np.ones((4, 6), np.float32)
  lists = [[_tile(a, 2, 2, p), _tile(b, 2, 1, p % 2)] for p in range(4)]
  for _, s in _run(client, exe, lists):
    np.testing.assert_allclose(s, np.sin(a), rtol=1e-6)


def test_shardings_of_programs_that_are_not_partitioned(client):
  one = client.compile(testing.ADD_F32)
  assert _shardings(client, one, "Parameter") is None
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  per_device = client.compile(testing.ADD_F32, compile_options=options)
  assert _shardings(client, per_device, "Output") == ["{replicated}"]


def test_a_partially_manual_program_that_splits_automatic_axes(client):
  program = """
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%a: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>] manual_axes={"x"} (%b: tensor<4x4xf32>) {
      sdy.return %b : tensor<4x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
"""
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  with pytest.raises(support.UnimplementedError,
                     match="partially manual .* automatic axes y"):
    client.compile(program, compile_options=options)


# -- JAX -----------------------------------------------------------------------------

# What jax.jit(shard_map(lambda v: psum(v, "x") * 2, mesh, P("x"), P("x")))
# lowers to over a 4-device mesh in GSPMD form (jax_use_shardy_partitioner
# off), as HLO text.
_JAX_SHARD_MAP_GSPMD = """HloModule jit__lambda, num_partitions=4

region_0.1 {
  psum_invariant.2 = f32[] parameter(0)
  psum_invariant.3 = f32[] parameter(1)
  ROOT add.1 = f32[] add(psum_invariant.2, psum_invariant.3)
}

shmap_body.2 {
  a__x____.1 = f32[2]{0} parameter(0)
  psum_invariant.5 = f32[2]{0} all-reduce(a__x____.1), channel_id=1,
    replica_groups={{0,1,2,3}}, use_global_device_ids=true,
    to_apply=region_0.1
  constant.1 = f32[] constant(2)
  broadcast.1 = f32[2]{0} broadcast(constant.1), dimensions={}
  ROOT mul.1 = f32[2]{0} multiply(psum_invariant.5, broadcast.1)
}

ENTRY main.3 {
  v.1 = f32[8]{0} parameter(0), sharding={devices=[4]<=[4]}
  shard_map.5 = f32[8]{0} custom-call(v.1), custom_call_target="Sharding",
    sharding={devices=[4]<=[4]}
  shard_map.6 = f32[2]{0} custom-call(shard_map.5),
    custom_call_target="SPMDFullToShardShape", sharding={manual}
  shard_map.7 = f32[2]{0} call(shard_map.6), to_apply=shmap_body.2
  shard_map.8 = f32[2]{0} custom-call(shard_map.7),
    custom_call_target="Sharding", sharding={manual}
  ROOT shard_map.9 = f32[8]{0} custom-call(shard_map.8),
    custom_call_target="SPMDShardToFullShape", sharding={devices=[4]<=[4]}
}
"""


def test_a_jax_shard_map_program_through_the_partitioner(client):
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  try:
    exe = client.compile(_proto(_JAX_SHARD_MAP_GSPMD), format="hlo",
                         compile_options=options)
  except support.UnimplementedError as e:
    if "partitioning is not available" not in str(e):
      raise
    pytest.skip("no SPMD partitioner")
  x = np.arange(8, dtype=np.float32)
  # Each device takes and returns its shard; the all-reduce sums them.
  got = _run(client, exe, [[x[2 * p:2 * p + 2]] for p in range(4)])
  for (y,) in got:
    np.testing.assert_array_equal(y, 2 * x.reshape(4, 2).sum(0))



def test_a_jax_program_in_per_device_form(client):
  jax = pytest.importorskip("jax")
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  fn = lambda v: jax.numpy.sin(v) * 2 + v.sum()
  lowered = jax.jit(fn).lower(x)
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  for program, fmt in ((lowered.as_text(), "mlir"),
                       (lowered.compiler_ir("hlo")
                        .as_serialized_hlo_module_proto(), "hlo")):
    exe = client.compile(program, format=fmt, compile_options=options)
    assert exe.num_partitions == 4
    xs = [x + p for p in range(4)]
    for p, (out,) in enumerate(_run(client, exe, [[v] for v in xs])):
      np.testing.assert_allclose(out, np.asarray(fn(xs[p])), rtol=1e-5)


def test_a_program_without_outputs_has_the_empty_tuple_sharding(client):
  # JAX requires exactly one output sharding for a program with no
  # outputs (XLA's, of the empty tuple).
  program = """
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
    return
  }
}
"""
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  exe = client.compile(program, compile_options=options)
  assert len(_shardings(client, exe, "Output")) == 1
  assert exe_shardings(exe) == (["{devices=[4]<=[4]}"], ["{}"])
  # An OpSharding of type TUPLE (2) with no elements.
  assert backends.op_sharding_protos(["{}"]) == [b"\x08\x02"]


def exe_shardings(exe):
  from pjrt._src.plugin import slots_executable  # pylint: disable=g-import-not-at-top
  return slots_executable.loaded_of(exe.handle).executable.shardings()


_NESTED_MANUAL = """
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
      -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%b: tensor<4x4xf32>) {
      %1 = sdy.manual_computation(%b) in_shardings=[<@mesh, [{}, {"y"}]>] out_shardings=[<@mesh, [{}, {"y"}]>] manual_axes={"y"} (%c: tensor<4x2xf32>) {
        %2 = "stablehlo.all_reduce"(%c) ({
          ^bb0(%x: tensor<f32>, %y: tensor<f32>):
            %s = stablehlo.add %x, %y : tensor<f32>
            stablehlo.return %s : tensor<f32>
        }) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>,
            channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
            use_global_device_ids} : (tensor<4x2xf32>) -> tensor<4x2xf32>
        sdy.return %2 : tensor<4x2xf32>
      } : (tensor<4x4xf32>) -> tensor<4x4xf32>
      sdy.return %1 : tensor<4x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}
"""


def test_a_manual_computation_nested_in_another(client):
  # Outer manual on "x", inner on "y": each device takes its column half
  # of its row block, the inner psum over "y" adds the halves, and the
  # halves are gathered back.
  options = pjrt.compile_options(num_partitions=4,
                                 use_spmd_partitioning=True)
  exe = client.compile(_NESTED_MANUAL, compile_options=options)
  a = np.arange(32, dtype=np.float32).reshape(8, 4)
  got = _run(client, exe, [[_tile(a, 2, 1, p // 2)] for p in range(4)])
  for p, (out,) in enumerate(got):
    rows = _tile(a, 2, 1, p // 2)
    half = rows[:, :2] + rows[:, 2:]
    np.testing.assert_array_equal(out, np.concatenate([half, half], 1))
