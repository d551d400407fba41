"""`--stablehlo-legalize-composite-to-call`: replaces each
`stablehlo.composite` with a `func.call` of its decomposition function (the
composite's meaning, per the spec)."""

from __future__ import annotations

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core


def run(module: core.Module) -> bool:
  changed = False
  for op in list(module.walk()):
    for region in op.regions:
      for block in region.blocks:
        for i, inner in enumerate(block.operations):
          if inner.name != "stablehlo.composite":
            continue
          decomposition = inner.attr("decomposition")
          call = core.Operation(
              "func.call", inner.operands, inner.result_types,
              properties={"callee": a.SymbolRefAttr(decomposition.root)},
              location=inner.location)
          for old, new in zip(inner.results, call.results):
            new.name_hint = old.name_hint
          mapping = dict(zip(inner.results, call.results))
          call.parent = block
          block.operations[i] = call
          for later in block.operations[i + 1:]:
            for o in later.walk():
              o.operands = [mapping.get(v, v) for v in o.operands]
          changed = True
  return changed
