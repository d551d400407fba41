"""Use-list order records, as upstream's serializer ends up writing them.

MLIR bytecode (>= 3) records, for a value with several uses, the order of
its in-memory use list when that order differs from the one a reader
rebuilds (readers push each new use in front, in file order). Upstream's
in-memory order is a by-product of how its passes created the uses, so to
write the same bytes we replay that history on the op tree:

  * legalization creates every op in pre-order, operands in order, each new
    use going to the front of its value's list;
  * the casts around sdy ops (mixed serialization) differ: a cast into
    VHLO takes its operand when its first user is converted (just before
    that user's uses), and at the end the uses of its result move to the
    final cast one by one (which reverses them); a cast out of VHLO takes
    its operand at the end, and its users (sdy ops) keep their order;
  * each op the version conversion rewrites (in pre-order) is recreated: its
    new uses go to the front; then, in rewrite order, the uses of each old
    result move to the new result one by one, each to the front (which
    reverses them); then the old ops' uses are dropped.

This model reproduces jaxlib's and the VHLO corpus' records (see the tests).
The writer then compares each list with the order of use ids
(`pre-order op number << 32 | operand number`) and, when the ids are not
strictly decreasing, records the permutation that sorts them, as index
pairs when fewer than half of the uses move.
"""

from __future__ import annotations

from stablehlo._src.bytecode import tree

_CAST = "builtin.unrealized_conversion_cast"


def _is_vhlo(ty) -> bool:
  return getattr(ty, "dialect", None) == "vhlo"


def _preorder(root: tree.Op) -> list:
  return list(root.walk())


def _record(uses: list, number: dict):
  """The (pairs flag, items) record for one value's uses, or None."""
  ids = [(number[id(op)] << 32) | operand for op, operand in uses]
  if all(a > b for a, b in zip(ids, ids[1:])):
    return None
  order = [i for i, _ in sorted(enumerate(ids), key=lambda p: -p[1])]
  shuffled = sum(1 for i, v in enumerate(order) if i != v)
  if shuffled < len(order) // 2:
    items = []
    for i, v in enumerate(order):
      if i != v:
        items += [v, i]
    return True, tuple(items)
  return False, tuple(order)


def assign(root: tree.Op, rewritten: list) -> None:
  """Sets `use_list_orders` on every op and block of `root`.

  `rewritten` lists the ops the version conversion recreated, in the order
  it recreated them.
  """
  ops = _preorder(root)
  if not rewritten and not any(op.name == _CAST for op in ops):
    # Every use was then pushed in pre-order, so each list holds its use
    # ids strictly decreasing: no value needs a record.
    for op in ops:
      op.use_list_orders = []
      for region in op.regions:
        for block in region.blocks:
          block.use_list_orders = []
    return
  number = {id(op): i for i, op in enumerate(ops)}
  lists: dict = {}  # id(value) -> list of (tag, op, operand index)

  def push(value, entry):
    lists.setdefault(id(value), []).insert(0, entry)

  into_vhlo = {}  # id(result of a cast into VHLO) -> the cast
  out_of_vhlo = []
  for op in ops:
    if op.name == _CAST:
      if _is_vhlo(op.results[0].type):
        into_vhlo[id(op.results[0])] = op
      else:
        out_of_vhlo.append(op)
  into_results = []
  for op in ops:
    if op.name == _CAST:
      continue
    for value in op.operands:
      cast = into_vhlo.pop(id(value), None)
      if cast is not None:
        for i, source in enumerate(cast.operands):
          push(source, ("old", cast, i))
        into_results.append(value)
    for i, value in enumerate(op.operands):
      push(value, ("old", op, i))
  for op in out_of_vhlo:
    for i, value in enumerate(op.operands):
      push(value, ("old", op, i))
  for value in into_results:
    lists[id(value)].reverse()
  redone = {id(op) for op in rewritten}
  for op in rewritten:
    for i, value in enumerate(op.operands):
      push(value, ("new", op, i))
  for op in rewritten:
    for result in op.results:
      uses = lists.get(id(result))
      if uses:
        uses.reverse()
  for key, uses in lists.items():
    lists[key] = [(op, i) for tag, op, i in uses
                  if tag == "new" or id(op) not in redone]

  def records(values):
    out = []
    for index, value in enumerate(values):
      uses = lists.get(id(value), ())
      if len(uses) < 2:
        continue
      rec = _record(uses, number)
      if rec is not None:
        out.append((index, rec[0], rec[1]))
    return out

  for op in ops:
    op.use_list_orders = records(op.results)
    for region in op.regions:
      for block in region.blocks:
        block.use_list_orders = records(block.args)
