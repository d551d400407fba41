"""Tests of the Qr / Householder product / Eigh expansions against numpy
(LAPACK): through the HLO evaluator (which evaluates the expansion), the pass
itself, and one compiled run on the CPU backend."""

import os
import subprocess
import sys

import numpy as np
import pytest

import support
from xla.hlo.evaluator import hlo_evaluator
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser import hlo_parser
from xla.service import eigh_expander
from xla.service import linalg_expander

_DTYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex64,
           "c128": np.complex128}
_TOL = {"f32": 2e-5, "f64": 1e-12, "c64": 2e-5, "c128": 1e-12}


def _random(et, dims, seed=0):
  rng = np.random.default_rng(seed)
  a = rng.standard_normal(dims)
  if et.startswith("c"):
    a = a + 1j * rng.standard_normal(dims)
  return a.astype(_DTYPES[et])


def _hermitian(et, dims, seed=0):
  a = _random(et, dims, seed)
  return (a + np.conj(np.swapaxes(a, -1, -2))).astype(a.dtype)


def _shape(et, dims):
  return f"{et}[{','.join(map(str, dims))}]"


def _run(text, args):
  module = hlo_parser.parse_and_return_verified_module(text)
  return hlo_evaluator.HloEvaluator().evaluate(module, args)


def _qr_text(et, dims):
  p = min(dims[-2:])
  a, t = _shape(et, dims), _shape(et, dims[:-2] + (p,))
  return f"""
HloModule qr
ENTRY e {{
  a = {a} parameter(0)
  ROOT q = ({a}, {t}) custom-call(a), custom_call_target="Qr"
}}"""


def _orgqr_text(et, a_dims, k):
  a, t = _shape(et, a_dims), _shape(et, a_dims[:-2] + (k,))
  return f"""
HloModule orgqr
ENTRY e {{
  a = {a} parameter(0)
  t = {t} parameter(1)
  ROOT q = {a} custom-call(a, t),
      custom_call_target="ProductOfElementaryHouseholderReflectors"
}}"""


def _eigh_text(et, dims, config):
  rt = {"c64": "f32", "c128": "f64"}.get(et, et)
  a, w = _shape(et, dims), _shape(rt, dims[:-1])
  return f"""
HloModule eigh
ENTRY e {{
  a = {a} parameter(0)
  ROOT r = ({a}, {w}) custom-call(a), custom_call_target="Eigh",
      backend_config="{config}"
}}"""


@pytest.mark.parametrize("et", list(_DTYPES))
@pytest.mark.parametrize("dims", [(5, 3), (3, 4), (4, 4)])
def test_qr_matches_lapack_geqrf(et, dims):
  a = _random(et, dims)
  h, taus = _run(_qr_text(et, dims), [a])
  wide = np.complex128 if et.startswith("c") else np.float64
  h_ref, taus_ref = np.linalg.qr(a.astype(wide), mode="raw")
  np.testing.assert_allclose(h, h_ref.T, atol=_TOL[et] * 10)
  np.testing.assert_allclose(taus, taus_ref, atol=_TOL[et] * 10)


@pytest.mark.parametrize("et", ["f32", "c128"])
@pytest.mark.parametrize("dims", [(2, 5, 3), (2, 3, 3, 4)])
def test_qr_then_householder_product_reconstructs(et, dims):
  a = _random(et, dims, seed=1)
  h, taus = _run(_qr_text(et, dims), [a])
  k = taus.shape[-1]
  q, = _run(_orgqr_text(et, h[..., :k].shape, k), [h[..., :k].copy(), taus])
  r = np.triu(h[..., :k, :])
  tol = _TOL[et] * 10
  np.testing.assert_allclose(q @ r, a, atol=tol)
  eye = np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k))
  np.testing.assert_allclose(np.conj(np.swapaxes(q, -1, -2)) @ q, eye,
                             atol=tol)


def test_householder_product_of_zero_taus_is_identity_columns():
  a = _random("f64", (4, 3))
  q, = _run(_orgqr_text("f64", (4, 3), 2), [a, np.zeros(2)])
  np.testing.assert_array_equal(q, np.eye(4, 3))


def _check_eigh(a, v, w, et, sort=True):
  tol = _TOL[et] * 10 * max(1.0, float(np.abs(a).max()))
  vh = np.conj(np.swapaxes(v, -1, -2))
  np.testing.assert_allclose(v @ (w[..., :, None] * vh), a, atol=tol)
  eye = np.broadcast_to(np.eye(a.shape[-1]), a.shape)
  np.testing.assert_allclose(vh @ v, eye, atol=tol)
  ref = np.linalg.eigvalsh(a.astype(np.complex128))
  if sort:
    np.testing.assert_allclose(w, ref, atol=tol)
  else:
    np.testing.assert_allclose(np.sort(w, axis=-1), ref, atol=tol)


@pytest.mark.parametrize("et", list(_DTYPES))
@pytest.mark.parametrize("dims", [(5, 5), (2, 4, 4)])
def test_eigh_matches_lapack(et, dims):
  a = _hermitian(et, dims, seed=2)
  tol = float(4 * np.finfo(_DTYPES[et]).eps)
  v, w = _run(_eigh_text(et, dims, f"1,1,100,{tol!r}"), [a])
  assert w.dtype == np.finfo(_DTYPES[et]).dtype and v.dtype == a.dtype
  assert np.all(np.diff(w, axis=-1) >= 0)
  _check_eigh(a, v, w, et)


@pytest.mark.parametrize("lower", [0, 1])
def test_eigh_reads_one_triangle(lower):
  a = _hermitian("c128", (4, 4), seed=3)
  garbage = _random("c128", (4, 4), seed=4)
  keep = np.tril(np.ones((4, 4), bool)) if lower else np.triu(
      np.ones((4, 4), bool))
  # The other triangle and the diagonal's imaginary part are ignored.
  given = np.where(keep, a, garbage) + 1j * np.diag([1.0, 2.0, 3.0, 4.0])
  v, w = _run(_eigh_text("c128", (4, 4), f"{lower},1,100,1e-15"), [given])
  _check_eigh(a, v, w, "c128")


def test_eigh_unsorted_and_degenerate():
  # Repeated eigenvalues, and a diagonal input (already converged).
  a = np.diag([3.0, -1.0, 3.0, 0.0])
  v, w = _run(_eigh_text("f64", (4, 4), "1,0,100,1e-15"), [a])
  np.testing.assert_allclose(w, [3.0, -1.0, 3.0, 0.0])
  _check_eigh(a, v, w, "f64", sort=False)
  a = np.ones((3, 3))
  v, w = _run(_eigh_text("f64", (3, 3), "1,1,100,1e-15"), [a])
  _check_eigh(a, v, w, "f64")


def test_eigh_one_by_one_and_zero():
  v, w = _run(_eigh_text("c64", (2, 1, 1), "1,1,100,1e-6"),
              [np.array([[[2 + 1j]], [[-3]]], np.complex64)])
  np.testing.assert_array_equal(v, np.ones((2, 1, 1)))
  np.testing.assert_array_equal(w, [[2.0], [-3.0]])
  v, w = _run(_eigh_text("f32", (3, 3), "1,1,100,1e-6"),
              [np.zeros((3, 3), np.float32)])
  np.testing.assert_array_equal(w, np.zeros(3))
  np.testing.assert_array_equal(v, np.eye(3))


def test_eigh_bad_backend_config():
  with pytest.raises(support.InvalidArgumentError, match="backend_config"):
    _run(_eigh_text("f32", (3, 3), "1,1"), [np.eye(3, dtype=np.float32)])
  assert eigh_expander.parse_config("0,1,7,1e-3") == eigh_expander.EighConfig(
      False, True, 7, 1e-3)


def test_pass_replaces_custom_calls_with_calls():
  text = _eigh_text("f32", (3, 3), "1,1,100,1e-6").replace(
      "ROOT r", "r") + ""
  text = text.rstrip().rstrip("}") + """
  q = (f32[3,3], f32[3]) custom-call(a), custom_call_target="Qr"
  q2 = (f32[3,3], f32[3]) custom-call(a), custom_call_target="Qr"
  x = f32[3,3] get-tuple-element(q), index=0
  y = f32[3,3] get-tuple-element(q2), index=0
  ROOT t = (f32[3,3], f32[3,3], (f32[3,3], f32[3])) tuple(x, y, r)
}"""
  module = hlo_parser.parse_and_return_verified_module(text)
  a = _hermitian("f32", (3, 3), seed=5)
  want = hlo_evaluator.HloEvaluator().evaluate(module, [a])
  assert linalg_expander.LinalgCustomCallExpander().run(module)
  ops = [i.opcode for c in module.computations for i in c.instructions]
  assert HloOpcode.kCustomCall not in ops and HloOpcode.kWhile in ops
  calls = [i for i in module.entry_computation.instructions
           if i.opcode == HloOpcode.kCall]
  assert len(calls) == 3
  # The two identical Qr calls share one expansion.
  assert len({id(c.to_apply) for c in calls}) == 2
  got = hlo_evaluator.HloEvaluator().evaluate(module, [a])
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
  assert not linalg_expander.LinalgCustomCallExpander().run(module)


def test_expansion_targets_are_the_expanders_targets():
  # The pass names the targets itself (it imports the expanders lazily).
  from xla.service import qr_expander  # pylint: disable=g-import-not-at-top
  assert set(linalg_expander.EXPANSIONS) == {
      qr_expander.QR_TARGET, qr_expander.HOUSEHOLDER_PRODUCT_TARGET,
      eigh_expander.EIGH_TARGET}


def test_cpu_backend_runs_the_expansions():
  cpu_compiler = pytest.importorskip("xla.service.cpu.cpu_compiler")
  text = _eigh_text("f64", (2, 4, 4), "1,1,100,1e-15")
  module = hlo_parser.parse_and_return_verified_module(text)
  compiled = cpu_compiler.run_hlo_passes(module.clone())
  assert all(i.opcode != HloOpcode.kCustomCall
             for c in compiled.computations for i in c.instructions)
  a = _hermitian("f64", (2, 4, 4), seed=6)
  v, w = cpu_compiler.compile(module).execute([a])
  _check_eigh(a, v, w, "f64")


_IMPORT_CHECK = """
import sys
from xla.hlo.parser import hlo_parser
from xla.hlo.transforms.simplifiers import hlo_constant_folding as hcf
from xla.service import linalg_expander
names = ("xla.service.qr_expander", "xla.service.eigh_expander",
         "xla.service.hlo_text_builder", "xla.hlo.evaluator.hlo_evaluator")
m = hlo_parser.parse_and_return_verified_module(
    "HloModule m\\nENTRY e {\\n p = f32[4] parameter(0)\\n"
    " c = f32[] constant(2)\\n b = f32[4] broadcast(c), dimensions={}\\n"
    " ROOT a = f32[4] add(p, b)\\n}")
print(linalg_expander.LinalgCustomCallExpander().run(m),
      hcf.HloConstantFolding().run(m))
print(",".join(n for n in names if n in sys.modules) or "-")
m = hlo_parser.parse_and_return_verified_module(
    "HloModule m\\nENTRY e {\\n c = f32[] constant(2)\\n"
    " ROOT n = f32[] negate(c)\\n}")
print(hcf.HloConstantFolding().run(m))
print(",".join(n for n in names if n in sys.modules) or "-")
"""


def test_a_module_without_linalg_calls_imports_no_builders():
  # In a fresh process: this pass (run on every CPU compile) and constant
  # folding with nothing to fold import neither the expansion builders nor
  # the HLO evaluator; folding a constant expression does import the
  # evaluator.
  root = os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))))
  env = dict(os.environ, PYTHONPATH=root + os.pathsep +
             os.environ.get("PYTHONPATH", ""))
  out = subprocess.run([sys.executable, "-c", _IMPORT_CHECK], env=env,
                       cwd=root, capture_output=True, text=True, timeout=120,
                       check=True).stdout.split()
  assert out == ["False", "False", "-", "True",
                 "xla.hlo.evaluator.hlo_evaluator"]
