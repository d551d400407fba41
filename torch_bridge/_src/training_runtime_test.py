"""The lean training runtime against AOTAutograd's: which graphs take it,
and that they train exactly as on AOTAutograd's runtime and as eager."""

import copy
import gc
import warnings

import pytest

torch = pytest.importorskip(
    "torch", reason="torch (requirements-test.txt) is not installed")

# pylint: disable=g-import-not-at-top
import support
import torch_bridge
from torch_bridge._src import backend
from torch_bridge._src import helpers
from torch_bridge._src import runtime
from torch_bridge._src import training_runtime
from torch_bridge.testing import models
# pylint: enable=g-import-not-at-top

nn = torch.nn


@pytest.fixture(autouse=True)
def _fresh_start():
  models.fresh_start()
  yield


def _train(model, inputs, options, steps=3, loss=None):
  """(outputs, gradients, parameters) after `steps` SGD steps of a copy
  of `model` compiled with our backend (None: eager), and the backend."""
  model = copy.deepcopy(model)
  be = torch_bridge.Backend(options) if options is not None else None
  run = (torch.compile(model, backend=be, dynamic=False) if be is not None
         else model)
  opt = torch.optim.SGD(model.parameters(), lr=0.05)
  loss = loss or (lambda out: out.pow(2).mean())
  outs, grads = [], []
  for _ in range(steps):
    opt.zero_grad()
    out = run(*inputs)
    loss(out).backward()
    outs.append([o.detach().clone() for o in (
        out if isinstance(out, tuple) else (out,))])
    grads.append([p.grad.clone() for p in model.parameters()
                  if p.grad is not None])
    opt.step()
  return outs, grads, [p.detach().clone() for p in model.parameters()], be


def _assert_same(a, b, exact):
  for x, y in zip(a, b):
    if isinstance(x, list):
      assert len(x) == len(y)
      _assert_same(x, y, exact)
    elif exact:
      assert torch.equal(x, y)
    else:
      torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


def _check_against_aot_and_eager(model, inputs, lean_expected, loss=None,
                                 options=None):
  options = dict(options or {})
  lean = _train(model, inputs, options, loss=loss)
  torch._dynamo.reset()  # pylint: disable=protected-access
  aot = _train(model, inputs, {**options, "lean_runtime": False}, loss=loss)
  eager = _train(model, inputs, None, loss=loss)
  runtimes = lean[3].training
  assert runtimes, "no training graph was compiled"
  assert [t.lean for t in runtimes] == [lean_expected] * len(runtimes), [
      (t.lean, t.reason) for t in runtimes]
  assert all(not t.lean and t.reason == "disabled"
             for t in aot[3].training)
  # The same programs on either runtime: the same bits.
  for got, want in zip(lean[:3], aot[:3]):
    _assert_same(got, want, exact=True)
  for got, want in zip(lean[:3], eager[:3]):
    _assert_same(got, want, exact=False)
  return runtimes


def test_plain_models_take_the_lean_runtime():
  for name in ("mlp", "lstm", "unlowered"):
    torch._dynamo.reset()  # pylint: disable=protected-access
    case = models.CASES[name]
    _check_against_aot_and_eager(case.make(), case.inputs(), True)


def test_batch_norm_running_statistics_keep_aot_runtime():
  model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Tanh(),
                        nn.Linear(8, 3))
  runtimes = _check_against_aot_and_eager(model, (torch.randn(5, 6),), False)
  assert runtimes[0].reason == "an input is mutated"


class _TwoOutputs(nn.Module):
  """An output the loss ignores (its gradient arrives as None and is
  materialized as zeros) beside one it reads."""

  def __init__(self):
    super().__init__()
    self.a = nn.Linear(6, 8)
    self.b = nn.Linear(8, 4)

  def forward(self, x):
    h = torch.tanh(self.a(x))
    return self.b(h), torch.sigmoid(h) * 2.0


def test_an_output_the_loss_ignores_gets_zero_gradient():
  _check_against_aot_and_eager(_TwoOutputs(), (torch.randn(5, 6),), True,
                               loss=lambda out: out[0].pow(2).mean())


class _WithSecondOutput(nn.Module):
  """tanh(Linear(x)) and `second` of it as a second output."""

  def __init__(self, second):
    super().__init__()
    self.a = nn.Linear(6, 8)
    self.second = second

  def forward(self, x):
    y = torch.tanh(self.a(x))
    return y, self.second(y)


def test_outputs_aliasing_each_other_keep_aot_runtime():
  runtimes = _check_against_aot_and_eager(
      _WithSecondOutput(lambda y: y.view(-1)), (torch.randn(5, 6),), False,
      loss=lambda out: out[0].sum() + out[1].pow(2).sum())
  assert "alias" in runtimes[0].reason


def test_an_output_without_gradient_keeps_aot_runtime():
  runtimes = _check_against_aot_and_eager(
      _WithSecondOutput(lambda y: y.argmax(-1)), (torch.randn(5, 6),), False,
      loss=lambda out: out[0].pow(2).mean())
  assert runtimes[0].reason.startswith("an output")


def test_tangents_reach_the_backward_dense():
  # sum()'s gradient is an expanded (stride 0) tensor; a backward graph
  # that views its tangent (as AOTAutograd traced it, dense) needs it dense.
  seen = []

  def fw(args):
    (x,) = args
    return [x * 3.0, x]

  def bw(args):
    saved, tangent = args
    seen.append((tangent.is_contiguous(), tangent.stride()))
    return [tangent.view(-1).view(saved.shape) * 3.0]

  fn = training_runtime._lean_function(fw, bw, 1)  # pylint: disable=protected-access
  x = torch.randn(4, 5, requires_grad=True)
  (out,) = fn.apply(x)
  out.sum().backward()
  assert seen == [(True, (5, 1))]
  torch.testing.assert_close(x.grad, torch.full((4, 5), 3.0))


def test_an_all_eager_graph_trains_on_the_lean_runtime():
  case = models.CASES["mlp"]
  _check_against_aot_and_eager(case.make(), case.inputs(), True,
                               options={"min_cluster_size": 10_000})


def test_transposed_output_gradient():
  case = models.CASES["mlp"]
  _check_against_aot_and_eager(
      case.make(), case.inputs(), True,
      loss=lambda out: (out.t() * torch.arange(
          out.shape[0], dtype=out.dtype)).sum())


def test_retained_graph_backward_twice_accumulates():
  case = models.CASES["mlp"]
  base, inputs = case.make(), case.inputs()
  results = []
  for options in ({}, {"lean_runtime": False}):
    torch._dynamo.reset()  # pylint: disable=protected-access
    model = copy.deepcopy(base)
    be = torch_bridge.Backend(options)
    run = torch.compile(model, backend=be, dynamic=False)
    for _ in range(2):  # The second call runs on the runtime decided.
      model.zero_grad()
      out = run(*inputs)
      out.pow(2).mean().backward(retain_graph=True)
      out.pow(2).mean().backward()
    results.append([p.grad.clone() for p in model.parameters()])
    assert [t.lean for t in be.training] == [not options]
  _assert_same(results[0], results[1], exact=True)


def test_double_backward_raises():
  case = models.CASES["mlp"]
  be = torch_bridge.Backend()
  model = case.make()
  run = torch.compile(model, backend=be, dynamic=False)
  (x,) = case.inputs()
  for _ in range(2):
    model.zero_grad()
    run(x).pow(2).mean().backward()
  assert be.training[0].lean
  x = x.clone().requires_grad_(True)
  out = run(x).pow(2).mean()
  (gx,) = torch.autograd.grad(out, x, create_graph=True)
  with pytest.raises(RuntimeError):
    gx.sum().backward()


def test_inference_after_training_is_its_own_graph():
  case = models.CASES["mlp"]
  model, inputs = case.make(), case.inputs()
  be = torch_bridge.Backend()
  run = torch.compile(model, backend=be, dynamic=False)
  for _ in range(2):
    run(*inputs).pow(2).mean().backward()
  assert be.training[0].lean
  with torch.no_grad():
    got = run(*inputs)
    want = model(*inputs)
  assert not got.requires_grad
  torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_contiguous_strides():
  dense = helpers.contiguous_strides
  assert dense((2, 3, 4)) == (12, 4, 1)
  assert dense((0, 3)) == (3, 1)
  assert dense((3, 0, 2)) == (2, 2, 1)
  assert dense(()) == ()
  for shape in ((2, 3, 4), (0, 3), (3, 0, 2), (5,)):
    assert dense(shape) == torch.empty(shape).stride()


def test_explain_says_which_runtime_training_takes(capsys):
  case = models.CASES["mlp"]
  result = torch_bridge.explain(case.make(), *case.inputs(), train=True)
  assert result.runtimes == [
      "lean (the bridge's autograd.Function, calling the forward and "
      "backward clusters directly; 3 of 7 saved values kept as buffers)"]
  assert "training runtime: lean" in capsys.readouterr().out
  torch._dynamo.reset()  # pylint: disable=protected-access
  case = models.CASES["unlowered"]
  result = torch_bridge.explain(case.make(), *case.inputs(), train=True,
                                quiet=True)
  assert result.runtimes == ["lean (the bridge's autograd.Function)"]
  torch._dynamo.reset()  # pylint: disable=protected-access
  model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8))
  result = torch_bridge.explain(model, torch.randn(5, 6), train=True,
                                quiet=True)
  assert result.runtimes == ["AOTAutograd's (an input is mutated)"]
  result = torch_bridge.explain(model, torch.randn(5, 6), quiet=True)
  assert not result.runtimes  # Inference: no training graph.


def test_unreadable_metadata_keeps_aot_runtime(monkeypatch):
  # A metadata check that fails (another torch's metadata) must not break
  # the backward it runs in: AOTAutograd's runtime stays, and says why.
  def broken(*unused):
    raise AttributeError("no such field")

  monkeypatch.setattr(training_runtime, "why_not_plain", broken)
  case = models.CASES["mlp"]
  runtimes = _check_against_aot_and_eager(case.make(), case.inputs(), False)
  assert "unreadable AOTAutograd metadata" in runtimes[0].reason


def _trained_direct(name="mlp"):
  """(model, compiled model, inputs, lean runtime) after two SGD steps of
  a model whose graphs are each one compiled cluster."""
  case = models.CASES[name]
  be = torch_bridge.Backend()
  model = case.make()
  run = torch.compile(model, backend=be, dynamic=False)
  inputs = case.inputs()
  for _ in range(2):
    model.zero_grad()
    run(*inputs).pow(2).mean().backward()
  return model, run, inputs, be.training[0]


def test_single_cluster_graphs_keep_saved_activations_raw():
  """The MLP's forward and backward are one cluster each: the lean
  runtime calls them directly and keeps the activations that only the
  backward reads as raw buffers (bit for bit as AOTAutograd's runtime, by
  test_plain_models_take_the_lean_runtime). The unlowered model's forward
  is two clusters around an eager op: no direct plan."""
  _, _, _, lean = _trained_direct("mlp")
  assert lean.lean and lean.direct is not None
  assert lean.direct.kept_results
  kept = [raw for raw, _ in lean.direct.layout]
  assert kept.count(True) == len(lean.direct.kept_results)
  torch._dynamo.reset()  # pylint: disable=protected-access
  _, _, _, lean = _trained_direct("unlowered")
  assert lean.lean and lean.direct is None


def test_direct_backward_twice_without_retain_graph_raises():
  _, run, inputs, lean = _trained_direct()
  assert lean.direct is not None
  loss = run(*inputs).pow(2).mean()
  loss.backward()
  with pytest.raises(RuntimeError, match="second time"):
    loss.backward()


def test_kept_buffers_are_released_without_a_backward():
  """A forward whose backward never runs: its kept buffers go with its
  graph, batched with the other outputs' buffers."""
  _, run, inputs, lean = _trained_direct()
  gc.collect()
  runtime.release_pending()
  out = run(*inputs)
  del out
  gc.collect()
  # The forward program's every output: the user's (a tensor) and the
  # kept activations (raw).
  assert runtime.release_pending() == len(
      lean.direct.fw.program.output_keys)


def test_a_failing_backward_program_falls_back_with_kept_values(
    monkeypatch):
  """The backward program fails at run time: its cluster runs eagerly on
  the kept activations, made tensors, and the gradients are eager's."""
  model, run, inputs, lean = _trained_direct()
  bw_program = lean.direct.bw.program
  eager_model = copy.deepcopy(model)

  def fail(inputs, keep):
    del inputs, keep
    raise support.InternalError("injected failure")

  monkeypatch.setattr(bw_program, "call_raw", fail)
  model.zero_grad()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    run(*inputs).pow(2).mean().backward()
  assert any(issubclass(w.category, backend.FallbackWarning) and
             "failed to run" in str(w.message) for w in caught)
  assert lean.direct.bw.cluster.info.fallback_reason
  eager_model(*inputs).pow(2).mean().backward()
  for p, q in zip(model.parameters(), eager_model.parameters()):
    torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)


def test_saved_tensor_hooks_see_every_saved_value():
  """Under pack hooks (offloading, compression) the direct plan keeps
  nothing raw: the hooks see what AOTAutograd's runtime gives them, and
  the gradients are the same."""
  model, run, inputs, lean = _trained_direct()
  assert lean.direct is not None and lean.direct.kept_results
  packed = []

  def pack(t):
    packed.append(t.shape)
    return t

  model.zero_grad()
  with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    run(*inputs).pow(2).mean().backward()
  hooked = [p.grad.clone() for p in model.parameters()]
  # Every saved value of the graph, with the loss's own (pow saves its
  # input and mean nothing).
  assert len(packed) == len(lean.direct.layout) + 1
  model.zero_grad()
  run(*inputs).pow(2).mean().backward()
  for got, want in zip(hooked, model.parameters()):
    assert torch.equal(got, want.grad)
