"""``--plot``: ClusterQueue usage and pending workloads over simulated time.

``.html`` is one self-contained file (inline SVG, no scripts, no network); ``.png`` needs matplotlib
(``pip install 'kueue-es[plot]'``).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from events.errors import InvalidInput
from kueue_es.simulator.sim import T0, Series

FORMATS = (".html", ".png")
MAX_POINTS = 2000
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def check(path: str) -> None:
    """Fail before a long run, not after it: a known format, and matplotlib present for PNG."""
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise InvalidInput(f"--plot {path}: unsupported format {ext or '(none)'}; use .html or .png")
    if ext == ".png":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise InvalidInput(f"--plot {path}: PNG output needs matplotlib, which is not installed; install it "
                               "with: pip install 'kueue-es[plot]' — or write a self-contained .html plot instead"
                               ) from None
    parent = Path(path).absolute().parent
    if not parent.is_dir():
        raise InvalidInput(f"--plot {path}: directory {parent} does not exist")


def _curves(series: Series, nominal: dict[str, int]) -> tuple[list[float], dict[str, list[float]], list[int]]:
    n = len(series.times)
    stride = max(1, -(-n // MAX_POINTS))
    idx = list(range(0, n, stride))
    if n and idx[-1] != n - 1:
        idx.append(n - 1)
    xs = [(series.times[i] - T0) / 1000 for i in idx]
    usage = {c: [100 * series.usage[c][i] / nominal[c] if nominal.get(c) else 0.0 for i in idx]
             for c in series.usage}
    pending = [series.pending[i] for i in idx]
    return xs, usage, pending


def write(path: str, summary: dict[str, Any], series: Series, nominal: dict[str, int]) -> None:
    xs, usage, pending = _curves(series, nominal)
    if Path(path).suffix.lower() == ".png":
        _png(path, summary, xs, usage, pending)
    else:
        Path(path).write_text(_html(summary, xs, usage, pending))


def _png(path: str, summary: dict[str, Any], xs: list[float], usage: dict[str, list[float]],
         pending: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    for i, (cls, ys) in enumerate(usage.items()):
        ax1.step(xs, ys, where="post", color=_COLORS[i % len(_COLORS)], label=f"{cls}")
    ax1.set_ylabel("usage of nominal quota (%)")
    ax1.legend(title="ClusterQueue class", loc="lower right")
    ax1.grid(alpha=0.3)
    ax2.step(xs, pending, where="post", color="#444444")
    ax2.set_ylabel("pending workloads")
    ax2.set_xlabel("simulated time (s)")
    ax2.grid(alpha=0.3)
    fig.suptitle(_title(summary))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _title(summary: dict[str, Any]) -> str:
    return (f"kueue-es simulate {summary['scenario']} (seed {summary['seed']}): "
            f"{summary['simulatedWallSeconds']:.1f}s simulated, lower bound {summary['lowerBoundSeconds']:.1f}s")


def _svg_chart(xs: list[float], curves: list[tuple[str, str, list[float]]], ylabel: str, ymax: float,
               width: int = 900, height: int = 260) -> str:
    left, right, top, bottom = 64, 16, 12, 36
    pw, ph = width - left - right, height - top - bottom
    xmax = max(xs[-1] if xs else 1.0, 1e-9)
    ymax = ymax or 1.0

    def px(x: float) -> float:
        return left + pw * x / xmax

    def py(y: float) -> float:
        return top + ph * (1 - min(y, ymax) / ymax)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
             f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#999"/>']
    for k in range(5):
        yv = ymax * k / 4
        y = py(yv)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{yv:.4g}</text>')
    for k in range(6):
        xv = xmax * k / 5
        x = px(xv)
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{xv:.4g}</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">simulated time (s)</text>')
    parts.append(f'<text x="14" y="{top + ph / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top + ph / 2})">{html.escape(ylabel)}</text>')
    for label, color, ys in curves:
        pts: list[str] = []
        prev = None
        for x, y in zip(xs, ys, strict=True):
            if prev is not None:
                pts.append(f"{px(x):.1f},{py(prev):.1f}")
            pts.append(f"{px(x):.1f},{py(y):.1f}")
            prev = y
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.4" points="{" ".join(pts)}">'
                     f'<title>{html.escape(label)}</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def _html(summary: dict[str, Any], xs: list[float], usage: dict[str, list[float]], pending: list[int]) -> str:
    curves = [(cls, _COLORS[i % len(_COLORS)], ys) for i, (cls, ys) in enumerate(usage.items())]
    ymax_u = max([100.0] + [max(ys) for _, _, ys in curves if ys])
    usage_svg = _svg_chart(xs, curves, "usage of nominal quota (%)", ymax_u)
    pending_svg = _svg_chart(xs, [("pending", "#444444", [float(p) for p in pending])], "pending workloads",
                             float(max(pending, default=0)) or 1.0)
    legend = " ".join(f'<span style="color:{c}">&#9632; {html.escape(cls)}</span>' for cls, c, _ in curves)
    rows = "".join(
        f"<tr><td>{html.escape(n)}</td><td>{c['count']}</td><td>{c['admitted']}</td>"
        f"<td>{c['avgTimeToAdmissionSeconds']}</td><td>{c['p50TimeToAdmissionSeconds']}</td>"
        f"<td>{c['p95TimeToAdmissionSeconds']}</td></tr>"
        for n, c in summary["workloadClasses"].items()
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(_title(summary))}</title>
<style>body{{font-family:sans-serif;margin:24px;color:#222}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} th{{background:#f0f0f0}}</style></head>
<body>
<h2>{html.escape(_title(summary))}</h2>
<p>{summary['clusterQueues']} ClusterQueues, {summary['workloads']} workloads, {summary['decisions']} decisions;
log <code>{html.escape(str(summary['log']))}</code></p>
<h3>ClusterQueue usage by class</h3>
<p>{legend}</p>
{usage_svg}
<h3>Pending workloads</h3>
{pending_svg}
<h3>Time to admission (seconds)</h3>
<table><tr><th>class</th><th>count</th><th>admitted</th><th>avg</th><th>p50</th><th>p95</th></tr>{rows}</table>
</body></html>
"""
