"""`status_table --where`: every piece of an op, found by file and line."""

import contextlib
import io

from stablehlo.tools import status_table
from xla.tools import op_locations


def _where(name):
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    rc = status_table.main(["--where", name])
  return rc, out.getvalue()


def test_slice_names_the_file_of_every_slot():
  rc, text = _where("stablehlo.slice")
  assert rc == 0
  expected = {
      "verifier": "stablehlo/_src/ops/",
      "pretty parse": "stablehlo/_src/text/",
      "interpreter": "stablehlo/_src/interpreter/",
      "HLO lowering": "xla/translate/",
      "HLO evaluator": "xla/hlo/evaluator/",
      "CPU emitter": "xla/service/cpu/",
  }
  for label, path in expected.items():
    line = next(l for l in text.splitlines() if l.strip().startswith(label))
    assert path in line and ".py:" in line, line


def test_opcode_mapping():
  assert op_locations.hlo_opcode("stablehlo.dot_general").value == "dot"
  assert op_locations.hlo_opcode("stablehlo.dynamic_update_slice").value == (
      "dynamic-update-slice")
  assert op_locations.hlo_opcode("chlo.erf") is None


def test_unknown_op_is_an_error():
  rc, _ = _where("stablehlo.no_such_op")
  assert rc == 1
