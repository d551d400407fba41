"""Every registered op has an interpreter kernel, or a recorded reason why
not (shown in the status table), in the kernel module of the op's family."""

import inspect

from stablehlo._src import interpreter  # noqa: F401  (registers kernels)
from stablehlo._src.ops import registry


def test_every_op_has_a_kernel_or_a_reason():
  missing = [d.name for d in registry.all_ops()
             if d.interpreter is None and "interpreter" not in d.unsupported]
  assert missing == []


def test_all_spec_ops_have_kernels():
  spec_ops = [d for d in registry.all_ops() if d.spec is not None]
  assert len(spec_ops) >= 108
  without = [d.name for d in spec_ops if d.interpreter is None]
  # Only ops the spec itself marks deprecated-and-removed may lack one.
  assert set(without) <= {"stablehlo.torch_index_select"}, without


def test_a_search_for_the_full_name_finds_the_kernel():
  # Kernels register under their full name (a decorator at the def, or a
  # register_interpreter call for one a factory builds), so the module
  # that registers an op's kernel spells the op's name.
  for d in registry.all_ops():
    if d.interpreter is None:
      continue
    module = inspect.getmodule(d.interpreter)
    assert f'"{d.name}"' in inspect.getsource(module), (d.name,
                                                         module.__name__)


def _family_module(d):
  """The ops/<family>.py module that defines `d`, told by its verifier or
  inference function (None for an op that has neither of its own)."""
  for fn in (d.verify, d.infer):
    name = getattr(fn, "__module__", None) or ""
    if name.startswith("stablehlo._src.ops.") and name.split(".")[-1] not in (
        "common", "typeutil"):
      return name.split(".")[-1]
  return None


def test_an_ops_kernel_is_in_the_kernel_module_of_its_family():
  # ops/<family>.py defines an op, kernels_<family>.py (or a part of it,
  # kernels_<family>_<part>.py) runs it; `program` and `checks` run the ops
  # that belong to the interpreter's own machinery.
  checked = 0
  for d in registry.all_ops():
    family = _family_module(d)
    if family is None or d.interpreter is None:
      continue
    kernel = inspect.getmodule(d.interpreter).__name__.split(".")[-1]
    if not kernel.startswith("kernels_"):
      assert kernel in ("program", "checks"), (d.name, kernel)
      continue
    assert kernel == f"kernels_{family}" or kernel.startswith(
        f"kernels_{family}_"), (d.name, family, kernel)
    checked += 1
  assert checked >= 130
