"""Tests for graph_dump (DOT / HTML) and its layout."""

import re
import xml.etree.ElementTree as ET

from xla.hlo.parser import hlo_parser
from xla.tools import graph_dump
from xla.tools import layout

# p0, p1 -> fusion{ add(param_0, param_1) -> exp } -> multiply with c
_FUSED = """
HloModule small

fused {
  param_0 = f32[4] parameter(0)
  param_1 = f32[4] parameter(1)
  add.1 = f32[4] add(param_0, param_1)
  ROOT exp.1 = f32[4] exponential(add.1)
}

ENTRY main {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  fusion.1 = f32[4] fusion(p0, p1), kind=kLoop, calls=fused
  c = f32[4] constant({1, 2, 3, 4})
  ROOT mul = f32[4] multiply(fusion.1, c)
}
"""

# A fusion inside a fusion, and a fusion as the root.
_NESTED = """
HloModule nested

inner {
  ip = f32[2] parameter(0)
  ROOT neg = f32[2] negate(ip)
}

outer {
  op0 = f32[2] parameter(0)
  op1 = f32[2] parameter(1)
  inner_fusion = f32[2] fusion(op0), kind=kLoop, calls=inner
  ROOT sub = f32[2] subtract(inner_fusion, op1)
}

ENTRY main {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  ROOT outer_fusion = f32[2] fusion(a, b), kind=kLoop, calls=outer
}
"""


def _graph(text):
  module = hlo_parser.parse_and_return_verified_module(text)
  return graph_dump.build_graph(module.entry_computation)


def _names(graph):
  by_id = {n.id: n.name for n in graph.nodes}
  edges = {(by_id[e.src], by_id[e.dst]) for e in graph.edges}
  return set(by_id.values()), edges


def test_snapshot_node_and_edge_sets():
  graph = _graph(_FUSED)
  nodes, edges = _names(graph)
  assert nodes == {"p0", "p1", "param_0", "param_1", "add.1", "exp.1", "c",
                   "mul"}
  assert edges == {("p0", "param_0"), ("p1", "param_1"),
                   ("param_0", "add.1"), ("param_1", "add.1"),
                   ("add.1", "exp.1"), ("exp.1", "mul"), ("c", "mul")}
  kinds = {n.name: n.kind for n in graph.nodes}
  assert kinds["p0"] == graph_dump.PARAMETER
  assert kinds["param_1"] == graph_dump.PARAMETER
  assert kinds["c"] == graph_dump.CONSTANT
  assert kinds["mul"] == graph_dump.ROOT
  assert kinds["exp.1"] == graph_dump.OP  # root of the fusion, not the entry
  [cluster] = graph.clusters
  assert cluster.name == "fusion.1" and cluster.parent is None
  inside = {n.name for n in graph.nodes if n.cluster == cluster.id}
  assert inside == {"param_0", "param_1", "add.1", "exp.1"}
  mul = next(n for n in graph.nodes if n.name == "mul")
  assert mul.label_lines[:3] == ("mul", "multiply", "f32[4]{0}")


def test_unexpanded_fusion_is_one_node():
  module = hlo_parser.parse_and_return_verified_module(_FUSED)
  graph = graph_dump.build_graph(module.entry_computation,
                                 expand_fusions=False)
  nodes, edges = _names(graph)
  assert nodes == {"p0", "p1", "fusion.1", "c", "mul"}
  assert edges == {("p0", "fusion.1"), ("p1", "fusion.1"),
                   ("fusion.1", "mul"), ("c", "mul")}
  assert not graph.clusters


def test_nested_fusions_are_nested_clusters_and_root_is_marked():
  graph = _graph(_NESTED)
  clusters = {c.name: c for c in graph.clusters}
  assert set(clusters) == {"outer_fusion", "inner_fusion"}
  assert clusters["inner_fusion"].parent == clusters["outer_fusion"].id
  assert clusters["outer_fusion"].is_root
  assert not clusters["inner_fusion"].is_root
  kinds = {n.name: n.kind for n in graph.nodes}
  assert kinds["sub"] == graph_dump.ROOT
  _, edges = _names(graph)
  assert ("a", "op0") in edges and ("op0", "ip") in edges
  assert ("neg", "sub") in edges and ("b", "op1") in edges


def _dot_tokens(text):
  """Identifiers, quoted strings and punctuation of DOT text."""
  token = re.compile(r'"(?:[^"\\]|\\.)*"|->|[{}\[\];=,]|[A-Za-z0-9_.]+|\s+')
  pos, out = 0, []
  while pos < len(text):
    m = token.match(text, pos)
    assert m, f"unexpected DOT text at {pos}: {text[pos:pos + 20]!r}"
    if not m.group().isspace():
      out.append(m.group())
    pos = m.end()
  return out


def _check_dot(text):
  """Balanced braces and brackets (outside strings); every edge endpoint is
  a declared node. Returns (declared node ids, edges)."""
  tokens = _dot_tokens(text)
  assert tokens[0] == "digraph"
  depth, brackets, declared, edges = 0, 0, set(), []
  for i, tok in enumerate(tokens):
    if tok == "{":
      depth += 1
    elif tok == "}":
      depth -= 1
      assert depth >= 0
    elif tok == "[":
      brackets += 1
      prev = tokens[i - 1]
      if prev not in ("node", "edge") and tokens[i - 2] != "->":
        declared.add(prev)
    elif tok == "]":
      brackets -= 1
    elif tok == "->":
      edges.append((tokens[i - 1], tokens[i + 1]))
  assert depth == 0 and brackets == 0
  for a, b in edges:
    assert a in declared and b in declared, (a, b)
  return declared, edges


def test_dot_is_structurally_valid():
  graph = _graph(_NESTED)
  text = graph_dump.to_dot(graph)
  declared, edges = _check_dot(text)
  assert declared == {n.id for n in graph.nodes}
  assert len(edges) == len(graph.edges)
  assert text.count("subgraph cluster_") == 2
  assert "\\n" in text  # labels are multi-line


def test_dot_escapes_quotes():
  node = graph_dump.Node(id="n1", name='a"b', opcode="add", shape="f32[]",
                         kind=graph_dump.OP, cluster=None, tooltip='x\\"y')
  text = graph_dump.to_dot(graph_dump.Graph("t", [node], [], []))
  declared, _ = _check_dot(text)
  assert declared == {"n1"}
  assert 'a\\"b' in text


def _svg(graph):
  html_text = graph_dump.to_html(graph)
  start, end = html_text.index("<svg"), html_text.index("</svg>") + 6
  return html_text, ET.fromstring(html_text[start:end])


def test_html_has_one_g_per_node_and_no_external_resources():
  graph = _graph(_FUSED)
  html_text, svg = _svg(graph)
  ns = "{http://www.w3.org/2000/svg}"
  groups = [g for g in svg.iter(ns + "g")
            if g.get("class", "").startswith("node")]
  assert len(groups) == len(graph.nodes)
  assert {g.get("id") for g in groups} == {n.id for n in graph.nodes}
  clusters = [g for g in svg.iter(ns + "g") if g.get("class") == "cluster"]
  assert len(clusters) == 1
  paths = [p for p in svg.iter(ns + "path") if p.get("class") == "edge"]
  assert len(paths) == len(graph.edges)
  assert "<script" not in html_text
  assert "http://" not in html_text.replace("http://www.w3.org/2000/svg", "")
  assert "https://" not in html_text


def _inside(inner, outer):
  return (inner.x >= outer.x - 1e-6 and inner.y >= outer.y - 1e-6 and
          inner.x + inner.w <= outer.x + outer.w + 1e-6 and
          inner.y + inner.h <= outer.y + outer.h + 1e-6)


def _overlap(a, b):
  return (a.x < b.x + b.w and b.x < a.x + a.w and a.y < b.y + b.h and
          b.y < a.y + a.h)


def test_layout_geometry():
  for text in (_FUSED, _NESTED):
    graph = _graph(text)
    lay = layout.layout_graph(graph)
    clusters = {c.id: c for c in graph.clusters}
    for n in graph.nodes:  # each node inside its cluster chain
      c = n.cluster
      while c is not None:
        assert _inside(lay.nodes[n.id], lay.clusters[c]), (n.name, c)
        c = clusters[c].parent
    boxes = list(lay.nodes.values())
    for i, a in enumerate(boxes):  # nodes never overlap
      for b in boxes[i + 1:]:
        assert not _overlap(a, b)
    for e in graph.edges:  # operands are drawn above their users
      assert lay.nodes[e.src].y + lay.nodes[e.src].h <= lay.nodes[e.dst].y
    for box in list(lay.nodes.values()) + list(lay.clusters.values()):
      assert box.x >= 0 and box.x + box.w <= lay.width
      assert box.y >= 0 and box.y + box.h <= lay.height


def test_sibling_clusters_do_not_overlap():
  text = _FUSED.replace(
      "  ROOT mul = f32[4] multiply(fusion.1, c)",
      "  fusion.2 = f32[4] fusion(c, fusion.1), kind=kLoop, calls=fused2\n"
      "  ROOT mul = f32[4] multiply(fusion.1, fusion.2)").replace(
          "ENTRY", "fused2 {\n  q0 = f32[4] parameter(0)\n"
          "  q1 = f32[4] parameter(1)\n  ROOT s = f32[4] add(q0, q1)\n}\n\n"
          "ENTRY")
  graph = _graph(text)
  assert len(graph.clusters) == 2
  lay = layout.layout_graph(graph)
  a, b = (lay.clusters[c.id] for c in graph.clusters)
  assert not _overlap(a, b)
