"""Tests for the bytecode writer: round trips and byte identity."""

import pytest

import support
from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import testdata
from stablehlo._src.bytecode import text_dump
from stablehlo._src.bytecode import tree
from stablehlo._src.bytecode import writer
from support import env

_FILES = testdata.corpus_files()
_needs_corpus = pytest.mark.skipif(
    not _FILES, reason=env.missing_corpus_reason("vhlo"))


@_needs_corpus
@pytest.mark.parametrize("path,target", _FILES, ids=lambda x: getattr(x, "name", ""))
def test_round_trip_is_byte_identical(path, target):
  data = path.read_bytes()
  f = reader.read(data)
  out = writer.write(f)
  again = reader.read(out)
  assert text_dump.dump(again) == text_dump.dump(f)
  # Upstream's numbering and section order are reproduced exactly, at every
  # bytecode version of the corpus (0, 1, 3, 4 and 6).
  assert out == data


def test_other_bc_files_byte_identical():
  files = testdata.all_bc_files()
  if not files:
    pytest.skip(env.missing_corpus_reason("vhlo"))
  for path in files:
    data = path.read_bytes()
    assert writer.write(reader.read(data)) == data, path.name


@_needs_corpus
@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_rewrite_old_file_at_other_versions(version):
  path = [p for p, t in _FILES if t == (0, 10, 0)][0]
  f = reader.read(path.read_bytes())
  out = writer.write(f, version=version)
  again = reader.read(out)
  assert again.version == version
  assert text_dump.dump(again) == text_dump.dump(f)


@_needs_corpus
def test_properties_need_version_5():
  path = [p for p, t in _FILES if t == (1, 0, 0)][0]
  f = reader.read(path.read_bytes())
  with pytest.raises(support.InvalidArgumentError, match="properties"):
    writer.write(f, version=4)


def test_bad_version():
  with pytest.raises(support.InvalidArgumentError):
    writer.write(None, version=7)


@_needs_corpus
def test_producer_override():
  path = _FILES[-1][0]
  out = writer.write(reader.read(path.read_bytes()), producer="StableHLO_v9.9.9")
  assert reader.read(out).producer == "StableHLO_v9.9.9"


@_needs_corpus
def test_equal_locations_of_distinct_objects_share_an_entry():
  # Entries are numbered by content: ops whose file locations are equal but
  # distinct objects (file names too) are written as if they shared one.
  path = [p for p, t in _FILES if t == (1, 0, 0)][0]

  def with_locations(shared: bool):
    f = reader.read(path.read_bytes())
    interned = {}
    for i, op in enumerate(f.ops()):
      key = ("f.mlir", i % 5, 7)
      loc = tree.Attr("builtin", "FileLineColLoc", (
          tree.Attr("builtin", "StringAttr", (key[0],)),) + key[1:])
      op.location = interned.setdefault(key, loc) if shared else loc
    return f

  out = writer.write(with_locations(shared=False))
  assert out == writer.write(with_locations(shared=True))
  again = reader.read(out)
  assert text_dump.dump(again) == text_dump.dump(with_locations(shared=True))
  assert {(op.location.fields[1], op.location.fields[2])
          for op in again.ops()} == {(i, 7) for i in range(5)}
