"""Draw the documentation site's charts from the committed benchmark results (bench/results/*.json).

Each chart is an SVG written by the code below from one JSON file, never drawn by hand, and the page
that shows them, ``docs/benchmarks.md``, is written here too: for each chart the picture, the numbers
it is drawn from as a table, and the command that measures them again. Only result files committed
to git are read (``git ls-files``), so a run in progress, which writes its file before anyone has
looked at it, changes nothing here. The output is deterministic: the same JSON gives the same bytes,
and tests/test_docs.py checks that the committed files are what this script writes. Stdlib only.

    .venv/bin/python scripts/docs_charts.py [--check]
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
FIGURES = ROOT / "docs" / "figures"
PAGE = ROOT / "docs" / "benchmarks.md"

OURS, THEIRS = "#1f6feb", "#9a6700"
#: Text sizes (px). The charts are WIDTH wide; a phone (390 px) shows them about 355 px wide, so the
#: smallest text, FONT_PX, is read at about 11.5 px there (tests/test_docs_browser.py measures it).
FONT_PX, TITLE_PX = 13, 15
FONT = f"font-family:sans-serif;font-size:{FONT_PX}px"
WIDTH = 400


@dataclass(frozen=True)
class Series:
    label: str
    color: str
    values: Sequence[float | None]  # None: not measured (drawn as a note, not as 0)
    labels: Sequence[str]  # the text beside each bar


def _open(title: str, height: int, series: Sequence[Series]) -> list[str]:
    """The start of a chart: the SVG element, a white background, the title and the series' legend."""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">',
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        f'<text x="10" y="20" style="{FONT};font-size:{TITLE_PX}px;font-weight:bold">{escape(title)}</text>',
    ]
    x = 10
    for s in series:
        out.append(f'<rect x="{x}" y="30" width="11" height="11" fill="{s.color}"/>')
        out.append(f'<text x="{x + 15}" y="40" style="{FONT}">{escape(s.label)}</text>')
        x += 15 + 8 * len(s.label) + 20
    return out


def grouped_bars(title: str, categories: Sequence[str], series: Sequence[Series], axis: str, top: float) -> str:
    """A horizontal grouped bar chart as SVG text: per category its name, then one bar per series, the bar's
    text to its right."""
    bar, gap, label, left, width, head = 15, 10, 17, 10, 300, 52
    group = label + bar * len(series) + gap
    height = head + group * len(categories) + 30
    out = _open(title, height, series)
    for c, name in enumerate(categories):
        y0 = head + c * group
        out.append(f'<text x="{left}" y="{y0 + label - 4}" style="{FONT}">{escape(name)}</text>')
        for i, s in enumerate(series):
            y = y0 + label + i * bar
            value = s.values[c]
            if value is None:
                out.append(
                    f'<text x="{left + 4}" y="{y + bar - 3}" style="{FONT};fill:#555">{escape(s.labels[c])}</text>'
                )
                continue
            w = width * value / top if top else 0.0
            out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar - 2}" fill="{s.color}"/>')
            out.append(f'<text x="{left + w + 4:.1f}" y="{y + bar - 3}" style="{FONT}">{escape(s.labels[c])}</text>')
    base = head + group * len(categories)
    out.append(f'<line x1="{left}" y1="{head - 2}" x2="{left}" y2="{base - gap}" stroke="#444"/>')
    out.append(f'<text x="{left}" y="{base + 14}" style="{FONT};fill:#444">{escape(axis)}</text>')
    out.append("</svg>\n")
    return "\n".join(out)


def nice_top(value: float) -> tuple[float, float]:
    """The y axis for values up to ``value``: (top, step), step 1, 2 or 5 times a power of ten, 3-6 steps."""
    if value <= 0:
        return 1.0, 0.2
    power = 10.0 ** math.floor(math.log10(value / 3))
    step = next(m * power for m in (1, 2, 5, 10) if value / (m * power) <= 6)
    return step * math.ceil(value / step - 1e-9), step


def line_chart(
    title: str, xs: Sequence[str], series: Sequence[Series], y_title: str, notes: tuple[str, Sequence[str], str]
) -> str:
    """Points joined by lines as SVG text: the categories ``xs`` evenly spaced on the x axis, one line per
    series, each point labelled, the y axis titled ``y_title``; ``notes`` is a row printed under the x
    axis: its name (at the left, beside the row), one text per x, and a line saying what the row is."""
    left, width, head, plot = 62, 322, 62, 220
    height = head + plot + 74
    top, step = nice_top(max((v for s in series for v in s.values if v is not None), default=0.0))
    out = _open(title, height, series)
    base = head + plot

    def y_of(value: float) -> float:
        return base - plot * value / top

    for k in range(round(top / step) + 1):  # grid and y labels
        y = y_of(k * step)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + width}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" style="{FONT}">{k * step:g}</text>')
    out.append(f'<line x1="{left}" y1="{head}" x2="{left}" y2="{base}" stroke="#444"/>')
    out.append(f'<line x1="{left}" y1="{base}" x2="{left + width}" y2="{base}" stroke="#444"/>')
    middle = head + plot / 2
    out.append(
        f'<text x="16" y="{middle:.1f}" transform="rotate(-90 16 {middle:.1f})" text-anchor="middle" '
        f'style="{FONT};fill:#444">{escape(y_title)}</text>'
    )
    x_of = [left + width * (i + 0.5) / len(xs) for i in range(len(xs))]
    for x, name, note in zip(x_of, xs, notes[1], strict=True):
        out.append(f'<text x="{x:.1f}" y="{base + 18}" text-anchor="middle" style="{FONT}">{escape(name)}</text>')
        out.append(
            f'<text x="{x:.1f}" y="{base + 38}" text-anchor="middle" style="{FONT};fill:#444">{escape(note)}</text>'
        )
    out.append(
        f'<text x="{left - 6}" y="{base + 38}" text-anchor="end" style="{FONT};fill:#444">{escape(notes[0])}</text>'
    )
    for s in series:
        points = [(x, y_of(v)) for x, v in zip(x_of, s.values, strict=True) if v is not None]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="2"/>')
        for x, y in points:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{s.color}"/>')
    for i, x in enumerate(x_of):  # labels: the highest point's above it, the others' below theirs
        here = sorted((v, j) for j, s in enumerate(series) if (v := s.values[i]) is not None)
        for rank, (v, j) in enumerate(here):
            dy = -9 if rank == len(here) - 1 else 18
            out.append(  # a white outline keeps the text readable where it crosses a line
                f'<text x="{x:.1f}" y="{y_of(v) + dy:.1f}" text-anchor="middle" style="{FONT};'
                f'fill:{series[j].color};stroke:#ffffff;stroke-width:5px;paint-order:stroke">'
                f"{escape(series[j].labels[i])}</text>"
            )
    out.append(f'<text x="{left}" y="{height - 8}" style="{FONT};fill:#444">{escape(notes[2])}</text>')
    out.append("</svg>\n")
    return "\n".join(out)


# ---------------------------------------------------------------- the charts


@dataclass(frozen=True)
class Drawn:
    svg: str
    table: str  # the numbers the chart is drawn from, as a Markdown table (and a note under it)
    caption: str  # what ran, where and when: the figure's caption


@dataclass(frozen=True)
class Chart:
    source: str  # file name under bench/results
    figure: str  # file name under docs/figures
    title: str
    draw: Callable[[dict[str, Any]], Drawn]
    rerun: str


def _chaos(data: dict[str, Any]) -> Drawn:
    counts: dict[tuple[int, str], dict[str, list[int]]] = {}
    for run in data["runs"]:
        key = (int(run["class"]), str(run["name"]))
        passed_runs = counts.setdefault(key, {}).setdefault(run["side"], [0, 0])
        passed_runs[0] += bool(run["passed"])
        passed_runs[1] += 1
    keys = sorted(counts)
    series = []
    for side, label, color in (("ours", "ours", OURS), ("torchrun", "stock torchrun", THEIRS)):
        got = [counts[k].get(side) for k in keys]
        series.append(
            Series(
                label,
                color,
                [100.0 * p / n if (p, n) != (0, 0) else None for p, n in (g or (0, 0) for g in got)],
                [f"{g[0]} / {g[1]}" if g else "not run" for g in got],
            )
        )
    # The classes whose run passes when the job fails as it must (the results' about, from the harness).
    must_fail = [k for k in keys if k[1] in data.get("about", {}).get("must_fail", [])]
    svg = grouped_bars(
        "Chaos matrix: runs passed per fault class",
        [f"{k[0]} {k[1]}" + (" (passes by failing)" if k in must_fail else "") for k in keys],
        series,
        "% of runs passed; beside each bar: passed / runs",
        100.0,
    )
    table = ["| # | fault | ours: passed / runs | torchrun: passed / runs |", "| ---: | --- | ---: | ---: |"]
    for k in keys:
        cells = [f"{g[0]} / {g[1]}" if (g := counts[k].get(side)) else "not run" for side in ("ours", "torchrun")]
        table.append(f"| {k[0]} | {k[1]} | {cells[0]} | {cells[1]} |")
    return Drawn(svg, "\n".join(table), _chaos_caption(data, counts, must_fail))


def _runs_per_class(runs: list[dict[str, Any]], side: str) -> str:
    """How many runs each class had on one side, and their seeds: "10 (seeds 1000-1009)"."""
    per_class: dict[int, int] = {}
    for r in runs:
        if r["side"] == side:
            per_class[int(r["class"])] = per_class.get(int(r["class"]), 0) + 1
    sizes = sorted(set(per_class.values()))
    count = "-".join(str(n) for n in (sizes[:1] + sizes[-1:] if len(sizes) > 1 else sizes)) or "no"
    seeds = sorted({int(r["seed"]) for r in runs if r["side"] == side and "seed" in r})
    if not seeds:
        return count
    return f"{count} (seed {seeds[0]})" if len(seeds) == 1 else f"{count} (seeds {seeds[0]}-{seeds[-1]})"


def _chaos_caption(
    data: dict[str, Any], counts: dict[tuple[int, str], dict[str, list[int]]], must_fail: list[tuple[int, str]]
) -> str:
    about = data.get("about", {})
    runs = data["runs"]
    dates = sorted({str(r["date"])[:10] for r in runs if r.get("date")})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else "dates not recorded"
    sources: dict[str, int] = {}
    for r in runs:
        source = str(r.get("source", "not recorded"))
        sources[source] = sources.get(source, 0) + 1
    commits = ", ".join(f"`{s}` ({n} runs)" for s, n in sorted(sources.items(), key=lambda kv: -kv[1]))
    named = [f"{k[0]} ({k[1]})" for k in must_fail]
    classes = ", ".join(named[:-1]) + (" and " if len(named) > 1 else "") + named[-1] if named else "none"
    return (
        f"{len(counts)} fault classes on the one-machine cluster ({about.get('cluster', 'not recorded')}); each run "
        f"is one job: {about.get('job', 'not recorded')}. Per class, {_runs_per_class(runs, 'ours')} runs with "
        f"elastic-idl's pod entrypoint and {_runs_per_class(runs, 'torchrun')} with stock torchrun as the pod "
        f"command. A run passes when it meets every check of the matrix: the job ends Succeeded, except in "
        f"classes {classes}, where it must end Failed. Run on {when}, from the source {commits}."
    )


#: The defaults of the defaults table (bench/chaos_cluster.py DEFAULTS), their labels and colours.
DEFAULTS_SERIES = (
    ("flytekit", "flytekit defaults", THEIRS),
    ("flyte2", "Flyte 2 defaults", "#8250df"),
    ("ours", "elastic-idl defaults", OURS),
)


def _chaos_defaults(data: dict[str, Any]) -> Drawn:
    """The defaults table's chart: per fault class and defaults, the runs whose job recovered (ended
    Succeeded with every check met); the table beside it has every outcome."""
    runs: dict[tuple[int, str], dict[str, list[dict[str, Any]]]] = {}
    for run in data["runs"]:
        runs.setdefault((int(run["class"]), str(run["name"])), {}).setdefault(str(run["defaults"]), []).append(run)
    keys = sorted(runs)
    present = [d for d in DEFAULTS_SERIES if any(d[0] in runs[k] for k in keys)]

    def recovered(rs: list[dict[str, Any]]) -> int:
        return sum(bool(r["passed"]) and r["outcome"] == "Succeeded" for r in rs)

    def failed(rs: list[dict[str, Any]]) -> int:
        return sum(r["outcome"] == "Failed" for r in rs)

    series = []
    for name, label, color in present:
        got = [runs[k].get(name, []) for k in keys]
        series.append(
            Series(
                label,
                color,
                [100.0 * recovered(rs) / len(rs) if rs else None for rs in got],
                [f"{recovered(rs)} / {len(rs)}" if rs else "not run" for rs in got],
            )
        )
    svg = grouped_bars(
        "What the defaults give: jobs that recovered",
        [f"{k[0]} {k[1]}" for k in keys],
        series,
        "% of runs whose job recovered (Succeeded, right state)",
        100.0,
    )
    table = [
        "| # | fault | " + " | ".join(f"{label}: recovered / failed / runs" for _, label, _ in present) + " |",
        "| ---: | --- |" + " ---: |" * len(present),
    ]
    for k in keys:
        cells = []
        for name, _, _ in present:
            rs = runs[k].get(name, [])
            cells.append(f"{recovered(rs)} / {failed(rs)} / {len(rs)}" if rs else "not run")
        table.append(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + " |")
    about = data.get("about", {})
    dates = sorted({str(r["date"])[:10] for r in data["runs"] if r.get("date")})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else "dates not recorded"
    sources = sorted({str(r.get("source", "not recorded"))[:12] for r in data["runs"]})
    titles = "; ".join(f"{label}: {about.get('defaults', {}).get(name, name)}" for name, label, _ in present)
    caption = (
        f"{len(keys)} fault classes on the one-machine cluster ({about.get('cluster', 'not recorded')}), each run one "
        f"job: {about.get('job', 'not recorded')}. The defaults: {titles}. A job recovered when it ended Succeeded "
        f"with the fault-free run's state; failed when it ended Failed. Run on {when}, from the source "
        f"{', '.join(f'`{s}`' for s in sources)}."
    )
    return Drawn(svg, "\n".join(table), caption)


def _plugin(data: dict[str, Any]) -> Drawn:
    rows = data["templates"]
    names = [r["template"] for r in rows]
    top = max(max(r["ours"]["allocs_per_op"], r["upstream"]["allocs_per_op"]) for r in rows)
    series = [
        Series(label, color, [r[side]["allocs_per_op"] for r in rows], [str(r[side]["allocs_per_op"]) for r in rows])
        for side, label, color in (("ours", "elastic-idl plugin", OURS), ("upstream", "flyteplugins", THEIRS))
    ]
    svg = grouped_bars("BuildResource: allocations per task", names, series, "allocations per BuildResource", top)
    table = [
        "| template | ours: allocs | flyteplugins: allocs | ours: ms | flyteplugins: ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ours, up = r["ours"], r["upstream"]
        table.append(
            f"| {r['template']} | {ours['allocs_per_op']} | {up['allocs_per_op']} | "
            f"{ours['ns_per_op'] / 1e6:.1f} | {up['ns_per_op'] / 1e6:.1f} |"
        )
    note = (
        "\n\nThe allocation counts are exact; the times were measured under that load and are shown for "
        "completeness, not compared."
    )
    when = (
        f"on {data['date'][:10]}, source commit `{data['commit'][:7]}`"
        if data.get("date") and data.get("commit")
        else "on a date and at a commit the file does not record"
    )
    caption = (
        f"{data['benchmark']} ({data['count']} runs of {data['benchtime']} per template), {data['go']}, "
        f"flyteplugins {data['flyteplugins']}, on {data['machine']}, load average {data['loadavg_1m'][0]}-"
        f"{data['loadavg_1m'][1]}, {when}. Each template is a Flyte TaskTemplate given to BuildResource "
        "of both plugins."
    )
    return Drawn(svg, "\n".join(table) + note, caption)


def _launch(data: dict[str, Any]) -> Drawn:
    rows = sorted(data["results"], key=lambda r: int(r["workers"]))

    def median(r: dict[str, Any], side: str) -> float | None:
        m = r[side]["median_s"]
        return None if m is None else float(m)

    series = [
        Series(label, color, [median(r, side) for r in rows], [_seconds(median(r, side)) for r in rows])
        for side, label, color in (("ours", "ours (elastic-idl)", OURS), ("torchrun", "stock torchrun", THEIRS))
    ]
    svg = line_chart(
        "Launch to exit vs workers (median)",
        [f"{r['workers']} worker{'s' if r['workers'] != 1 else ''}" for r in rows],
        series,
        "seconds, launch to exit",
        ("ratio", [_number(r["ratio_median"]) for r in rows], "ratio: ours / torchrun, median of the rounds"),
    )
    table = [
        "| workers | ours: median (s) | torchrun: median (s) | ours / torchrun | failed runs (ours / torchrun) |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        table.append(
            f"| {r['workers']} | {_number(median(r, 'ours'))} | {_number(median(r, 'torchrun'))} | "
            f"{_number(r['ratio_median'])} | {r['ours']['failed']} / {r['torchrun']['failed']} |"
        )
    m = data["machine"]
    start, end = (datetime.fromisoformat(data[k].replace("Z", "+00:00")) for k in ("date", "finished"))
    caption = (
        f"One node, CPU/gloo: {data['rounds']} rounds in {(end - start).total_seconds() / 60:.0f} minutes, measured "
        f"{data['date'][:16].replace('T', ' ')} UTC on {m['arch']}, {m['cpus']} cores (shared), {m['cpu_model']}, "
        f"Python {m['python']}, torch {m['torch']}"
        + "".join(f", {lib} {m[lib]}" for lib in ("numpy", "pandas") if m.get(lib))
        + (" installed" if any(m.get(lib) for lib in ("numpy", "pandas")) else " (no numpy)")
        + f", load average {data['loadavg_1m_start']} at the start and "
        f"{data['loadavg_1m_end']} at the end, source commit `{data['commit'][:7]}`."
    )
    note = (
        "\n\nEach sample is a fresh launcher process timed from start to exit "
        "(imports, rendezvous, workers, teardown); every round runs each (launcher, workers) pair once in a new "
        "random order, and the ratio is the median of the per-round ratios, so load that hits one round hits "
        "both launchers alike. Ours is the default start method, a warm fork server: the workers do not import "
        "torch again. Every sample is in the JSON file."
    )
    return Drawn(svg, "\n".join(table) + note, caption)


def _flyte_times(data: dict[str, Any]) -> Drawn:
    """bench/flyte_times.py: create -> first step and -> Succeeded through each pytorch plugin of one propeller."""
    keys = (
        ("create_to_first_step_s", "create -> first training step"),
        ("create_to_succeeded_s", "create -> Succeeded"),
    )
    med = data["medians_s"]
    top = max(med[arm][k] for arm in ("ours", "upstream") for k, _ in keys)
    series = [
        Series(label, color, [med[arm][k] for k, _ in keys], [_seconds(med[arm][k]) for k, _ in keys])
        for arm, label, color in (("ours", "elastic-idl-pytorch", OURS), ("upstream", "flyteplugins' pytorch", THEIRS))
    ]
    svg = grouped_bars(
        "Flyte: create to first step and to Succeeded", [n for _, n in keys], series, "seconds, median", top * 1.15
    )
    table = [
        "| median | elastic-idl-pytorch | flyteplugins' pytorch | ratio ours / theirs |",
        "| --- | ---: | ---: | ---: |",
    ]
    for k, name in keys:
        table.append(
            f"| {name} | {_seconds(med['ours'][k])} | {_seconds(med['upstream'][k])} | "
            f"{data['ratio_ours_over_upstream'][k]:.2f} |"
        )
    caption = (
        f"{data['benchmark']}: {data['workflow']}, {data['rounds']} rounds, flytepropeller {data['flytepropeller']}, "
        f"on {data['machine']}, load average {data['loadavg_1m'][0]}-{data['loadavg_1m'][1]}, on "
        f"{data['date'][:10]}, source commit `{data['commit'][:7]}`. Each round runs the workflow once through "
        "each plugin, in alternating order; the first step is the later rank's, from the workers' pod logs."
    )
    return Drawn(svg, "\n".join(table), caption)


def _html(text: str) -> str:
    """Caption text for HTML: escaped, with `code` spans as <code>."""
    parts = escape(text, quote=False).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


CHARTS = (
    Chart(
        "launch.json",
        "launch-vs-workers.svg",
        "Launch time vs workers: ours vs stock torchrun",
        _launch,
        ".venv/bin/python bench/bench_launch.py --workers 1,2,4,8 --rounds 10 --json bench/results/launch.json"
        "   # 11 minutes on 2 cores",
    ),
    Chart(
        "chaos-cluster.json",
        "chaos-cluster.svg",
        "Chaos matrix: ours vs stock torchrun",
        _chaos,
        'make chaos   # the matrix on the one-machine cluster (bench/README.md, "Chaos")',
    ),
    Chart(
        "chaos-defaults.json",
        "chaos-defaults.svg",
        "What the defaults give: flytekit, Flyte 2, elastic-idl",
        _chaos_defaults,
        "make chaos-defaults   # the fault classes under each defaults on the one-machine cluster, 5 runs each",
    ),
    Chart(
        "plugin_buildresource.json",
        "plugin-buildresource.svg",
        "The propeller plugin's BuildResource",
        _plugin,
        ".venv/bin/python bench/bench_plugin.py   # needs Go; writes bench/results/plugin_buildresource.json",
    ),
    Chart(
        "flyte-times.json",
        "flyte-times.svg",
        "Flyte: ours vs flyteplugins' pytorch plugin in one propeller",
        _flyte_times,
        "make flyte-bench   # root and Go: its own cluster and propeller, 5 rounds, about 10 minutes",
    ),
)


def committed_results() -> set[str]:
    """The result files git tracks (every file present when this is not a git checkout)."""
    proc = subprocess.run(
        ["git", "ls-files", "--", str(RESULTS.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return {p.name for p in RESULTS.glob("*.json")}
    return {Path(line).name for line in proc.stdout.splitlines()}


def outputs(sources: set[str] | None = None) -> dict[Path, str]:
    """Every file this script writes (figures and the page): path -> content."""
    present = committed_results() if sources is None else sources
    files: dict[Path, str] = {}
    page = [
        "<!-- Generated by scripts/docs_charts.py from bench/results/: do not edit; run `make docs`. -->\n",
        "# Benchmarks and chaos\n",
        "The figures are drawn by `scripts/docs_charts.py` from the JSON files the benchmarks commit under "
        "`bench/results/`; CI never runs the long benchmarks. Each chart stands beside the numbers it is "
        "drawn from, and says how to measure them again. `bench/README.md` has every benchmark and its method.\n",
    ]
    for chart in CHARTS:
        if chart.source not in present:
            continue
        drawn = chart.draw(json.loads((RESULTS / chart.source).read_text()))
        files[FIGURES / chart.figure] = drawn.svg
        page += [
            f"## {chart.title}\n",
            # md_in_html: the image stays Markdown (its path is rewritten per page), the caption is HTML.
            f'<figure markdown="span">\n  ![{chart.title}](figures/{chart.figure})\n'
            f"  <figcaption>{_html(drawn.caption)}</figcaption>\n</figure>\n",
            f"{drawn.table}\n",
            f"From `bench/results/{chart.source}`. To measure again:\n\n```text\n{chart.rerun}\n```\n",
        ]
    page += [OTHER_FIGURES]
    files[PAGE] = "\n".join(page)
    return files


#: Figures measured beside the code they describe (tables on the guide pages, not charts).
OTHER_FIGURES = """## Other measured figures

Each is a table on the page of what it measures, with its method and the command that measures it again:

- the pure paths (decode, validate, render) per contract vector, in microseconds:
  [What is in the box](guide/architecture.md);
- Go against Python per contract vector: [The Go backend](guide/go-backend.md);
- the propeller plugin's BuildResource per task: [For propeller](guide/propeller.md);
- the start methods, restart success and how fast a lost peer is noticed:
  [Launching locally](guide/launching.md);
- a flytekit workflow against a plain launch and against kfpytorch:
  [The fast path](guide/flytekit.md#the-fast-path);
- the chaos matrix with its median and worst recovery times: [When pods die](guide/when-pods-die.md);
- apply to first step on the one-machine cluster, and its start and build times:
  [A cluster on one machine](guide/cluster.md);
- the demo's timings: [The demo](index.md#the-demo); CI's run time and the wheel's size:
  [Development](guide/development.md).
"""


def main(argv: list[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print("usage: docs_charts.py [--check]", file=sys.stderr)
        return 2
    want = outputs()
    stale = [p for p, text in want.items() if not p.exists() or p.read_text() != text]
    extra = [p for p in FIGURES.glob("*.svg") if p not in want]
    if check:
        if stale or extra:
            names = ", ".join(str(p.relative_to(ROOT)) for p in stale + extra)
            print(f"stale or extra chart files (run `make docs` and commit them): {names}", file=sys.stderr)
            return 1
        return 0
    FIGURES.mkdir(parents=True, exist_ok=True)
    for path in stale:
        path.write_text(want[path])
    for path in extra:
        path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
