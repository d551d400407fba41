"""A small layered (Sugiyama-style) layout for `graph_dump` graphs.

Written here rather than taken from Graphviz because the HTML dump must work
without a `dot` binary (Graphviz is not a Python package; the pip `graphviz`
package only shells out to it).

The layout is compound: each fusion cluster is laid out on its own, then
stands as one box of that size in the level that contains it. Per level:
  1. layers: every item sits one layer below its lowest operand (longest
     path); items with no operands at that level (parameters, constants)
     move down to just above their first user;
  2. order within layers: a few barycenter sweeps down and up, to reduce
     crossings;
  3. x: each item is pulled toward the mean center of its neighbours in
     the previous layer, then pushed right to remove overlaps.
Edges are then drawn between absolute box positions by the caller; long
edges get no bend points (a simplification: they may cross boxes).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

CHAR_WIDTH = 7.0  # px per character of the 11px monospace label font
LINE_HEIGHT = 14.0
PAD_X = 8.0
PAD_Y = 5.0
GAP_X = 24.0  # between boxes in a layer
GAP_Y = 36.0  # between layers
CLUSTER_PAD = 12.0
CLUSTER_TITLE = 22.0
MARGIN = 16.0
_SWEEPS = 4


@dataclasses.dataclass
class Box:
  x: float
  y: float
  w: float
  h: float


@dataclasses.dataclass
class Layout:
  width: float
  height: float
  nodes: dict[str, Box]
  clusters: dict[str, Box]


def node_size(lines) -> tuple[float, float]:
  width = max(len(s) for s in lines) * CHAR_WIDTH + 2 * PAD_X
  return max(width, 40.0), len(lines) * LINE_HEIGHT + 2 * PAD_Y


def _layer(items: list[str], preds: dict[str, list[str]],
           succs: dict[str, list[str]]) -> dict[str, int]:
  """Longest-path layers; sources sink to just above their first user."""
  layer: dict[str, int] = {}
  indegree = {i: len(preds[i]) for i in items}
  ready = [i for i in items if indegree[i] == 0]
  order = []
  while ready:
    item = ready.pop(0)
    order.append(item)
    layer[item] = max((layer[p] + 1 for p in preds[item]), default=0)
    for s in succs[item]:
      indegree[s] -= 1
      if indegree[s] == 0:
        ready.append(s)
  for item in items:  # a cycle (not expected in HLO): place what is left
    if item not in layer:
      layer[item] = max((layer.get(p, 0) + 1 for p in preds[item]), default=0)
  for item in order:
    if not preds[item] and succs[item]:
      layer[item] = max(0, min(layer[s] for s in succs[item]) - 1)
  return layer


def _barycenter_sort(row: list[str], neighbours: dict[str, list[str]],
                     position: dict[str, int]) -> list[str]:
  def key(item):
    ns = [position[n] for n in neighbours[item] if n in position]
    current = position.get(item, 0)
    return (sum(ns) / len(ns)) if ns else current
  return sorted(row, key=key)


def _layout_level(items: list[str], sizes: dict[str, tuple[float, float]],
                  edges: list[tuple[str, str]]
                  ) -> tuple[float, float, dict[str, tuple[float, float]]]:
  """Positions (top-left, relative) of `items`; returns (w, h, positions)."""
  if not items:
    return 0.0, 0.0, {}
  preds = {i: [] for i in items}
  succs = {i: [] for i in items}
  for a, b in edges:
    if b not in preds[a] and a not in preds[b]:
      preds[b].append(a)
      succs[a].append(b)
  layer = _layer(items, preds, succs)
  rows: list[list[str]] = [[] for _ in range(max(layer.values()) + 1)]
  for item in items:
    rows[layer[item]].append(item)
  rows = [r for r in rows if r]

  position = {item: i for row in rows for i, item in enumerate(row)}
  for sweep in range(_SWEEPS):
    down = sweep % 2 == 0
    sequence = rows[1:] if down else list(reversed(rows[:-1]))
    for row in sequence:
      ordered = _barycenter_sort(row, preds if down else succs, position)
      row[:] = ordered
      for i, item in enumerate(row):
        position[item] = i

  center: dict[str, float] = {}

  def place(row, neighbours):
    x = 0.0
    for item in row:
      w = sizes[item][0]
      ns = [center[n] for n in neighbours[item] if n in center]
      want = (sum(ns) / len(ns) - w / 2) if ns else x
      x = max(x, want)
      center[item] = x + w / 2
      x += w + GAP_X

  for row in rows:  # top-down: children under their operands
    place(row, preds)
  for row in reversed(rows[:-1]):  # bottom-up: operands over their users
    saved = {i: center[i] for i in row}
    for item in row:
      del center[item]
    place(row, succs)
    for item in row:  # keep the average of both passes
      center[item] = (center[item] + saved[item]) / 2
    x = 0.0  # and restore the order without overlaps
    for item in row:
      w = sizes[item][0]
      left = max(x, center[item] - w / 2)
      center[item] = left + w / 2
      x = left + w + GAP_X

  left_edge = min(center[i] - sizes[i][0] / 2 for i in items)
  positions: dict[str, tuple[float, float]] = {}
  y = 0.0
  width = 0.0
  for row in rows:
    row_h = max(sizes[i][1] for i in row)
    for item in row:
      w, h = sizes[item]
      x = center[item] - w / 2 - left_edge
      positions[item] = (x, y + (row_h - h) / 2)
      width = max(width, x + w)
    y += row_h + GAP_Y
  return width, y - GAP_Y, positions


def layout_graph(graph) -> Layout:
  """Absolute boxes for every node and cluster of a `graph_dump.Graph`."""
  parent_of: dict[str, Optional[str]] = {}
  members: dict[Optional[str], list[str]] = {None: []}
  labels: dict[str, str] = {}
  for c in graph.clusters:
    parent_of[c.id] = c.parent
    labels[c.id] = c.label
    members.setdefault(c.id, [])
  sizes: dict[str, tuple[float, float]] = {}
  for n in graph.nodes:
    parent_of[n.id] = n.cluster
    sizes[n.id] = node_size(n.label_lines)
  for item, parent in parent_of.items():
    members.setdefault(parent, []).append(item)

  def chain(item: str) -> list[str]:
    result = [item]
    while parent_of[result[-1]] is not None:
      result.append(parent_of[result[-1]])
    return result

  chains = {item: chain(item) for item in parent_of}

  def representative(item: str, container: Optional[str]) -> Optional[str]:
    for x in chains[item]:
      if parent_of[x] == container:
        return x
    return None

  local: dict[str, tuple[float, float]] = {}

  def lay(container: Optional[str]) -> tuple[float, float]:
    items = members.get(container, [])
    for item in items:
      if item in members and item not in sizes:  # a cluster
        w, h = lay(item)
        title_w = len(labels[item]) * CHAR_WIDTH + 2 * CLUSTER_PAD
        sizes[item] = (max(w + 2 * CLUSTER_PAD, title_w),
                       h + CLUSTER_TITLE + CLUSTER_PAD)
    level_edges = []
    for e in graph.edges:
      a, b = representative(e.src, container), representative(e.dst,
                                                               container)
      if a is not None and b is not None and a != b:
        level_edges.append((a, b))
    w, h, pos = _layout_level(items, sizes, level_edges)
    local.update(pos)
    return w, h

  width, height = lay(None)
  node_boxes: dict[str, Box] = {}
  cluster_boxes: dict[str, Box] = {}

  def place(container: Optional[str], ox: float, oy: float):
    for item in members.get(container, []):
      x, y = local[item]
      w, h = sizes[item]
      if item in members:
        cluster_boxes[item] = Box(ox + x, oy + y, w, h)
        place(item, ox + x + CLUSTER_PAD, oy + y + CLUSTER_TITLE)
      else:
        node_boxes[item] = Box(ox + x, oy + y, w, h)

  place(None, MARGIN, MARGIN)
  return Layout(width + 2 * MARGIN, height + 2 * MARGIN, node_boxes,
                cluster_boxes)
