"""End-to-end tests of the torch.compile backend against eager PyTorch:
forward passes, 3 SGD training steps, fallback of unsupported ops, bad
input, and `explain`."""

import copy
import gc
import threading
import warnings

import pytest

torch = pytest.importorskip(
    "torch", reason="torch (requirements-test.txt) is not installed")

# pylint: disable=g-import-not-at-top
import support
from pjrt.tools import plugin_choice
import torch_bridge
from torch_bridge._src import backend as backend_lib
from torch_bridge._src import runtime
from torch_bridge.testing import models
# pylint: enable=g-import-not-at-top

FORWARD_TOLERANCE = 1e-4
GRAD_TOLERANCE = 1e-3


@pytest.fixture(autouse=True)
def _fresh_start():
  models.fresh_start()
  yield


def _compiled_clusters(be):
  return [c for r in be.reports for c in r.clusters if c.compiled]


@pytest.mark.parametrize("name", ["mlp", "cnn", "lstm"])
def test_forward_matches_eager(name):
  case = models.CASES[name]
  be = torch_bridge.Backend()
  err = models.compare_inference(case.make(), case.inputs(), be)
  assert err <= FORWARD_TOLERANCE
  assert _compiled_clusters(be), "nothing ran through PJRT"
  assert all(not r.eager for r in be.reports), [r.eager for r in be.reports]


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_three_training_steps_match_eager(name):
  case = models.CASES[name]
  be = torch_bridge.Backend()
  result = models.compare_training(case.make(), case.inputs(), be, steps=3)
  assert result.outputs <= FORWARD_TOLERANCE
  assert result.grads <= GRAD_TOLERANCE
  assert result.params <= FORWARD_TOLERANCE
  assert result.buffers <= FORWARD_TOLERANCE  # BN running statistics
  kinds = {r.kind for r in be.reports if any(c.compiled for c in r.clusters)}
  assert kinds == {"forward", "backward"}


def test_max_pool_cnn_trains_without_fallback():
  nn = torch.nn
  model = nn.Sequential(
      nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
      nn.MaxPool2d(2), nn.Conv2d(8, 8, 3), nn.ReLU(),
      nn.MaxPool2d(3, stride=2, padding=1), nn.Flatten(), nn.Linear(32, 4))
  be = torch_bridge.Backend()
  result = models.compare_training(model, (torch.randn(2, 3, 12, 12),), be,
                                   steps=3)
  assert result.outputs <= FORWARD_TOLERANCE
  assert result.grads <= GRAD_TOLERANCE
  assert result.params <= FORWARD_TOLERANCE
  assert all(not r.eager for r in be.reports), [r.eager for r in be.reports]
  ops = set().union(*(c.ops for c in _compiled_clusters(be)))
  assert {"aten.max_pool2d_with_indices.default",
          "aten.max_pool2d_with_indices_backward.default"} <= ops


def test_unlowered_op_falls_back_between_clusters():
  case = models.CASES["unlowered"]
  be = torch_bridge.Backend()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    err = models.compare_inference(case.make(), case.inputs(), be)
  assert err <= FORWARD_TOLERANCE
  (report,) = be.reports
  assert len(_compiled_clusters(be)) == 2
  assert [e.op for e in report.eager] == [models.WithUnloweredOp.UNLOWERED_OP]
  assert "no lowering" in report.eager[0].reason
  fallbacks = [w for w in caught
               if issubclass(w.category, torch_bridge.FallbackWarning)]
  assert len(fallbacks) == 1
  assert "aten.cummax.default" in str(fallbacks[0].message)


def test_unlowered_op_trains():
  case = models.CASES["unlowered"]
  be = torch_bridge.Backend()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", torch_bridge.FallbackWarning)
    result = models.compare_training(case.make(), case.inputs(), be, steps=2)
  assert result.outputs <= FORWARD_TOLERANCE
  assert result.grads <= GRAD_TOLERANCE


def test_fallback_warns_once():
  case = models.CASES["unlowered"]
  model = case.make()
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with torch.no_grad():
      for _ in range(3):
        compiled(*case.inputs())
    torch._dynamo.reset()  # pylint: disable=protected-access
    with torch.no_grad():
      torch.compile(model, backend=torch_bridge.Backend(),
                    dynamic=False)(*case.inputs())
  assert sum(issubclass(w.category, torch_bridge.FallbackWarning)
             for w in caught) == 1


def test_require_full_compilation_makes_fallback_an_error():
  case = models.CASES["unlowered"]
  be = torch_bridge.Backend({"require_full_compilation": True})
  compiled = torch.compile(case.make(), backend=be, dynamic=False)
  with pytest.raises(Exception, match="aten.cummax.default") as info:
    with torch.no_grad():
      compiled(*case.inputs())
  # Dynamo wraps backend errors; ours is the cause.
  causes = []
  e = info.value
  while e is not None:
    causes.append(e)
    e = e.__cause__ or e.__context__
  assert any(isinstance(c, support.UnimplementedError) for c in causes)


def test_require_full_compilation_flag():
  case = models.CASES["unlowered"]
  with support.flags.override(torch_bridge_require_full_compilation=True):
    compiled = torch.compile(case.make(), backend=torch_bridge.Backend(),
                             dynamic=False)
    with pytest.raises(Exception, match="require_full_compilation"):
      with torch.no_grad():
        compiled(*case.inputs())


def test_small_clusters_stay_eager():
  model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
  x = torch.randn(2, 4)
  be = torch_bridge.Backend()  # default min_cluster_size=4
  with torch.no_grad():
    got = torch.compile(model, backend=be, dynamic=False)(x)
  assert models.max_relative_error(got, model(x)) <= FORWARD_TOLERANCE
  (report,) = be.reports
  assert not report.clusters
  assert report.eager and all("min_cluster_size=4" in e.reason
                              for e in report.eager)
  torch._dynamo.reset()  # pylint: disable=protected-access
  be1 = torch_bridge.Backend({"min_cluster_size": 1})
  with torch.no_grad():
    got = torch.compile(model, backend=be1, dynamic=False)(x)
  assert models.max_relative_error(got, model(x)) <= FORWARD_TOLERANCE
  assert len(_compiled_clusters(be1)) == 1


def test_plugin_compile_failure_falls_back(monkeypatch):
  def broken(text, plugin=runtime.DEFAULT_PLUGIN, threads=0):
    raise support.InternalError("planted compile failure")
  monkeypatch.setattr(runtime, "compile_program", broken)
  case = models.CASES["mlp"]
  be = torch_bridge.Backend()
  with pytest.warns(torch_bridge.FallbackWarning,
                    match="planted compile failure"):
    err = models.compare_inference(case.make(), case.inputs(), be)
  assert err <= FORWARD_TOLERANCE
  (cluster,) = be.reports[0].clusters
  assert not cluster.compiled and "planted" in cluster.fallback_reason


def test_weights_changed_in_place_are_seen():
  """Weights are read where they are (a view, made once): every way of
  writing them between calls is seen, also writes through `.data`, which
  bump no version counter, and a new storage assigned to `.data`."""
  model = models.MLP()
  x = torch.randn(4, 16)
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  with torch.no_grad():
    for _ in range(3):  # The views exist from the second call on.
      assert models.max_relative_error(compiled(x), model(x)) <= 1e-4
    model.net[0].weight.data.mul_(0.5)
    assert models.max_relative_error(compiled(x), model(x)) <= 1e-4
    model.net[2].bias.add_(1.0)
    assert models.max_relative_error(compiled(x), model(x)) <= 1e-4
    model.net[4].weight.data = torch.randn(4, 32)
    assert models.max_relative_error(compiled(x), model(x)) <= 1e-4
    x.mul_(2.0)  # An input the program views, written in place.
    assert models.max_relative_error(compiled(x), model(x)) <= 1e-4


def test_steady_calls_copy_no_inputs(monkeypatch):
  """Once the weights and the (same) input are viewed, a call transfers
  nothing into the plugin."""
  model = models.MLP()
  x = torch.randn(4, 16)
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  with torch.no_grad():
    compiled(x)
    compiled(x)
    transfers = []
    for name in ("upload", "view"):
      original = getattr(runtime._Lane, name)  # pylint: disable=protected-access
      def spy(*args, _original=original, _name=name):
        transfers.append(_name)
        return _original(*args)
      monkeypatch.setattr(runtime._Lane, name, spy)  # pylint: disable=protected-access
    for _ in range(3):
      assert models.max_relative_error(compiled(x), model(x)) <= 1e-4
    assert transfers == []
    # A new tensor each call (a batch, a tangent) is copied into the
    # slot's staging memory (its view made at the first call, whose x was
    # new then): no transfer either.
    for _ in range(3):
      fresh = torch.randn(4, 16)
      assert models.max_relative_error(compiled(fresh), model(fresh)) <= 1e-4
    assert transfers == []


def test_large_new_inputs_are_uploaded(monkeypatch):
  """An input above the staging size that is a new tensor each call is
  uploaded per call, and read right."""
  model = models.MLP()
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  rows = runtime._STAGE_MAX_BYTES // (16 * 4) + 1  # pylint: disable=protected-access
  with torch.no_grad():
    compiled(torch.randn(rows, 16))
    uploads = []
    original = runtime._Lane.upload  # pylint: disable=protected-access
    def spy(*args):
      uploads.append(1)
      return original(*args)
    monkeypatch.setattr(runtime._Lane, "upload", spy)  # pylint: disable=protected-access
    for _ in range(2):
      fresh = torch.randn(rows, 16)
      assert models.max_relative_error(compiled(fresh), model(fresh)) <= 1e-4
    assert len(uploads) == 2


def _square_mlp():
  return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh(),
                             torch.nn.Linear(16, 16), torch.nn.Tanh())


def test_outputs_are_tensors_of_their_own():
  """Outputs live in the memory of their PJRT buffers: writing one in place
  changes no input, no other output and no later result; an output passed
  back in (as its own buffer) is read with its writes."""
  model = _square_mlp()
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  x = torch.randn(8, 16)
  x_before = x.clone()
  with torch.no_grad():
    first = compiled(x)
    second = compiled(x)
    assert first.data_ptr() != second.data_ptr()
    first.add_(1.0)
    assert torch.equal(x, x_before)
    assert models.max_relative_error(second, model(x)) <= 1e-4
    assert models.max_relative_error(compiled(x), model(x)) <= 1e-4
    y = compiled(x)
    y.mul_(-3.0)
    assert models.max_relative_error(compiled(y), model(y)) <= 1e-4
    chained = compiled(compiled(compiled(x)))
    assert models.max_relative_error(chained, model(model(model(x)))) <= 1e-4
    del first, second, y
    assert models.max_relative_error(compiled(x), model(x)) <= 1e-4


def test_shared_call_structs_are_used_under_the_lock(monkeypatch):
  """Regression: outputs were once made into tensors after the program's
  lock was released, reading their addresses through the lane's shared
  Buffer_UnsafePointer struct; a concurrent call could rewrite it in
  between and the caller got a tensor over the other call's output."""
  original_init = runtime.Program.__init__

  def init(program, *args, **kwargs):
    original_init(program, *args, **kwargs)
    lane = program._lane  # pylint: disable=protected-access
    fn, struct, pointer = lane.pointer_call
    busy = program._busy  # pylint: disable=protected-access

    def checked(p, _fn=fn):
      assert busy.locked(), "Buffer_UnsafePointer's struct used unlocked"
      return _fn(p)
    lane.pointer_call = (checked, struct, pointer)
  monkeypatch.setattr(runtime.Program, "__init__", init)
  model = _square_mlp()
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  x = torch.randn(8, 16)
  with torch.no_grad():
    for _ in range(3):
      assert models.max_relative_error(compiled(x), model(x)) <= 1e-4


def test_concurrent_calls_match():
  """Calls from several threads at once (one takes the zero-copy path, the
  others copy)."""
  model = _square_mlp()
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  inputs = [torch.randn(8, 16) for _ in range(4)]
  with torch.no_grad():
    compiled(inputs[0])
    want = [model(x) for x in inputs]
  errors = []

  def work(i):
    with torch.no_grad():
      for _ in range(20):
        errors.append(models.max_relative_error(compiled(inputs[i]),
                                                want[i]))
  threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert len(errors) == 80 and max(errors) <= 1e-4


def test_plugin_execution_failure_falls_back(monkeypatch):
  def broken(program, inputs):
    raise support.InternalError("planted execution failure")
  monkeypatch.setattr(runtime.Program, "__call__", broken)
  case = models.CASES["mlp"]
  be = torch_bridge.Backend()
  with pytest.warns(torch_bridge.FallbackWarning,
                    match="planted execution failure"):
    err = models.compare_inference(case.make(), case.inputs(), be)
  assert err <= FORWARD_TOLERANCE
  (cluster,) = be.reports[0].clusters
  assert cluster.compiled and "planted" in cluster.fallback_reason


def test_lowering_bug_falls_back_not_crashes(monkeypatch):
  from torch_bridge._src import lowering  # pylint: disable=g-import-not-at-top
  def buggy(gm, name="x"):
    raise KeyError("planted bug")
  monkeypatch.setattr(lowering, "lower_graph", buggy)
  case = models.CASES["mlp"]
  be = torch_bridge.Backend()
  with pytest.warns(torch_bridge.FallbackWarning, match="KeyError"):
    err = models.compare_inference(case.make(), case.inputs(), be)
  assert err <= FORWARD_TOLERANCE


class _ComplexSquares(torch.nn.Module):

  def forward(self, x):
    y = x * x + x
    return y * y - 2 * x


def test_unsupported_dtype_falls_back():
  model = _ComplexSquares()
  x = torch.randn(4, 16, dtype=torch.complex64)  # complex is not lowered
  be = torch_bridge.Backend()
  with pytest.warns(torch_bridge.FallbackWarning, match="torch.complex64"):
    with torch.no_grad():
      got = torch.compile(model, backend=be, dynamic=False)(x)
      want = model(x)
  assert torch.equal(got, want)  # the same eager kernels ran
  eager = [e for r in be.reports for e in r.eager]
  assert eager and all("complex64" in e.reason for e in eager), eager
  assert not _compiled_clusters(be)


BF16_TOLERANCE = 2 ** -7  # one rounding of a bfloat16 (8 bits of mantissa)


def _bf16_step(model, inputs, backend=None):
  """(output, gradients as one vector) of one training step's forward and
  backward of a copy of `model`."""
  model = copy.deepcopy(model).train()
  run = (torch.compile(model, backend=backend, dynamic=False) if backend
         else model)
  out = run(*inputs)
  out.float().pow(2).mean().backward()
  return out, torch.cat([p.grad.float().flatten()
                         for p in model.parameters()])


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_bfloat16_models_match_eager(name):
  """bf16 ops compute in f32 and round once, as torch's CPU kernels do:
  inference agrees with eager bf16 up to a rounding here and there, and a
  training step is as close to the f32 model as eager bf16 is (the
  decomposed backward rounds in other places than eager's fused kernels,
  so the two bf16 results differ by about their distance to f32)."""
  case = models.CASES[name]
  model = case.make()
  inputs = case.inputs()
  low = copy.deepcopy(model).to(torch.bfloat16)
  low_inputs = [x.to(torch.bfloat16) for x in inputs]
  be = torch_bridge.Backend()
  assert models.compare_inference(low, low_inputs, be) <= BF16_TOLERANCE
  assert _compiled_clusters(be) and all(not r.eager for r in be.reports)

  want_out, want_grads = _bf16_step(model, inputs)
  eager_out, eager_grads = _bf16_step(low, low_inputs)
  be = torch_bridge.Backend()
  got_out, got_grads = _bf16_step(low, low_inputs, be)
  assert got_out.dtype == torch.bfloat16
  assert all(not r.eager for r in be.reports)
  for got, eager, want in ((got_out, eager_out, want_out),
                           (got_grads, eager_grads, want_grads)):
    eager_error = models.max_relative_error(eager, want)
    assert models.max_relative_error(got, want) <= max(
        1.5 * eager_error, BF16_TOLERANCE)


def test_shape_change_recompiles_and_programs_are_cached():
  model = models.MLP()
  be = torch_bridge.Backend()
  compiled = torch.compile(model, backend=be, dynamic=False)
  with torch.no_grad():
    for batch in (4, 6, 4):
      x = torch.randn(batch, 16)
      assert models.max_relative_error(compiled(x), model(x)) <= 1e-4
  assert len(be.reports) == 2  # one graph per shape, the third call reuses
  torch._dynamo.reset()  # pylint: disable=protected-access
  be2 = torch_bridge.Backend()
  with torch.no_grad():
    torch.compile(model, backend=be2, dynamic=False)(torch.randn(4, 16))
  assert [c.cache_hit for c in _compiled_clusters(be2)] == [True]


def test_dynamic_shapes_compile_once_per_shape():
  # Without dynamic=False, Dynamo marks the batch dimension dynamic once it
  # changes; those graphs ran eagerly. Each shape is now compiled.
  model = models.MLP()
  reference = copy.deepcopy(model)
  be = torch_bridge.Backend({"min_cluster_size": 1})
  compiled = torch.compile(model, backend=be)
  with warnings.catch_warnings():
    warnings.simplefilter("error", backend_lib.FallbackWarning)
    for batch in (4, 6, 9, 6):
      x = torch.randn(batch, 16)
      got, want = compiled(x), reference(x)
      assert models.max_relative_error(got, want) <= FORWARD_TOLERANCE
      got.pow(2).sum().backward()
      want.pow(2).sum().backward()
      for p, q in zip(model.parameters(), reference.parameters()):
        assert models.max_relative_error(p.grad, q.grad) <= GRAD_TOLERANCE
  # Forward and backward for each of the three shapes; the fourth call
  # reuses the second's programs.
  assert [r.kind for r in be.reports] == ["forward", "backward"] * 3
  assert all(r.clusters and not r.eager for r in be.reports)


def test_dynamic_shapes_past_the_limit_run_eagerly(monkeypatch):
  monkeypatch.setattr(backend_lib, "MAX_SPECIALIZATIONS", 2)
  model = models.MLP()
  be = torch_bridge.Backend()
  compiled = torch.compile(model, backend=be)
  with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for batch in (4, 6, 9, 11, 13):
      x = torch.randn(batch, 16)
      assert models.max_relative_error(compiled(x), model(x)) <= 1e-4
  # 4 static, then 6 and 9 specialized; 11 and 13 eagerly, said once.
  assert len(be.reports) == 3
  messages = [str(w.message) for w in caught
              if issubclass(w.category, backend_lib.FallbackWarning)]
  assert len(messages) == 1 and "more than 2 shapes" in messages[0]


def test_training_dropout_stays_in_its_cluster():
  # Dropout in training was an eager op that cut the forward graph in two;
  # its random draw now runs eagerly before one compiled cluster.
  p = 0.3
  model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(),
                              torch.nn.Dropout(p), torch.nn.Linear(64, 64),
                              torch.nn.Tanh())
  be = torch_bridge.Backend({"require_full_compilation": True})
  compiled = torch.compile(model, backend=be, dynamic=False)
  x = torch.randn(32, 16)
  torch.manual_seed(1)
  out = compiled(x)
  out.sum().backward()
  forward = be.reports[0]
  assert forward.kind == "forward" and len(forward.clusters) == 1
  assert [e.op for e in forward.eager] == ["aten.rand.default"]
  # The mask comes from torch's generator: the same draw made eagerly
  # gives the same output and gradients.
  reference = copy.deepcopy(model)
  for q in reference.parameters():
    q.grad = None
  torch.manual_seed(1)
  keep = torch.rand(32, 64) >= p
  hidden = torch.tanh(reference[0](x)) * keep * (1 / (1 - p))
  want = reference[4](reference[3](hidden))
  want.sum().backward()
  assert models.max_relative_error(out, want) <= FORWARD_TOLERANCE
  for got_p, want_p in zip(model.parameters(), reference.parameters()):
    assert models.max_relative_error(got_p.grad, want_p.grad) <= (
        GRAD_TOLERANCE)
  # Repeatable under torch.manual_seed; another seed, another mask.
  torch.manual_seed(1)
  assert torch.equal(compiled(x), out)
  torch.manual_seed(2)
  assert not torch.equal(compiled(x), out)


def test_dropout_keeps_one_minus_p_and_scales():
  p = 0.25
  model = torch.nn.Dropout(p)
  be = torch_bridge.Backend({"min_cluster_size": 1})
  compiled = torch.compile(model, backend=be, dynamic=False)
  x = torch.ones(256, 256, requires_grad=True)
  out = compiled(x)
  scale = torch.tensor(1 / (1 - p))
  assert ((out == 0) | (out == scale)).all()
  kept = (out != 0).float().mean().item()
  assert abs(kept - (1 - p)) < 0.01  # 65536 draws: sd 0.0017
  out.sum().backward()
  torch.testing.assert_close(x.grad, out.detach())  # d/dx = mask / (1-p)
  assert be.reports[0].clusters and be.reports[0].clusters[0].compiled


class _Attention(torch.nn.Module):
  """Multi-head attention as transformers' "sdpa" models write it: a
  RoPE-style rotate-half of the queries (its gradient is a slice_scatter)
  and torch's scaled_dot_product_attention, with grouped key / value
  heads."""

  def __init__(self, heads, kv_heads, head_dim=8, causal=True):
    super().__init__()
    self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
    self.causal = causal
    self.q = torch.nn.Linear(32, heads * head_dim)
    self.kv = torch.nn.Linear(32, 2 * kv_heads * head_dim)
    self.o = torch.nn.Linear(heads * head_dim, 32)

  def forward(self, x, mask=None):
    b, n, _ = x.shape
    q = self.q(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
    k, v = self.kv(x).view(b, n, 2, self.kv_heads,
                           self.head_dim).permute(2, 0, 3, 1, 4)
    half = self.head_dim // 2
    q = q + torch.cat([-q[..., half:], q[..., :half]], -1)
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=self.causal and mask is None,
        enable_gqa=self.kv_heads != self.heads)
    return self.o(out.transpose(1, 2).reshape(b, n, -1))


@pytest.mark.parametrize("heads,kv_heads,causal,mask", [
    (4, 4, True, None),
    (4, 2, True, None),       # grouped-query attention
    (4, 4, False, None),
    (4, 4, False, "bool"),
    (4, 4, False, "float"),
])
def test_attention_gradients_match_eager(heads, kv_heads, causal, mask,
                                         monkeypatch):
  # torch decomposes CPU flash attention into the math attention, whose
  # second output is the probabilities, but autograd still called the flash
  # backward op eagerly with them as its log-sum-exp: wrong gradients (a
  # ViT's were off by a factor of 40). Its gradient is now decomposed too.
  calls = []
  decomposition = backend_lib.ops_nn.flash_attention_backward_decomposition

  def counted(*args, **kwargs):
    calls.append(1)
    return decomposition(*args, **kwargs)

  monkeypatch.setattr(backend_lib.ops_nn,
                      "flash_attention_backward_decomposition", counted)
  model = _Attention(heads, kv_heads, causal=causal)
  reference = copy.deepcopy(model)
  x = torch.randn(2, 12, 32)
  m = None
  if mask == "bool":
    m = torch.rand(12, 12) > 0.3
    m.fill_diagonal_(True)
  elif mask == "float":
    m = torch.randn(12, 12)
  be = torch_bridge.Backend()
  compiled = torch.compile(model, backend=be, dynamic=False)
  got, want = compiled(x, m), reference(x, m)
  assert models.max_relative_error(got, want) <= FORWARD_TOLERANCE
  got.pow(2).sum().backward()
  want.pow(2).sum().backward()
  for (name, p), q in zip(model.named_parameters(), reference.parameters()):
    if name == "kv.bias":  # Its key half's gradient is zero up to rounding.
      p, q = (t.grad.view(2, -1)[1] for t in (p, q))
      assert models.max_relative_error(p, q) <= GRAD_TOLERANCE
      continue
    assert models.max_relative_error(p.grad, q.grad) <= GRAD_TOLERANCE, name
  backward = [r for r in be.reports if r.kind == "backward"]
  assert backward and all(r.clusters and not r.eager for r in backward)
  if mask is None:
    assert calls  # the flash attention path, whose gradient is decomposed


@pytest.mark.parametrize("causal", [True, False])
def test_attention_backward_decomposition_from_a_log_sum_exp(causal):
  # The op's own forward gives a real log-sum-exp (not the probabilities
  # of torch's decomposition): the probabilities are recomputed from it.
  q, k, v, grad = (torch.randn(2, 3, 10, 8, dtype=torch.float64)
                   for _ in range(4))
  aten = torch.ops.aten
  out, lse = aten._scaled_dot_product_flash_attention_for_cpu(  # pylint: disable=protected-access
      q, k, v, 0.0, causal)
  want = aten._scaled_dot_product_flash_attention_for_cpu_backward(  # pylint: disable=protected-access
      grad, q, k, v, out, lse, 0.0, causal)
  got = backend_lib.ops_nn.flash_attention_backward_decomposition(
      grad, q, k, v, out, lse, 0.0, causal)
  for g, w in zip(got, want):
    torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-9)


def _trains_fully_compiled(model, inputs, steps=2, **options):
  """Trains `model` against eager under require_full_compilation: outputs
  and gradients match, and every graph is one cluster with nothing eager.
  Returns the comparison."""
  be = torch_bridge.Backend({"require_full_compilation": True, **options})
  result = models.compare_training(model, inputs, be, steps=steps)
  assert result.outputs <= FORWARD_TOLERANCE
  assert result.grads <= GRAD_TOLERANCE
  assert [len(r.clusters) for r in be.reports] == [1] * len(be.reports)
  assert not [e for r in be.reports for e in r.eager]
  return result


def test_clamped_and_leaky_activations_train_compiled():
  # ReLU6 (MobileNet), ELU / SELU and LeakyReLU had no lowering: each one
  # cut its graph and ran eagerly.
  model = torch.nn.Sequential(
      torch.nn.Linear(16, 32), torch.nn.ReLU6(), torch.nn.Linear(32, 32),
      torch.nn.ELU(0.7), torch.nn.Linear(32, 32), torch.nn.LeakyReLU(0.1),
      torch.nn.Linear(32, 32), torch.nn.SELU(), torch.nn.Linear(32, 4),
      torch.nn.Hardtanh(-0.5, 0.5))
  _trains_fully_compiled(model, (torch.randn(8, 16) * 3,), steps=3)


@pytest.mark.parametrize("norm", ["group", "instance"])
def test_group_and_instance_norm_train_compiled(norm):
  # Neither had a lowering (diffusion U-Nets use GroupNorm, style transfer
  # InstanceNorm): they now take torch's decompositions.
  layer = (torch.nn.GroupNorm(4, 16) if norm == "group" else
           torch.nn.InstanceNorm2d(16, affine=True))
  model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), layer,
                              torch.nn.SiLU(), torch.nn.Conv2d(16, 4, 1),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 36, 3))
  _trains_fully_compiled(model, (torch.randn(2, 3, 6, 6),), steps=3)


@pytest.mark.parametrize("cin,cout,groups,stride,dilation", [
    (8, 8, 8, 1, 1),     # depthwise (MobileNet)
    (8, 16, 8, 2, 1),    # depthwise, channel multiplier 2, strided
    (8, 12, 4, 1, 2),    # grouped (ResNeXt), dilated
])
def test_grouped_convolutions_train_compiled(cin, cout, groups, stride,
                                             dilation):
  # Their convolution_backward had no lowering for groups > 1: depthwise
  # layers trained eagerly.
  model = torch.nn.Sequential(
      torch.nn.Conv2d(3, cin, 1), torch.nn.Tanh(),
      torch.nn.Conv2d(cin, cout, 3, stride=stride, dilation=dilation,
                      padding=dilation, groups=groups), torch.nn.Tanh())
  result = _trains_fully_compiled(model, (torch.randn(2, 3, 9, 9),),
                                  min_cluster_size=1)
  assert result.params <= FORWARD_TOLERANCE


@pytest.mark.parametrize("k,stride,padding,output_padding,dilation,groups", [
    (2, 2, 0, 0, 1, 1),     # the U-Net / DCGAN upsampling layer
    (3, 2, 1, 1, 1, 1),
    (3, 1, 1, 0, 2, 1),
    (4, 2, 1, 0, 1, 1),
    (3, 2, 1, 1, 1, 2),     # grouped
    (2, 2, 0, 0, 1, 4),     # depthwise, channel multiplier 3 / 2
])
def test_transposed_convolutions_train_compiled(k, stride, padding,
                                                output_padding, dilation,
                                                groups):
  # Transposed convolutions had no lowering, forward or backward; with
  # groups their gradient stayed eager.
  model = torch.nn.Sequential(
      torch.nn.Conv2d(3, 4, 1), torch.nn.Tanh(),
      torch.nn.ConvTranspose2d(4, 6 if groups < 4 else 12, k, stride=stride,
                               padding=padding,
                               output_padding=output_padding,
                               dilation=dilation, groups=groups),
      torch.nn.Tanh())
  result = _trains_fully_compiled(model, (torch.randn(2, 3, 7, 7),),
                                  min_cluster_size=1)
  assert result.params <= FORWARD_TOLERANCE


@pytest.mark.parametrize("k,padding,stride", [(1, 1, 1), (2, 2, 1),
                                              (3, 4, 3)])
def test_convolutions_padded_beyond_their_kernel_train_compiled(k, padding,
                                                                stride):
  # Padding wider than the dilated kernel left the gradient eager.
  model = torch.nn.Sequential(
      torch.nn.Conv2d(3, 4, 1), torch.nn.Tanh(),
      torch.nn.Conv2d(4, 5, k, padding=padding, stride=stride),
      torch.nn.Tanh())
  _trains_fully_compiled(model, (torch.randn(2, 3, 7, 6),),
                         min_cluster_size=1)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_upsampling_trains_compiled(mode):
  # torch decomposes upsampling into advanced indexing with whole dims
  # before the index tensors (x[:, :, ih, iw]) and its gradient into an
  # accumulating index_put with two index tensors; both were eager.
  model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1),
                              torch.nn.Upsample(scale_factor=2, mode=mode),
                              torch.nn.Conv2d(4, 2, 3, padding=1))
  _trains_fully_compiled(model, (torch.randn(2, 3, 6, 5),),
                         min_cluster_size=1)


@pytest.mark.parametrize("output_size",
                         [(1, 1), (2, 3), (3, None), (4, 4), (4, None),
                          (5, 2)])
def test_adaptive_max_pool_trains_compiled(output_size):
  # adaptive_max_pool2d (and the gradient autograd emits for it) had no
  # lowering; where the output divides the input it is a max pool, else
  # its windows are gathered (those of (4, 4) from 6 x 6 overlap; (5, 2)
  # from 6 x 7 has windows of two widths).
  model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1),
                              torch.nn.AdaptiveMaxPool2d(output_size),
                              torch.nn.Flatten(), torch.nn.LazyLinear(2))
  x = torch.randn(2, 3, 6, 7 if output_size == (5, 2) else 6)
  model(x)  # materialise the lazy layer
  _trains_fully_compiled(model, (x,), min_cluster_size=1)


def test_uneven_adaptive_average_pooling_trains_compiled():
  # Adaptive average pooling with uneven windows had no lowering; torch's
  # decomposition of it uses lowered ops.
  model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1),
                              torch.nn.AdaptiveAvgPool2d((4, 5)),
                              torch.nn.Flatten(), torch.nn.Linear(80, 2))
  _trains_fully_compiled(model, (torch.randn(2, 3, 6, 7),),
                         min_cluster_size=1)


class _Windows(torch.nn.Module):
  """Overlapping windows (Tensor.unfold, an as_strided that re-reads
  elements) along time and features, and a triu_indices table."""

  def __init__(self):
    super().__init__()
    self.proj = torch.nn.Linear(8, 8)
    self.mix = torch.nn.Linear(32, 5)

  def forward(self, x):
    h = torch.tanh(self.proj(x))  # [B, 10, 8]
    w = h.unfold(1, 4, 2).mean(-1)  # [B, 4, 8]: windows overlap by 2
    f = h.unfold(2, 3, 1).sum(-1).mean((1, 2))  # [B]: step 1
    rows, cols = torch.triu_indices(4, 4)
    block = h[:, 0, :4, None] * h[:, 1, None, :4]  # [B, 4, 4]
    pairs = block[:, rows, cols].mean(-1)  # its upper triangle
    return self.mix(w.flatten(1)) + (f + pairs)[:, None]


def test_unfold_windows_and_triu_indices_train_compiled():
  # Tensor.unfold (overlapping windows: a gather of every position; its
  # gradient an accumulating index_put) and triu_indices ran eagerly.
  _trains_fully_compiled(_Windows(), (torch.randn(2, 10, 8),),
                         min_cluster_size=1)


class _Bags(torch.nn.Module):
  """Bags of embeddings (EmbeddingBag) in sum, mean and weighted-sum mode,
  with empty bags, a padding index, a last offset and fixed-length bags."""

  def __init__(self):
    super().__init__()
    self.table = torch.nn.Parameter(torch.randn(12, 6))
    self.head = torch.nn.Linear(6, 3)

  def forward(self, idx, offsets, weights, rows):
    f = torch.nn.functional.embedding_bag
    t = torch.tanh(self.table * 1.5)  # the table a computed value too
    a = f(idx, self.table, offsets, mode="sum")
    b = f(idx, t, offsets, mode="mean", padding_idx=4)
    c = f(idx, self.table, offsets, mode="sum", per_sample_weights=weights)
    d = f(idx, self.table, torch.cat([offsets, offsets.new_tensor([9])]),
          mode="mean", include_last_offset=True)
    e = f(rows, self.table, mode="mean")  # [bags, length]: fixed bags
    return self.head(a + b + c + d) + e.sum(0, keepdim=True)[:, :3]


def test_embedding_bags_train_compiled():
  # embedding_bag (its op and its gradient op) ran eagerly.
  idx = torch.tensor([1, 4, 4, 7, 2, 11, 4, 0, 3])
  offsets = torch.tensor([0, 3, 3, 6])  # bag 1 is empty
  weights = torch.rand(9)
  rows = torch.tensor([[1, 2], [5, 5], [0, 11]])
  _trains_fully_compiled(_Bags(), (idx, offsets, weights, rows),
                         min_cluster_size=1)


def test_median_and_kthvalue_compile_over_the_sort():
  # median and kthvalue ran eagerly. Values equal torch's (a NaN in a
  # slice makes its median NaN); indices where no values tie (torch leaves
  # the index of equal values open).
  nan = float("nan")
  x = torch.tensor([[3., 1., 2., 2., 5., 2.], [1., nan, 3., nan, 0., 2.],
                    [4., 4., 4., 1., 1., 1.]])
  distinct = torch.randperm(20).reshape(4, 5).float()

  def fn(x, distinct):
    return (torch.median(x, 1).values, torch.median(x[:, :5], 1).values,
            torch.median(x, 0, keepdim=True).values,
            torch.kthvalue(x, 2, 1).values, torch.kthvalue(x, 5, 1).values,
            *torch.median(distinct, 1), *torch.kthvalue(distinct, 3, 0),
            *torch.median(distinct.long(), 0))

  be = torch_bridge.Backend({"min_cluster_size": 1,
                             "require_full_compilation": True})
  got = torch.compile(fn, backend=be, dynamic=False)(x, distinct)
  for g, w in zip(got, fn(x, distinct)):
    assert g.dtype == w.dtype and g.shape == w.shape
    assert torch.equal(g, w) or bool(((g == w) | (g.isnan() & w.isnan()))
                                     .all()), (g, w)


def test_uneven_adaptive_max_pool_matches_torch_indices_and_nan():
  # The gathered windows repeat a narrow window's last position; the
  # maximum's first index must still be torch's, ties and NaN included.
  x = torch.randn(2, 3, 7, 5)
  x[..., 0, 0] = x[..., 0, 1]
  x[0, 0, 3, 2] = float("nan")
  pool = torch.nn.AdaptiveMaxPool2d((3, 4), return_indices=True)
  want = pool(x)
  got = torch.compile(pool, backend=torch_bridge.Backend(
      {"min_cluster_size": 1, "require_full_compilation": True}),
      dynamic=False)(x)
  torch.testing.assert_close(got[0], want[0], equal_nan=True)
  assert torch.equal(got[1], want[1])


def test_graph_break_parts_run_eagerly_and_match():
  case = models.CASES["torch_lstm"]  # nn.LSTM is not traced by Dynamo.
  be = torch_bridge.Backend()
  result = models.compare_training(case.make(), case.inputs(), be, steps=2)
  assert result.outputs <= FORWARD_TOLERANCE
  assert result.grads <= GRAD_TOLERANCE


def test_explain_prints_clusters_fallbacks_and_picture(capsys):
  case = models.CASES["unlowered"]
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", torch_bridge.FallbackWarning)
    result = torch_bridge.explain(case.make(), *case.inputs())
  text = capsys.readouterr().out
  assert result.graph_count == 1 and result.graph_break_count == 0
  assert len(result.clusters) == 2
  assert result.fallback_ops() == {
      "aten.cummax.default": "no lowering for aten.cummax.default"}
  assert "eager aten.cummax.default x1: no lowering" in text
  assert "[fused_0: PJRT" in text and "[fused_1: PJRT" in text
  assert "clusters: 2 (2 compiled), eager nodes: 1" in text


def test_options_are_validated():
  with pytest.raises(support.InvalidArgumentError, match="no_such_option"):
    torch_bridge.Options.make({"no_such_option": 1})
  with pytest.raises(support.InvalidArgumentError, match="min_cluster_size"):
    torch_bridge.Options.make({"min_cluster_size": 0})
  with pytest.raises(support.InvalidArgumentError, match="partitioner"):
    torch_bridge.Options.make({"partitioner": "greedy"})
  for bad in (-1, 1.5, True, "2"):
    with pytest.raises(support.InvalidArgumentError,
                       match="intra_op_parallelism_threads"):
      torch_bridge.Options.make({"intra_op_parallelism_threads": bad})


def test_plugin_threads_follow_torch_unless_set(monkeypatch):
  # By default a cluster runs on as many threads as torch's eager ops
  # (torch's threads and the plugin's would otherwise compete for the
  # cores); the option sets it, 0 leaves the plugin's own default.
  monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
  assert torch_bridge.Options.make({}).threads == 1
  assert torch_bridge.Options.make(
      {"intra_op_parallelism_threads": 3}).threads == 3
  assert torch_bridge.Options.make(
      {"intra_op_parallelism_threads": 0}).threads == 0
  case = models.CASES["mlp"]
  for threads in (None, 2):
    torch._dynamo.reset()  # pylint: disable=protected-access
    options = ({} if threads is None else
               {"intra_op_parallelism_threads": threads})
    be = torch_bridge.Backend(options)
    cmp = models.compare_training(case.make(), case.inputs(), be, steps=1)
    assert cmp.outputs <= 1e-4 and cmp.grads <= 1e-3
    key = (runtime.DEFAULT_PLUGIN, threads or 1)
    assert key in runtime._clients  # pylint: disable=protected-access
    assert _compiled_clusters(be)


def test_min_cut_saves_no_views_for_the_backward():
  # A saved view (the transpose a weight gradient's matmul reads) would be
  # a transposing copy in the forward program and one more output; the
  # backward recomputes it, where it is free.
  case = models.CASES["mlp"]
  be = torch_bridge.Backend({"partitioner": "min_cut"})
  models.compare_training(case.make(), case.inputs(), be, steps=1)
  forward = next(r for r in be.reports if r.kind == "forward")
  (cluster,) = forward.clusters
  returned = cluster.program.split("return", 1)[1].split(":", 1)[0]
  transposed = {line.split("=", 1)[0].strip()
                for line in cluster.program.splitlines()
                if "stablehlo.transpose" in line}
  assert transposed and not transposed & {
      v.strip() for v in returned.split(",")}


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
def test_training_matches_with_either_partitioner(partitioner):
  """The min-cut split saves fewer activations than the default one and
  recomputes the rest in the backward; both train as eager does."""
  case = models.CASES["lstm"]
  be = torch_bridge.Backend({"partitioner": partitioner})
  cmp = models.compare_training(case.make(), case.inputs(), be, steps=2)
  assert cmp.outputs <= 1e-4 and cmp.grads <= 1e-3 and cmp.params <= 1e-4
  forward = next(r for r in be.reports if r.kind == "forward")
  assert forward.clusters and all(c.compiled for c in forward.clusters)


_xla_cpu_pjrt_path = plugin_choice.xla_cpu_pjrt_path


@pytest.mark.skipif(_xla_cpu_pjrt_path() is None,
                    reason="xla-cpu-pjrt (requirements-test.txt) is not "
                    "installed")
@pytest.mark.parametrize("name", ["cnn", "unlowered"])
def test_training_on_the_real_xla_cpu_plugin(name):
  case = models.CASES[name]
  be = torch_bridge.Backend({"plugin": _xla_cpu_pjrt_path()})
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", torch_bridge.FallbackWarning)
    result = models.compare_training(case.make(), case.inputs(), be, steps=3)
  assert result.outputs <= FORWARD_TOLERANCE
  assert result.grads <= GRAD_TOLERANCE
  assert result.params <= FORWARD_TOLERANCE
  assert result.buffers <= FORWARD_TOLERANCE
  compiled = _compiled_clusters(be)
  assert compiled and all(not c.fallback_reason for c in compiled)


def test_registered_by_name():
  torch_bridge.register()
  model = models.MLP()
  x = torch.randn(3, 16)
  compiled = torch.compile(model, backend=torch_bridge.BACKEND_NAME,
                           dynamic=False, options={"min_cluster_size": 2})
  with torch.no_grad():
    assert models.max_relative_error(compiled(x), model(x)) <= 1e-4


def test_eager_ops_option_forces_fallback():
  case = models.CASES["mlp"]
  be = torch_bridge.Backend({"eager_ops": ["aten.tanh.default"]})
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", torch_bridge.FallbackWarning)
    err = models.compare_inference(case.make(), case.inputs(), be)
  assert err <= FORWARD_TOLERANCE
  eager = [e.op for r in be.reports for e in r.eager]
  assert "aten.tanh.default" in eager


def test_output_buffers_are_released_with_their_tensors():
  """An output's buffer, and its entry in the table of program outputs
  that later calls take as buffers, go with the last tensor over it; a
  tensor over an output's memory that is not the whole output in order is
  no such buffer."""
  model = _square_mlp()
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  x = torch.randn(8, 16)
  with torch.no_grad():
    compiled(x)
    out = compiled(x)
    pointer = out.data_ptr()
    assert pointer in runtime._produced  # pylint: disable=protected-access
    # Same start, type and shape, another order.
    shuffled = out.as_strided((8, 16), (1, 8))
    del out
    assert pointer in runtime._produced  # pylint: disable=protected-access
    assert models.max_relative_error(compiled(shuffled),
                                     model(shuffled)) <= 1e-4
    del shuffled
    gc.collect()
    assert pointer not in runtime._produced  # pylint: disable=protected-access


def test_small_output_buffers_are_destroyed_together():
  """The buffer of a small output whose last tensor went waits with others
  and is destroyed by the next program call (or release_pending); its
  memory then holds later outputs, which come out right."""
  model = _square_mlp()
  compiled = torch.compile(model, backend=torch_bridge.Backend(),
                           dynamic=False)
  x = torch.randn(8, 16)
  with torch.no_grad():
    want = model(x)
    compiled(x)
    out = compiled(x)
    gc.collect()  # (garbage of earlier tests would wait here too)
    runtime.release_pending()
    pointer = out.data_ptr()
    assert pointer in runtime._produced  # pylint: disable=protected-access
    del out
    assert pointer not in runtime._produced  # pylint: disable=protected-access
    assert [rec[2] for rec in runtime._pending] == [pointer]  # pylint: disable=protected-access
    assert runtime.release_pending() == 1
    assert not runtime._pending  # pylint: disable=protected-access
    again = compiled(x)
    assert models.max_relative_error(again, want) <= 1e-4
    gc.collect()
    runtime.release_pending()
    del again
    # The next call destroys what waits before it runs.
    assert len(runtime._pending) == 1  # pylint: disable=protected-access
    last = compiled(x)
    assert not runtime._pending  # pylint: disable=protected-access
    assert models.max_relative_error(last, want) <= 1e-4
