"""GPT-2 (2 layers, d=128, eager attention) and BERT (2 layers) from
`transformers` configs, random weights, no downloads: forward and 3 SGD
training steps against eager PyTorch."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip(
    "torch", reason="torch (requirements-test.txt) is not installed")
pytest.importorskip(
    "transformers", reason="transformers (requirements-test.txt) is not "
    "installed")

# pylint: disable=g-import-not-at-top
import torch_bridge
from torch_bridge._src import backend as backend_lib
from torch_bridge.testing import models
# pylint: enable=g-import-not-at-top


@pytest.fixture(autouse=True)
def _fresh_dynamo():
  torch._dynamo.reset()  # pylint: disable=protected-access
  backend_lib._warned.clear()  # pylint: disable=protected-access
  torch.manual_seed(0)
  yield


@pytest.mark.filterwarnings("ignore::torch_bridge.FallbackWarning")
@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_forward_and_training_match_eager(name):
  case = models.CASES[name]
  model, inputs = case.make(), case.inputs()
  be = torch_bridge.Backend()
  assert models.compare_inference(model, inputs, be) <= 1e-4
  torch._dynamo.reset()  # pylint: disable=protected-access
  be_train = torch_bridge.Backend()
  result = models.compare_training(model, inputs, be_train, steps=3)
  assert result.outputs <= 1e-4
  assert result.grads <= 1e-3
  assert result.params <= 1e-4
  for be_ in (be, be_train):
    # Every ATen op of both models lowers: one cluster per graph, nothing
    # eager.
    assert [len(r.clusters) for r in be_.reports] == [1] * len(be_.reports)
    assert all(c.compiled for r in be_.reports for c in r.clusters)
    assert not [e for r in be_.reports for e in r.eager]
