"""The cases of the PJRT ABI fuzz run (pjrt/tools/abi_fuzz.py).

A *kind* is one way of calling the C API badly (or in a valid corner), e.g.
`struct_size.zero` or `execute.wrong_dtype`. A *case* is a kind plus
parameters drawn from a seeded random generator (which slot, which sizes,
which bytes), so that a run is reproducible from `--seed` and `--cases`.

Every kind says what a conforming plugin must do:
  ok     succeed (a documented NULL, a valid corner);
  error  return a PJRT_Error with a valid non-OK code and a message;
  any    either of those;
and belongs to a tier:
  contract   what a caller may rely on: the header's (0.112) explicit
             promises (struct sizes are checked, a newer caller's larger
             struct is read by its prefix; fields documented "can be
             nullptr" may be NULL; IsDeleted is true iff Delete was called;
             outputs outlive their executable), sizes and counts that exist
             to be checked (dst_size, num_byte_strides,
             default_assignment_size), and invalid values in well-formed
             calls (unknown enum values, impossible shapes, ids, options,
             formats, program bytes, arguments that do not match the
             executable): the caller cannot know the plugin's rules, so
             the plugin must say INVALID_ARGUMENT (or another code), as
             XLA's own C API tests expect for ids, options and formats;
  hardening  calls that break a rule the header states or implies: a NULL
             args pointer, NULL in a field not marked optional, using a
             buffer or executable after Delete other than IsDeleted /
             Destroy ("can only be used with ..."). A robust plugin returns
             an error; a C plugin may crash without breaking the header.
No case passes a pointer that is not NULL and not a live object of this
process (no use after free, no garbage addresses): crashing on those is
every C library's right. Every buffer handed to the plugin is at least as
large as what the call may legitimately read or write.

The cases run in a child process (see abi_fuzz.py) against a `Fixture`: a
client, a live buffer and a compiled `add` of two f32[4].
"""

from __future__ import annotations

import dataclasses
import random

import support
# pylint: disable=unused-import,g-importing-member
from pjrt.tools import abi_fuzz_values  # Registers its kinds.
from pjrt.tools.abi_fuzz_fixture import BUILDERS
from pjrt.tools.abi_fuzz_fixture import Fixture
from pjrt.tools.abi_fuzz_fixture import handle_field
from pjrt.tools.abi_fuzz_fixture import MUTABLE_SLOTS
from pjrt.tools.abi_fuzz_fixture import Skip
from pjrt.tools.abi_fuzz_fixture import Wrong
from pjrt.tools.abi_fuzz_kinds import ANY
from pjrt.tools.abi_fuzz_kinds import CONTRACT
from pjrt.tools.abi_fuzz_kinds import ERROR
from pjrt.tools.abi_fuzz_kinds import HARDENING
from pjrt.tools.abi_fuzz_kinds import Kind
from pjrt.tools.abi_fuzz_kinds import KIND_STATE
from pjrt.tools.abi_fuzz_kinds import KINDS
from pjrt.tools.abi_fuzz_kinds import OK
# pylint: enable=unused-import,g-importing-member


@dataclasses.dataclass
class Case:
  """A kind with its drawn parameters; `index` orders a run."""

  index: int
  kind: str
  params: dict

  @property
  def info(self) -> Kind:
    return KINDS[self.kind]

  def describe(self) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
    return (f"#{self.index} {self.kind}({params}) [{self.info.tier}, expect "
            f"{self.info.expect}]: {self.info.doc}")

  def to_json(self) -> dict:
    return {"index": self.index, "kind": self.kind, "params": self.params}


def generate(count: int, seed: int, *, tiers=(CONTRACT, HARDENING),
             kinds: list[str] | None = None) -> list[Case]:
  """`count` cases drawn from `seed`.

  Kinds are dealt in shuffled rounds (a kind `weight` times per round), so
  any `count` >= the round's length covers every kind; parameters are drawn
  per case.
  """
  rng = random.Random(seed)
  KIND_STATE.clear()
  names = sorted(n for n in (KINDS if kinds is None else kinds)
                 if KINDS[n].tier in tiers)
  if not names:
    raise support.InvalidArgumentError("no fuzz kinds selected")
  cases, deck = [], []
  for index in range(count):
    if not deck:
      deck = [n for n in names for _ in range(KINDS[n].weight)]
      rng.shuffle(deck)
    name = deck.pop()
    cases.append(Case(index, name, KINDS[name].params(rng)))
  return cases


def run_case(fx: Fixture, case: Case) -> dict:
  """Runs one case; returns {"outcome", "code", "message"}.

  Outcomes: ok, error (a support error from the plugin), wrong (succeeded
  with a result that breaks the contract), skipped, exception (anything
  else: a bug of the case or an output the client could not read).
  """
  try:
    case.info.run(fx, case.params)
  except Skip as e:
    return {"outcome": "skipped", "message": str(e)}
  except Wrong as e:
    return {"outcome": "wrong", "message": str(e)}
  except support.XlaError as e:
    return {"outcome": "error", "code": int(e.code), "message": str(e)}
  except Exception as e:  # pylint: disable=broad-except
    return {"outcome": "exception",
            "message": f"{type(e).__name__}: {e}"}
  return {"outcome": "ok"}
