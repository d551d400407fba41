"""Every jnp.linalg / jax.scipy.linalg / lax.linalg function on openxla_cpu
(JAX's LAPACK custom calls, run by our CPU backend) against JAX's own CPU
backend, in a child interpreter that finds the plugin through its
"jax_plugins" entry point (as jax_plugin_test does).

Outputs that are unique are compared as values; those defined only up to
sign / phase / order (eigenvectors, singular vectors, Q of QR, Schur and
Hessenberg bases) by reconstruction, orthogonality and the unique parts.
Every metric is an error relative to the reference's largest magnitude;
it must stay within 2e-3 (f32 / c64) or 1e-9 (f64 / c128)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pjrt.jax_plugin import testing

jax = pytest.importorskip("jax")

_CHILD = textwrap.dedent("""
    import json, re, sys
    import numpy as np
    import jax, jax.numpy as jnp
    import jax.scipy.linalg as jsl
    from jax import lax
    jax.config.update("jax_enable_x64", True)

    dtype = np.dtype(sys.argv[1])
    shapes = json.loads(sys.argv[2])
    ours, ref = jax.devices("openxla_cpu")[0], jax.devices("cpu")[0]
    cplx = dtype.kind == "c"
    report = {}

    def rand(shape, seed):
      rng = np.random.default_rng(seed)
      x = rng.standard_normal(shape)
      if cplx:
        x = x + 1j * rng.standard_normal(shape)
      return x.astype(dtype)

    def ct(x):
      return np.conj(np.swapaxes(x, -1, -2))

    def rel(got, want):
      got, want = np.asarray(got), np.asarray(want)
      assert got.shape == want.shape, (got.shape, want.shape)
      if not want.size:
        return 0.0
      d = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
      return float(d.max() / max(float(np.abs(want).max()), 1e-30))

    def eye_like(q):
      k = q.shape[-1]
      return np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k))

    def match(w, w0):
      # Eigenvalues as sets: each one's distance to the nearest of the other.
      w = np.asarray(w).astype(np.complex128)
      w0 = np.asarray(w0).astype(np.complex128)
      d = np.abs(w[..., :, None] - w0[..., None, :])
      err = max(float(d.min(-1).max()), float(d.min(-2).max()))
      return err / max(float(np.abs(w0).max()), 1e-30)

    def run(f, args, device):
      out = jax.jit(f)(*[jax.device_put(a, device) for a in args])
      leaves = jax.tree.leaves(out)
      platforms = {d.platform for l in leaves for d in l.devices()}
      return jax.tree.map(np.asarray, out), platforms

    def case(name, f, args, check=None):
      key = f"{dtype}{list(shape)} {name}"
      try:
        got, platforms = run(f, args, ours)
        want, _ = run(f, args, ref)
        if check is None:
          metrics = {f"value{i}": rel(g, w) for i, (g, w) in enumerate(
              zip(jax.tree.leaves(got), jax.tree.leaves(want)))}
        else:
          metrics = check(got, want, *args)
        report[key] = {"metrics": metrics, "platforms": sorted(platforms)}
      except Exception as e:  # reported, and failed, by the parent
        report[key] = {"error": f"{type(e).__name__}: {e}"[:2000]}

    def check_eigh(got, want, h):
      (w, v), (w0, _) = got, want
      return {"w": rel(w, w0), "recon": rel((v * w[..., None, :]) @ ct(v), h),
              "orth": rel(ct(v) @ v, eye_like(v))}

    def check_eig(got, want, a):
      (w, v), (w0, _) = got, want
      return {"w": match(w, w0), "residual": rel(a @ v, v * w[..., None, :]),
              "unit": rel(np.linalg.norm(v, axis=-2), np.ones(w.shape))}

    def check_svd(got, want, a):
      (u, s, vh), (_, s0, _) = got, want
      k = s.shape[-1]
      return {"s": rel(s, s0),
              "recon": rel((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a),
              "orth_u": rel(ct(u) @ u, eye_like(u)),
              "orth_v": rel(vh @ ct(vh), eye_like(ct(vh)))}

    def check_qr(got, want, a):
      (q, r), (_, r0) = got, want
      k = r.shape[-2]
      return {"abs_r": rel(np.abs(r), np.abs(r0)),
              "recon": rel(q[..., :k] @ r, a), "orth": rel(ct(q) @ q, eye_like(q)),
              "triu": float(np.abs(np.tril(r, -1)).max(initial=0))}

    def check_qr_pivoting(got, want, a):
      (q, r, p), (_, r0, p0) = got, want
      k = r.shape[-2]
      ap = np.take_along_axis(a, p[..., None, :], -1)
      return {"abs_r": rel(np.abs(r), np.abs(r0)), "perm": float((p != p0).sum()),
              "recon": rel(q[..., :k] @ r, ap),
              "orth": rel(ct(q) @ q, eye_like(q))}

    def check_schur(got, want, a):
      (t, z), (t0, _) = got, want
      lower = np.tril(t, -1 if cplx else -2)
      return {"recon": rel(z @ t @ ct(z), a), "orth": rel(ct(z) @ z, eye_like(z)),
              "triangular": float(np.abs(lower).max(initial=0)),
              "diag": match(np.linalg.eigvals(t), np.linalg.eigvals(t0))}

    def check_hessenberg(got, want, a):
      (h, q), (h0, _) = got, want
      return {"recon": rel(q @ h @ ct(q), a), "orth": rel(ct(q) @ q, eye_like(q)),
              "hessenberg": float(np.abs(np.tril(h, -2)).max(initial=0)),
              "abs_h": rel(np.abs(h), np.abs(h0))}

    def check_tridiagonal(got, want, h):
      (_, d, e, _), (_, d0, e0, _) = got, want
      i = np.arange(h.shape[-1])
      tri = np.zeros(h.shape, d.dtype)
      tri[..., i, i] = d
      tri[..., i[:-1], i[1:]] = tri[..., i[1:], i[:-1]] = e
      return {"d": rel(d, d0), "abs_e": rel(np.abs(e), np.abs(e0)),
              "eigs": rel(np.linalg.eigvalsh(tri), np.linalg.eigvalsh(h))}

    def check_lstsq(got, want, a, b):
      (x, res, rank, sv), (x0, res0, rank0, sv0) = got, want
      # Residuals of an underdetermined system are rounding noise: measure
      # them against |b|^2.
      scale = max(float(np.abs(res0).max(initial=0)),
                  float((np.abs(b) ** 2).sum(-2).max()))
      return {"x": rel(x, x0), "sv": rel(sv, sv0),
              "residuals": float(np.abs(res - res0).max(initial=0)) / scale,
              "rank": float((rank != rank0).sum())}

    def check_tri_solve(got, want, dl, d, du, b):
      return {"x": rel(got, want)}

    for shape in shapes:
      shape = tuple(shape)
      n = shape[-1]
      batch = shape[:-2]
      sq = batch + (n, n)
      a = rand(sq, 0)
      h = ((a + ct(a)) / 2).astype(dtype)
      spd = (a @ ct(a) + n * np.eye(n)).astype(dtype)
      b = rand(batch + (n, 2), 1)
      rect = rand(shape, 2)
      case("cholesky", jnp.linalg.cholesky, [spd])
      case("solve", jnp.linalg.solve, [a, b])
      case("inv", jnp.linalg.inv, [a])
      case("det", jnp.linalg.det, [a])
      case("slogdet", lambda x: tuple(jnp.linalg.slogdet(x)), [a])
      case("eigh", lambda x: tuple(jnp.linalg.eigh(x)), [h], check_eigh)
      case("eigvalsh", jnp.linalg.eigvalsh, [h])
      case("eig", jnp.linalg.eig, [a], check_eig)
      case("eigvals", jnp.linalg.eigvals, [a],
           lambda g, w, _: {"w": match(g, w)})
      case("svd full", lambda x: tuple(jnp.linalg.svd(x)), [rect], check_svd)
      case("svd reduced",
           lambda x: tuple(jnp.linalg.svd(x, full_matrices=False)), [rect],
           check_svd)
      case("svd values", lambda x: jnp.linalg.svd(x, compute_uv=False), [rect])
      case("qr reduced", lambda x: tuple(jnp.linalg.qr(x)), [rect], check_qr)
      case("qr complete", lambda x: tuple(jnp.linalg.qr(x, mode="complete")),
           [rect], check_qr)
      case("qr r", lambda x: jnp.linalg.qr(x, mode="r"), [rect],
           lambda g, w, _: {"abs_r": rel(np.abs(g), np.abs(w))})
      if not batch:
        case("scipy qr pivoting",
             lambda x: tuple(jsl.qr(x, pivoting=True, mode="economic")),
             [rect], check_qr_pivoting)
      lu = lambda x: tuple(jsl.lu(x))
      case("lu", lu if not batch else jax.vmap(lu), [a])
      case("lu rect", lambda x: tuple(lax.linalg.lu(x)), [rect])
      case("lu_factor", lambda x: tuple(jsl.lu_factor(x)), [a])
      case("lu_solve", lambda x, y: jsl.lu_solve(jsl.lu_factor(x), y), [a, b])
      lstsq = lambda x, y: tuple(jnp.linalg.lstsq(x, y))
      case("lstsq", lstsq if not batch else jax.vmap(lstsq),
           [rect, rand(shape[:-1] + (2,), 3)], check_lstsq)
      case("pinv", jnp.linalg.pinv, [rect])
      case("matrix_power 3", lambda x: jnp.linalg.matrix_power(x, 3), [a])
      case("matrix_power -2", lambda x: jnp.linalg.matrix_power(x, -2), [a])
      case("expm", jsl.expm, [(a / n).astype(dtype)])
      schur = (lambda x: tuple(jsl.schur(x))) if not batch else (
          lambda x: tuple(jax.vmap(jsl.schur)(x)))
      case("schur", schur, [a], check_schur)
      hess = lambda x: tuple(jsl.hessenberg(x, calc_q=True))
      case("hessenberg", hess if not batch else jax.vmap(hess), [a],
           check_hessenberg)
      case("solve_triangular lower",
           lambda x, y: jsl.solve_triangular(x, y, lower=True),
           [(a + 2 * n * np.eye(n)).astype(dtype), b])
      case("solve_triangular upper trans",
           lambda x, y: jsl.solve_triangular(x, y, trans=1 if not cplx else 2,
                                             unit_diagonal=True),
           [(a + 2 * n * np.eye(n)).astype(dtype), b])
      case("tridiagonal", lambda x: tuple(lax.linalg.tridiagonal(x)), [h],
           check_tridiagonal)
      dl, d, du = (rand(batch + (n,), s) for s in (4, 5, 6))
      case("tridiagonal_solve", lax.linalg.tridiagonal_solve,
           [dl, (d + 4).astype(dtype), du, b], check_tri_solve)
      perturbed = lambda *x: lax.linalg.tridiagonal_solve(
          *x, perturb_singular=True)
      case("tridiagonal_solve perturbed", perturbed, [dl, d, du, b],
           check_tri_solve)
      # Singular (a zero row): perturbed pivots give finite values.
      zero_row = np.array(d, copy=True)
      zero_row[..., 1] = 0
      dlz, duz = np.array(dl, copy=True), np.array(du, copy=True)
      dlz[..., 1] = 0
      duz[..., 1] = 0
      case("tridiagonal_solve perturbed singular", perturbed,
           [dlz, zero_row, duz, b], check_tri_solve)
    # The lowering used is JAX's LAPACK one, not a platform-less fallback.
    text = jax.jit(jnp.linalg.eigh).lower(jax.device_put(h, ours)).as_text()
    report["eigh_calls"] = sorted(set(re.findall(r"custom_call @(\\w+)", text)))
    print("REPORT " + json.dumps(report))
""")

# Metrics that count elements (not relative errors) must be exactly 0.
_EXACT = ("perm", "rank")
_TOL = {"float32": 2e-3, "complex64": 2e-3, "float64": 1e-9,
        "complex128": 1e-9}
_SHAPES = [[4, 3], [2, 3, 4]]


def _child_report(tmp_path, script, *args, platforms="openxla_cpu",
                  backend=None, timeout=600):
  """The REPORT line of `script` (with `args`) run in a child that finds
  the plugin through its entry point, with JAX_PLATFORMS=`platforms` (and
  OPENXLA_CPU_BACKEND=`backend` if given)."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([str(testing.plugin_site(tmp_path))] +
                                      [p for p in sys.path if p])
  env["JAX_PLATFORMS"] = platforms
  if backend is not None:
    env["OPENXLA_CPU_BACKEND"] = backend
  env.pop("OPENXLA_CPU_JAX_REGISTER", None)
  proc = subprocess.run([sys.executable, "-c", script, *args], env=env,
                        capture_output=True, text=True, timeout=timeout,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("REPORT ")][-1]
  return json.loads(line[len("REPORT "):])


def _run_child(tmp_path, dtype, backend="cpu", shapes=None):
  return _child_report(tmp_path, _CHILD, dtype, json.dumps(shapes or _SHAPES),
                       platforms="openxla_cpu,cpu", backend=backend,
                       timeout=1200)


def _check(report, dtype):
  tol = _TOL[dtype]
  failures = []
  letter = {"float32": "s", "float64": "d", "complex64": "c",
            "complex128": "z"}[dtype]
  routine = "syevd" if letter in "sd" else "heevd"
  assert report.pop("eigh_calls") == [f"lapack_{letter}{routine}_ffi"]
  for key, r in report.items():
    if "error" in r:
      failures.append(f"{key}: {r['error']}")
      continue
    if r["platforms"] != ["openxla_cpu"]:
      failures.append(f"{key}: ran on {r['platforms']}")
    for metric, value in r["metrics"].items():
      limit = 0 if metric in _EXACT else tol
      if not value <= limit:  # also catches NaN
        failures.append(f"{key} {metric}: {value:.3g} > {limit}")
  assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64",
                                   "complex128"])
def test_linalg_matches_jax_cpu(tmp_path, dtype):
  report = _run_child(tmp_path, dtype)
  # Every function ran, batched and not (pivoted QR unbatched only), with
  # the lowering JAX uses on "cpu" (eigh_calls).
  assert len(report) == 2 * 32 + 2, sorted(report)
  _check(report, dtype)


def test_linalg_on_the_evaluator_backend(tmp_path):
  """The evaluator backend runs the same LAPACK custom calls."""
  report = _run_child(tmp_path, "float64", backend="evaluator",
                      shapes=[[4, 3]])
  assert len(report) == 34
  _check(report, "float64")


_CHECK_CHILD = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp
    from jax.experimental import checkify

    @jax.jit
    def unfunctionalized(x):
      checkify.check(x > 0, "x must be positive")
      return x + 1

    try:
      unfunctionalized(jnp.float32(1))
      raised = None
    except Exception as e:  # what JAX tells the user
      raised = f"{type(e).__name__}: {e}"
    err, out = jax.jit(checkify.checkify(
        lambda x: (checkify.check(x > 0, "x must be positive"), x + 1)[1]))(
            jnp.float32(-1))
    print("REPORT " + json.dumps({
        "platform": jax.default_backend(), "raised": raised,
        "error": err.get(), "out": float(out)}))
""")


def test_an_unfunctionalized_check_gets_jaxs_own_error(tmp_path):
  # checkify's `check` has a lowering for "cpu" only: on our platform JAX
  # reported a missing MLIR translation rule instead of its error telling
  # the user to functionalize the check.
  report = _child_report(tmp_path, _CHECK_CHILD)
  assert report["platform"] == "openxla_cpu"
  assert report["raised"].startswith("ValueError: Cannot abstractly evaluate")
  assert "x must be positive" in report["error"]
  assert report["out"] == 0.0


_NO_INIT_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 6))
    spd = a @ a.T + 6 * np.eye(6)
    w, v = jnp.linalg.eig(a)
    ew, ev = jnp.linalg.eigh(spd)
    u, s, vt = jnp.linalg.svd(a)
    q, r = jnp.linalg.qr(a)
    chol = jnp.linalg.cholesky(spd)
    x = jnp.linalg.solve(a, np.ones(6))
    av = np.asarray(a) @ np.asarray(v)
    errors = {
        "eig": float(np.abs(av - np.asarray(v) * np.asarray(w)).max()),
        "eigh": float(np.abs(spd @ ev - ev * ew).max()),
        "svd": float(np.abs((u * s) @ vt - a).max()),
        "qr": float(np.abs(q @ r - a).max()),
        "cholesky": float(np.abs(chol @ chol.T - spd).max()),
        "solve": float(np.abs(a @ x - 1).max()),
    }
    print("REPORT " + json.dumps({
        "platform": jax.default_backend(), "errors": errors,
        "scipy_linalg": "scipy.linalg" in sys.modules}))
""")


def test_lapack_lowerings_skip_jaxlibs_lapack_setup(tmp_path):
  # JAX's "cpu" rules initialise jaxlib's LAPACK (importing scipy.linalg,
  # 0.15 s of the first call's time), which our backend never calls.
  report = _child_report(tmp_path, _NO_INIT_CHILD)
  assert report["platform"] == "openxla_cpu"
  assert all(e < 1e-9 for e in report["errors"].values()), report
  assert not report["scipy_linalg"]
