"""jnp.linalg.qr / eigh / svd on openxla_cpu, checked against JAX's CPU
backend by reconstruction, in a child interpreter that finds the plugin
through its "jax_plugins" entry point (as jax_plugin_test does)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

jax = pytest.importorskip("jax")

_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    ours, ref = jax.devices("openxla_cpu")[0], jax.devices("cpu")[0]
    rng = np.random.default_rng(0)
    report = {}

    def ct(x):
      return np.conj(np.swapaxes(x, -1, -2))

    def err(x, y):
      return float(np.abs(np.asarray(x) - np.asarray(y)).max())

    for dt in ("float32", "float64", "complex64"):
      for shape in ((4, 3), (2, 5, 5)):
        a = rng.standard_normal(shape)
        if dt.startswith("complex"):
          a = a + 1j * rng.standard_normal(shape)
        a = a.astype(dt)
        h = (a + ct(a)) if shape[-1] == shape[-2] else None
        key = f"{dt}{list(shape)}"
        on = lambda f, *xs: f(*[jax.device_put(x, ours) for x in xs])
        cpu = lambda f, *xs: f(*[jax.device_put(x, ref) for x in xs])
        q, r = on(jnp.linalg.qr, a)
        q0, r0 = cpu(jnp.linalg.qr, a)
        report[key + " qr"] = {
            "recon": err(np.asarray(q) @ np.asarray(r), a),
            "orth": err(ct(np.asarray(q)) @ np.asarray(q),
                        np.eye(q.shape[-1])),
            "vs_cpu_abs_r": err(np.abs(np.asarray(r)), np.abs(np.asarray(r0))),
            "triu": bool(np.all(np.tril(np.asarray(r), -1) == 0)),
            "platform": list(q.devices())[0].platform}
        u, s, vh = on(lambda x: jnp.linalg.svd(x, full_matrices=False), a)
        s0 = cpu(lambda x: jnp.linalg.svd(x, compute_uv=False), a)
        u, s, vh = map(np.asarray, (u, s, vh))
        report[key + " svd"] = {
            "recon": err((u * s[..., None, :]) @ vh, a),
            "vs_cpu_s": err(s, s0), "platform": "openxla_cpu"}
        if h is not None:
          w, v = on(jnp.linalg.eigh, h)
          w0, _ = cpu(jnp.linalg.eigh, h)
          w, v = np.asarray(w), np.asarray(v)
          report[key + " eigh"] = {
              "recon": err((v * w[..., None, :]) @ ct(v), h),
              "orth": err(ct(v) @ v, np.eye(shape[-1])),
              "vs_cpu_w": err(w, w0), "platform": "openxla_cpu"}
    try:
      jax.jit(jnp.linalg.eig)(jax.device_put(np.eye(3), ours))
      report["eig_error"] = None
    except NotImplementedError as e:
      report["eig_error"] = str(e)
    print("REPORT " + json.dumps(report))
""")


def _site(tmp_path):
  dist = tmp_path / "openxla_pjrt-0.1.0.dist-info"
  dist.mkdir()
  (dist / "METADATA").write_text(
      "Metadata-Version: 2.1\nName: openxla-pjrt\nVersion: 0.1.0\n")
  (dist / "entry_points.txt").write_text(
      "[jax_plugins]\nopenxla_cpu = pjrt.jax_plugin\n")
  return tmp_path


@pytest.mark.parametrize("backend", ["cpu"])
def test_qr_eigh_svd_match_jax_cpu(tmp_path, backend):
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([str(_site(tmp_path))] +
                                      [p for p in sys.path if p])
  env["JAX_PLATFORMS"] = "openxla_cpu,cpu"
  env["OPENXLA_CPU_BACKEND"] = backend
  env.pop("OPENXLA_CPU_JAX_REGISTER", None)
  proc = subprocess.run([sys.executable, "-c", _CHILD], env=env,
                        capture_output=True, text=True, timeout=600,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("REPORT ")][-1]
  report = json.loads(line[len("REPORT "):])
  assert len(report) == 3 * 2 * 2 + 3 + 1
  for key, r in report.items():
    if key == "eig_error":
      continue
    tol = 1e-10 if key.startswith("float64") else 5e-5
    # Scale: entries of the (Hermitian) inputs are a few units.
    for metric, value in r.items():
      if metric in ("recon", "orth", "vs_cpu_abs_r", "vs_cpu_s", "vs_cpu_w"):
        assert value < tol * 10, (key, metric, value)
    assert r.get("triu", True), key
    assert r["platform"] == "openxla_cpu", key
  assert "eig is not supported on the openxla_cpu platform" in (
      report["eig_error"] or "")
  assert "LAPACK geev" in report["eig_error"]
