"""PJRT ABI fuzz kinds about values: BufferFromHostBuffer and ToHostBuffer
arguments, device ids and assignments, programs, formats and compile
options, client options. (The registry and what tiers and expectations
mean: abi_fuzz_kinds.py, abi_fuzz_cases.py.)
"""

from __future__ import annotations

import ctypes
import random

import numpy as np

import pjrt
import support
from pjrt._src import abi
from pjrt._src import loader
from pjrt.tools import abi_fuzz_fixture as fixture_lib
from pjrt.tools.abi_fuzz_fixture import Skip
from pjrt.tools.abi_fuzz_fixture import Wrong
from pjrt.tools.abi_fuzz_kinds import ANY
from pjrt.tools.abi_fuzz_kinds import CONTRACT
from pjrt.tools.abi_fuzz_kinds import ERROR
from pjrt.tools.abi_fuzz_kinds import HARDENING
from pjrt.tools.abi_fuzz_kinds import kind
from pjrt.tools.abi_fuzz_kinds import OK

# -- BufferFromHostBuffer. ----------------------------------------------------


def _host_kind(name, tier, expect, doc, make_fields, params=None):
  def run(fx, p):
    args = fixture_lib.host_args(fx, **make_fields(fx, p))
    fx.call("Client_BufferFromHostBuffer", args)
    try:
      fx.finish_event(args.done_with_host_buffer, check=True)
      args.done_with_host_buffer = None
      fixture_lib.ready(fx, args.buffer)
    finally:
      fixture_lib.host_cleanup(fx)(args)
  kind(f"host_buffer.{name}", tier, expect, doc, params)(run)


_host_kind("type_invalid", CONTRACT, ERROR, "element type INVALID (0)",
           lambda fx, p: {"type": 0})
_host_kind("type_out_of_range", CONTRACT, ERROR,
           "an element type number PJRT does not define",
           lambda fx, p: {"type": p["type"]},
           lambda rng: {"type": rng.choice([-1, 99, 1000,
                                            fixture_lib.INT_MAX])})
_host_kind("type_token", CONTRACT, ERROR, "element type TOKEN",
           lambda fx, p: {"type": abi.BufferType.TOKEN})
_host_kind("negative_dim", CONTRACT, ERROR, "a negative dimension",
           lambda fx, p: {"dims": p["dims"], "num_dims": len(p["dims"])},
           lambda rng: {"dims": rng.choice([[-1], [2, -2], [-(1 << 62)]])})
_host_kind("overflowing_dims", CONTRACT, ERROR,
           "dimensions whose product overflows int64",
           lambda fx, p: {"dims": p["dims"], "num_dims": len(p["dims"])},
           lambda rng: {"dims": rng.choice([[1 << 40, 1 << 40],
                                            [1 << 62, 8], [1 << 32] * 3])})
_host_kind("strides_count_mismatch", CONTRACT, ERROR,
           "num_byte_strides differs from num_dims",
           lambda fx, p: {"byte_strides": [4, 4], "num_byte_strides": 2})
_host_kind("strides_odd", CONTRACT, ANY,
           "zero, negative (allowed by the header) or misaligned byte "
           "strides for an f32[4]; data points 32 bytes into a 64-byte "
           "array, so any of them stays inside it",
           lambda fx, p: {"byte_strides": [p["stride"]],
                          "num_byte_strides": 1, "data": fixture_lib.MIDDLE},
           lambda rng: {"stride": rng.choice([0, 1, 3, -4, 8])})
_host_kind("semantics_invalid", CONTRACT, ANY,
           "a host_buffer_semantics value PJRT does not define",
           lambda fx, p: {"host_buffer_semantics": p["semantics"]},
           lambda rng: {"semantics": rng.choice([-1, 4, 99])})
_host_kind("no_device_no_memory", HARDENING, ERROR,
           "neither a device nor a memory (device is required when memory "
           "is NULL)",
           lambda fx, p: {"device": None, "memory": None})
_host_kind("zero_size", CONTRACT, OK, "a shape with a zero dimension",
           lambda fx, p: {"dims": p["dims"], "num_dims": len(p["dims"])},
           lambda rng: {"dims": rng.choice([[0], [0, 4], [4, 0, 2]])})
_host_kind("rank_0", CONTRACT, OK, "a scalar (num_dims 0, dims NULL)",
           lambda fx, p: {"dims": None, "num_dims": 0})
_host_kind("dims_null", HARDENING, ERROR, "num_dims 1 with dims NULL",
           lambda fx, p: {"dims": None, "num_dims": 1})
_host_kind("data_null", HARDENING, ERROR, "data NULL for an f32[4]",
           lambda fx, p: {"data": None})


@kind("host_buffer.device_and_other_memory", CONTRACT, ANY,
      "a device and a memory of another device")
def _(fx, p):
  del p
  if len(fx.devices) < 2:
    raise Skip("one addressable device")
  memory = fx.devices[1].default_memory().handle
  args = fixture_lib.host_args(fx, memory=memory)
  fx.call("Client_BufferFromHostBuffer", args)
  fixture_lib.host_cleanup(fx)(args)


# -- ToHostBuffer. ------------------------------------------------------------


def _to_host_kind(name, expect, doc, make_fields, params=None):
  def run(fx, p):
    out = np.zeros(1024, np.float32)  # 4 KiB: more than any layout needs.
    fields = dict(src=fx.buffer.handle, dst=out.ctypes.data, dst_size=16)
    fields.update(make_fields(fx, p))
    args = fx.args("Buffer_ToHostBuffer", **fields)
    fx.call("Buffer_ToHostBuffer", args)
    fx.finish_event(args.event, check=True)
  kind(f"to_host.{name}", CONTRACT, expect, doc, params)(run)


def tiled_layout(minor_to_major):
  layout = abi.make_args(abi.PJRT_Buffer_MemoryLayout,
                         type=abi.MemoryLayoutType.TILED)
  m2m = (ctypes.c_int64 * max(1, len(minor_to_major)))(*minor_to_major)
  layout.tiled.struct_size = abi.PJRT_Buffer_MemoryLayout_Tiled.STRUCT_SIZE
  layout.tiled.minor_to_major = ctypes.cast(m2m, abi.INT64_P)
  layout.tiled.minor_to_major_size = len(minor_to_major)
  abi.keep_alive(layout, m2m)
  return layout


def strides_layout(strides):
  layout = abi.make_args(abi.PJRT_Buffer_MemoryLayout,
                         type=abi.MemoryLayoutType.STRIDES)
  arr = (ctypes.c_int64 * max(1, len(strides)))(*strides)
  layout.strides.struct_size = (
      abi.PJRT_Buffer_MemoryLayout_Strides.STRUCT_SIZE)
  layout.strides.byte_strides = ctypes.cast(arr, abi.INT64_P)
  layout.strides.num_byte_strides = len(strides)
  abi.keep_alive(layout, arr)
  return layout


@kind("to_host.layout_column_major", CONTRACT, ANY,
      "ToHostBuffer of an f32[2,3] into a column-major host layout: an "
      "error, or the data transposed")
def _(fx, p):
  del p
  b = fx.client.buffer_from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
  out = np.zeros(64, np.float32)
  args = fx.args("Buffer_ToHostBuffer", src=b.handle, dst=out.ctypes.data,
                 dst_size=24, host_layout=tiled_layout([0, 1]))
  fx.call("Buffer_ToHostBuffer", args)
  fx.finish_event(args.event, check=True)
  want = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
  if out[:6].tolist() != want:
    raise Wrong(f"wrote {out[:6].tolist()}, column-major is {want} (the "
                "host layout was ignored)")


_to_host_kind("dst_too_small", ERROR, "dst_size smaller than the data",
              lambda fx, p: {"dst_size": p["size"]},
              lambda rng: {"size": rng.choice([0, 1, 8, 15])})
_to_host_kind("layout_bad_dimension", ERROR,
              "a host layout whose minor_to_major names dimension 5 of a "
              "rank-1 buffer", lambda fx, p: {"host_layout":
                                               tiled_layout([5])})
_to_host_kind("layout_wrong_rank", ERROR,
              "a host layout of rank 2 for a rank-1 buffer",
              lambda fx, p: {"host_layout": tiled_layout([0, 1])})
_to_host_kind("layout_strides_wrong_count", ERROR,
              "a strides host layout with 3 strides for a rank-1 buffer",
              lambda fx, p: {"host_layout": strides_layout([4, 4, 4])})


def bad_type_layout(layout_type):
  layout = tiled_layout([0])
  layout.type = layout_type
  return layout


_to_host_kind("layout_type_invalid", ERROR,
              "a host layout of a type PJRT does not define",
              lambda fx, p: {"host_layout": bad_type_layout(p["type"])},
              lambda rng: {"type": rng.choice([-1, 2, 77])})


# -- Devices and device assignments. -----------------------------------------


@kind("lookup.device_id", CONTRACT, ERROR,
      "Client_LookupDevice of an id no device has",
      lambda rng: {"which": rng.choice(["-1", "min", "past_last", "max"])})
def _(fx, p):
  ids = [d.id for d in fx.client.devices()]
  device_id = {"-1": -1, "min": fixture_lib.INT_MIN, "past_last": max(ids) + 1,
               "max": fixture_lib.INT_MAX}[p["which"]]
  if device_id in ids:
    raise Skip(f"a device has id {device_id}")
  fx.call("Client_LookupDevice", fx.args(
      "Client_LookupDevice", client=fx.client.handle, id=device_id))


@kind("lookup.addressable_device_id", CONTRACT, ERROR,
      "Client_LookupAddressableDevice of a local id no device has",
      lambda rng: {"which": rng.choice(["-1", "past_last", "max"])})
def _(fx, p):
  ids = [d.local_hardware_id for d in fx.devices]
  local_id = {"-1": -1, "past_last": max(ids) + 1,
              "max": fixture_lib.INT_MAX}[p["which"]]
  fx.call("Client_LookupAddressableDevice", fx.args(
      "Client_LookupAddressableDevice", client=fx.client.handle,
      local_hardware_id=local_id))


def _assignment(fx, replicas, partitions, size):
  out = (ctypes.c_int * 64)()
  fx.call("Client_DefaultDeviceAssignment", fx.args(
      "Client_DefaultDeviceAssignment", client=fx.client.handle,
      num_replicas=replicas, num_partitions=partitions,
      default_assignment_size=size, default_assignment=out))
  return list(out[:max(0, min(size, 64))])


@kind("assignment.size_too_small", CONTRACT, ERROR,
      "default_assignment_size smaller than replicas x partitions")
def _(fx, p):
  del p
  _assignment(fx, 2, 1, 1)


@kind("assignment.zero_or_negative", CONTRACT, ERROR,
      "zero or negative replicas / partitions",
      lambda rng: {"replicas": rng.choice([0, 1, -1]),
                   "partitions": rng.choice([0, -1])} if rng.random() < 0.5
      else {"replicas": rng.choice([0, -1]), "partitions": 1})
def _(fx, p):
  _assignment(fx, p["replicas"], p["partitions"], 1)


@kind("assignment.more_than_devices", CONTRACT, ERROR,
      "more replicas x partitions than devices")
def _(fx, p):
  del p
  n = len(fx.client.devices())
  ids = _assignment(fx, n + 1, 1, n + 1)
  raise Wrong(f"returned {ids} for {n + 1} replicas on {n} devices")


# -- Compile. ---------------------------------------------------------------


def _compile(fx, code, fmt=b"mlir", options=None):
  args = fixture_lib.compile_args(fx, code, fmt, options)
  fx.call("Client_Compile", args)
  fx.quietly("LoadedExecutable_Destroy", executable=args.executable)


def _seeded(rng):
  return {"seed": rng.randrange(1 << 30)}


@kind("compile.format", CONTRACT, ERROR, "an unknown or mismatched format",
      lambda rng: {"format": rng.choice(["", "mlirr", "hlo",
                                         "hlo_with_config", "MLIR"])})
def _(fx, p):
  _compile(fx, fixture_lib.ADD_F32.encode(), p["format"].encode())


@kind("compile.random_bytes", CONTRACT, ERROR,
      "random bytes (0..512) as an MLIR program", _seeded)
def _(fx, p):
  r = random.Random(p["seed"])
  _compile(fx, bytes(r.randrange(256) for _ in range(r.randrange(513))))


@kind("compile.bytecode_magic_then_garbage", CONTRACT, ERROR,
      "the MLIR bytecode magic followed by random bytes", _seeded)
def _(fx, p):
  r = random.Random(p["seed"])
  _compile(fx, b"ML\xefR" + bytes(r.randrange(256)
                                  for _ in range(r.randrange(1, 257))))


@kind("compile.truncated_text", CONTRACT, ERROR,
      "a valid program cut short (before its last brace)", _seeded)
def _(fx, p):
  text = fixture_lib.ADD_F32.strip().encode()
  cut = random.Random(p["seed"]).randrange(len(text) - 1)
  _compile(fx, text[:cut])


@kind("compile.mutated_text", CONTRACT, ANY,
      "a valid program with 1..8 random bytes replaced", _seeded)
def _(fx, p):
  r = random.Random(p["seed"])
  text = bytearray(fixture_lib.ADD_F32.encode())
  for _ in range(r.randrange(1, 9)):
    text[r.randrange(len(text))] = r.randrange(256)
  _compile(fx, bytes(text))


def _add_bytecode(fx) -> bytes:
  # pylint: disable=g-import-not-at-top
  from stablehlo.text import parse_module
  from stablehlo.vhlo import portable
  target = fx.plugin.stablehlo_current_version
  target = ".".join(map(str, target)) if target else "1.0.0"
  module = parse_module(fixture_lib.ADD_F32)
  try:
    return portable.serialize_portable_artifact(module, target)
  except support.XlaError:  # A plugin newer than our StableHLO.
    return portable.serialize_portable_artifact(module, "1.0.0")


@kind("compile.bytecode", CONTRACT, OK,
      "the program as a portable artifact at the plugin's StableHLO version")
def _(fx, p):
  del p
  _compile(fx, _add_bytecode(fx))


@kind("compile.truncated_bytecode", CONTRACT, ERROR,
      "a portable artifact cut short", _seeded)
def _(fx, p):
  data = _add_bytecode(fx)
  _compile(fx, data[:random.Random(p["seed"]).randrange(4, len(data) - 1)])


@kind("compile.options_random_bytes", CONTRACT, ANY,
      "random bytes as the CompileOptionsProto", _seeded)
def _(fx, p):
  r = random.Random(p["seed"])
  _compile(fx, fixture_lib.ADD_F32.encode(),
           options=bytes(r.randrange(256) for _ in range(r.randrange(1, 65))))


@kind("compile.options_truncated", CONTRACT, ANY,
      "a valid CompileOptionsProto cut short", _seeded)
def _(fx, p):
  data = pjrt.compile_options()
  _compile(fx, fixture_lib.ADD_F32.encode(),
           options=data[:random.Random(p["seed"]).randrange(1, len(data))])


@kind("compile.options_empty", CONTRACT, ANY,
      "an empty CompileOptionsProto (compile_options NULL, size 0)")
def _(fx, p):
  del p
  args = fixture_lib.compile_args(fx)
  args.compile_options, args.compile_options_size = None, 0
  fx.call("Client_Compile", args)
  fx.quietly("LoadedExecutable_Destroy", executable=args.executable)


@kind("compile.options_invalid", CONTRACT, ERROR,
      "options the devices cannot satisfy",
      lambda rng: {"which": rng.choice(["zero_replicas", "many_replicas",
                                        "unknown_device"])})
def _(fx, p):
  n = len(fx.client.devices())
  options = {
      "zero_replicas": lambda: pjrt.compile_options(num_replicas=0),
      "many_replicas": lambda: pjrt.compile_options(num_replicas=n + 1),
      "unknown_device": lambda: pjrt.compile_options(
          device_assignment=[[max(d.id for d in fx.client.devices()) +
                              1000]]),
  }[p["which"]]()
  _compile(fx, fixture_lib.ADD_F32.encode(), options=options)


@kind("compile.options_assignment_mismatch", CONTRACT, ANY,
      "num_replicas 1 with a device assignment of 2 replicas")
def _(fx, p):
  del p
  _compile(fx, fixture_lib.ADD_F32.encode(), options=pjrt.compile_options(
      num_replicas=1, device_assignment=[[0], [0]]))


@kind("compile.null_program", HARDENING, ERROR, "program NULL")
def _(fx, p):
  del p
  args = fixture_lib.compile_args(fx)
  args.program = None
  fx.call("Client_Compile", args)


@kind("compile.null_code", HARDENING, ERROR,
      "program code NULL with code_size > 0")
def _(fx, p):
  del p
  args = fixture_lib.compile_args(fx)
  args.program.contents.code = None
  fx.call("Client_Compile", args)


# -- Client_Create. -----------------------------------------------------------


def _create_client(fx, options, count=None, null=False):
  named = loader.encode_named_values(options)
  args = fx.args("Client_Create", create_options=None if null else named,
                 num_options=len(options) if count is None else count)
  fx.call("Client_Create", args)
  if args.client:
    fx.quietly("Client_Destroy", client=args.client)


@kind("client_create.unknown_options", CONTRACT, ANY,
      "Client_Create with options the plugin does not know",
      lambda rng: {"value": rng.choice(["s", 7, -1, 2.5, True, [1, 2]])})
def _(fx, p):
  _create_client(fx, {"pjrt_fuzz_no_such_option": p["value"]})


@kind("client_create.null_options", HARDENING, ERROR,
      "num_options 2 with create_options NULL")
def _(fx, p):
  del p
  _create_client(fx, {}, count=2, null=True)
