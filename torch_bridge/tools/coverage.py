"""Coverage of common PyTorch ops by the bridge: each case (one op, or a
functional that torch decomposes into a few) is compiled alone with
`min_cluster_size=1`, run, and compared with eager. Prints one row per
case: "compiled" (no eager node, within tolerance of eager), "eager"
(with the ops that fell back and why) or "MISMATCH"; a summary line last.

  python -m torch_bridge.tools.coverage [--cases a,b] [--list]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Callable

import torch
import torch.nn.functional as F

import torch_bridge

# name -> function of one [6, 6] float32 tensor x.
CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "topk": lambda x: torch.topk(x, 3, dim=-1).values,
    "sort": lambda x: torch.sort(x, dim=-1).values,
    "argsort": lambda x: torch.argsort(x, dim=-1).float(),
    "median": lambda x: x.median(-1).values,
    "kthvalue": lambda x: x.kthvalue(2, -1).values,
    "cumsum": lambda x: torch.cumsum(x, 1),
    "cumprod": lambda x: torch.cumprod(x, 1),
    "prod": lambda x: x.prod(-1),
    "max_all": lambda x: x.max(),
    "max_dim": lambda x: torch.max(x, 1).values,
    "argmax": lambda x: torch.argmax(x, 1).float(),
    "amax": lambda x: x.amax(-1),
    "std": lambda x: x.std(-1),
    "var_mean": lambda x: torch.var_mean(x, -1)[0],
    "logsumexp": lambda x: torch.logsumexp(x, -1),
    "vector_norm": lambda x: torch.linalg.vector_norm(x, dim=-1),
    "normalize": F.normalize,
    "cosine_similarity": lambda x: F.cosine_similarity(x, x + 1),
    "index_select": lambda x: torch.index_select(x, 0, torch.tensor([0, 2])),
    "gather": lambda x: x.gather(1, (x.abs() * 2).long().clamp(max=5)),
    "scatter_add": lambda x: torch.zeros(6, 6).scatter_add(
        1, (x.abs() * 2).long().clamp(max=5), x),
    "roll": lambda x: torch.roll(x, 2, 1),
    "flip": lambda x: torch.flip(x, [1]),
    "tril": torch.tril,
    "repeat": lambda x: x.repeat(2, 1),
    "stack": lambda x: torch.stack([x, x * 2], 0),
    "chunk": lambda x: torch.chunk(x, 2, 1)[1],
    "diff": lambda x: torch.diff(x, dim=1),
    "unfold": lambda x: x.unfold(1, 2, 2).sum(-1),
    "pad_constant": lambda x: F.pad(x, (1, 2)),
    "pad_reflect": lambda x: F.pad(x[None], (1, 1), mode="reflect")[0],
    "pixel_shuffle": lambda x: F.pixel_shuffle(x.reshape(1, 4, 3, 3), 2),
    "clamp_tensor": lambda x: torch.clamp(x, min=x[:, :1],
                                          max=x[:, 1:2] + 1),
    "where_scalar": lambda x: torch.where(x > 0, x, 0.0),
    "masked_fill": lambda x: x.masked_fill(x > 0.5, -1.0),
    "nan_to_num": lambda x: torch.nan_to_num(x / 0.0),
    "isnan": lambda x: torch.isnan(x).float(),
    "logical_ops": lambda x: ((x > 0) & (x < 1)).float(),
    "remainder": lambda x: torch.remainder(x, 0.7),
    "fmod": lambda x: torch.fmod(x, 0.7),
    "floor_divide": lambda x: x // 0.3,
    "sign": torch.sign,
    "round": torch.round,
    "atan2": lambda x: torch.atan2(x, x + 1),
    "expm1": torch.expm1,
    "log2": lambda x: torch.log2(x.abs() + 1),
    "erfinv": lambda x: torch.erfinv(x.clamp(-0.9, 0.9)),
    "lgamma": lambda x: torch.lgamma(x.abs() + 0.5),
    "lerp": lambda x: torch.lerp(x, x * 2, 0.3),
    "addcmul": lambda x: torch.addcmul(x, x, x, value=0.5),
    "softplus": F.softplus,
    "silu": F.silu,
    "mish": F.mish,
    "hardswish": F.hardswish,
    "glu": F.glu,
    "layer_norm": lambda x: F.layer_norm(x, (6,)),
    "rms_norm": lambda x: F.rms_norm(x, (6,)),
    "one_hot": lambda x: F.one_hot(
        (x.abs() * 3).long().clamp(max=3), 4).float(),
    "einsum": lambda x: torch.einsum("ij,kj->ik", x, x),
    "baddbmm": lambda x: torch.baddbmm(x[None], x[None], x.t()[None]),
    "cross_entropy": lambda x: F.cross_entropy(x, torch.arange(6)),
    "nll_loss": lambda x: F.nll_loss(x.log_softmax(-1), torch.arange(6)),
    "mse_loss": lambda x: F.mse_loss(x, x * 0.5),
    "smooth_l1_loss": lambda x: F.smooth_l1_loss(x, x * 0.5),
    "bce_with_logits": lambda x: F.binary_cross_entropy_with_logits(
        x, (x > 0).float()),
    "triu_indices": lambda x: x[torch.triu_indices(6, 6)[0][:6]],
    "embedding_bag": lambda x: F.embedding_bag(
        torch.tensor([[0, 1], [2, 3]]), x),
    "interpolate_bicubic": lambda x: F.interpolate(
        x.reshape(1, 1, 6, 6), scale_factor=2, mode="bicubic"),
    "avg_pool1d": lambda x: F.avg_pool1d(x[None], 2),
    "max_pool1d": lambda x: F.max_pool1d(x[None], 2),
    "adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(
        x.reshape(1, 1, 6, 6), (4, 4)),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(
        x.reshape(1, 1, 6, 6), (4, 4)),
}

TOLERANCE = 1e-4  # of max |eager|, as the bridge's forward comparisons


def run_case(name: str, seed: int = 0) -> dict:
  """{"case", "status", "eager": [(op, reason)], "error"} for one case."""
  fn = CASES[name]
  torch.manual_seed(seed)
  x = torch.randn(6, 6)
  torch._dynamo.reset()  # pylint: disable=protected-access
  backend = torch_bridge.Backend({"min_cluster_size": 1})
  row = {"case": name, "eager": [], "error": None}
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      got = torch.compile(fn, backend=backend, dynamic=False)(x)
    want = fn(x)
  except Exception as e:  # pylint: disable=broad-except
    row["status"] = "ERROR"
    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return row
  row["eager"] = [(e.op, e.reason) for r in backend.reports for e in r.eager]
  scale = max(float(want.float().abs().nan_to_num().max()), 1e-30) \
      if want.numel() else 1.0
  diff = (got.float() - want.float()).abs()
  diff = diff[~(got.float().isnan() & want.float().isnan())]
  err = float(diff.max()) / scale if diff.numel() else 0.0
  row["error"] = err
  if err > TOLERANCE or diff.isnan().any():
    row["status"] = "MISMATCH"
  elif row["eager"]:
    row["status"] = "eager"
  else:
    row["status"] = "compiled"
  return row


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
      prog="python -m torch_bridge.tools.coverage",
      description=__doc__.split("\n\n")[0].replace("\n", " "))
  ap.add_argument("--cases", default="",
                  help="comma-separated case names (default: all)")
  ap.add_argument("--list", action="store_true", help="list the cases")
  args = ap.parse_args(argv)
  if args.list:
    print("\n".join(CASES))
    return 0
  names = [n for n in args.cases.split(",") if n] or list(CASES)
  unknown = [n for n in names if n not in CASES]
  if unknown:
    print(f"coverage: unknown case(s): {', '.join(unknown)} (see --list)",
          file=sys.stderr)
    return 2
  counts: dict[str, int] = {}
  print(f"{'case':<22} {'status':<9} {'rel err':>8}  eager ops")
  for k, name in enumerate(names, 1):
    print(f"[{k}/{len(names)}] {name}", file=sys.stderr, flush=True)
    row = run_case(name)
    counts[row["status"]] = counts.get(row["status"], 0) + 1
    err = row["error"]
    err_text = f"{err:.1e}" if isinstance(err, float) else ""
    detail = ", ".join(sorted({op for op, _ in row["eager"]}))
    if row["status"] == "ERROR":
      detail = err
    print(f"{name:<22} {row['status']:<9} {err_text:>8}  {detail}")
  print(f"{len(names)} cases: " + ", ".join(
      f"{counts[s]} {s}" for s in ("compiled", "eager", "MISMATCH", "ERROR")
      if s in counts))
  return 1 if counts.get("MISMATCH") or counts.get("ERROR") else 0


if __name__ == "__main__":
  sys.exit(main())
