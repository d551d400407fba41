"""Tests of the PJRT ABI fuzz run (abi_fuzz.py, abi_fuzz_cases.py)."""

import collections
import json

import pytest

import support
from pjrt._src import test_util
from pjrt.tools import abi_fuzz
from pjrt.tools import abi_fuzz_cases as cases_lib

# Failures of xla-cpu-pjrt 0.0.1 (PJRT C API 0.81) that the fuzz run finds.
# They are the plugin's bugs, not the harness's; each reason says what it
# does. Contract-tier kinds break what the header promises or leave invalid
# input unchecked; hardening-tier kinds are NULLs and uses after Delete that
# the header does not oblige a plugin to survive.
XLA_CPU_PJRT_KNOWN = {
    # -- contract --
    "assignment.more_than_devices":
        "returns ids of devices that do not exist instead of an error",
    "assignment.zero_or_negative":
        "aborts: CHECK(replica_count > 0) in computation_placer.h",
    "compile.options_empty":
        "aborts: an empty CompileOptionsProto means 0 replicas, CHECK fails",
    "compile.options_invalid":
        "aborts on num_replicas 0 (same CHECK)",
    "compile.options_random_bytes":
        "aborts when random bytes decode to 0 replicas (same CHECK)",
    "deleted_executable.is_deleted":
        "LoadedExecutable_IsDeleted is false after LoadedExecutable_Delete",
    "execute.wrong_dtype_same_size":
        "Execute checks only an argument's byte size: s32[4] runs as f32[4]",
    "execute.wrong_rank":
        "Execute checks only an argument's byte size: f32[2,2] runs as f32[4]",
    "host_buffer.strides_count_mismatch":
        "aborts: CHECK(dims.size() == byte_strides.size())",
    "host_buffer.type_invalid":
        "aborts: 'Buffer type is not supported in C API layer'",
    "host_buffer.type_out_of_range": "SIGSEGV on an unknown element type",
    "host_buffer.type_token": "aborts: CHECK(buffer != nullptr) in shape.h",
    "to_host.layout_*": "ignores host_layout (even a valid column-major one)",
    # -- hardening --
    "null.args_pointer": "dereferences a NULL args pointer (SIGSEGV)",
    "null.handle": "dereferences a NULL object field (SIGSEGV), or returns "
                   "success for some slots",
    "compile.null_program": "dereferences a NULL program (SIGSEGV)",
    "compile.null_code": "reads code_size bytes from NULL (SIGSEGV)",
    "host_buffer.data_null": "reads from a NULL data pointer (SIGSEGV)",
    "host_buffer.dims_null": "reads from a NULL dims pointer (SIGSEGV)",
    "host_buffer.no_device_no_memory":
        "dereferences the NULL device (SIGSEGV)",
    "event.on_ready_null_callback": "calls the NULL callback (SIGSEGV)",
    "client_create.null_options":
        "ignores num_options when create_options is NULL (succeeds)",
    "deleted_executable.execute":
        "runs a deleted executable (Delete does not delete, see above)",
}


def _case(kind, params=None, index=0):
  return cases_lib.Case(index, kind, params or {})


# -- Case generation. ------------------------------------------------------


def test_generation_is_deterministic_and_covers_every_kind():
  a = cases_lib.generate(300, seed=5)
  b = cases_lib.generate(300, seed=5)
  assert [c.to_json() for c in a] == [c.to_json() for c in b]
  assert [c.to_json() for c in a] != [
      c.to_json() for c in cases_lib.generate(300, seed=6)]
  round_length = sum(k.weight for k in cases_lib.KINDS.values())
  assert {c.kind for c in cases_lib.generate(round_length, 0)} == set(
      cases_lib.KINDS)
  json.dumps([c.to_json() for c in a])  # Cases travel as JSON.


def test_slot_walkers_cover_every_slot():
  n = 3 * sum(k.weight for k in cases_lib.KINDS.values())
  cases = cases_lib.generate(n, seed=1, kinds=["struct_size.zero"])
  slots = collections.Counter(c.params["slot"] for c in cases)
  assert set(slots) == set(cases_lib.MUTABLE_SLOTS)
  # Each slot before any twice: counts differ by at most one.
  assert max(slots.values()) - min(slots.values()) <= 1


def test_tiers_and_kind_filters():
  hardening = cases_lib.generate(50, 0, tiers=(cases_lib.HARDENING,))
  assert {c.info.tier for c in hardening} == {cases_lib.HARDENING}
  with pytest.raises(support.InvalidArgumentError):
    cases_lib.generate(5, 0, kinds=[])


def test_every_kind_is_well_formed():
  assert len(cases_lib.KINDS) >= 80
  for name, info in cases_lib.KINDS.items():
    assert info.tier in (cases_lib.CONTRACT, cases_lib.HARDENING), name
    assert info.expect in (cases_lib.OK, cases_lib.ERROR, cases_lib.ANY), name
    assert info.doc, name
  # The builders give every mutated slot an args struct of its own.
  for slot in cases_lib.MUTABLE_SLOTS:
    assert slot in cases_lib.BUILDERS
  assert cases_lib.handle_field("Buffer_Dimensions") == "buffer"
  assert cases_lib.handle_field("Buffer_ToHostBuffer") == "src"
  assert cases_lib.handle_field("Plugin_Attributes") is None


# -- Verdicts. --------------------------------------------------------------


@pytest.mark.parametrize("kind, record, passed", [
    ("lookup.device_id", {"outcome": "error", "code": 3, "message": "no"},
     True),
    ("lookup.device_id", {"outcome": "ok"}, False),
    ("lookup.device_id", {"outcome": "error", "code": 0, "message": "x"},
     False),  # An error with code OK is not clean.
    ("lookup.device_id", {"outcome": "error", "code": 3, "message": " "},
     False),  # Nor one without a message.
    ("null_documented.destroy", {"outcome": "ok"}, True),
    ("null_documented.destroy", {"outcome": "error", "code": 3,
                                 "message": "no"}, False),
    ("compile.mutated_text", {"outcome": "ok"}, True),
    ("compile.mutated_text", {"outcome": "error", "code": 3,
                              "message": "bad"}, True),
    ("compile.mutated_text", {"outcome": "crash", "message": "SIGSEGV"},
     False),
    ("compile.mutated_text", {"outcome": "exception", "message": "x"}, False),
    ("compile.mutated_text", {"outcome": "wrong", "message": "x"}, False),
    ("compile.mutated_text", {"outcome": "skipped", "message": "x"}, None),
])
def test_judge(kind, record, passed):
  result = abi_fuzz.judge(_case(kind), record)
  assert result.passed is passed
  if passed is False:
    assert result.explain()


def test_known_kinds_use_globs():
  assert abi_fuzz.is_known("to_host.layout_wrong_rank", ["to_host.layout_*"])
  assert not abi_fuzz.is_known("to_host.dst_too_small",
                               ["to_host.layout_*:reason"])
  for pattern in XLA_CPU_PJRT_KNOWN:
    assert any(abi_fuzz.is_known(k, [pattern]) for k in cases_lib.KINDS), (
        f"stale known kind {pattern}")


# -- Command line. ------------------------------------------------------------


def test_list_kinds_and_help(capsys):
  assert abi_fuzz.main(["--list-kinds"]) == 0
  out = capsys.readouterr().out
  assert len(out.splitlines()) == len(cases_lib.KINDS)
  assert "struct_size.zero" in out
  with pytest.raises(SystemExit) as e:
    abi_fuzz.main(["--help"])
  assert e.value.code == 0
  assert "--cases" in capsys.readouterr().out


def test_usage_errors(capsys, tmp_path):
  assert abi_fuzz.main(["--plugin", str(tmp_path / "none.so")]) == 2
  assert abi_fuzz.main(["--plugin", "x.so", "--cases", "0"]) == 2
  assert abi_fuzz.main(["--plugin", str(tmp_path / "none.so"), "--kind",
                        "no_such_kind*"]) == 2
  capsys.readouterr()


# -- Against the real plugin. ------------------------------------------------


@test_util.requires_xla_cpu_pjrt
def test_a_crash_fails_only_its_case():
  path = test_util.xla_cpu_pjrt_path()
  cases = [_case("lookup.device_id", {"which": "-1"}, 0),
           # Aborts xla-cpu-pjrt (see XLA_CPU_PJRT_KNOWN).
           _case("host_buffer.type_token", {}, 1),
           _case("null_documented.to_host_size_query", {}, 2)]
  results = abi_fuzz.run(path, cases)
  assert [r.outcome for r in results] == ["error", "crash", "ok"]
  assert [r.passed for r in results] == [True, False, True]
  assert "SIGABRT" in results[1].message
  assert "Check failed" in results[1].message


@test_util.requires_xla_cpu_pjrt
def test_small_run_on_xla_cpu_pjrt(tmp_path):
  out = tmp_path / "results.json"
  argv = ["--plugin", test_util.xla_cpu_pjrt_path(), "--cases", "30",
          "--seed", "0", "--json", str(out)]
  for kind, reason in XLA_CPU_PJRT_KNOWN.items():
    argv += ["--known", f"{kind}:{reason}"]
  code = abi_fuzz.main(argv)
  data = json.loads(out.read_text())
  unexpected = [r for r in data["results"]
                if r["passed"] is False and not r["known"]]
  assert code == 0, json.dumps(unexpected, indent=1)
  assert len(data["results"]) == 30
  passed = sum(r["passed"] is True for r in data["results"])
  assert passed >= 10, data["summary"]


def test_how_a_child_ended_is_described():
  log = "noise\nF0000 x.cc:1] Check failed: a > 0\n*** stack ***\nmore\n"
  text = abi_fuzz._how_it_ended(-6, log)  # pylint: disable=protected-access
  assert text.startswith("killed by SIGABRT")
  assert "Check failed: a > 0" in text and "noise" not in text
  assert "no result within" in abi_fuzz._how_it_ended(None, "")  # pylint: disable=protected-access
  assert abi_fuzz._how_it_ended(3, "") == "exited with status 3"  # pylint: disable=protected-access
