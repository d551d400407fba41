"""`--inline`: replaces every `func.call` of a function defined in the
module with a copy of its body, then drops private functions nothing refers
to any more (as MLIR's inliner with symbol DCE does). Recursive calls are
left in place."""

from __future__ import annotations

from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.transforms import rewrite
import support

_MAX_DEPTH = 64


def _callee(module: core.Module, op: core.Operation):
  ref = op.attr("callee")
  name = ref.root if isinstance(ref, a.SymbolRefAttr) else None
  fn = module.lookup(name) if name else None
  if fn is None or fn.name != "func.func" or not fn.regions or len(
      fn.regions[0].blocks) != 1:
    return None, name
  return fn, name


def _inline_block(module, block: core.Block, mapping: dict, stack) -> bool:
  changed = False
  new_ops = []
  for op in block.operations:
    op.operands = [mapping.get(v, v) for v in op.operands]
    for region in op.regions:
      for b in region.blocks:
        changed |= _inline_block(module, b, mapping, stack)
    if op.name == "func.call":
      fn, name = _callee(module, op)
      if fn is not None and name not in stack and len(stack) < _MAX_DEPTH:
        new_ops.extend(_inline_call(module, op, fn, name, mapping, stack))
        changed = True
        continue
    new_ops.append(op)
  block.operations = []
  for op in new_ops:
    block.append(op)
  return changed


def _inline_call(module, call, fn, name, mapping, stack):
  body = fn.regions[0].blocks[0]
  local = dict(zip(body.arguments, call.operands))
  tmp = core.Block()
  for op in body.operations[:-1]:
    tmp.append(rewrite.clone_op(op, local))
  ret = body.operations[-1]
  results = [local.get(v, v) for v in ret.operands]
  inner: dict = {}
  _inline_block(module, tmp, inner, stack + (name,))
  results = [inner.get(v, v) for v in results]
  if len(results) != len(call.results):
    raise support.InvalidArgumentError(
        f"call of @{name} expects {len(call.results)} results, the function "
        f"returns {len(results)}")
  for old, new in zip(call.results, results):
    mapping[old] = new
  return tmp.operations


def _referenced_symbols(module: core.Module) -> set:
  refs = set()

  def visit(attr):
    if isinstance(attr, a.SymbolRefAttr):
      refs.add(attr.root)
    elif isinstance(attr, a.ArrayAttr):
      for e in attr.elements:
        visit(e)
    elif isinstance(attr, a.DictionaryAttr):
      for _, e in attr.entries:
        visit(e)

  for op in module.walk():
    if op is module.op:
      continue
    for attr in list(op.attributes.values()) + list(op.properties.values()):
      visit(attr)
  return refs


def run(module: core.Module) -> bool:
  """Inlines all calls; returns whether the module changed."""
  changed = False
  for fn in list(module.functions):
    if fn.regions and fn.regions[0].blocks:
      name = fn.attr("sym_name").value
      for block in fn.regions[0].blocks:
        changed |= _inline_block(module, block, {}, (name,))
  # Symbol DCE: private functions no longer referenced.
  while True:
    refs = _referenced_symbols(module)
    dead = [op for op in module.body.operations
            if op.name == "func.func" and _is_private(op) and
            op.attr("sym_name").value not in refs]
    if not dead:
      break
    module.body.operations = [op for op in module.body.operations
                              if op not in dead]
    changed = True
  return changed


def _is_private(fn: core.Operation) -> bool:
  vis = fn.attr("sym_visibility")
  return isinstance(vis, a.StringAttr) and vis.value == "private"
