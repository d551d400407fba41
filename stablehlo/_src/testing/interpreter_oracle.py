"""Differential testing of our interpreter against jaxlib's bundled
StableHLO reference interpreter (`jaxlib.mlir.dialects.stablehlo.
eval_module`), a test-only oracle.

The oracle knows neither the `check` dialect nor the `@check.*` custom
calls of the corpora, so `strip_checks` rewrites a program: every check is
removed and the value it checked becomes an extra result of the entry
function. Both interpreters then run the same rewritten text, and their
results are compared bit for bit (floats: identical, or within a ULP bound).

The upstream interpreter aborts the process on some errors, so each oracle
run happens in a forked child; a crash becomes an error result.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import time
from typing import Optional

import numpy as np

from stablehlo._src import text as mlir_text
from stablehlo._src.interpreter import checks
from stablehlo._src.interpreter import cli_args
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
import support

_CHECK_TARGETS = ("check.expect_close", "check.expect_eq",
                  "check.expect_almost_eq", "check.eq")


def _is_check(op: core.Operation) -> bool:
  if op.dialect == "check":
    return True
  if op.name == "stablehlo.custom_call":
    target = op.attr("call_target_name")
    return isinstance(target, a.StringAttr) and target.value in _CHECK_TARGETS
  return False


def strip_checks(src: str, filename: str = "<case>") -> Optional[str]:
  """`src` with every check op of the entry function replaced by an extra
  result (the checked value); None when the program cannot be rewritten
  (checks outside the entry block, no function, interpreter-dialect ops)."""
  module = mlir_text.parse_module(src, filename)
  funcs = [op for op in module.body.operations if op.name == "func.func"]
  if not funcs:
    return None
  names = [f.attr("sym_name").value for f in funcs]
  entry = funcs[names.index("main")] if "main" in names else (
      funcs[0] if len(funcs) == 1 else None)
  if entry is None:
    return None
  for op in module.walk():
    if op.dialect == "interpreter":
      return None
    if _is_check(op) and op.parent is not entry.regions[0].blocks[0]:
      return None
  block = entry.regions[0].blocks[0]
  extra = []
  kept = []
  for op in block.operations:
    if _is_check(op):
      extra.append(op.operands[0])
      # check.eq's i1 result may be used (returned): replace with true.
      for r in op.results:
        const = core.Operation(
            "stablehlo.constant", [], [r.type], properties={
                "value": a.DenseElementsAttr(r.type, np.array(True),
                                             splat=True)},
            location=op.location)
        const.parent = block
        kept.append(const)
        for later in block.operations:
          later.operands = [const.results[0] if v is r else v
                            for v in later.operands]
      continue
    kept.append(op)
  block.operations = kept
  ret = block.operations[-1]
  # jaxlib's Python binding aborts on complex-typed results, so complex
  # values are returned as their real and imaginary parts.
  returned = []
  for v in list(ret.operands) + extra:
    et = t.element_type_of(v.type)
    if isinstance(et, t.ComplexType) and isinstance(v.type,
                                                    t.RankedTensorType):
      part = t.RankedTensorType(v.type.shape, et.element_type)
      for name in ("stablehlo.real", "stablehlo.imag"):
        o = core.Operation(name, [v], [part], location=ret.location)
        o.parent = block
        block.operations.insert(len(block.operations) - 1, o)
        returned.append(o.results[0])
    else:
      returned.append(v)
  ret.operands = returned
  ft = entry.attr("function_type").value
  new_ft = t.FunctionType(ft.inputs, tuple(v.type for v in returned))
  if "function_type" in entry.properties:
    entry.properties["function_type"] = a.TypeAttr(new_ft)
  else:
    entry.attributes["function_type"] = a.TypeAttr(new_ft)
  res_attrs = entry.attr("res_attrs")
  if isinstance(res_attrs, a.ArrayAttr):
    padded = a.ArrayAttr(tuple(a.DictionaryAttr(()) for _ in returned))
    if "res_attrs" in entry.properties:
      entry.properties["res_attrs"] = padded
    else:
      entry.attributes["res_attrs"] = padded
  return mlir_text.print_module(module)


def _oracle_child(text: str):
  from jaxlib.mlir import ir  # pylint: disable=g-import-not-at-top
  from jaxlib.mlir.dialects import stablehlo  # pylint: disable=g-import-not-at-top
  from stablehlo._src.testing import jaxlib_oracle  # pylint: disable=g-import-not-at-top
  ctx = jaxlib_oracle.ir_context()
  with ctx:
    module = ir.Module.parse(text)
    start = time.perf_counter()
    results = stablehlo.eval_module(module, [])
    elapsed = time.perf_counter() - start
    texts = [str(r) for r in results]
  return texts, elapsed


def jaxlib_eval(text: str, timeout_s: float = 600.0):
  """Runs `text` with jaxlib's interpreter in a forked child.

  Returns (list of numpy arrays, seconds spent in eval_module). Raises
  support.InternalError when the oracle fails or crashes.
  """
  rfd, wfd = os.pipe()
  pid = os.fork()
  if pid == 0:  # child
    os.close(rfd)
    try:
      payload = ("ok", _oracle_child(text))
    except BaseException as e:  # pylint: disable=broad-except
      payload = ("error", f"{type(e).__name__}: {e}")
    with os.fdopen(wfd, "wb") as f:
      pickle.dump(payload, f)
    # A forked child must skip the parent's teardown: os._exit is the
    # documented way (there is no public alias).
    os._exit(0)  # pylint: disable=protected-access
  os.close(wfd)
  with os.fdopen(rfd, "rb") as f:
    data = f.read()
  _, status = os.waitpid(pid, 0)
  if not data:
    raise support.InternalError(
        f"the oracle crashed (wait status {status})")
  kind, value = pickle.loads(data)
  if kind != "ok":
    raise support.InternalError(f"the oracle failed: {value}")
  texts, elapsed = value
  arrays = cli_args.parse_args("[" + ", ".join(texts) + "]") if texts else []
  return arrays, elapsed


@dataclasses.dataclass
class Comparison:
  verdict: str  # "identical", "close", "differ"
  detail: str = ""


def compare(ours, theirs, max_ulp: int = 3) -> Comparison:
  """Compares result lists: identical bits (NaNs of any payload equal), or
  floats within `max_ulp`, else differ (with the first difference)."""
  if len(ours) != len(theirs):
    return Comparison("differ", f"{len(ours)} vs {len(theirs)} results")
  worst = "identical"
  for i, (x, y) in enumerate(zip(ours, theirs)):
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape:
      return Comparison("differ", f"result {i}: shape {x.shape} vs {y.shape}")
    if x.dtype != y.dtype:
      y = y.astype(x.dtype)
    if x.dtype.kind in "biu" or x.dtype == np.bool_:
      bad = x != y
      if np.any(bad):
        return _first(i, x, y, bad)
      continue
    same = checks.eq_mask(x, y)  # True where not ==
    if x.dtype.kind == "c":
      nan = np.isnan(x) & np.isnan(y)
    else:
      xf, yf = x.astype(np.float64), y.astype(np.float64)
      nan = np.isnan(xf) & np.isnan(yf)
    bitdiff = same & ~nan
    if not np.any(bitdiff):
      continue
    far = checks.close_mask(x, y, max_ulp)
    if np.any(far):
      return _first(i, x, y, far)
    worst = "close"
  return Comparison(worst)


def _first(i, x, y, bad) -> Comparison:
  idx = tuple(int(k) for k in np.argwhere(bad)[0]) if np.ndim(bad) else ()
  return Comparison("differ", f"result {i} at {list(idx)}: ours "
                    f"{x[idx]!r}, jaxlib {y[idx]!r} "
                    f"({int(np.count_nonzero(bad))} of {bad.size} differ)")
