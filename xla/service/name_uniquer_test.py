"""Tests for NameUniquer."""

from xla.service.name_uniquer import NameUniquer
from xla.service.name_uniquer import sanitize_name


def test_sequence():
  u = NameUniquer()
  assert [u.get_unique_name("add") for _ in range(3)] == [
      "add", "add.1", "add.2"]


def test_numeric_suffix_is_kept_when_free():
  u = NameUniquer()
  assert u.get_unique_name("x.5") == "x.5"
  assert u.get_unique_name("x") == "x"
  assert u.get_unique_name("x.5") == "x.1"  # 5 taken; next free id
  assert u.get_unique_name("x.0") == "x.2"  # 0 taken by plain "x"


def test_sanitize():
  assert sanitize_name("a b/c") == "a_b_c"
  assert sanitize_name("1abc") == "_1abc"
  assert sanitize_name("") == "_"
  assert NameUniquer().get_unique_name("") == "name"
  assert NameUniquer().get_unique_name("x.01") == "x.01"  # not a number
