"""Tests for the bytecode reader: the VHLO corpus and corrupted inputs."""

import random

import pytest

import support
from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import testdata
from stablehlo._src.bytecode import tree
from support import env

_FILES = testdata.corpus_files()
_needs_corpus = pytest.mark.skipif(
    not _FILES, reason=env.missing_corpus_reason("vhlo"))


@_needs_corpus
@pytest.mark.parametrize("path,target", _FILES, ids=lambda x: getattr(x, "name", ""))
def test_reads_corpus(path, target):
  f = reader.read(path.read_bytes())
  assert f.producer == "StableHLO_v%d.%d.%d" % target
  assert f.version == testdata.expected_bytecode_version(target)
  ops = list(f.ops())
  assert f.root.name == "builtin.module"
  assert len(ops) > 500
  for op in ops[1:]:
    assert op.name.startswith("vhlo."), op.name
    assert op.name.rsplit("_v", 1)[1].isdigit(), op.name
  # Every operand refers to a defined, typed value.
  for op in ops:
    for value in op.operands:
      assert value.type is not None and value.id >= 0
  # Properties exactly from bytecode version 5.
  has_props = any(op.properties is not None for op in ops)
  assert has_props == (f.version >= 5)


@_needs_corpus
def test_func_properties_are_sorted_attribute_references():
  path = [p for p, t in _FILES if t >= (1, 0, 0)][0]
  f = reader.read(path.read_bytes())
  func = next(op for op in f.ops() if op.name == "vhlo.func_v1")
  # arg_attrs, function_type, res_attrs, sym_name, sym_visibility.
  kinds = [v.kind for v in func.properties.values]
  assert kinds == ["ArrayV1Attr", "TypeV1Attr", "ArrayV1Attr",
                   "StringV1Attr", "StringV1Attr"]


@_needs_corpus
def test_old_versions_use_attribute_dictionaries():
  path = [p for p, t in _FILES if t == (0, 9, 0)][0]
  f = reader.read(path.read_bytes())
  func = next(op for op in f.ops() if op.name == "vhlo.func_v1")
  names = [n.fields[0] for n, _ in func.attrs.fields[0]]
  assert "sym_name" in names and "function_type" in names


def test_every_bc_file_reads():
  files = testdata.all_bc_files()
  if not files:
    pytest.skip(env.missing_corpus_reason("vhlo"))
  for path in files:
    assert isinstance(reader.read(path.read_bytes()), tree.BytecodeFile)


@pytest.mark.parametrize("data", [b"", b"ML", b"MLIR", b"ML\xefR",
                                  b"ML\xefR\x0d", b"ML\xefR\x0dabc"])
def test_short_inputs(data):
  with pytest.raises(support.DataLossError):
    reader.read(data)


def test_future_version_is_invalid_argument():
  with pytest.raises(support.InvalidArgumentError, match="version 7"):
    reader.read(b"ML\xefR\x0fprod\x00")


def _mutations(data: bytes, count: int, seed: int):
  rng = random.Random(seed)
  for i in range(count):
    choice = i % 4
    if choice == 0:  # Truncate.
      yield data[:rng.randrange(len(data))]
    elif choice == 1:  # Flip one byte.
      pos = rng.randrange(len(data))
      yield data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1:]
    elif choice == 2:  # Overwrite a few bytes with random values.
      buf = bytearray(data)
      for _ in range(rng.randrange(1, 4)):
        buf[rng.randrange(len(buf))] = rng.randrange(256)
      yield bytes(buf)
    else:  # Delete or duplicate a slice.
      a = rng.randrange(len(data))
      b = min(len(data), a + rng.randrange(1, 16))
      yield (data[:a] + data[b:]) if rng.random() < 0.5 else (
          data[:b] + data[a:b] + data[b:])


def _fuzz_inputs():
  files = testdata.all_bc_files()
  small = [p for p in files if p.name.startswith("vhlo_emit")]
  big = [p for p, t in _FILES if t in ((0, 9, 0), (1, 20, 0))]
  return small + big


@pytest.mark.parametrize("index", range(3))
def test_fuzzed_inputs_raise_only_status_errors(index):
  inputs = _fuzz_inputs()
  if index >= len(inputs):
    pytest.skip(env.missing_corpus_reason("vhlo"))
  data = inputs[index].read_bytes()
  for mutated in _mutations(data, 100, seed=index):
    try:
      reader.read(mutated)
    except (support.DataLossError, support.InvalidArgumentError):
      pass
