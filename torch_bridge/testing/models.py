"""Test models of the bridge, built in code with random weights (no
downloads), and a comparison of compiled against eager PyTorch."""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import Any, Callable

import torch
from torch import nn


def fresh_start() -> None:
  """What each test starts from: Dynamo's caches empty (they are per code
  object, shared by all instances of a class, and stop compiling at the
  recompile limit), no fallback warned of yet, torch's seed 0."""
  from torch_bridge._src import backend  # pylint: disable=g-import-not-at-top
  # torch._dynamo.reset() is torch's documented way to drop compiled
  # graphs; torch has no public alias of the module.
  torch._dynamo.reset()  # pylint: disable=protected-access
  backend._warned.clear()  # pylint: disable=protected-access
  torch.manual_seed(0)


class MLP(nn.Module):

  def __init__(self, d_in=16, hidden=32, d_out=4):
    super().__init__()
    self.net = nn.Sequential(
        nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden),
        nn.Tanh(), nn.Linear(hidden, d_out), nn.LogSoftmax(-1))

  def forward(self, x):
    return self.net(x)


class ResBlock(nn.Module):

  def __init__(self, c_in, c_out, stride):
    super().__init__()
    self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1,
                           bias=False)
    self.bn1 = nn.BatchNorm2d(c_out)
    self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
    self.bn2 = nn.BatchNorm2d(c_out)
    self.skip = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride),
                               nn.BatchNorm2d(c_out))
                 if stride != 1 or c_in != c_out else nn.Identity())

  def forward(self, x):
    y = torch.relu(self.bn1(self.conv1(x)))
    y = self.bn2(self.conv2(y))
    return torch.relu(y + self.skip(x))


class CNN(nn.Module):
  """A small ResNet-style CNN with BatchNorm."""

  def __init__(self, classes=10):
    super().__init__()
    self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                              nn.ReLU())
    self.block1 = ResBlock(8, 8, 1)
    self.block2 = ResBlock(8, 16, 2)
    self.pool = nn.AvgPool2d(2)
    self.fc = nn.Linear(16, classes)

  def forward(self, x):
    y = self.block2(self.block1(self.stem(x)))
    y = self.pool(y).mean((2, 3))
    return self.fc(y)


class LSTM(nn.Module):
  """An LSTM unrolled over time with nn.LSTMCell (Dynamo traces it into
  one graph; nn.LSTM itself is not traced by Dynamo and runs eagerly)."""

  def __init__(self, d_in=8, hidden=16, d_out=4):
    super().__init__()
    self.hidden = hidden
    self.cell = nn.LSTMCell(d_in, hidden)
    self.fc = nn.Linear(hidden, d_out)

  def forward(self, x):
    h = x.new_zeros(x.shape[0], self.hidden)
    c = h
    for t in range(x.shape[1]):
      h, c = self.cell(x[:, t], (h, c))
    return self.fc(h)


class TorchLSTM(nn.Module):
  """nn.LSTM: Dynamo breaks the graph around it, so it runs eagerly."""

  def __init__(self, d_in=8, hidden=16, d_out=4):
    super().__init__()
    self.lstm = nn.LSTM(d_in, hidden, batch_first=True)
    self.fc = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(),
                            nn.Linear(hidden, d_out))

  def forward(self, x):
    out, _ = self.lstm(x)
    return self.fc(out[:, -1])


class WithUnloweredOp(nn.Module):
  """An MLP with torch.cummax in the middle, an op the table deliberately
  does not lower: it must run eagerly between two compiled clusters."""

  UNLOWERED_OP = "aten.cummax.default"

  def __init__(self):
    super().__init__()
    self.a = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32),
                           nn.Sigmoid())
    self.b = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4),
                           nn.LogSoftmax(-1))

  def forward(self, x):
    y = self.a(x)
    y = torch.cummax(y, dim=1).values * 2.0
    return self.b(y)


def gpt2(layers=2, d=128):
  os.environ.setdefault("HF_HUB_OFFLINE", "1")
  from transformers import GPT2Config, GPT2LMHeadModel  # pylint: disable=g-import-not-at-top
  config = GPT2Config(n_layer=layers, n_head=4, n_embd=d, vocab_size=1000,
                      n_positions=128, use_cache=False, bos_token_id=0,
                      eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                      attn_pdrop=0.0)
  # transformers reads the attention kind from this config field.
  config._attn_implementation = "eager"  # pylint: disable=protected-access
  return _HFWrapper(GPT2LMHeadModel(config), use_cache=False)


def bert(layers=2, d=128):
  os.environ.setdefault("HF_HUB_OFFLINE", "1")
  from transformers import BertConfig, BertForSequenceClassification  # pylint: disable=g-import-not-at-top
  config = BertConfig(num_hidden_layers=layers, hidden_size=d,
                      num_attention_heads=4, intermediate_size=4 * d,
                      vocab_size=1000, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)
  # transformers reads the attention kind from this config field.
  config._attn_implementation = "eager"  # pylint: disable=protected-access
  return _HFWrapper(BertForSequenceClassification(config))


class _HFWrapper(nn.Module):
  """Calls a transformers model with return_dict=False; returns logits."""

  def __init__(self, model, **kwargs):
    super().__init__()
    self.model = model
    self.kwargs = kwargs

  def forward(self, ids):
    return self.model(ids, return_dict=False, **self.kwargs)[0]


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  make: Callable[[], nn.Module]
  inputs: Callable[[], tuple]
  needs: str = ""  # a module that must be importable


def _images():
  return (torch.randn(4, 3, 16, 16),)


CASES = {
    "mlp": Case("mlp", MLP, lambda: (torch.randn(8, 16),)),
    "cnn": Case("cnn", CNN, _images),
    "lstm": Case("lstm", LSTM, lambda: (torch.randn(4, 6, 8),)),
    "torch_lstm": Case("torch_lstm", TorchLSTM,
                       lambda: (torch.randn(4, 6, 8),)),
    "unlowered": Case("unlowered", WithUnloweredOp,
                      lambda: (torch.randn(8, 16),)),
    "gpt2": Case("gpt2", gpt2, lambda: (torch.randint(0, 1000, (2, 32)),),
                 needs="transformers"),
    "bert": Case("bert", bert, lambda: (torch.randint(0, 1000, (2, 32)),),
                 needs="transformers"),
}


def max_relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
  """max |got - want| / max |want| (0 when both are 0)."""
  want = want.detach().double()
  got = got.detach().double()
  scale = want.abs().max().item()
  diff = (got - want).abs().max().item()
  return diff / scale if scale else diff


@dataclasses.dataclass
class Comparison:
  outputs: float      # max relative error of the outputs over all steps
  grads: float        # of the gradients
  params: float       # of the parameters after the last step
  buffers: float      # of the buffers (BN running stats) after the last step


def _loss(out):
  return out.float().pow(2).mean() if out.dim() else out


def compare_training(model: nn.Module, inputs: tuple, backend,
                     steps: int = 3, lr: float = 0.05) -> Comparison:
  """Trains a copy eagerly and a copy compiled with `backend` for `steps`
  SGD steps on the same inputs; returns the largest relative errors."""
  eager = copy.deepcopy(model).train()
  ours = copy.deepcopy(model).train()
  compiled = torch.compile(ours, backend=backend, dynamic=False)
  opt_e = torch.optim.SGD(eager.parameters(), lr=lr)
  opt_o = torch.optim.SGD(ours.parameters(), lr=lr)
  worst = Comparison(0.0, 0.0, 0.0, 0.0)
  for _ in range(steps):
    opt_e.zero_grad()
    opt_o.zero_grad()
    out_e = eager(*inputs)
    out_o = compiled(*inputs)
    worst.outputs = max(worst.outputs, max_relative_error(out_o, out_e))
    _loss(out_e).backward()
    _loss(out_o).backward()
    # Gradients are compared as one vector: a gradient that is zero in exact
    # arithmetic (a conv bias followed by batch norm) is rounding noise in
    # both, and relative to its own tiny max it would be meaningless.
    pairs = [(po.grad, pe.grad) for pe, po in
             zip(eager.parameters(), ours.parameters()) if pe.grad is not None]
    if pairs:
      worst.grads = max(worst.grads, max_relative_error(
          torch.cat([g.flatten() for g, _ in pairs]),
          torch.cat([g.flatten() for _, g in pairs])))
    opt_e.step()
    opt_o.step()
  # Parameters and buffers, like gradients, as one vector each (a bias
  # initialized to zero whose gradient is zero moves by rounding noise only).
  worst.params = _vector_error(list(ours.parameters()),
                               list(eager.parameters()))
  worst.buffers = _vector_error(
      [b for b in ours.buffers() if b.is_floating_point()],
      [b for b in eager.buffers() if b.is_floating_point()])
  return worst


def _vector_error(got: list[torch.Tensor], want: list[torch.Tensor]) -> float:
  if not want:
    return 0.0
  return max_relative_error(torch.cat([t.detach().flatten() for t in got]),
                            torch.cat([t.detach().flatten() for t in want]))


def compare_inference(model: nn.Module, inputs: tuple, backend) -> float:
  model = copy.deepcopy(model).eval()
  compiled = torch.compile(model, backend=backend, dynamic=False)
  with torch.no_grad():
    want = model(*inputs)
    got = compiled(*inputs)
  return max_relative_error(got, want)
