#!/usr/bin/env python3
"""Draws the benchmark charts of docs/benchmarks.md from recorded JSON, never by hand.

Reads every `setwise bench ... --json FILE` recording under docs/bench/*.jsonl (one line
per run: {"sender": report, "receiver": report, "net": name}) and the other
implementations' figures in docs/bench/anchors.json, and writes docs/charts/time.svg
(receiver seconds, the end-to-end time) and docs/charts/bytes.svg (bytes both ways)
against the set size, for intersections of equal-sized sets without network shaping,
and docs/charts/unbalanced.svg (the receiver's query seconds against the sender's
database size, one line per receiver set size) for the unbalanced protocol beside APSI.

Usage: scripts/charts.py [--check] [ROOT]
  --check  regenerate in memory and fail if the committed SVGs differ (hand edits, or
           recordings changed without redrawing).
Standard library only; the output is a pure function of the input files.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

WIDTH, HEIGHT = 720, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 30, 50
COLOURS = ["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#332288", "#999933"]


@dataclass
class Series:
    """One line of a chart: points (log2 size, value) by set size."""

    name: str
    anchor: bool
    source: str = ""
    points: dict[int, list[float]] = field(default_factory=dict)

    def add(self, log2_size: int, value: float) -> None:
        self.points.setdefault(log2_size, []).append(value)

    def medians(self) -> list[tuple[int, float]]:
        return [(n, statistics.median(v)) for n, v in sorted(self.points.items())]


def series_name(receiver: dict[str, object]) -> str:
    """The line a run belongs to: protocol, and for mqrpmt the membership test."""
    protocol = str(receiver["protocol"])
    params = dict(p.split("=", 1) for p in str(receiver.get("params", "")).split(";") if "=" in p)
    if protocol == "mqrpmt" and "rpmt" in params:
        return f"setwise mqrpmt ({params['rpmt']})"
    return f"setwise {protocol}"


@dataclass
class Loaded:
    """Every chart's series: setwise's recordings first, then the anchors."""

    times: list[Series]
    sizes: list[Series]
    unbalanced: list[Series]


def items_name(m: int) -> str:
    return f"{m} receiver item" + ("" if m == 1 else "s")


def load(root: Path) -> Loaded:
    """The series of every chart, from the recordings and the anchors."""
    times: dict[str, Series] = {}
    sizes: dict[str, Series] = {}
    unbalanced: dict[int, Series] = {}
    for path in sorted((root / "docs" / "bench").glob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                run = json.loads(line)
                s, r = run["sender"], run["receiver"]
                n = int(r["own_set_size"])
                if run.get("net") != "none" or r["operation"] != "intersection":
                    continue
                db = int(s["own_set_size"])
                if r["protocol"] == "unbalanced" and db > 0 and not db & (db - 1):
                    name = f"setwise unbalanced, {items_name(n)}"
                    series = unbalanced.setdefault(n, Series(name, False))
                    series.add(db.bit_length() - 1, float(r["total_ms"]) / 1e3)
                    continue
                if n != db:
                    continue
                if n <= 0 or n & (n - 1):
                    continue
                name = series_name(r)
                seconds = float(r["total_ms"]) / 1e3
                both_ways = int(s["traffic"]["bytes_sent"]) + int(r["traffic"]["bytes_sent"])
            except (KeyError, TypeError, ValueError) as e:
                raise SystemExit(f"{path}:{number}: not a setwise bench record: {e!r}") from e
            times.setdefault(name, Series(name, False)).add(n.bit_length() - 1, seconds)
            sizes.setdefault(name, Series(name, False)).add(n.bit_length() - 1, both_ways)
    anchors = json.loads((root / "docs" / "bench" / "anchors.json").read_text())["anchors"]
    anchor_times, anchor_bytes, anchor_unbalanced = [], [], []
    for a in anchors:
        t, b = Series(a["name"], True, a["source"]), Series(a["name"], True, a["source"])
        for p in a["points"]:
            t.add(int(p["log2_size"]), float(p["seconds"]))
            if "bytes" in p:
                b.add(int(p["log2_size"]), float(p["bytes"]))
        if a.get("chart") == "unbalanced":
            anchor_unbalanced.append(t)
            continue
        anchor_times.append(t)
        anchor_bytes.append(b)
    order = sorted(times)
    return Loaded(
        [times[k] for k in order] + anchor_times,
        [sizes[k] for k in order] + anchor_bytes,
        [unbalanced[m] for m in sorted(unbalanced)] + anchor_unbalanced,
    )


def escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def seconds_label(v: float) -> str:
    return f"{v:g} s"


def bytes_label(v: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if v >= scale:
            return f"{v / scale:g} {unit}"
    return f"{v:g} B"


def chart(
    title: str,
    y_title: str,
    series: list[Series],
    label: Callable[[float], str],
    x_title: str = "set size (items on each side)",
) -> str:
    """An SVG line chart, log2 sizes across and a log scale up."""
    xs = [n for s in series for n, _ in s.medians()]
    ys = [v for s in series for _, v in s.medians()]
    x0, x1 = min(xs), max(xs)
    x0, x1 = x0 - x0 % 2, x1 + x1 % 2
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if y1 == y0:
        y1 += 1
    w, h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(n: float) -> float:
        return LEFT + (n - x0) / max(x1 - x0, 1) * w

    def py(v: float) -> float:
        return TOP + h - (math.log10(v) - y0) / (y1 - y0) * h

    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">'
        ),
        f"<title>{escape(title)}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
        f'<text x="{WIDTH / 2:.0f}" y="18" text-anchor="middle" font-size="14">'
        f"{escape(title)}</text>",
    ]
    for d in range(y0, y1 + 1):
        y = py(10.0**d)
        out.append(f'<line x1="{LEFT}" x2="{LEFT + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(label(10.0**d))}</text>"
        )
    for n in range(x0, x1 + 1, 2):
        x = px(n)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + h}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{TOP + h + 16}" text-anchor="middle">2^{n}</text>')
    out.append(
        f'<text x="{LEFT + w / 2:.0f}" y="{HEIGHT - 10}" text-anchor="middle">'
        f"{escape(x_title)}</text>"
    )
    out.append(
        f'<text x="14" y="{TOP + h / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + h / 2:.0f})">{escape(y_title)}</text>'
    )
    for i, s in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        pts = s.medians()
        dash = ' stroke-dasharray="6 4"' if s.anchor else ""
        path = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in pts)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        for n, v in pts:
            tip = escape(f"{s.name}, 2^{n}: {label(v)}" + (f" ({s.source})" if s.source else ""))
            if s.anchor:
                out.append(
                    f'<rect x="{px(n) - 4:.1f}" y="{py(v) - 4:.1f}" width="8" height="8" '
                    f'fill="{colour}">'
                    f"<title>{tip}</title></rect>"
                )
            else:
                out.append(
                    f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="4" fill="{colour}">'
                    f"<title>{tip}</title></circle>"
                )
        ly = TOP + 14 + 16 * i
        out.append(
            f'<line x1="{LEFT + 10}" x2="{LEFT + 34}" y1="{ly - 4}" y2="{ly - 4}" '
            f'stroke="{colour}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{LEFT + 40}" y="{ly}">{escape(s.name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def render(root: Path) -> dict[Path, str]:
    """Every chart's path and content."""
    loaded = load(root)
    times, sizes = loaded.times, loaded.sizes
    charts = root / "docs" / "charts"
    return {
        charts / "time.svg": chart(
            "PSI: time against set size (intersection, loopback)",
            "receiver seconds (end to end)",
            times,
            seconds_label,
        ),
        charts / "bytes.svg": chart(
            "PSI: bytes on the wire against set size (intersection)",
            "bytes, both ways",
            sizes,
            bytes_label,
        ),
        charts / "unbalanced.svg": chart(
            "Unbalanced PSI: a query against the sender's database",
            "receiver seconds (query, end to end)",
            loaded.unbalanced,
            seconds_label,
            "sender's database (items)",
        ),
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    stale = []
    for path, svg in render(root).items():
        if check:
            if not path.exists() or path.read_text() != svg:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(svg)
            print(f"wrote {path}")
    if stale:
        names = ", ".join(str(p) for p in stale)
        print(
            f"charts differ from the recorded JSON: {names}; run scripts/charts.py", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
