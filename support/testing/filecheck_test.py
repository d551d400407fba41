"""Tests for the FileCheck engine."""

import pytest

from support.testing import filecheck as fc

OUT = """\
func @f {
  %a = add(%x, %y)
  %b = multiply(%a, %a)
  return %b
}
func @g {
  %c = subtract(%x, %y)
}
"""


def _ok(check, out=OUT, **kw):
  fc.filecheck(out, check, **kw)


def _bad(check, match, out=OUT, **kw):
  with pytest.raises(fc.FileCheckError, match=match):
    fc.filecheck(out, check, **kw)


def test_check_in_order():
  _ok("CHECK: add\nCHECK: multiply\nCHECK: return")
  _bad("CHECK: multiply\nCHECK: add", "CHECK .*'add' not found")


def test_check_may_continue_on_the_same_line():
  _ok("CHECK: %b = multiply\nCHECK: %a, %a")
  _bad("CHECK: %a, %a\nCHECK: %b = multiply", "not found")


def test_next_same_empty():
  _ok("CHECK: add\nCHECK-NEXT: multiply\nCHECK-SAME: (%a, %a)")
  _bad("CHECK: add\nCHECK-NEXT: return", "CHECK-NEXT.*next line")
  _bad("CHECK: multiply\nCHECK-SAME: %x", "CHECK-SAME")
  _ok("CHECK: subtract\nCHECK-NEXT: }\nCHECK-EMPTY:", out=OUT + "\nmore\n")
  _bad("CHECK: add\nCHECK-EMPTY:", "empty line")


def test_not_is_bounded_by_the_next_match():
  _ok("CHECK: @f\nCHECK-NOT: subtract\nCHECK: return")
  _bad("CHECK: @f\nCHECK-NOT: multiply\nCHECK: return", "CHECK-NOT")
  # A trailing NOT reaches the end of the output.
  _bad("CHECK: @f\nCHECK-NOT: subtract", "CHECK-NOT.*subtract")
  _ok("CHECK: @g\nCHECK-NOT: add")


def test_dag_any_order_without_overlap():
  _ok("CHECK-DAG: multiply\nCHECK-DAG: add\nCHECK: return")
  _bad("CHECK-DAG: %a\nCHECK-DAG: %a\nCHECK-DAG: %a\nCHECK-DAG: %a\n"
       "CHECK-DAG: %a", "CHECK-DAG.*not found")
  # The position after a DAG run is its last match: `return` follows.
  _bad("CHECK-DAG: return\nCHECK-DAG: add\nCHECK: multiply", "not found")


def test_label():
  _ok("CHECK-LABEL: @g\nCHECK: subtract")
  _bad("CHECK-LABEL: @g\nCHECK: add", "not found")


def test_regex_and_variables():
  _ok("CHECK: %[[A:[a-z]+]] = add\nCHECK: multiply(%[[A]], %[[A]])")
  _ok("CHECK: {{^}}  %b = {{mul.*}}(")
  _bad("CHECK: %[[A:[a-z]+]] = add\nCHECK: subtract(%[[A]]", "not found")
  # Same-line back reference.
  _ok("CHECK: multiply(%[[V:[a-z]]], %[[V]])")
  _bad("CHECK: add(%[[V:[a-z]]], %[[V]])", "not found")
  _bad("CHECK: [[UNDEFINED]]", "used before it is defined")
  _bad("CHECK: {{(}}", "bad regex")


def test_literal_and_blanks():
  out = "dense<[[1, 2], [3,    4]]>\n"
  _ok("CHECK{LITERAL}: [[1, 2], [3, 4]]", out=out)
  _ok("// CHECK: x\n// CHECK-NEXT{LITERAL}: dense<[[1,", out="x\n" + out)
  _ok("CHECK:    add(%x,    %y)  ")
  _bad("CHECK: add(%x,%y)", "not found")


def test_prefixes():
  _ok("// FOO: @g\n// CHECK: nowhere", prefixes=("FOO",))
  # CHECK-DENSE is its own prefix, not a CHECK directive.
  _ok("// CHECK-DENSE: nowhere\n// CHECK: add")
  _bad("// OTHER: nowhere", "no check directives")
  _ok("// OTHER: nowhere", require_directives=False)


def test_empty_pattern_is_an_error():
  _bad("CHECK:", "empty pattern")
