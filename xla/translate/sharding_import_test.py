"""Tests of the sharding import: Shardy shardings as HloShardings (against
jaxlib's own conversion where jax is installed, and against the devices
each tile goes to), and the shardings a StableHLO program's import carries
(GSPMD and Shardy forms, shard_map), partitioned and run per partition."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import support
from stablehlo import sdy
from stablehlo import text as mlir_text
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.ir.hlo_sharding import HloSharding
from xla.service.spmd import spmd_testing
from xla.translate import sharding_import
from xla.translate import stablehlo_to_hlo

O = HloOpcode


def _mesh(**axes) -> sdy.Mesh:
  return sdy.Mesh(tuple(sdy.MeshAxis(k, v) for k, v in axes.items()))


def _dims(*dims, closed=True):
  out = []
  for d in dims:
    refs = []
    for name in (d if isinstance(d, (tuple, list)) else
                 ((d,) if d is not None else ())):
      if isinstance(name, sdy.AxisRef):
        refs.append(name)
      else:
        refs.append(sdy.AxisRef(name))
    out.append(sdy.DimensionSharding(tuple(refs), is_closed=closed))
  return tuple(out)


def _sharding(*dims, replicated=(), unreduced=()):
  return sdy.TensorSharding(
      "mesh", _dims(*dims),
      replicated_axes=tuple(sdy.AxisRef(x) for x in replicated),
      unreduced_axes=tuple(sdy.AxisRef(x) for x in unreduced))


def _sub(name, pre, size):
  return sdy.AxisRef(name, sdy.SubAxisInfo(pre, size))


# -- the conversion, against the devices of each tile ----------------------------


def _expected_tiles(mesh: sdy.Mesh, sharding: sdy.TensorSharding):
  """device -> tile index, from mesh coordinates: a dimension sharded over
  axes (a1, a2, ...) takes the mixed-radix number of the devices' (sub-)axis
  coordinates, major to minor."""
  sizes = [x.size for x in mesh.axes]
  order = mesh.device_order
  out = {}
  for position in range(mesh.num_devices):
    coords = dict(zip(mesh.axis_names,
                      np.unravel_index(position, sizes)))
    index = []
    for dim in sharding.dim_shardings:
      i = 0
      for ref in dim.axes:
        c = int(coords[ref.name])
        if ref.sub_axis_info is None:
          n = mesh.axis_size(ref.name)
        else:
          full = mesh.axis_size(ref.name)
          pre, n = ref.sub_axis_info.pre_size, ref.sub_axis_info.size
          c = (c // (full // (pre * n))) % n
        i = i * n + c
      index.append(i)
    out[order[position]] = tuple(index)
  return out


@pytest.mark.parametrize("axes,dims", [
    ({"x": 4}, ["x", None]),
    ({"x": 2, "y": 2}, ["x", "y"]),
    ({"x": 2, "y": 2}, ["y", "x"]),
    ({"x": 2, "y": 2}, [None, "y"]),
    ({"x": 2, "y": 2}, [("y", "x")]),
    ({"a": 2, "b": 2, "c": 2}, [("c", "a"), None]),
    ({"a": 2, "b": 2, "c": 2}, ["b", None, "a"]),
    ({"x": 4, "y": 2}, [(_sub("x", 1, 2),), "y"]),
    ({"x": 4, "y": 2}, [(_sub("x", 2, 2),), None]),
    ({"x": 4, "y": 2}, [(_sub("x", 2, 2),), (_sub("x", 1, 2), "y")]),
    ({"x": 8}, [(_sub("x", 2, 2),), (_sub("x", 4, 2), _sub("x", 1, 2))]),
])
def test_tiles_go_to_the_devices_of_their_mesh_coordinates(axes, dims):
  mesh = _mesh(**axes)
  sharding = _sharding(*dims)
  hs = sharding_import.from_sdy(sharding, mesh)
  want = _expected_tiles(mesh, sharding)
  for device, index in want.items():
    got = hs.tile_index_for_device(device)
    assert tuple(got[:len(index)]) == index, (device, str(hs))
  # Devices with the same tile are exactly a replication group.
  groups = {}
  for device, index in want.items():
    groups.setdefault(index, set()).add(device)
  if len(groups) == 1:
    assert hs.is_replicated
  else:
    assert hs.num_devices == mesh.num_devices
    assert sorted(map(sorted, groups.values())) == sorted(
        sorted(g) for g in hs.replication_groups())


def test_explicit_device_ids_give_an_explicit_assignment():
  mesh = sdy.Mesh((sdy.MeshAxis("x", 2), sdy.MeshAxis("y", 2)),
                  device_ids=(3, 1, 2, 0))
  hs = sharding_import.from_sdy(_sharding("y", None), mesh)
  assert str(hs) == "{devices=[2,1,2]2,3,0,1 last_tile_dim_replicate}"
  want = _expected_tiles(mesh, _sharding("y", None))
  for device, index in want.items():
    assert tuple(hs.tile_index_for_device(device)[:len(index)]) == index


def test_replicated_manual_and_maximal():
  mesh = _mesh(x=2, y=2)
  assert sharding_import.from_sdy(_sharding(None, None), mesh).is_replicated
  assert sharding_import.from_sdy(
      _sharding(None, replicated=("x",)), mesh).is_replicated
  assert sharding_import.from_sdy(_sharding(None), mesh,
                                  ("x", "y")).is_manual
  # Manual on "x" only: XLA's own string for shard_map(axis_names={"x"}).
  partial = sharding_import.from_sdy(_sharding(None, None), mesh, ("x",))
  assert str(partial) == ("{devices=[1,1,2,2]<=[4] last_tile_dims={manual, "
                          "replicated}}")
  maximal = sdy.Mesh((), device_ids=(2,))
  assert str(sharding_import.from_sdy(_sharding(), maximal)) == (
      "{maximal device=2}")


def test_unreduced_axes_are_an_unreduced_subgroup():
  mesh = _mesh(x=2, y=2)
  assert str(sharding_import.from_sdy(
      _sharding("x", None, unreduced=("y",)), mesh)) == (
          "{devices=[2,1,2]<=[4] last_tile_dims={unreduced}}")
  assert str(sharding_import.from_sdy(
      _sharding(None, unreduced=("x", "y")), mesh)) == "{unreduced}"
  with pytest.raises(support.UnimplementedError, match="unreduced"):
    sharding_import.from_sdy(_sharding(None, unreduced=("y",)), mesh,
                             manual_axes=("x",))


def test_unknown_axes_are_refused():
  with pytest.raises(support.InvalidArgumentError, match="'z'"):
    sharding_import.from_sdy(_sharding("z"), _mesh(x=2))


# -- against jaxlib ----------------------------------------------------------------

# Each: mesh shape, axis names, PartitionSpec entries (None, a name, or a
# list of names), rank.
_JAX_CASES = [
    ((4,), ("i",), ["i"], 1),
    ((4,), ("i",), [None, "i"], 2),
    ((4,), ("i",), [], 2),
    ((2, 2), ("x", "y"), ["x", "y"], 2),
    ((2, 2), ("x", "y"), ["y", None], 2),
    ((2, 2), ("x", "y"), [None, "x"], 3),
    ((2, 2), ("x", "y"), [["y", "x"]], 2),
    ((2, 2), ("x", "y"), [["x", "y"], None], 2),
    ((2, 2, 2), ("a", "b", "c"), [["c", "a"]], 2),
    ((2, 2, 2), ("a", "b", "c"), [None, ["b", "a"]], 2),
    ((2, 2, 2), ("a", "b", "c"), ["c", "a"], 2),
    ((2, 4), ("x", "y"), ["y"], 2),
    ((4, 2), ("x", "y"), ["y", "x"], 2),
    # Unreduced axes (a fifth entry).
    ((2, 2), ("x", "y"), ["x"], 2, ["y"]),
    ((2, 2), ("x", "y"), [], 1, ["x"]),
    ((2, 2), ("x", "y"), [], 1, ["x", "y"]),
    ((2, 2, 2), ("a", "b", "c"), [None, "b"], 2, ["c"]),
    ((2, 2, 2), ("a", "b", "c"), ["c"], 2, ["a"]),
]

_JAX_SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax, numpy as np
    from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P
    out = []
    for shape, names, spec, rank, *unreduced in json.loads(sys.argv[1]):
      devices = np.array(jax.devices()[:int(np.prod(shape))]).reshape(shape)
      spec = [tuple(s) if isinstance(s, list) else s for s in spec]
      mesh = Mesh(devices, tuple(names),
                  axis_types=(AxisType.Explicit,) * len(names))
      ns = NamedSharding(mesh, P(*spec, unreduced=set(*unreduced)))
      out.append(str(ns._to_xla_hlo_sharding(rank)))
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def jax_shardings():
  pytest.importorskip("jax")
  env = {k: v for k, v in os.environ.items()
         if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
  done = subprocess.run(
      [sys.executable, "-c", _JAX_SCRIPT, json.dumps(_JAX_CASES)],
      capture_output=True, text=True, env=env, timeout=300, check=True)
  return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", range(len(_JAX_CASES)))
def test_matches_jaxlib(jax_shardings, case):
  shape, names, spec, rank, *unreduced = _JAX_CASES[case]
  mesh = _mesh(**dict(zip(names, shape)))
  dims = [tuple(s) if isinstance(s, list) else s for s in spec]
  dims += [None] * (rank - len(dims))
  ours = sharding_import.from_sdy(
      _sharding(*dims, unreduced=tuple(*unreduced)), mesh)
  theirs = HloSharding.parse(jax_shardings[case])
  assert ours == theirs, (str(ours), str(theirs))
  assert str(ours) == str(theirs)


# -- the import ----------------------------------------------------------------------


def _import(text: str):
  return stablehlo_to_hlo.stablehlo_to_hlo(
      mlir_text.parse_module(text, "<test>"))


def _by_target(module, target):
  return [i for i in module.entry_computation.instructions
          if i.opcode == O.kCustomCall and i.custom_call_target == target]


_GSPMD_MATMUL = """
module @m attributes {mhlo.num_partitions = 4 : i32} {
  func.func public @main(%a: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,2]<=[4]}"},
                         %b: tensor<4x6xf32> {mhlo.sharding = "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"})
      -> (tensor<8x6xf32> {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}"}) {
    %0 = stablehlo.sine %a : tensor<8x4xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %2 = stablehlo.dot_general %1, %b, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    return %2 : tensor<8x6xf32>
  }
}
"""

_SDY_MATMUL = """
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%a: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
                         %b: tensor<4x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>})
      -> (tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
    %0 = stablehlo.sine %a : tensor<8x4xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"y"}]> : tensor<8x4xf32>
    %2 = stablehlo.dot_general %1, %b, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    return %2 : tensor<8x6xf32>
  }
}
"""


@pytest.mark.parametrize("program", [_GSPMD_MATMUL, _SDY_MATMUL])
def test_both_forms_import_the_same_shardings(program):
  module = _import(program)
  entry = module.entry_computation
  params = entry.parameter_instructions
  assert str(params[0].sharding) == "{devices=[2,2]<=[4]}"
  assert str(params[1].sharding) == (
      "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
  (constraint,) = _by_target(module, "Sharding")
  assert str(constraint.sharding) == (
      "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
  assert entry.root_instruction.opcode == O.kDot
  assert str(entry.root_instruction.sharding) == (
      "{devices=[2,1,2]<=[4] last_tile_dim_replicate}")
  spmd_testing.check_partitioning(module, 4, rtol=1e-4, atol=1e-5)


_SDY_SHARD_MAP = """
module @m attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<16x2xf32>, tensor<8x4xf32>) {
    %0:3 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{}, {"y"}]>, <@mesh, [{"x"}, {}]>, <@mesh, [{"x"}, {"y"}]>] manual_axes={"x", "y"} (%arg1: tensor<4x2xf32>) {
      %1 = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
      ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
        %4 = stablehlo.add %arg2, %arg3 : tensor<f32>
        %5 = sdy.sharding_constraint %4 <@mesh, []> : tensor<f32>
        stablehlo.return %5 : tensor<f32>
      }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
      %2 = "stablehlo.all_gather"(%arg1) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<4x2xf32>) -> tensor<8x2xf32>
      %3 = "stablehlo.collective_permute"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 2], [2, 0], [1, 3], [3, 1]]> : tensor<4x2xi64>}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
      sdy.return %1, %2, %3 : tensor<4x2xf32>, tensor<8x2xf32>, tensor<4x2xf32>
    } : (tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<16x2xf32>, tensor<8x4xf32>)
    return %0#0, %0#1, %0#2 : tensor<4x4xf32>, tensor<16x2xf32>, tensor<8x4xf32>
  }
}
"""


def test_manual_computation_is_the_gspmd_manual_pattern():
  module = _import(_SDY_SHARD_MAP)
  shardings = {t: [str(i.sharding) for i in _by_target(module, t)]
               for t in ("Sharding", "SPMDFullToShardShape",
                         "SPMDShardToFullShape")}
  # What JAX's GSPMD lowering of the same shard_map has.
  assert shardings == {
      "Sharding": ["{devices=[2,2]<=[4]}", "{manual}", "{manual}",
                   "{manual}"],
      "SPMDFullToShardShape": ["{manual}"],
      "SPMDShardToFullShape": [
          "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
          "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
          "{devices=[2,2]<=[4]}"],
  }
  (to_shard,) = _by_target(module, "SPMDFullToShardShape")
  assert to_shard.shape.dimensions == (4, 2)
  # The body is manual, as Shardy's export marks it.
  body = [i for i in module.entry_computation.instructions
          if i.opcode in (O.kAllReduce, O.kAllGather, O.kCollectivePermute)]
  assert len(body) == 3 and all(str(i.sharding) == "{manual}" for i in body)
  # The constraint in the reduction's body is gone.
  for comp in module.computations:
    if comp is not module.entry_computation:
      assert all(i.opcode != O.kCustomCall for i in comp.instructions)
  x = np.arange(32, dtype=np.float32).reshape(8, 4)
  blocks = [[x[4 * (p // 2):4 * (p // 2) + 4, 2 * (p % 2):2 * (p % 2) + 2]
             for p in range(4)]]
  psum = np.concatenate([blocks[0][0] + blocks[0][2],
                         blocks[0][1] + blocks[0][3]], axis=1)
  gathered = np.concatenate([np.concatenate([blocks[0][0], blocks[0][1]]),
                             np.concatenate([blocks[0][2], blocks[0][3]])])
  swapped = np.concatenate([
      np.concatenate([blocks[0][2], blocks[0][3]], axis=1),
      np.concatenate([blocks[0][0], blocks[0][1]], axis=1)])
  spmd_testing.check_partitioning(module, 4, [x],
                                  expected=[psum, gathered, swapped])


def test_partial_results_shardings_leave_the_rest_to_propagation():
  module = _import("""
    module @m {
      sdy.mesh @mesh = <["i"=4]>
      func.func public @main(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}]>})
          -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}, tensor<8xf32>) {
        %0 = stablehlo.negate %a : tensor<8xf32>
        return %a, %0 : tensor<8xf32>, tensor<8xf32>
      }
    }""")
  root = module.entry_computation.root_instruction
  assert str(root.sharding) == "{{replicated}, {unknown}}"
  param = module.entry_computation.parameter_instructions[0]
  assert str(param.sharding) == "{devices=[4]<=[4]}"


def test_an_output_that_is_a_parameter_gets_a_copy():
  module = _import("""
    module @m {
      sdy.mesh @mesh = <["i"=4]>
      func.func public @main(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}]>})
          -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
        return %a : tensor<8xf32>
      }
    }""")
  root = module.entry_computation.root_instruction
  assert root.opcode == O.kCopy and str(root.sharding) == "{replicated}"
  assert str(root.operand(0).sharding) == "{devices=[4]<=[4]}"


def test_open_dimensions():
  module = _import("""
    module @m {
      sdy.mesh @mesh = <["x"=2, "y"=2]>
      func.func public @main(%a: tensor<8x4xf32>) -> tensor<8x4xf32> {
        %0 = sdy.sharding_constraint %a <@mesh, [{?}, {?}]> : tensor<8x4xf32>
        %1 = sdy.sharding_constraint %0 <@mesh, [{"x", ?}, {?}]> : tensor<8x4xf32>
        return %1 : tensor<8x4xf32>
      }
    }""")
  (call,) = _by_target(module, "Sharding")  # The first says nothing.
  # {"x", ?} keeps "x"; {?} is left to propagation.
  assert call.backend_config == "unspecified_dims=[1]"
  assert str(call.sharding) == (
      "{devices=[2,1,2]<=[4] last_tile_dim_replicate}")


def test_op_sharding_attributes():
  module = _import("""
    module @m {
      sdy.mesh @mesh = <["i"=4]>
      func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {
        %0 = stablehlo.negate %a {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"i"}]>]>} : tensor<8xf32>
        %1 = stablehlo.abs %0 {mhlo.sharding = "{replicated}"} : tensor<8xf32>
        return %1 : tensor<8xf32>
      }
    }""")
  negate, = [i for i in module.entry_computation.instructions
             if i.opcode == O.kNegate]
  assert str(negate.sharding) == "{devices=[4]<=[4]}"
  assert str(module.entry_computation.root_instruction.sharding) == (
      "{replicated}")


_PARTIAL_MANUAL = """
  module @m {
    sdy.mesh @mesh = <["x"=2, "y"=2]>
    func.func public @main(%a: tensor<8x4xf32>) -> tensor<4x4xf32> {
      %0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"x", ?}, {IN}]>] out_shardings=[<@mesh, [{?}, {?}]>] manual_axes={"x"} (%b: tensor<4xLOCALxf32>) {
        %1 = "stablehlo.all_reduce"(%b) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
        ^bb0(%x: tensor<f32>, %y: tensor<f32>):
          %2 = stablehlo.add %x, %y : tensor<f32>
          stablehlo.return %2 : tensor<f32>
        }) : (tensor<4xLOCALxf32>) -> tensor<4xLOCALxf32>
        sdy.return %1 : tensor<4xLOCALxf32>
      } : (tensor<8x4xf32>) -> tensor<4x4xf32>
      return %0 : tensor<4x4xf32>
    }
  }"""


def test_partially_manual_without_automatic_splits_is_fully_manual():
  module = _import(_PARTIAL_MANUAL.replace("{IN}", "{?}").replace(
      "LOCAL", "4"))
  (to_shard,) = _by_target(module, "SPMDFullToShardShape")
  assert str(to_shard.sharding) == "{manual}"
  assert str(to_shard.operand(0).sharding) == (
      "{devices=[2,1,2]<=[4] last_tile_dim_replicate}")
  x = np.arange(32, dtype=np.float32).reshape(8, 4)
  spmd_testing.check_partitioning(module, 4, [x], expected=[x[:4] + x[4:]])


def test_partially_manual_and_sdy_collectives_are_unimplemented():
  with pytest.raises(support.UnimplementedError,
                     match="partially manual .* automatic axes y"):
    _import(_PARTIAL_MANUAL.replace("{IN}", '{"y"}').replace("LOCAL", "2"))
  with pytest.raises(support.UnimplementedError, match="sdy.all_gather"):
    _import("""
      module @m {
        sdy.mesh @mesh = <["x"=2]>
        func.func public @main(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<8xf32> {
          %0 = sdy.all_gather [{"x"}] %a out_sharding=<@mesh, [{}]> : tensor<8xf32>
          return %0 : tensor<8xf32>
        }
      }""")


def test_programs_without_shardings_import_as_before():
  module = _import("""
    func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
      %0 = stablehlo.negate %a : tensor<4xf32>
      return %0 : tensor<4xf32>
    }""")
  assert all(i.sharding is None
             for i in module.entry_computation.instructions)


@pytest.mark.parametrize("annotation", [
    'mhlo.sharding = "{maximal device=1}"',
    "sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[1]>, []>]>",
])
def test_a_call_without_results_keeps_its_sharding(annotation):
  # jax.debug.print under jit over several devices: a host callback with no
  # results, annotated to run on one device.
  module = _import(f"""
    module @m attributes {{mhlo.num_partitions = 2 : i32}} {{
      func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {{
        stablehlo.custom_call @print(%a) {{has_side_effect = true, {annotation}}} : (tensor<8xf32>) -> ()
        return %a : tensor<8xf32>
      }}
    }}""")
  call, = _by_target(module, "print")
  assert str(call.sharding) == "{maximal device=1}"
