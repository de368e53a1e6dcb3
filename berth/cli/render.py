"""How ``berth simulate`` shows its comparison: a text table, and a chart (PNG, SVG, PDF or HTML)."""

from __future__ import annotations

import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from berth.cli.simulate import Simulation, StrategyResult
from berth.core import format_amount, format_time

CHART_FORMATS = ("png", "svg", "pdf")
REPORT_FORMATS = (*CHART_FORMATS, "html")

GIB = 2**30
_HEADERS = ("strategy", "used", "lower", "skew", "skew", "util pp", "util pp", "stranded", "stranded", "refused")
_HEADERS2 = ("", "nodes", "bound", "/node", "/zone", "stddev", "range", "cpu", "memory", "pods")


def _cores(millicores: int) -> str:
    return f"{millicores / 1000:.1f}"


def _gib(amount: int) -> str:
    return f"{amount / GIB:.1f} GiB"


def _row(r: StrategyResult, bound: int) -> tuple[str, ...]:
    return (r.strategy, str(r.nodes_used), str(bound), str(r.node_skew),
            "-" if r.zone_skew is None else str(r.zone_skew), f"{r.util_stddev:.1f}", f"{r.util_range:.1f}",
            _cores(r.stranded_cpu), _gib(r.stranded_memory), str(r.refused))


def describe(sim: Simulation) -> list[str]:
    ref = sim.reference
    shape = ", ".join(f"{k} {format_amount(k, v)}" for k, v in sorted(ref.pod.requests.items()))
    bound = ", ".join(f"{k} {v}" for k, v in sorted(sim.lower_bound_by.items())) or "no pool node"
    return [
        f"cluster: {sim.cluster}: {sim.nodes} nodes, {sim.pool} in the pool (up, schedulable, untainted), "
        f"{sim.zones} zones; judged at {format_time(sim.now)}",
        f"workloads: {sim.workloads}: {len(sim.results[0].outcomes) if sim.results else 0} workloads, "
        f"{sim.pods} pods; reference pod: {ref.namespace}/{ref.name} ({shape})",
        f"lower bound on nodes used: {sim.lower_bound} (ceil of the mix's total / largest pool node, per resource: "
        f"{bound})",
    ]


def table(sim: Simulation) -> str:
    rows: list[Sequence[str]] = [_HEADERS, _HEADERS2]
    rows += [_row(r, sim.lower_bound) for r in sim.results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS))]
    lines = []
    for k, row in enumerate(rows):
        cells = [cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
        if k == 1:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def notes(sim: Simulation, limit: int = 240) -> list[str]:
    """One line per workload that a strategy could not place whole: why."""
    out = []
    for r in sim.results:
        for o in r.outcomes:
            if o.error is None and not o.refused:
                continue
            message = o.error.message if o.error else ""
            marker = "nodes can take the pod: "
            if marker in message and o.refusals:
                head = message[: message.index(marker)]
                message = f"{head}nodes can take the pod ({summarise(o.refusals)})"
            if len(message) > limit:
                message = message[: limit - 3] + "..."
            code = o.error.code.value if o.error else "refused"
            out.append(f"{r.strategy}: {o.workload}: placed {o.placed} of {o.requested}: {code}: {message}")
    return out


def summarise(refusals: Mapping[str, str]) -> str:
    """Refusal reasons grouped by kind, most frequent first: ``30 insufficient cpu, 3 node is down``."""
    groups: dict[str, int] = {}
    for reason in refusals.values():
        kind = reason_kind(reason)
        groups[kind] = groups.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])))


def reason_kind(reason: str) -> str:
    prefix = "insufficient capacity: "
    if reason.startswith(prefix):
        dims = [part.split(":")[0].strip() for part in reason.removeprefix(prefix).split("; ")]
        return "insufficient " + " and ".join(dims)
    if reason.startswith("topology spread: placing here"):
        return "topology spread: maxSkew"
    return reason.split(": ")[0]


def text_report(sim: Simulation) -> str:
    parts = [*describe(sim), "", table(sim)]
    found = notes(sim)
    if found:
        parts += ["", "refusals:", *(f"  {line}" for line in found)]
    return "\n".join(parts) + "\n"


# -- charts ---------------------------------------------------------------------------------


def write_report(sim: Simulation, path: str) -> str:
    """Write the comparison to ``path``; the format follows the extension. Returns the format."""
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in REPORT_FORMATS:
        raise ValueError(f"unknown report format {Path(path).suffix or '(none)'!r}; "
                         f"use .{', .'.join(REPORT_FORMATS)}")
    if fmt == "html":
        Path(path).write_text(html_report(sim), encoding="utf-8")
    else:
        Path(path).write_bytes(chart_bytes(sim, fmt))
    return fmt


def chart_bytes(sim: Simulation, fmt: str = "png") -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    names = [r.strategy for r in sim.results]
    x = list(range(len(names)))
    fig = Figure(figsize=(15, 9.5), dpi=110)
    fig.subplots_adjust(left=0.05, right=0.985, top=0.91, bottom=0.09, hspace=0.42, wspace=0.2)
    FigureCanvasAgg(fig)
    fig.suptitle(f"berth simulate: {sim.pods} pods of {len(sim.results[0].outcomes) if sim.results else 0} "
                 f"workloads on {sim.pool} pool nodes in {sim.zones} zones", fontsize=14, fontweight="bold")
    axes = fig.subplots(2, 3)
    colour = "#4477aa"

    def bars(ax: object, values: Sequence[float], title: str, ylabel: str, fmt_value: str = "{:.0f}") -> None:
        from matplotlib.axes import Axes

        assert isinstance(ax, Axes)
        drawn = ax.bar(x, values, color=colour)
        ax.bar_label(drawn, labels=[fmt_value.format(v) for v in values], fontsize=8, padding=2)
        ax.set_title(title, fontsize=11)
        ax.set_ylabel(ylabel)
        ax.set_xticks(x, names, rotation=35, ha="right", fontsize=9)
        ax.margins(y=0.15)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)

    ax = axes[0][0]
    bars(ax, [r.nodes_used for r in sim.results],
         f"Nodes used (dashed: bin-packing lower bound, {sim.lower_bound})", "nodes")
    ax.axhline(sim.lower_bound, color="#cc3311", linestyle="--", linewidth=1.5)

    ax = axes[0][1]
    width = 0.38
    node = ax.bar([i - width / 2 for i in x], [r.node_skew for r in sim.results], width, label="across nodes",
                  color=colour)
    zone = ax.bar([i + width / 2 for i in x], [r.zone_skew or 0 for r in sim.results], width, label="across zones",
                  color="#ee7733")
    ax.bar_label(node, fontsize=8, padding=2)
    ax.bar_label(zone, fontsize=8, padding=2)
    ax.set_title("Max instance skew of a workload", fontsize=11)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("pods (max - min)")
    ax.set_xticks(x, names, rotation=35, ha="right", fontsize=9)
    ax.legend(fontsize=8)
    ax.margins(y=0.15)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)

    ax = axes[0][2]
    data = [[100 * u for u in r.utilisation.values()] or [0.0] for r in sim.results]
    ax.boxplot(data, positions=x, widths=0.6)
    ax.set_xticks(x, names, rotation=35, ha="right", fontsize=9)
    ax.set_title("Node utilisation (dominant share), per node", fontsize=11)
    ax.set_ylabel("% of allocatable")
    for i, r in enumerate(sim.results):
        ax.annotate(f"sd {r.util_stddev:.1f}", (i, 0), xytext=(0, -2), textcoords="offset points",
                    ha="center", va="top", fontsize=7, color="#555555")
    ax.set_ylim(-8, 105)
    ax.grid(axis="y", alpha=0.3)

    ref = sim.reference
    bars(axes[1][0], [r.stranded_cpu / 1000 for r in sim.results],
         f"Stranded CPU (cannot hold a {ref.name} pod)", "cores", "{:.1f}")
    bars(axes[1][1], [r.stranded_memory / GIB for r in sim.results],
         f"Stranded memory (cannot hold a {ref.name} pod)", "GiB", "{:.0f}")
    bars(axes[1][2], [r.refused for r in sim.results], f"Refused pods (of {sim.pods})", "pods")
    for ax in (axes[0][0], axes[1][2]):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))

    out = io.BytesIO()
    fig.savefig(out, format=fmt)
    return out.getvalue()


def html_report(sim: Simulation) -> str:
    svg = chart_bytes(sim, "svg").decode("utf-8")
    svg = svg[svg.find("<svg"):]  # drop the XML prolog and doctype
    head = "".join(f"<th>{html.escape(a)}<br>{html.escape(b)}</th>" for a, b in zip(_HEADERS, _HEADERS2, strict=True))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _row(r, sim.lower_bound)) + "</tr>"
                   for r in sim.results)
    about = "".join(f"<p>{html.escape(line)}</p>" for line in describe(sim))
    found = notes(sim)
    refusals = ("<h2>Refusals</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in found) + "</ul>"
                if found else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>berth simulate</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
th {{ background: #f2f2f2; }}
svg {{ max-width: 100%; height: auto; }}
</style></head><body>
<h1>berth simulate</h1>
{about}
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
{refusals}
{svg}
</body></html>
"""
