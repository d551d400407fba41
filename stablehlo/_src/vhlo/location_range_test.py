"""Tests of builtin FileLineColRange locations (`"f":1:2 to 3:4`)."""

import pytest

from stablehlo._src.bytecode import reader
from stablehlo._src.bytecode import writer
from stablehlo._src.ir import attributes as a
from stablehlo._src.vhlo import builtin_conversion as bc


@pytest.mark.parametrize("numbers,raw,text", [
    ((0, 0, 0, 0), (), '"f.py":0:0'),
    ((7, 0, 7, 0), (7,), '"f.py":7:0'),
    ((7, 3, 7, 3), (7, 3), '"f.py":7:3'),
    ((7, 3, 7, 9), (7, 3, 9), '"f.py":7:3 to :9'),
    ((7, 3, 8, 2), (7, 3, 8, 2), '"f.py":7:3 to 8:2'),
    # MLIR's writer would drop the end column here; ours keeps it.
    ((7, 0, 7, 12), (7, 0, 12), '"f.py":7:0 to :12'),
])
def test_range_forms(numbers, raw, text):
  attr = bc.file_range("f.py", *numbers)
  assert attr.fields == (bc.string("f.py"), raw)
  assert bc.range_numbers(attr) == numbers
  assert bc.location_text(attr) == text
  loc = bc.location_from_builtin(attr)
  assert (loc.kind, loc.filename, loc.line, loc.col, loc.end_line,
          loc.end_col) == ("file", "f.py") + numbers
  assert loc.text == text
  assert bc.location_to_builtin(loc) == attr


def test_plain_file_location_keeps_its_kind():
  loc = a.Location("file", "g.py", 3, 4, text='"g.py":3:4')
  assert bc.location_to_builtin(loc).kind == "FileLineColLoc"


@pytest.mark.parametrize("text", [
    '"n"("f.py":4:19 to 5:8)',
    'callsite("f"("a.py":3:6 to :16) at "<module>"("b.py":6:6 to :60))',
])
def test_nested_range_text(text):
  attr = bc.location_to_builtin(a.Location("name", text=text))
  assert bc.location_text(attr) == text


def test_too_many_numbers():
  attr = bc.ba("FileLineColRange", bc.string("f"), (1, 2, 3, 4, 5))
  with pytest.raises(bc.ConversionError):
    bc.location_from_builtin(attr)




def test_bytecode_round_trip_and_jaxlib_agrees():
  jax_mlir = pytest.importorskip("jaxlib.mlir.ir")
  from jaxlib.mlir.dialects import stablehlo as jstablehlo  # pylint: disable=g-import-not-at-top
  from stablehlo._src import vhlo  # pylint: disable=g-import-not-at-top
  from stablehlo._src.text import parser  # pylint: disable=g-import-not-at-top
  cases = [(0, 0, 0, 0), (7, 0, 7, 0), (7, 3, 7, 9), (7, 3, 8, 2)]
  body = "\n".join(
      f"    %{i + 1} = stablehlo.negate %{i} : tensor<2xf32> "
      f"loc(\"n{i}\"(\"f.py\":{l}:{c} to {el}:{ec}))"
      for i, (l, c, el, ec) in enumerate(cases))
  text = ("func.func @main(%0: tensor<2xf32>) -> tensor<2xf32> {\n"
          f"{body}\n    func.return %{len(cases)} : tensor<2xf32>\n}}\n")
  module = parser.parse_module(text)
  data = vhlo.serialize_portable_artifact(module, "1.15.0")
  # The encoding survives our reader / writer unchanged.
  assert writer.write(reader.read(data)) == data
  with jax_mlir.Context() as ctx:
    jstablehlo.register_dialect(ctx)
    theirs = jstablehlo.deserialize_portable_artifact(ctx, data)
    ops = list(theirs.body.operations[0].regions[0].blocks[0].operations)
    got = [str(op.location) for op in ops[:len(cases)]]
  want = [f'loc("n{i}"({bc.location_text(bc.file_range("f.py", *n))}))'
          for i, n in enumerate(cases)]
  assert got == want
  back = vhlo.deserialize_portable_artifact(data)
  texts = [op.location.text for op in back.walk()
           if op.name == "stablehlo.negate"]
  assert texts == [w[4:-1] for w in want]
