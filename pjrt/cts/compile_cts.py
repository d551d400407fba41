"""Conformance: compiling valid and invalid programs, options and formats.

Invalid input must produce a PJRT error (mapped to a `support` error class
by its code), never a crash; these cases run as probes in a child process.
"""

import pytest

import pjrt
import support
from pjrt.cts import harness
from pjrt.cts import programs

_VALID = {
    "add": (programs.ADD_F32, 1),
    "dot": (programs.DOT_F32, 1),
    "reduce": (programs.REDUCE_SUM_F32, 1),
    "two_outputs": (programs.MULTIPLY_I32_AND_CONSTANT, 2),
    "no_parameters": (programs.CONSTANT_ONLY, 1),
}


@pytest.mark.parametrize("name", sorted(_VALID))
def test_compile_valid_program(client, name):
  program, num_outputs = _VALID[name]
  executable = client.compile(program)
  assert executable.num_outputs == num_outputs
  assert executable.num_replicas == 1
  assert executable.num_partitions == 1
  devices = executable.addressable_devices()
  assert len(devices) == 1 and devices[0] in client.addressable_devices()


def test_compile_program_as_bytes(client):
  executable = client.compile(programs.ADD_F32.encode("utf-8"))
  assert executable.num_outputs == 1


def test_compile_same_program_twice(client):
  first = client.compile(programs.ADD_F32)
  second = client.compile(programs.ADD_F32)
  assert first.handle != second.handle


def test_compile_for_each_device(client):
  for device in client.addressable_devices():
    options = pjrt.compile_options(device_assignment=[[device.id]])
    executable = client.compile(programs.ADD_F32, compile_options=options)
    assert executable.addressable_devices() == [device]
    assert executable.device_assignment() == [[device.id]]


def test_compile_replicated(client):
  devices = client.addressable_devices()
  if len(devices) < 2:
    pytest.skip("needs two addressable devices")
  options = pjrt.compile_options(
      num_replicas=2, device_assignment=[[d.id] for d in devices[:2]])
  executable = client.compile(programs.ADD_F32, compile_options=options)
  assert executable.num_replicas == 2
  assert set(executable.addressable_devices()) == set(devices[:2])


def test_executable_output_metadata(client):
  executable = client.compile(programs.MULTIPLY_I32_AND_CONSTANT)
  try:
    types = executable.output_element_types()
    shapes = executable.output_shapes()
  except support.UnimplementedError:
    pytest.skip("no PJRT_Executable_OutputElementTypes / OutputDimensions")
  assert types == [pjrt.BufferType.S32, pjrt.BufferType.F64]
  assert shapes == [(2, 3), ()]


def test_executable_name_and_fingerprint(client):
  executable = client.compile(programs.ADD_F32)
  assert isinstance(executable.name, str)
  try:
    fingerprint = executable.fingerprint
  except support.UnimplementedError:
    pytest.skip("no executable fingerprint")
  assert isinstance(fingerprint, bytes)


_INVALID_PROGRAMS = [
    "compile.empty_program",
    "compile.not_mlir",
    "compile.binary_garbage",
    "compile.no_main",
    "compile.unknown_op",
    "compile.shape_mismatch",
    "compile.wrong_return_type",
]


@pytest.mark.parametrize("name", _INVALID_PROGRAMS, ids=harness.probe_id)
def test_invalid_program_is_an_error(probe, name):
  harness.expect_error(probe(name))


@pytest.mark.parametrize("name", [
    "compile.unknown_format",
    "compile.empty_format",
    "compile.hlo_format_with_mlir_code",
], ids=harness.probe_id)
def test_invalid_format_is_an_error(probe, name):
  harness.expect_error(probe(name), {support.StatusCode.INVALID_ARGUMENT,
                                     support.StatusCode.UNIMPLEMENTED})


@pytest.mark.parametrize("name", [
    "compile.garbage_options",
    "compile.more_replicas_than_devices",
    "compile.zero_replicas",
    "compile.unknown_device_in_assignment",
], ids=harness.probe_id)
def test_invalid_options_are_an_error(probe, name):
  harness.expect_error(probe(name), harness.BAD_INPUT_CODES)
