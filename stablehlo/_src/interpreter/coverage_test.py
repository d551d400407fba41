"""Every registered op has an interpreter kernel, or a recorded reason why
not (shown in the status table)."""

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
