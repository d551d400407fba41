"""The CPU opcode coverage table."""

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service.cpu import coverage


def test_every_opcode_has_a_status_and_reason():
  rows = coverage.table()
  assert len(rows) == len(HloOpcode)
  for name, status, detail in rows:
    assert status in (coverage.CODEGEN, coverage.THUNK,
                      coverage.UNIMPLEMENTED), name
    assert detail, name


def test_core_opcodes():
  status = {name: s for name, s, _ in coverage.table()}
  for name in ("fusion", "reduce", "dynamic-update-slice", "broadcast",
               "transpose", "slice", "pad", "concatenate", "iota", "reverse",
               "dynamic-slice", "map", "add", "exponential", "convert",
               "select", "reshape"):
    assert status[name] == coverage.CODEGEN, name
  for name in ("while", "conditional", "custom-call", "tuple",
               "get-tuple-element", "bitcast", "parameter", "call"):
    assert status[name] == coverage.THUNK, name
  assert status["infeed"] == coverage.UNIMPLEMENTED


def test_cli_prints_markdown(capsys):
  assert coverage.main(["--markdown"]) == 0
  out = capsys.readouterr().out
  assert out.startswith("| opcode | status | detail |")
  assert "`while`" in out and "(of " in out
