"""Pictures of an HLO computation: Graphviz DOT text and self-contained HTML.

  graph = build_graph(computation)      # nodes, fusion clusters, edges
  dot_text = to_dot(graph)              # for `dot -Tsvg` where installed
  html_text = to_html(graph)            # one page, inline SVG, no scripts

A node is one instruction, labelled with its name, opcode and shape.
Parameters, constants and the root are styled apart. With `expand_fusions`,
a fusion instruction is drawn as a box (a DOT `subgraph cluster_*`, an SVG
`<g class="cluster">`) holding the nodes of its fused computation, nested
for fusions inside fusions; the edge from the fusion's i-th operand goes to
the fused `parameter(i)`, and the edges to the fusion's users leave from the
fused root. Other called computations (reduce's `to_apply`, while bodies)
are named in the node's label, not drawn.

The HTML page is laid out here (`layout.py`) rather than by Graphviz: the
project cannot assume a `dot` binary (it is not a Python package), and the
page must open offline, so it carries no JavaScript and no CDN links.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Optional

from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.tools import layout as layout_lib

# Node kinds, which select the style.
PARAMETER = "parameter"
CONSTANT = "constant"
ROOT = "root"
OP = "op"

_HEAVY_OPCODES = frozenset(("dot", "convolution", "fft", "triangular-solve",
                            "cholesky", "custom-call"))
_REDUCTION_OPCODES = frozenset(("reduce", "reduce-window", "all-reduce",
                                "reduce-scatter", "select-and-scatter",
                                "scatter", "sort"))
_SHAPE_OPCODES = frozenset(("broadcast", "reshape", "transpose", "slice",
                            "dynamic-slice", "dynamic-update-slice",
                            "concatenate", "pad", "bitcast", "copy", "gather",
                            "reverse", "iota", "tuple", "get-tuple-element"))


@dataclasses.dataclass
class Node:
  """One instruction."""
  id: str
  name: str
  opcode: str
  shape: str
  kind: str  # PARAMETER, CONSTANT, ROOT or OP
  cluster: Optional[str]  # id of the innermost enclosing cluster
  extra: tuple[str, ...] = ()  # further label lines (called computations)
  tooltip: str = ""
  opcode_line: str = ""  # shown instead of `opcode`, e.g. "parameter 0"

  @property
  def label_lines(self) -> tuple[str, ...]:
    return (self.name, self.opcode_line or self.opcode, self.shape) + self.extra


@dataclasses.dataclass
class Cluster:
  """A fusion instruction drawn as a box around its fused computation."""
  id: str
  name: str
  label: str
  parent: Optional[str]
  is_root: bool = False


@dataclasses.dataclass
class Edge:
  src: str
  dst: str
  operand_index: int


@dataclasses.dataclass
class Graph:
  title: str
  nodes: list[Node]
  clusters: list[Cluster]
  edges: list[Edge]

  def node(self, node_id: str) -> Node:
    for n in self.nodes:
      if n.id == node_id:
        return n
    raise KeyError(node_id)


def _short_text(text: str, limit: int = 60) -> str:
  return text if len(text) <= limit else text[:limit - 3] + "..."


class _Builder:
  """Walks a computation (and fused computations) into a Graph."""

  def __init__(self, expand_fusions: bool):
    self.expand_fusions = expand_fusions
    self.nodes: list[Node] = []
    self.clusters: list[Cluster] = []
    self.edges: list[Edge] = []
    self._count = 0

  def _new_id(self, prefix: str) -> str:
    self._count += 1
    return f"{prefix}{self._count}"

  def add_computation(self, comp, cluster: Optional[str], outer_root: bool):
    """Adds `comp`'s instructions; returns (ids that stand for each
    instruction as an edge source, the ids of parameter nodes by number)."""
    source_of: dict[int, str] = {}  # instruction id() -> source node id
    sink_of: dict[int, list[tuple[str, int]]] = {}  # operand wiring targets
    params: dict[int, str] = {}
    for instr in comp.instructions_in_stable_order():
      is_root = instr is comp.root_instruction
      if self.expand_fusions and instr.opcode == HloOpcode.kFusion:
        cid = self._new_id("cluster_")
        kind = instr.fusion_kind
        kind_text = kind.value if kind is not None else ""
        self.clusters.append(Cluster(
            id=cid, name=instr.name,
            label=f"{instr.name} (fusion {kind_text}) {instr.shape}",
            parent=cluster, is_root=is_root and outer_root))
        inner_sources, inner_params = self.add_computation(
            instr.fused_computation, cid, is_root and outer_root)
        fused_root = instr.fused_computation.root_instruction
        source_of[id(instr)] = inner_sources[id(fused_root)]
        sink_of[id(instr)] = [(inner_params[i], i)
                              for i in range(instr.operand_count)
                              if i in inner_params]
      else:
        nid = self._new_id("n")
        if instr.opcode == HloOpcode.kParameter:
          kind = PARAMETER
          params[instr.parameter_number] = nid
        elif is_root and outer_root:
          kind = ROOT
        elif instr.opcode == HloOpcode.kConstant:
          kind = CONSTANT
        else:
          kind = OP
        extra = tuple(
            _short_text(f"calls {c.name}")
            for c in instr.called_computations())
        self.nodes.append(Node(
            id=nid, name=instr.name, opcode=instr.opcode.value,
            shape=_short_text(str(instr.shape)), kind=kind, cluster=cluster,
            extra=extra, tooltip=_short_text(instr.to_string(), 400),
            opcode_line=(f"parameter {instr.parameter_number}"
                         if kind == PARAMETER else "")))
        source_of[id(instr)] = nid
        sink_of[id(instr)] = [(nid, i) for i in range(instr.operand_count)]
      for target, i in sink_of[id(instr)]:
        self.edges.append(Edge(source_of[id(instr.operand(i))], target, i))
    return source_of, params


def build_graph(computation, expand_fusions: bool = True) -> Graph:
  """The picture's content for `computation` (see the module docstring)."""
  builder = _Builder(expand_fusions)
  builder.add_computation(computation, None, True)
  return Graph(title=computation.name, nodes=builder.nodes,
               clusters=builder.clusters, edges=builder.edges)


# -- styles --------------------------------------------------------------------


def node_fill(node: Node) -> str:
  if node.kind == PARAMETER:
    return "#d9f2d9"
  if node.kind == CONSTANT:
    return "#eeeeee"
  if node.opcode in _HEAVY_OPCODES:
    return "#fdd9b5"
  if node.opcode in _REDUCTION_OPCODES:
    return "#fff2b3"
  if node.opcode in _SHAPE_OPCODES:
    return "#e6e6fa"
  return "#dde9f8"


_ROOT_STROKE = "#c0392b"
_CLUSTER_FILL = "#f6f2ff"
_CLUSTER_STROKE = "#7a5cc0"


# -- DOT -----------------------------------------------------------------------


def _dot_string(text: str) -> str:
  return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(graph: Graph) -> str:
  """Graphviz DOT text: one `digraph`, a `subgraph cluster_*` per fusion."""
  children: dict[Optional[str], list] = {}
  for c in graph.clusters:
    children.setdefault(c.parent, []).append(c)
  nodes_in: dict[Optional[str], list[Node]] = {}
  for n in graph.nodes:
    nodes_in.setdefault(n.cluster, []).append(n)
  out = [f"digraph {_dot_string(graph.title)} {{",
         "  rankdir=TB;",
         '  node [shape=box, style="rounded,filled", fontname="monospace", '
         "fontsize=10];",
         "  edge [arrowsize=0.6];"]

  def emit(cluster_id: Optional[str], indent: str):
    for n in nodes_in.get(cluster_id, []):
      label = "\\n".join(_dot_string(line)[1:-1] for line in n.label_lines)
      attrs = [f'label="{label}"',
               f"fillcolor={_dot_string(node_fill(n))}",
               f"tooltip={_dot_string(n.tooltip)}"]
      if n.kind == PARAMETER:
        attrs.append("shape=ellipse")
      elif n.kind == ROOT:
        attrs.append(f"color={_dot_string(_ROOT_STROKE)}, penwidth=2.5")
      out.append(f"{indent}{n.id} [{', '.join(attrs)}];")
    for c in children.get(cluster_id, []):
      out.append(f"{indent}subgraph {c.id} {{")
      out.append(f"{indent}  label={_dot_string(c.label)};")
      out.append(f'{indent}  style="rounded,filled"; '
                 f"fillcolor={_dot_string(_CLUSTER_FILL)}; "
                 f"color={_dot_string(_ROOT_STROKE if c.is_root else _CLUSTER_STROKE)};")
      emit(c.id, indent + "  ")
      out.append(f"{indent}}}")

  emit(None, "  ")
  for e in graph.edges:
    out.append(f"  {e.src} -> {e.dst} [tooltip={_dot_string(f'operand {e.operand_index}')}];")
  out.append("}")
  return "\n".join(out) + "\n"


# -- HTML / SVG ----------------------------------------------------------------

_PAGE_STYLE = """
body { font-family: sans-serif; margin: 16px; }
svg text { font-family: monospace; font-size: 11px; }
svg .cluster > text { font-size: 11px; font-weight: bold; fill: #4b3590; }
svg .edge { fill: none; stroke: #555; stroke-width: 1.2; }
svg .node:hover rect { stroke-width: 2.5; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 6px;
  border: 1px solid #888; border-radius: 4px; font-size: 12px; }
"""


def _svg_text(x: float, y: float, text: str, anchor: str = "middle",
              extra: str = "") -> str:
  return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>'
          f"{html.escape(text)}</text>")


def to_svg(graph: Graph) -> str:
  """An `<svg>` element: a `<g class="cluster">` per fusion box, a
  `<g class="node">` per instruction, a `<path class="edge">` per edge."""
  lay = layout_lib.layout_graph(graph)
  parts = [f'<svg xmlns="http://www.w3.org/2000/svg" '
           f'width="{lay.width:.0f}" height="{lay.height:.0f}" '
           f'viewBox="0 0 {lay.width:.0f} {lay.height:.0f}">',
           "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" "
           "refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
           "orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" "
           "fill=\"#555\"/></marker></defs>"]
  # Clusters, outermost first so inner boxes paint over outer ones.
  for c in graph.clusters:
    box = lay.clusters[c.id]
    stroke = _ROOT_STROKE if c.is_root else _CLUSTER_STROKE
    parts.append(
        f'<g class="cluster" id="{c.id}"><title>{html.escape(c.label)}</title>'
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" '
        f'height="{box.h:.1f}" rx="8" fill="{_CLUSTER_FILL}" '
        f'stroke="{stroke}" stroke-width="{2.5 if c.is_root else 1.5}"/>'
        + _svg_text(box.x + 8, box.y + 15, c.label, anchor="start")
        + "</g>")
  for e in graph.edges:
    a, b = lay.nodes[e.src], lay.nodes[e.dst]
    x1, y1 = a.x + a.w / 2, a.y + a.h
    x2, y2 = b.x + b.w / 2, b.y
    if y2 > y1:
      dy = (y2 - y1) / 2
      d = (f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + dy:.1f} {x2:.1f},"
           f"{y2 - dy:.1f} {x2:.1f},{y2:.1f}")
    else:  # should not happen in a layered layout; draw it plainly
      d = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}"
    parts.append(f'<path class="edge" d="{d}" marker-end="url(#arrow)">'
                 f"<title>operand {e.operand_index}</title></path>")
  for n in graph.nodes:
    box = lay.nodes[n.id]
    stroke = _ROOT_STROKE if n.kind == ROOT else "#333"
    width = 2.5 if n.kind == ROOT else 1
    rx = box.h / 2 if n.kind == PARAMETER else 5
    rows = [_svg_text(box.x + box.w / 2,
                      box.y + layout_lib.PAD_Y + (i + 0.8) *
                      layout_lib.LINE_HEIGHT, line,
                      extra=' font-weight="bold"' if i == 0 else "")
            for i, line in enumerate(n.label_lines)]
    parts.append(
        f'<g class="node node-{n.kind}" id="{n.id}">'
        f"<title>{html.escape(n.tooltip)}</title>"
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" '
        f'height="{box.h:.1f}" rx="{rx:.1f}" fill="{node_fill(n)}" '
        f'stroke="{stroke}" stroke-width="{width}"/>' + "".join(rows) + "</g>")
  parts.append("</svg>")
  return "\n".join(parts)


def to_html(graph: Graph, heading: Optional[str] = None) -> str:
  """A self-contained page (no scripts, no external links) with the SVG."""
  title = html.escape(heading or graph.title)
  legend = "".join(
      f'<span style="background:{color}">{label}</span>'
      for label, color in (("parameter", "#d9f2d9"), ("constant", "#eeeeee"),
                           ("elementwise", "#dde9f8"),
                           ("shape/data movement", "#e6e6fa"),
                           ("reduction", "#fff2b3"),
                           ("dot/conv/custom-call", "#fdd9b5"),
                           ("fusion", _CLUSTER_FILL)))
  legend += (f'<span style="border:2.5px solid {_ROOT_STROKE}">root</span>')
  return (
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
      f"<title>{title}</title><style>{_PAGE_STYLE}</style></head>\n<body>\n"
      f"<h2>{title}</h2>\n<p class=\"legend\">{legend}</p>\n"
      f"<p>{len(graph.nodes)} instructions, {len(graph.clusters)} fusions, "
      f"{len(graph.edges)} edges. Hover a node for its HLO text.</p>\n"
      f"{to_svg(graph)}\n</body></html>\n")
