"""Checks the numpy benchmark programs against their jax twins (quick sizes)
and the committed StableHLO files against the programs' inputs."""

import pathlib

import numpy as np
import pytest

from examples.bench import numpy_programs

HERE = pathlib.Path(__file__).resolve().parent
NAMES = sorted(numpy_programs.PROGRAMS)


def test_every_program_has_full_and_quick_sizes():
  for program in numpy_programs.PROGRAMS.values():
    assert set(program.sizes) >= {"full", "quick"}, program.name


def test_inputs_are_deterministic_and_f32_or_int():
  for program in numpy_programs.PROGRAMS.values():
    a = program.inputs("quick", seed=3)
    b = program.inputs("quick", seed=3)
    c = program.inputs("quick", seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b)), program.name
    assert any(not np.array_equal(x, y) for x, y in zip(a, c)), program.name
    for x in a:
      assert x.dtype in (np.float32, np.int32), (program.name, x.dtype)


def test_quick_sizes_are_smaller():
  for program in numpy_programs.PROGRAMS.values():
    full = sum(x.size for x in program.inputs("full")) if program.name in (
        "matmul", "topk") else None
    quick = sum(x.size for x in program.inputs("quick"))
    assert quick < 100_000, program.name
    if full is not None:
      assert full > 100 * quick


@pytest.mark.parametrize("name", NAMES)
def test_numpy_matches_jax(name):
  jax = pytest.importorskip("jax")
  from examples.bench import jax_programs  # pylint: disable=g-import-not-at-top
  program = numpy_programs.PROGRAMS[name]
  inputs = program.inputs("quick")
  want = program.run_numpy(inputs, "quick")
  fn = jax_programs.function(name, **program.sizes["quick"])
  got = jax.jit(fn)(*inputs)
  assert len(got) == len(want)
  for g, w in zip(got, want):
    g = np.asarray(g)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape,
                                                       g.dtype, w.dtype)
    if w.dtype.kind == "i":
      np.testing.assert_array_equal(g, w)
    else:
      np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


def test_numpy_topk_picks_the_largest():
  x = np.array([[1, 5, 3, 4], [9, -1, 2, 8]], np.float32)
  vals, idx = numpy_programs.topk_numpy(x, rows=2, cols=4, k=2)
  np.testing.assert_array_equal(vals, [[5, 4], [9, 8]])
  np.testing.assert_array_equal(idx, [[1, 3], [0, 3]])


def test_numpy_topk_breaks_ties_by_index():
  # Three 3s for two places, at every position of the partition boundary.
  for row in ([1, 3, 3, 2, 3, 0], [3, 0, 3, 3, 1, 2], [0, 1, 2, 3, 3, 3]):
    x = np.array([row, row[::-1]], np.float32)
    vals, idx = numpy_programs.topk_numpy(x, rows=2, cols=6, k=2)
    np.testing.assert_array_equal(vals, [[3, 3], [3, 3]])
    want = [[i for i, v in enumerate(r) if v == 3][:2] for r in x]
    np.testing.assert_array_equal(idx, want)


def test_numpy_topk_with_many_ties_matches_jax():
  jax = pytest.importorskip("jax")
  x = np.random.default_rng(1).integers(0, 4, (16, 32)).astype(np.float32)
  vals, idx = numpy_programs.topk_numpy(x, rows=16, cols=32, k=5)
  want_vals, want_idx = jax.lax.top_k(x, 5)
  np.testing.assert_array_equal(vals, want_vals)
  np.testing.assert_array_equal(idx, want_idx)


def test_numpy_conv_matches_a_direct_loop():
  rng = np.random.default_rng(0)
  x = rng.standard_normal((1, 4, 5, 2)).astype(np.float32)
  w = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)
  got = numpy_programs._conv3x3_same(x, w)  # pylint: disable=protected-access
  xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
  want = np.zeros((1, 4, 5, 3), np.float32)
  for i in range(4):
    for j in range(5):
      want[0, i, j] = np.einsum("hwc,hwco->o", xp[0, i:i + 3, j:j + 3], w)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("preset", ["full", "quick"])
def test_committed_mlir_matches_the_program_inputs(preset):
  """Each generated file exists, parses, and its @main takes the program's
  inputs (shapes and element types) in order."""
  from stablehlo._src import text as mlir_text  # pylint: disable=g-import-not-at-top
  from stablehlo._src.text import attr_printer  # pylint: disable=g-import-not-at-top
  for name in NAMES:
    suffix = ".mlir" if preset == "full" else f".{preset}.mlir"
    path = HERE / f"{name}{suffix}"
    assert path.is_file(), f"{path} missing: run gen_programs.py"
    text = path.read_text()
    assert len(text) < 64 * 1024, f"{path}: a large constant is embedded"
    module = mlir_text.parse_module(text, str(path))
    fn = module.lookup("main")
    params = fn.attr("function_type").value.inputs
    program = numpy_programs.PROGRAMS[name]
    # Shapes only (no data) for the full preset: build them cheaply.
    sizes = program.sizes[preset]
    inputs = program.make_inputs(_ShapeRng(), **sizes)
    assert len(params) == len(inputs), name
    for ty, x in zip(params, inputs):
      assert tuple(ty.shape) == x.shape, (name, ty, x.shape)
      want = {np.float32: "f32", np.int32: "i32"}[x.dtype.type]
      assert attr_printer.format_type(ty.element_type) == want, (name, ty)


class _ShapeRng:
  """A stand-in Generator that returns zeros: inputs' shapes without the
  cost of drawing 16M normals."""

  def standard_normal(self, shape, dtype=np.float64):
    return np.zeros(shape, dtype)

  def integers(self, low, high, size):
    del high
    return np.full(size, low)
