"""Comparison of a workload's outputs across platforms, and the reports: the
text table, JSON and an HTML page with an inline SVG chart of the ratios.

Pure functions over plain records (dicts), so they are tested without JAX.
"""

from __future__ import annotations

import html
import math

import numpy as np

# Relative tolerance: max|ours - ref| <= TOL * max|ref| for each output.
TOLERANCE = {"f32": 2e-3, "f64": 1e-9}


def compare_outputs(ours: dict, ref: dict, dtype: str) -> dict:
  """Compares two {name: array} dicts.

  Floating outputs: max|ours-ref| / max|ref| must be <= the dtype's
  tolerance (NaNs must sit at the same places; infinities must be equal).
  Integer and boolean outputs must be equal. Returns {"ok": bool,
  "max_rel_err": float, "worst": name, "detail": str}."""
  tol = TOLERANCE[dtype]
  worst_err, worst_name, problems = 0.0, None, []
  for name in sorted(set(ours) | set(ref)):
    if name not in ours or name not in ref:
      problems.append(f"{name}: missing on {'ours' if name not in ours else 'ref'}")
      worst_err, worst_name = math.inf, name
      continue
    a, b = np.asarray(ours[name]), np.asarray(ref[name])
    if a.shape != b.shape:
      problems.append(f"{name}: shape {a.shape} vs {b.shape}")
      worst_err, worst_name = math.inf, name
      continue
    if a.size == 0:
      continue
    if np.issubdtype(b.dtype, np.inexact):
      err = _relative_error(a, b)
      bad = not err <= tol
    else:
      differ = int(np.count_nonzero(a != b))
      err = 0.0 if differ == 0 else math.inf
      bad = differ != 0
      if bad:
        problems.append(f"{name}: {differ} of {b.size} elements differ")
    if bad and np.issubdtype(b.dtype, np.inexact):
      problems.append(f"{name}: rel err {err:.3g} > {tol:g}")
    if err > worst_err or worst_name is None:
      worst_err, worst_name = err, name
  return {"ok": not problems, "max_rel_err": worst_err, "worst": worst_name,
          "detail": "; ".join(problems[:3])}


def _relative_error(a: np.ndarray, b: np.ndarray) -> float:
  a = a.astype(np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(b)
               else np.float64)
  b = b.astype(a.dtype)
  nan_a, nan_b = np.isnan(a), np.isnan(b)
  if np.any(nan_a != nan_b):
    return math.inf
  inf_b = np.isinf(b)
  if np.any(np.isinf(a) != inf_b) or np.any(a[inf_b] != b[inf_b]):
    return math.inf
  finite = ~(nan_b | inf_b)
  if not np.any(finite):
    return 0.0
  diff = float(np.max(np.abs(a[finite] - b[finite])))
  scale = float(np.max(np.abs(b[finite])))
  if scale == 0.0:
    return diff  # reference all zeros: absolute error
  return diff / scale


# -- Rows ---------------------------------------------------------------------


def make_row(name: str, family: str, dtype: str, ours: dict,
             ref: dict | None, comparison: dict | None) -> dict:
  """One table row from the child records of both platforms.

  Status: ERROR / TIMEOUT if our run failed (with its first error line),
  REF-ERROR if only the reference failed, MISMATCH if the outputs differ
  beyond tolerance, else ok."""
  row = {"name": name, "family": family, "dtype": dtype,
         "ours": ours, "ref": ref}
  where = lambda rec: f"in {rec['phase']}: " if rec.get("phase") else ""
  if ours.get("timeout"):
    row["status"], row["error"] = "TIMEOUT", ours.get("error")
  elif ours.get("error"):
    row["status"], row["error"] = "ERROR", where(ours) + ours["error"]
  elif ref is not None and ref.get("error"):
    row["status"], row["error"] = "REF-ERROR", where(ref) + ref["error"]
  elif comparison is not None and not comparison["ok"]:
    row["status"], row["error"] = "MISMATCH", comparison["detail"]
  else:
    row["status"], row["error"] = "ok", None
  row["max_rel_err"] = comparison["max_rel_err"] if comparison else None
  for key, ratio in (("init_s", "init_ratio"), ("first_s", "first_ratio"),
                     ("steady_median_s", "steady_ratio")):
    a = ours.get(key)
    b = ref.get(key) if ref else None
    row[ratio] = a / b if a and b else None
  return row


def geomean(values) -> float | None:
  vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
  if not vals:
    return None
  return math.exp(sum(math.log(v) for v in vals) / len(vals))


def summary(rows: list[dict]) -> dict:
  """Counts per status and the geomeans of the ratios (ours / reference)
  over the rows whose status is ok."""
  counts = {}
  for r in rows:
    counts[r["status"]] = counts.get(r["status"], 0) + 1
  ok = [r for r in rows if r["status"] == "ok"]
  return {
      "counts": counts,
      "geomean_init_ratio": geomean(r["init_ratio"] for r in ok),
      "geomean_first_ratio": geomean(r["first_ratio"] for r in ok),
      "geomean_steady_ratio": geomean(r["steady_ratio"] for r in ok),
      "n_ok": len(ok),
  }


# -- Text ---------------------------------------------------------------------


def _fmt_s(v) -> str:
  if v is None:
    return "-"
  return f"{v:.2f}" if v >= 0.995 else f"{v:.3f}"


def _fmt_ms(v) -> str:
  if v is None:
    return "-"
  ms = v * 1e3
  return f"{ms:.0f}" if ms >= 99.5 else (f"{ms:.1f}" if ms >= 0.995
                                        else f"{ms:.3f}")


def _fmt_ratio(v) -> str:
  return "-" if v is None else f"{v:.2f}x"


def _fmt_err(v) -> str:
  if v is None:
    return "-"
  if v == 0:
    return "0"
  return "inf" if math.isinf(v) else f"{v:.1e}"


def _fmt_mb(v) -> str:
  return "-" if v is None else f"{v:.0f}"


COLUMNS = ("workload", "status", "max err", "init s", "first s",
           "steady ms", "ratio", "RSS MB")


def table_cells(row: dict) -> list[str]:
  ours, ref = row["ours"], row["ref"] or {}
  pair = lambda f, k: f"{f(ours.get(k))} / {f(ref.get(k))}"
  return [
      row["name"], row["status"], _fmt_err(row["max_rel_err"]),
      pair(_fmt_s, "init_s"), pair(_fmt_s, "first_s"),
      pair(_fmt_ms, "steady_median_s"), _fmt_ratio(row["steady_ratio"]),
      pair(_fmt_mb, "peak_rss_mb"),
  ]


def format_table(rows: list[dict], ours_name: str, ref_name: str) -> str:
  """The comparison table: times and RSS as `ours / reference`, the ratio
  as ours / reference (steady step), then the errors and the geomeans."""
  cells = [list(COLUMNS)] + [table_cells(r) for r in rows]
  widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
  lines = [f"ours = {ours_name}, reference = {ref_name}; "
           "pairs are ours / reference"]
  for i, c in enumerate(cells):
    lines.append("  ".join(x.ljust(w) if j < 2 else x.rjust(w)
                           for j, (x, w) in enumerate(zip(c, widths))).rstrip())
    if i == 0:
      lines.append("  ".join("-" * w for w in widths))
  errors = [r for r in rows if r["error"]]
  if errors:
    lines.append("")
    for r in errors:
      lines.append(f"{r['name']}: {r['status']}: {r['error']}")
  s = summary(rows)
  lines.append("")
  lines.append("status: " + ", ".join(f"{k} {v}" for k, v in
                                      sorted(s["counts"].items())))
  lines.append(
      f"geomean ratios ours/reference over {s['n_ok']} ok workloads: "
      f"init {_fmt_ratio(s['geomean_init_ratio'])}, "
      f"first step {_fmt_ratio(s['geomean_first_ratio'])}, "
      f"steady step {_fmt_ratio(s['geomean_steady_ratio'])}")
  return "\n".join(lines)


def progress_line(i: int, n: int, row: dict) -> str:
  ours = row["ours"]
  ref = row["ref"] or {}
  text = (f"[{i}/{n}] {row['name']}: {row['status']}"
          f"  first {_fmt_s(ours.get('first_s'))}s/{_fmt_s(ref.get('first_s'))}s"
          f"  steady {_fmt_ms(ours.get('steady_median_s'))}ms/"
          f"{_fmt_ms(ref.get('steady_median_s'))}ms")
  if row["error"]:
    text += f"  ({row['error'][:160]})"
  return text


# -- HTML ---------------------------------------------------------------------


def _svg_ratio_chart(rows: list[dict], key: str, title: str) -> str:
  """Horizontal bars of log10(ratio), one per ok workload, with a 1x axis."""
  data = [(r["name"], r[key]) for r in rows
          if r.get(key) and r["status"] == "ok"]
  if not data:
    return ""
  logs = [math.log10(v) for _, v in data]
  lo, hi = min(min(logs), 0.0), max(max(logs), 0.0)
  lo, hi = math.floor(lo), math.ceil(hi)
  if hi == lo:
    hi = lo + 1
  label_w, bar_w, row_h = 230, 460, 16
  height = row_h * len(data) + 40
  x = lambda lg: label_w + (lg - lo) / (hi - lo) * bar_w
  parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 80}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           f'<text x="4" y="12" font-weight="bold">{html.escape(title)}</text>']
  for p in range(lo, hi + 1):
    parts.append(f'<line x1="{x(p):.1f}" y1="18" x2="{x(p):.1f}" '
                 f'y2="{height - 14}" stroke="{"#000" if p == 0 else "#ddd"}"/>')
    parts.append(f'<text x="{x(p):.1f}" y="{height - 2}" text-anchor="middle">'
                 f'{10.0 ** p:g}x</text>')
  for i, ((name, v), lg) in enumerate(zip(data, logs)):
    y = 22 + i * row_h
    x0, x1 = sorted((x(0), x(lg)))
    color = "#c0392b" if v > 1 else "#27ae60"
    parts.append(f'<text x="{label_w - 4}" y="{y + 11}" text-anchor="end">'
                 f'{html.escape(name)}</text>')
    parts.append(f'<rect x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 1):.1f}" '
                 f'height="{row_h - 4}" fill="{color}"/>')
    parts.append(f'<text x="{x1 + 3:.1f}" y="{y + 11}">{v:.2f}x</text>')
  parts.append("</svg>")
  return "\n".join(parts)


def to_html(rows: list[dict], ours_name: str, ref_name: str,
            command: str) -> str:
  s = summary(rows)
  head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS + ("error",))
  body = []
  for r in rows:
    cells = table_cells(r) + [r["error"] or ""]
    style = "" if r["status"] == "ok" else ' style="background:#fdd"'
    body.append(f"<tr{style}>" + "".join(
        f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
  geo = (f"geomean ratios over {s['n_ok']} ok workloads: "
         f"init {_fmt_ratio(s['geomean_init_ratio'])}, first step "
         f"{_fmt_ratio(s['geomean_first_ratio'])}, steady step "
         f"{_fmt_ratio(s['geomean_steady_ratio'])}")
  return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>JAX workloads: {html.escape(ours_name)} vs {html.escape(ref_name)}</title>
<style>body{{font-family:sans-serif}} td,th{{padding:2px 8px;border-bottom:1px solid #eee;font-size:12px;text-align:right}}
td:first-child,td:nth-child(2),td:last-child{{text-align:left}}</style></head>
<body><h1>JAX workloads: {html.escape(ours_name)} vs {html.escape(ref_name)}</h1>
<p><code>{html.escape(command)}</code></p>
<p>Times and peak RSS are <i>ours / reference</i>; ratio = ours / reference
(steady step, median). Max err = max|ours-ref| / max|ref| over the outputs.</p>
<p>status: {html.escape(", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items())))}; {html.escape(geo)}</p>
<table><tr>{head}</tr>
{chr(10).join(body)}
</table>
<h2>Ratios (ours / reference, log scale; below 1x is faster)</h2>
{_svg_ratio_chart(rows, "steady_ratio", "steady step")}
{_svg_ratio_chart(rows, "first_ratio", "first step (trace + compile + run)")}
</body></html>
"""
