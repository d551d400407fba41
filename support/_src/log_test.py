"""Tests for support._src.log."""

import importlib.util
import logging

import pytest

from support._src import flags
from support._src import log
from support._src import status


@pytest.fixture
def records(caplog):
  """The messages absl logs during the test."""
  caplog.set_level(logging.DEBUG, logger="absl")

  def messages():
    return [r.getMessage() for r in caplog.records if r.name == "absl"]
  return messages


def _other_module(tmp_path, name):
  """Imports a module `name` (another file) whose `emit(level)` vlogs."""
  path = tmp_path / f"{name}.py"
  path.write_text(
      "from support._src import log\n"
      "def emit(level):\n"
      "  log.vlog(level, 'from %s at %d', __name__, level)\n"
      "def is_on(level):\n"
      "  return log.vlog_is_on(level)\n")
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_vlog_filters_by_v(records):
  with flags.override(v=2, vmodule=""):
    for level in range(5):
      log.vlog(level, "level %d", level)
    assert log.vlog_is_on(2)
    assert not log.vlog_is_on(3)
  assert records() == ["level 0", "level 1", "level 2"]


def test_vlog_default_is_quiet_above_zero(records):
  with flags.override(v=0, vmodule=""):
    log.vlog(1, "hidden")
    log.vlog(0, "shown")
  assert records() == ["shown"]


def test_vlog_record_points_at_caller(caplog):
  caplog.set_level(logging.INFO, logger="absl")
  with flags.override(v=1):
    log.vlog(1, "where")
  (record,) = [r for r in caplog.records if r.getMessage() == "where"]
  assert record.filename == "log_test.py"
  assert record.funcName == "test_vlog_record_points_at_caller"
  assert record.levelno == logging.INFO


def test_vmodule_matches_calling_file(records, tmp_path):
  pass_mod = _other_module(tmp_path, "hlo_pass_fusion")
  other_mod = _other_module(tmp_path, "buffer_assignment")
  with flags.override(v=1, vmodule="hlo_pass*=3,nothing=9"):
    for level in (1, 2, 3, 4):
      pass_mod.emit(level)
      other_mod.emit(level)
      log.vlog(level, "here %d", level)
    assert pass_mod.is_on(3) and not pass_mod.is_on(4)
    assert other_mod.is_on(1) and not other_mod.is_on(2)
  assert records() == [
      "from hlo_pass_fusion at 1", "from buffer_assignment at 1", "here 1",
      "from hlo_pass_fusion at 2",
      "from hlo_pass_fusion at 3",
  ]


def test_vmodule_first_match_wins_and_can_lower(records):
  with flags.override(v=3, vmodule="log_test=1,log_*=5"):
    log.vlog(1, "one")
    log.vlog(2, "two")
  with flags.override(v=3, vmodule="log_test=0"):
    log.vlog(1, "lowered")
  with flags.override(v=0, vmodule="LOG_TEST=4"):  # Case-sensitive, as glog.
    log.vlog(1, "case")
  assert records() == ["one"]


def test_vmodule_cache_follows_flag_changes(records):
  with flags.override(vmodule="log_test=2"):
    log.vlog(2, "a")
  with flags.override(vmodule="log_test=1"):
    log.vlog(2, "b")
  with flags.override(vmodule="log_test=2"):
    log.vlog(2, "c")
  assert records() == ["a", "c"]


@pytest.mark.parametrize("text", ["log_test", "=3", "log_test=x", "a=1,b"])
def test_bad_vmodule_names_the_flag(text):
  with pytest.raises(status.InvalidArgumentError, match="--vmodule"):
    with flags.override(vmodule=text):
      pass


def test_info_warning_error(caplog):
  caplog.set_level(logging.INFO, logger="absl")
  log.info("i %s", 1)
  log.warning("w %s", 2)
  log.error("e %s", 3)
  got = [(r.levelno, r.getMessage(), r.filename) for r in caplog.records]
  assert got == [(logging.INFO, "i 1", "log_test.py"),
                 (logging.WARNING, "w 2", "log_test.py"),
                 (logging.ERROR, "e 3", "log_test.py")]


def test_log_first_n_and_every_n_count_per_call_site(records):
  for i in range(5):
    log.log_first_n(log.INFO, "first %d", 2, i)
    log.log_every_n(log.INFO, "every %d", 3, i)
  for i in range(2):
    log.log_first_n(log.INFO, "other site %d", 1, i)
  assert records() == ["first 0", "every 0", "first 1", "every 3",
                       "other site 0"]


def test_log_n_rejects_bad_n():
  with pytest.raises(status.InvalidArgumentError):
    log.log_every_n(log.INFO, "x", 0)


def test_module_name():
  assert log.module_name("/a/b/hlo_pass.py") == "hlo_pass"
  assert log.module_name("<stdin>") == "<stdin>"
