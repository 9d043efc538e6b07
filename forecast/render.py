"""Drawing a forecast model: Graphviz DOT text, or an SVG drawn with matplotlib.

Each state is a node labelled with the predicates that hold in it and its probability of
reaching the unsafe state (``P(F unsafe)``), coloured from green (0) to red (1); ``unsafe`` and
``end`` are the absorbing states. An edge carries its transition probability and, in brackets,
how many times the recorded sessions took it; transitions that only smoothing gives (never
observed) are dashed. ``min_probability`` leaves out edges less likely than it (the absorbing
self-loops are never drawn).

The DOT text needs nothing installed and renders with Graphviz (``dot -Tsvg``). The SVG is
drawn with matplotlib, which policyc depends on, so it works without Graphviz: states are laid
out in columns by how many predicates hold (``unsafe`` and ``end`` in the last one), which
follows the direction monotone predicates force.
"""

from __future__ import annotations

import io
from typing import Any

from .model import END, UNSAFE, Model


def _color(p: float) -> str:
    """Green (0) through yellow to red (1), as #rrggbb."""
    p = min(max(p, 0.0), 1.0)
    red = int(255 * min(1.0, 2 * p))
    green = int(200 * min(1.0, 2 * (1 - p)))
    return f"#{red:02x}{green:02x}40"


def _edges(model: Model, min_probability: float) -> list:
    return [
        t
        for t in model.transitions
        if t.source not in (UNSAFE, END) and t.probability >= min_probability and t.probability > 0
    ]


def _quote(*lines: str) -> str:
    """A DOT string: each line escaped, joined by DOT's ``\\n``."""
    escaped = [line.replace("\\", "\\\\").replace('"', '\\"') for line in lines]
    return '"' + "\\n".join(escaped) + '"'


def to_dot(model: Model, min_probability: float = 0.0) -> str:
    lines = [
        "digraph forecast {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    for state in model.states:
        label = _quote(f"{state.id}: {model.label(state.values)}", f"P(F unsafe) = {state.unsafe:.3f}")
        lines.append(f"  {_quote(state.id)} [label={label}, fillcolor={_quote(_color(state.unsafe))}];")
    unsafe = _quote("unsafe", model.unsafe.pattern)
    lines.append(f'  {_quote(UNSAFE)} [label={unsafe}, shape=doubleoctagon, fillcolor="#ff4040"];')
    lines.append(f'  {_quote(END)} [label="end", shape=doublecircle, fillcolor="#c8c8c8"];')
    initial = [s for s in model.states if s.initial]
    if initial:
        lines.append('  "start" [shape=point];')
        for state in initial:
            lines.append(f'  "start" -> {_quote(state.id)} [label="{state.initial}"];')
    for t in _edges(model, min_probability):
        style = "" if t.count else ", style=dashed"
        text = _quote(f"{t.probability:.3f} [{t.count}]")
        lines.append(f"  {_quote(t.source)} -> {_quote(t.target)} [label={text}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(model: Model, min_probability: float = 0.0) -> str:
    import matplotlib

    figure = draw(model, min_probability)
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "policyc-forecast"}):  # the same model, the same file
        figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return buffer.getvalue()


def draw(model: Model, min_probability: float = 0.0) -> Any:
    """The chain as a matplotlib figure."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch

    columns: dict[int, list[str]] = {}
    labels: dict[str, str] = {}
    colors: dict[str, str] = {}
    for state in model.states:
        held = sum(state.values)
        columns.setdefault(held, []).append(state.id)
        labels[state.id] = f"{state.id}: {model.label(state.values)}\nP(F unsafe) = {state.unsafe:.3f}"
        colors[state.id] = _color(state.unsafe)
    last = (max(columns) + 1) if columns else 0
    columns[last] = [UNSAFE, END]
    labels[UNSAFE] = f"unsafe\n{model.unsafe.pattern}"
    labels[END] = "end"
    colors[UNSAFE] = "#ff4040"
    colors[END] = "#c8c8c8"
    # a column is as wide as its longest label (at fontsize 7, about 0.1 units a character)
    widest = max(len(line) for text in labels.values() for line in text.splitlines())
    step = max(4.0, 0.1 * widest + 1.5)
    position: dict[str, tuple[float, float]] = {}
    for column, ids in sorted(columns.items()):
        spread = 3.2 if column == last else 1.6
        shift = 0.8 * (column % 2) if len(ids) % 2 else 0.0  # columns zig-zag, so edges do not overlap
        for row, identifier in enumerate(ids):
            position[identifier] = (column * step, -(row - (len(ids) - 1) / 2) * spread + shift)
    height = max(len(ids) for ids in columns.values()) * 1.6 + 2
    figure = Figure(figsize=(max(6.0, (last + 1) * step * 0.8), max(3.0, height)))
    axes = figure.subplots()
    axes.set_axis_off()
    for t in _edges(model, min_probability):
        start, end = position[t.source], position[t.target]
        if t.source == t.target:
            x, y = start
            axes.annotate(
                f"{t.probability:.2f} [{t.count}]", (x, y + 0.55), ha="center", fontsize=7, color="#555555"
            )
            continue
        dx, dy = end[0] - start[0], end[1] - start[1]
        rad = 0.12 + 0.06 * max(0.0, abs(dx) / step - 1)  # longer edges bend more
        arrow = FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=10,
            connectionstyle=f"arc3,rad={rad}",
            color="#555555" if t.count else "#aaaaaa",
            linestyle="-" if t.count else "--",
            linewidth=0.6 + 2.0 * t.probability,
            shrinkA=28,
            shrinkB=28,
        )
        axes.add_patch(arrow)
        # the middle of the arc (a quadratic Bézier curve through arc3's control point)
        middle = ((start[0] + end[0]) / 2 + rad * dy / 2, (start[1] + end[1]) / 2 - rad * dx / 2)
        axes.annotate(f"{t.probability:.2f} [{t.count}]", middle, ha="center", fontsize=6, color="#333333")
    for identifier, (x, y) in position.items():
        axes.text(
            x,
            y,
            labels[identifier],
            ha="center",
            va="center",
            fontsize=7,
            bbox={"boxstyle": "round,pad=0.4", "facecolor": colors[identifier], "edgecolor": "#333333"},
        )
    xs = [x for x, _ in position.values()]
    ys = [y for _, y in position.values()]
    axes.set_xlim(min(xs) - step / 2, max(xs) + step / 2)
    axes.set_ylim(min(ys) - 1.2, max(ys) + 1.2)
    return figure
