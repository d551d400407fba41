"""The bench report: text tables, bench.json, and a self-contained HTML page
with an SVG bar chart (no plotting library: the chart is a few rects)."""

from __future__ import annotations

import html
import json
import math
from typing import Optional

COLORS = {"ours": "#d9480f", "xla": "#1c7ed6", "numpy": "#2b8a3e",
          "interpreter": "#868e96"}
SHORT = {"interpreter": "interp"}


def fmt_seconds(s: Optional[float]) -> str:
  if s is None:
    return "-"
  if s >= 1:
    return f"{s:.2f} s"
  if s >= 1e-3:
    return f"{s * 1e3:.2f} ms"
  return f"{s * 1e6:.0f} us"


def fmt_bytes(n: Optional[int]) -> str:
  if not n:
    return "-"
  for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
    if n >= scale:
      return f"{n / scale:.1f} {unit}"
  return f"{n} B"


def fmt_ratio(r: Optional[float]) -> str:
  if r is None:
    return "-"
  if r >= 100:
    return f"{r:.0f}x"
  if r >= 10:
    return f"{r:.1f}x"
  if r >= 0.01:
    return f"{r:.2f}x"
  return f"{r:.1g}x"


def fmt_err(e: Optional[float]) -> str:
  return "-" if e is None else f"{e:.1e}"


def _cell(m: Optional[dict], value: str) -> str:
  """The value for an ok measurement, else its status."""
  if m is None:
    return ""
  if m["status"] == "ok":
    return value
  return {"unavailable": "n/a", "skipped": "skip", "error": "ERROR"}.get(
      m["status"], m["status"])


def _table(header: list[str], rows: list[list[str]]) -> str:
  widths = [max(len(r[i]) for r in [header] + rows) for i in range(
      len(header))]
  lines = []
  for j, r in enumerate([header] + rows):
    cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(
        r[1:], widths[1:])]
    lines.append("  ".join(cells).rstrip())
    if j == 0:
      lines.append("  ".join("-" * w for w in widths))
  return "\n".join(lines) + "\n"


def run_table(report: dict) -> tuple[list[str], list[list[str]]]:
  platforms = report["platforms"]
  ratio_keys = [k for k in ("ours/xla", "ours/numpy", "ours/interpreter")
                if k.split("/")[1] in platforms and "ours" in platforms]
  header = ["program"] + [SHORT.get(p, p) for p in platforms] + [
      k.replace("interpreter", "interp") for k in ratio_keys]
  rows = []
  for name, entry in report["programs"].items():
    ps = entry["platforms"]
    row = [name] + [_cell(ps.get(p), fmt_seconds(ps.get(p, {}).get("run_s")))
                    for p in platforms]
    row += [fmt_ratio(entry.get("ratios", {}).get(k)) for k in ratio_keys]
    rows.append(row)
  geo = report.get("geomean", {})
  rows.append(["geomean"] + [""] * len(platforms)
              + [fmt_ratio(geo.get(k)) for k in ratio_keys])
  return header, rows


def detail_table(report: dict) -> tuple[list[str], list[list[str]]]:
  platforms = report["platforms"]
  header = ["program"]
  for p in ("ours", "xla"):
    if p in platforms:
      header.append(f"compile {p}")
  has_compile_ratio = "ours" in platforms and "xla" in platforms
  if has_compile_ratio:
    header.append("ours/xla")
  header += [f"peak {SHORT.get(p, p)}" for p in platforms
             if p != "interpreter"]
  header += [f"err {SHORT.get(p, p)}" for p in platforms]
  header.append("verified")
  rows = []
  for name, entry in report["programs"].items():
    ps = entry["platforms"]
    row = [name]
    for p in ("ours", "xla"):
      if p in platforms:
        row.append(_cell(ps.get(p), fmt_seconds(ps[p].get("compile_s"))))
    if has_compile_ratio:
      row.append(fmt_ratio(entry.get("ratios", {}).get("compile ours/xla")))
    row += [_cell(ps.get(p), fmt_bytes(ps[p].get("peak_bytes")))
            for p in platforms if p != "interpreter"]
    ref = entry.get("reference")
    row += ["ref" if p == ref else _cell(ps.get(p), fmt_err(
        ps[p].get("max_abs_err"))) for p in platforms]
    checked = [(p, m["verified"]) for p, m in ps.items()
               if m["verified"] is not None]
    if not checked:
      row.append("no")
    elif all(v for _, v in checked):
      row.append(f"yes ({len(checked)} vs {SHORT.get(ref, ref)})")
    else:
      row.append("FAIL: " + ",".join(p for p, v in checked if not v))
    rows.append(row)
  return header, rows


def notes(report: dict) -> list[str]:
  seen = {}
  for name, entry in report["programs"].items():
    for p, m in entry["platforms"].items():
      if m["status"] != "ok" or m["verified"] is False:
        key = (p, m["status"], m["note"])
        seen.setdefault(key, []).append(name)
  out = []
  for (p, status, note), names in seen.items():
    where = "all programs" if len(names) == len(report["programs"]) else (
        ", ".join(names))
    out.append(f"{p} {status} ({where}): {note}")
  return out


def bandwidth_lines(report: dict) -> list[str]:
  bw = report.get("bandwidth")
  lines = []
  if bw:
    threads = bw.get("threads", 1)
    lines.append(f"machine memory bandwidth (numpy, "
                 f"{fmt_bytes(bw['array_bytes'])} arrays, best of 1 and "
                 f"{threads} threads): copy "
                 f"{bw['copy_gbps']:.1f} GB/s, triad {bw['triad_gbps']:.1f} "
                 "GB/s")
  for name, entry in report["programs"].items():
    achieved = entry.get("achieved_gbps")
    if not achieved:
      continue
    parts = []
    for p, gbps in achieved.items():
      frac = (f" = {100 * gbps / bw['copy_gbps']:.0f}% of copy"
              if bw else "")
      parts.append(f"{p} {gbps:.1f} GB/s{frac}")
    lines.append(f"{name}: effective bandwidth "
                 f"({fmt_bytes(entry['bytes_moved'])} read+written at "
                 f"least): " + ", ".join(parts))
  return lines


def format_tables(report: dict) -> str:
  m = report.get("machine", {})
  text = (f"bench: {report['preset']} sizes, best of {report['repeat']}; "
          f"{m.get('cpu', m.get('machine', '?'))}, {m.get('cpu_count')} "
          "cores\n\nrun time (best of N; ratios < 1 mean ours is faster)\n")
  text += _table(*run_table(report))
  text += ("\ncompile time, peak memory (arguments + outputs + "
           "temporaries), max abs error vs the reference "
           f"(rtol {report['tolerance']['rtol']:g}, atol "
           f"{report['tolerance']['atol']:g})\n")
  text += _table(*detail_table(report))
  extra = bandwidth_lines(report)
  if extra:
    text += "\n" + "\n".join(extra) + "\n"
  n = notes(report)
  if n:
    text += "\nnotes:\n" + "".join(f"  {line}\n" for line in n)
  return text


def write_json(report: dict, path: str) -> None:
  def clean(v):
    if isinstance(v, float) and not math.isfinite(v):
      return str(v)
    if isinstance(v, dict):
      return {k: clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
      return [clean(x) for x in v]
    return v
  with open(path, "w", encoding="utf-8") as f:
    json.dump(clean(report), f, indent=1, sort_keys=False)
    f.write("\n")


# -- HTML / SVG ---------------------------------------------------------------


def _base_platform(report: dict) -> Optional[str]:
  for p in ("xla", "numpy", "ours", "interpreter"):
    if any(e["platforms"].get(p, {}).get("status") == "ok"
           for e in report["programs"].values()):
      return p
  return None


def svg_chart(report: dict) -> str:
  """Horizontal bars of run time relative to the base platform (XLA when
  it ran), on a log scale centred on 1x."""
  base = _base_platform(report)
  if base is None:
    return "<p>No platform ran.</p>"
  platforms = [p for p in report["platforms"] if p != base] or [base]
  bars = []  # (program, platform, ratio)
  for name, entry in report["programs"].items():
    ps = entry["platforms"]
    b = ps.get(base, {}).get("run_s")
    for p in platforms:
      r = ps.get(p, {}).get("run_s")
      bars.append((name, p, r / b if r and b else None))
  ratios = [r for _, _, r in bars if r]
  lo = math.floor(math.log10(min(ratios + [1.0])))
  hi = math.ceil(math.log10(max(ratios + [1.0])))
  if hi == lo:
    hi += 1
  label_w, width, bar_h, gap = 110, 560, 14, 10
  rows = len(report["programs"])
  height = 40 + rows * (len(platforms) * bar_h + gap) + 30

  def x(r):
    return label_w + (math.log10(r) - lo) / (hi - lo) * width

  out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + width + 90}" '
         f'height="{height}" font-family="sans-serif" font-size="11">']
  for e in range(lo, hi + 1):
    xe = x(10.0 ** e)
    out.append(f'<line x1="{xe:.1f}" y1="30" x2="{xe:.1f}" '
               f'y2="{height - 25}" stroke="{"#000" if e == 0 else "#ddd"}"/>')
    out.append(f'<text x="{xe:.1f}" y="{height - 10}" text-anchor="middle">'
               f'{10.0 ** e:g}x</text>')
  out.append(f'<text x="{label_w}" y="14">run time relative to '
             f'{html.escape(base)} (log scale; left of the black line is '
             'faster)</text>')
  for i, p in enumerate(platforms):
    out.append(f'<rect x="{label_w + 330 + i * 90}" y="18" width="10" '
               f'height="10" fill="{COLORS.get(p, "#999")}"/>'
               f'<text x="{label_w + 344 + i * 90}" y="27">'
               f'{html.escape(p)}</text>')
  y = 36
  for name in report["programs"]:
    out.append(f'<text x="{label_w - 6}" y="{y + len(platforms) * bar_h / 2 + 4:.1f}" '
               f'text-anchor="end">{html.escape(name)}</text>')
    for p in platforms:
      r = next(r for n, q, r in bars if n == name and q == p)
      if r:
        x0, x1 = sorted((x(1.0), x(r)))
        out.append(f'<rect x="{x0:.1f}" y="{y + 1}" width="{max(x1 - x0, 1):.1f}" '
                   f'height="{bar_h - 2}" fill="{COLORS.get(p, "#999")}">'
                   f'<title>{html.escape(name)} {html.escape(p)}: '
                   f'{fmt_ratio(r)}</title></rect>')
        out.append(f'<text x="{x1 + 3:.1f}" y="{y + bar_h - 3}">'
                   f'{fmt_ratio(r)}</text>')
      else:
        status = report["programs"][name]["platforms"].get(p, {}).get(
            "status", "-")
        out.append(f'<text x="{x(1.0) + 3:.1f}" y="{y + bar_h - 3}" '
                   f'fill="#999">{html.escape(p)}: {html.escape(status)}'
                   '</text>')
      y += bar_h
    y += gap
  out.append("</svg>")
  return "\n".join(out)


def _html_table(header, rows) -> str:
  h = "".join(f"<th>{html.escape(c)}</th>" for c in header)
  body = "".join(
      "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
      for r in rows)
  return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def to_html(report: dict) -> str:
  m = report.get("machine", {})
  machine = ", ".join(f"{k} {v}" for k, v in m.items())
  extra = "".join(f"<li>{html.escape(line)}</li>"
                  for line in bandwidth_lines(report) + notes(report))
  return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>CPU backend benchmark</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
</style></head><body>
<h1>CPU backend benchmark</h1>
<p>{html.escape(report['preset'])} sizes, best of {report['repeat']} runs;
{html.escape(machine)}</p>
{svg_chart(report)}
<h2>Run time</h2>
{_html_table(*run_table(report))}
<h2>Compile time, peak memory, error vs the reference</h2>
{_html_table(*detail_table(report))}
<ul>{extra}</ul>
</body></html>
"""
