"""JAX on our plugin, end to end, in child interpreters.

Each child sees the plugin only through the "jax_plugins" entry point that
the openxla-pjrt wheel declares (ci/wheels/components.py), written here into
a temporary dist-info directory on the child's path, exactly as installing
the wheel would. Results on JAX_PLATFORMS=openxla_cpu are compared with
JAX's own CPU backend in the same child.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from pjrt._src.plugin import backends

jax = pytest.importorskip("jax")

_COMPONENTS = pytest.importorskip("ci.wheels.components")

_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    from jax import lax

    ours, ref = jax.devices("openxla_cpu"), jax.devices("cpu")

    def mlp(x, w1, b1, w2, b2):
      h = jnp.tanh(x @ w1 + b1)
      return jax.nn.softmax(h @ w2 + b2, axis=-1)

    rng = np.random.default_rng(0)
    def normal(*shape):
      return rng.standard_normal(shape).astype(np.float32)

    cases = {
        "add": (lambda a, b: a + b, [normal(3, 4), normal(3, 4)]),
        "matmul": (lambda a, b: a @ b, [normal(5, 7), normal(7, 3)]),
        "reductions": (lambda a: (a.sum(0), a.max(1), jnp.mean(a),
                                  jnp.argmin(a, axis=1)), [normal(6, 5)]),
        "mlp": (mlp, [normal(4, 8), normal(8, 16), normal(16),
                      normal(16, 4), normal(4)]),
        "integers": (lambda a: (a * 3 - 1) // 2 % 5, [np.arange(-6, 6)]),
        "grad": (jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)),
                 [normal(3, 2), normal(4, 3)]),
        "while": (lambda n: lax.fori_loop(0, n, lambda i, s: s + i * i, 0),
                  [np.int32(10)]),
    }
    only = sys.argv[1].split(",") if len(sys.argv) > 1 else list(cases)
    report = {"default": jax.devices()[0].platform, "cases": {}}
    for name in only:
      f, args = cases[name]
      # Committed arguments: JAX then annotates the program with Shardy.
      got = jax.jit(f)(*[jax.device_put(a, ours[0]) for a in args])
      want = jax.jit(f)(*[jax.device_put(a, ref[0]) for a in args])
      pairs = list(zip(jax.tree.leaves(got), jax.tree.leaves(want)))
      report["cases"][name] = {
          "platform": list(jax.tree.leaves(got)[0].devices())[0].platform,
          "same": all(np.asarray(g).dtype == np.asarray(w).dtype and
                      np.allclose(np.asarray(g), np.asarray(w), rtol=2e-5,
                                  atol=1e-6) for g, w in pairs)}
    if "--extras" in sys.argv:
      x = jnp.arange(4.0)  # Uncommitted: on our default device.
      report["uncommitted"] = np.asarray(jax.jit(lambda a: a * 2)(x)).tolist()
      try:  # Fails while running: raised once the result is waited for.
        jax.block_until_ready(jax.jit(lambda a: jax.ffi.ffi_call(
            "no_such_target", jax.ShapeDtypeStruct(a.shape, a.dtype))(a))(x))
        report["error"] = None
      except Exception as e:  # pylint: disable=broad-except
        report["error"] = type(e).__name__
      from jax.experimental import serialize_executable as se
      compiled = jax.jit(lambda a: a * 3 + 1).lower(x).compile()
      payload, in_tree, out_tree = se.serialize(compiled)
      loaded = se.deserialize_and_load(payload, in_tree, out_tree,
                                       backend=ours[0].client,
                                       execution_devices=ours[:1])
      report["deserialized"] = np.asarray(loaded(x)).tolist()
      report["device_put"] = str(jax.device_put(x, ours[1]).devices())
    print("REPORT " + json.dumps(report))
""")


@pytest.fixture(name="site", scope="module")
def _site(tmp_path_factory):
  """A directory holding openxla-pjrt's dist-info (entry points only)."""
  site = tmp_path_factory.mktemp("site")
  dist = site / "openxla_pjrt-0.1.0.dist-info"
  dist.mkdir()
  (dist / "METADATA").write_text(
      "Metadata-Version: 2.1\nName: openxla-pjrt\nVersion: 0.1.0\n")
  groups = {}
  for group, name, value in _COMPONENTS.BY_PACKAGE["pjrt"].entry_points:
    groups.setdefault(group, []).append(f"{name} = {value}")
  (dist / "entry_points.txt").write_text("".join(
      f"[{g}]\n" + "\n".join(lines) + "\n\n" for g, lines in groups.items()))
  return site


def _child(site, platforms: str, *args: str, backend: str = "interpreter",
           script: str = _CHILD,
           timeout: float = 600) -> subprocess.CompletedProcess:
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([str(site)] +
                                      [p for p in sys.path if p])
  env["JAX_PLATFORMS"] = platforms
  env["OPENXLA_CPU_BACKEND"] = backend
  # Two devices: the device_put case moves an array to the second one.
  env["OPENXLA_CPU_NUM_DEVICES"] = "2"
  env.pop("OPENXLA_CPU_JAX_REGISTER", None)
  return subprocess.run([sys.executable, "-c", script, *args], env=env,
                        capture_output=True, text=True, timeout=timeout,
                        check=False)


def _report(proc: subprocess.CompletedProcess) -> dict:
  assert proc.returncode == 0, proc.stderr[-4000:]
  lines = [l for l in proc.stdout.splitlines() if l.startswith("REPORT ")]
  assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
  return json.loads(lines[-1][len("REPORT "):])


def test_entry_point_is_declared():
  assert ("jax_plugins", "openxla_cpu", "pjrt.jax_plugin") in (
      _COMPONENTS.BY_PACKAGE["pjrt"].entry_points)


def test_jit_matches_jax_cpu_on_the_interpreter(site):
  report = _report(_child(site, "openxla_cpu,cpu", "add,matmul,reductions,"
                          "mlp,integers,grad,while", "--extras"))
  assert report["default"] == "openxla_cpu"
  for name, case in report["cases"].items():
    assert case == {"platform": "openxla_cpu", "same": True}, name
  assert report["uncommitted"] == [0.0, 2.0, 4.0, 6.0]
  assert report["error"] == "JaxRuntimeError"
  assert report["deserialized"] == [1.0, 4.0, 7.0, 10.0]
  assert "OPENXLA_CPU_1" in report["device_put"]


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="the CPU compiler cannot be imported")
def test_jit_matches_jax_cpu_on_the_cpu_compiler(site):
  report = _report(_child(site, "openxla_cpu,cpu", "add,matmul,reductions,mlp",
                          backend="cpu"))
  for name, case in report["cases"].items():
    assert case == {"platform": "openxla_cpu", "same": True}, name


def test_not_registered_unless_asked_for(site):
  script = textwrap.dedent("""
      import jax
      from jax._src import xla_bridge
      print("REPORT " + __import__("json").dumps(sorted(xla_bridge.backends())))
  """)
  assert _report(_child(site, "cpu", script=script)) == ["cpu"]


# A compilation still running when the interpreter exits (as one of a test
# that timed out, abandoned by its caller): jaxlib compiles on its client's
# thread pool. Left running into finalization, that thread would be ended
# by the interpreter, and the pool's destructor (run by the last garbage
# collection) would wait for it forever.
_ORPHANED_COMPILE = textwrap.dedent("""
    import os, signal, threading, time
    import numpy as np
    from pjrt._src.plugin import api

    api._load_slots()
    _, required = api._IMPLEMENTATIONS["Client_Compile"]

    def endless_compile(args):
      del args
      print("compiling on the main thread:",
            threading.get_ident() == threading.main_thread().ident,
            flush=True)
      os.kill(os.getpid(), signal.SIGUSR1)  # The caller gives up on it.
      while True:
        time.sleep(0.01)

    api._IMPLEMENTATIONS["Client_Compile"] = (endless_compile, required)

    class GaveUp(Exception):
      pass

    def give_up(*_):
      raise GaveUp()

    signal.signal(signal.SIGUSR1, give_up)
    import jax
    try:
      jax.jit(lambda x: x + 1)(np.ones(3, np.float32))
    except GaveUp:
      print("gave up", flush=True)
""")


def test_exit_with_a_compilation_under_way(site):
  try:
    proc = _child(site, "openxla_cpu", script=_ORPHANED_COMPILE, timeout=120)
  except subprocess.TimeoutExpired as e:
    pytest.fail(f"the child hung at exit: {e.stdout!r}")
  if "compiling on the main thread: True" in proc.stdout:
    pytest.skip("this jaxlib compiles on the calling thread")
  assert proc.returncode == 0, proc.stderr[-4000:]
  assert "compiling on the main thread: False" in proc.stdout
  assert "gave up" in proc.stdout


# donate_argnums on our platform: JAX keeps it (no "Donation is not
# implemented" warning, which is an error here), the donated array is deleted,
# and the CPU backend writes the aliased result into the donated memory.
_DONATION = textwrap.dedent("""
    import json, warnings
    import numpy as np
    import jax, jax.numpy as jnp
    warnings.simplefilter("error")
    step = jax.jit(lambda p, g: (p - 0.5 * g, jnp.sum(g)), donate_argnums=0)
    update = jax.jit(lambda p, g: p - 0.5 * g, donate_argnums=0)
    p = jnp.arange(1 << 16, dtype=jnp.float32)
    g = jnp.ones(1 << 16, jnp.float32)
    new, total = step(p, g)
    address = new.unsafe_buffer_pointer()
    newer = update(new, g)
    print("REPORT " + json.dumps({
        "platform": list(newer.devices())[0].platform,
        "deleted": [p.is_deleted(), new.is_deleted()], "in_place":
            newer.unsafe_buffer_pointer() == address,
        "values": np.asarray(newer)[:3].tolist(), "total": float(total)}))
""")


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="the CPU compiler cannot be imported")
def test_donation_is_honoured(site):
  report = _report(_child(site, "openxla_cpu", script=_DONATION,
                          backend="cpu"))
  assert report == {"platform": "openxla_cpu", "deleted": [True, True],
                    "in_place": True, "values": [-1.0, 0.0, 1.0],
                    "total": 65536.0}


_PERSISTENT_CACHE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    from pjrt._src.plugin import programs
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    parsed = []
    real = programs.load
    programs.load = lambda *a, **k: parsed.append(1) or real(*a, **k)

    @jax.jit
    def f(x):
      return jax.nn.softmax(jnp.tanh(x) @ x.T, axis=-1)

    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    got = np.asarray(f(x))
    want = np.asarray(jax.jit(f.__wrapped__, backend="cpu")(x))
    print("REPORT " + json.dumps({
        "platform": jax.default_backend(), "parsed": len(parsed),
        "close": bool(np.allclose(got, want, rtol=1e-5, atol=1e-6))}))
""")


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="the cpu backend is not available")
def test_jax_compilation_cache_dir_is_the_plugins_persistent_cache(
    site, tmp_path):
  # JAX uses its own persistent cache only for its built-in platforms; on
  # ours, setting it makes the plugin keep compiled programs there, and a
  # second process runs them without parsing (or compiling) them again.
  runs = [_report(_child(site, "openxla_cpu,cpu", str(tmp_path),
                         script=_PERSISTENT_CACHE, backend="cpu"))
          for _ in range(2)]
  assert runs == [
      {"platform": "openxla_cpu", "parsed": 1, "close": True},
      {"platform": "openxla_cpu", "parsed": 0, "close": True}]
  assert os.listdir(tmp_path / "openxla_cpu")


_CALLBACKS = textwrap.dedent("""
    import faulthandler, json, sys
    faulthandler.dump_traceback_later(300, exit=True)  # a hang fails
    import numpy as np
    import jax, jax.numpy as jnp
    from jax.experimental import io_callback
    if sys.argv[1]:
      jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    seen = []

    @jax.jit
    def f(x):
      jax.debug.print("sum={s}", s=x.sum())
      jax.debug.print("first={a}", a=x[0], ordered=True)
      y = jax.pure_callback(lambda a: np.sin(a),
                            jax.ShapeDtypeStruct(x.shape, x.dtype), x)
      z = io_callback(lambda a: np.asarray(a * 2),
                      jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)
      jax.debug.callback(lambda a: seen.append(np.asarray(a).tolist()), y)
      return y + z

    x = np.arange(3, dtype=np.float32)
    got = [np.asarray(f(x)).tolist(), np.asarray(f(x + 1)).tolist()]
    want = [(np.sin(v) + 2 * v).tolist() for v in (x, x + 1)]

    def loop(n):  # an ordered print in a loop: its token is in the carry
      def body(i, c):
        jax.debug.print("step={i}", i=i, ordered=True)
        return c + i
      return jax.lax.fori_loop(0, n, body, 0)

    total = int(jax.jit(loop)(3))
    # A Python scalar result is taken as JAX takes it (canonicalised); a
    # wrong shape is JAX's error.
    literal = float(jax.jit(lambda: jax.pure_callback(
        lambda: 1.5, jax.ShapeDtypeStruct((), np.float32)))())
    try:
      np.asarray(jax.jit(lambda: jax.pure_callback(
          lambda: np.zeros(2, np.float32),
          jax.ShapeDtypeStruct((3,), np.float32)))())
      bad = ""
    except Exception as e:  # pylint: disable=broad-except
      bad = str(e)
    # A callback that computes with JAX on our device while a program that
    # calls it runs there (eagerly, and under jit): it must not wait for
    # the device's worker, which is running that program.
    def with_jax(a):
      return np.asarray(2 * jnp.log(jnp.asarray(a) + 1))

    xs = jnp.array([1.0, 2.0, 3.0])
    want_nested = 2 * np.log(np.asarray(xs) + 1)
    nested = [bool(np.allclose(jax.pure_callback(
        with_jax, jax.ShapeDtypeStruct.like(xs), xs), want_nested))]
    nested_jit = jax.jit(lambda a: jax.pure_callback(
        with_jax, jax.ShapeDtypeStruct.like(a), a) * 2)
    nested += [bool(np.allclose(nested_jit(xs), 2 * want_nested))
               for _ in range(2)]
    # An exception in a callback is logged, with its traceback, as JAX's
    # impls log it, and the call fails.
    def boom(a):
      raise ValueError("boom in callback")

    try:
      jax.jit(lambda a: jax.pure_callback(
          boom, jax.ShapeDtypeStruct(a.shape, a.dtype), a))(
              np.ones(2, np.float32)).block_until_ready()
      boom_raised = False
    except Exception:  # pylint: disable=broad-except
      boom_raised = True
    # An error the result is never read for: JAX's effects barrier raises
    # it (the program is registered as calling host callbacks).
    try:
      jax.jit(lambda: jax.pure_callback(
          lambda: np.zeros(2, np.float32),
          jax.ShapeDtypeStruct((3,), np.float32)))()
      jax.effects_barrier()
      unread = ""
    except RuntimeError as e:
      unread = str(e)
    # shard_map: each of two devices calls back with its own shard.
    from jax.sharding import Mesh, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices("openxla_cpu")[:2]), ("d",))
    sm = jax.jit(jax.shard_map(
        lambda a: jax.pure_callback(
            lambda s: (s * 3).astype(s.dtype),
            jax.ShapeDtypeStruct(a.shape, a.dtype), a),
        mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    sharded = np.asarray(sm(np.arange(4, dtype=np.float32))).tolist()
    # jit over both devices: each callback runs once, on the first device,
    # with the whole value, and its result reaches both.
    from jax.sharding import NamedSharding
    spread = jax.device_put(np.arange(4, dtype=np.float32),
                            NamedSharding(mesh, P("d")))

    @jax.jit
    def g(a):
      jax.debug.print("whole={s}", s=a.sum())
      b = jax.pure_callback(lambda v: np.cos(v),
                            jax.ShapeDtypeStruct(a.shape, a.dtype), a)
      c = io_callback(lambda v: np.asarray(v + 1),
                      jax.ShapeDtypeStruct(a.shape, a.dtype), a)
      return b * 2 + c

    # A shard_map manual over one mesh axis of two: each shard prints once.
    import functools
    mesh2 = Mesh(np.array(jax.devices("openxla_cpu")[:2]).reshape(2, 1),
                 ("x", "y"))

    @functools.partial(jax.shard_map, mesh=mesh2, in_specs=P("x"),
                       out_specs=P("x"), axis_names=frozenset({"x"}))
    def part(a):
      jax.debug.print("part={i}:{s}", i=jax.lax.axis_index("x"), s=a.sum())
      return a * 2

    jax.block_until_ready(jax.jit(part)(np.arange(4, dtype=np.float32)))
    # partitioned=True: every device prints its own shard.
    jax.jit(lambda a: jax.debug.print("shard={a}", a=a, partitioned=True))(
        jax.device_put(np.arange(4, dtype=np.float32),
                       NamedSharding(mesh, P("d"))))
    jax.effects_barrier()
    v = np.arange(4, dtype=np.float32)
    across = bool(np.allclose(np.asarray(g(spread)), np.cos(v) * 2 + v + 1,
                              rtol=1e-6))
    # Arguments arrive as JAX arrays, on a CPU device with JAX's cpu
    # backend, else on ours; a pytree prints as JAX prints it.
    placed = []

    def record(a):
      placed.append([type(a).__name__, sorted({d.platform
                                               for d in a.devices()})])
      return np.asarray(a) + 1

    jax.block_until_ready(jax.jit(lambda a: jax.pure_callback(
        record, jax.ShapeDtypeStruct(a.shape, a.dtype), a))(v))
    jax.jit(lambda a: jax.debug.print("tree={}", dict(foo=a), ordered=True))(
        np.array(2, np.int32))
    # Outside jit, JAX calls its impls directly.
    jax.debug.callback(lambda a: print(f"eager={float(a.sum())}"),
                       jnp.ones(3))
    jax.debug.print("eager_print={}", jnp.arange(2))
    jax.effects_barrier()
    print("REPORT " + json.dumps({
        "platform": jax.default_backend(),
        "close": bool(np.allclose(got, want, rtol=1e-6)),
        "seen": bool(np.allclose(seen, [np.sin(x), np.sin(x + 1)],
                                 rtol=1e-6)),
        "sharded": sharded, "across": across,
        "loop": total, "literal": literal,
        "shape_error": "Incorrect output shape for return value #0" in bad,
        "unread_error": "Incorrect output shape" in unread,
        "nested": nested, "boom_raised": boom_raised, "placed": placed}))
""")


@pytest.mark.skipif(backends.cpu_compiler_module() is None,
                    reason="the cpu backend is not available")
@pytest.mark.parametrize("platforms", ["openxla_cpu", "openxla_cpu,cpu"])
def test_host_callbacks_run_on_our_platform(site, tmp_path, platforms):
  # JAX lowers Python callbacks for its built-in platforms only; the plugin
  # registers its own rules. With JAX's cpu backend beside ours the
  # callbacks get arrays on a CPU device, as JAX's impls pass them; without
  # it, arrays on our device (where JAX's impls would raise).
  cache = tmp_path / "cache"
  for _ in range(2):
    proc = _child(site, platforms, str(cache), script=_CALLBACKS,
                  backend="cpu")
    assert _report(proc) == {"platform": "openxla_cpu", "close": True,
                             "seen": True, "sharded": [0.0, 3.0, 6.0, 9.0],
                             "across": True, "loop": 3, "literal": 1.5,
                             "shape_error": True, "unread_error": True,
                             "nested": [True, True, True],
                             "boom_raised": True,
                             "placed": [["ArrayImpl", [
                                 "openxla_cpu" if platforms == "openxla_cpu"
                                 else "cpu"]]]}
    out = proc.stdout
    assert out.index("sum=3.0") < out.index("sum=6.0")
    assert out.index("first=0.0") < out.index("first=1.0")
    assert out.index("step=0") < out.index("step=1") < out.index("step=2")
    assert out.count("whole=6.0") == 1, out
    assert "jax.pure_callback failed" in proc.stderr, proc.stderr[-3000:]
    assert "boom in callback" in proc.stderr
    assert out.count("part=0:1.0") == 1 and out.count("part=1:5.0") == 1, out
    assert out.count("shard=[0. 1.]") == 1 and out.count("shard=[2. 3.]") == 1
    assert "tree={'foo': Array(2, dtype=int32)}" in out, out
    assert "eager=3.0" in out and "eager_print=[0 1]" in out, out
  # The callbacks' indices mean something in one process only: such a
  # program is never written to the persistent cache (the programs that
  # the callbacks themselves run are).
  folder = cache / "openxla_cpu"
  stored = sorted(folder.iterdir()) if folder.exists() else []
  assert stored
  calling = [p.name for p in stored if backends.calls_host(p.read_bytes())]
  assert not calling, calling
