"""What the ``policyc forecast`` commands print: models, states, PAC bounds, replayed sessions."""

from __future__ import annotations

import math

from .errors import ForecastError
from .model import END, UNSAFE, Model, StateInfo
from .patterns import parse_predicate
from .replay import SessionForecast


def _number(n: float) -> str:
    if math.isinf(n):
        return "∞"
    return f"{n:,.0f}" if n >= 1000 else f"{n:.3g}"


def predicates_text(model: Model) -> list[str]:
    lines = ["predicates:"]
    for p in model.predicates:
        kind = "monotone" if p.monotone else "volatile"
        name = p.name if p.pattern == p.name else f"{p.name} = {p.pattern}"
        lines.append(f"  {name}: {kind}, {p.why}")
    rules = f" (rules {', '.join(i for i, _ in model.rules)})" if model.rules else ""
    lines.append(f"unsafe: {model.unsafe.pattern}{rules}")
    lines.extend(f"invariant: {text}" for text in model.invariants)
    return lines


def pac_text(model: Model) -> list[str]:
    pac = model.pac
    head = f"PAC (ε = {pac.epsilon:g}, δ = {pac.delta:g}, {model.estimator})"
    if pac.undecided == 0:
        return [
            f"{head}: every state reaches `{model.unsafe.name}` with probability 0 or 1; nothing to bound"
        ]
    most = max(pac.required.values(), default=0)
    states = f"{pac.undecided} undecided state{'s' * (pac.undecided != 1)}"
    lines = [
        f"{head}: conditioning κ = {_number(pac.conditioning)} over {states}",
        f"  Algorithm 1 stops once each has been visited enough: up to {_number(most)} visits, "
        f"about {_number(pac.traces_needed)} sessions at the rate of these",
    ]
    if pac.met:
        verb = "meets" if model.traces == 1 else "meet"
        lines.append(
            f"  the {_sessions(model.traces)} {verb} it: every P(F unsafe) is within {pac.epsilon:g}"
        )
    else:
        error = pac.achieved_epsilon
        bound = f"{_number(error)}, which says nothing" if error >= 1 else f"{error:.3f}"
        lines.append(
            f"  the {_sessions(model.traces)} {'does' if model.traces == 1 else 'do'} not meet it; "
            f"with confidence {1 - pac.delta:g} {'it bounds' if model.traces == 1 else 'they bound'} "
            f"the error of every P(F unsafe) by {bound}"
        )
    return lines


def learn_text(model: Model, output: str) -> str:
    observed = sum(1 for t in model.transitions if t.count)
    smoothed = sum(1 for t in model.transitions if not t.count and t.source not in (UNSAFE, END))
    alpha = f", α = {model.alpha:g}" if model.estimator == "laplace" else ""
    lines = [
        f"wrote {output}: {len(model.states)} states, {observed} observed transitions"
        + (f" and {smoothed} from smoothing" if smoothed else "")
        + f" ({model.estimator}{alpha}), learned from {_sessions(model.traces)} "
        f"({model.unsafe_traces} reached `{model.unsafe.name}`) and {model.steps:,} steps",
        *predicates_text(model),
        *pac_text(model),
    ]
    return "\n".join(lines)


def states_table(model: Model, states: list[StateInfo]) -> str:
    names = ["state", "P(safe)", "P(F unsafe)", *(f"P(F<={k})" for k in model.horizons), "visits", "sessions"]
    rows = []
    for s in states:
        rows.append(
            [
                f"{s.id} {model.label(s.values)}",
                f"{s.safe:.3f}",
                f"{s.unsafe:.3f}",
                *(f"{p:.3f}" for p in s.within),
                str(s.visits),
                f"{s.unsafe_traces}/{s.traces}",
            ]
        )
    widths = [max(len(r[i]) for r in [names, *rows]) for i in range(len(names))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in [names, *rows]
    ]
    return "\n".join(lines)


def select(model: Model, spec: str | None) -> list[StateInfo]:
    """The states a ``--state`` selection names: ``a,!b`` (``a`` holds, ``b`` does not; the rest
    either way), or a state id."""
    if spec is None:
        return list(model.states)
    if spec in model.by_id:
        return [model.by_id[spec]]
    wanted: dict[str, bool] = {}
    for part in (p.strip() for p in _split(spec)):
        if not part:
            continue
        value = not part.startswith(("!", "not "))
        name = part.removeprefix("!").removeprefix("not ").strip() if not value else part
        if not value and name.startswith(("!", "not ")):
            raise ForecastError(
                f"`{part}`: negate a predicate once (`!{name.lstrip('!').removeprefix('not ').strip()}`)"
            )
        if name not in model.names and "(" in name:
            try:  # a pattern, written with other spacing
                name = parse_predicate(name).default_name
            except ForecastError:
                pass
        if name not in model.names:
            known = ", ".join(f"`{n}`" for n in model.names)
            raise ForecastError(
                f"`{name}` is not a predicate or a state of the model (the predicates: {known})"
            )
        if wanted.get(name, value) != value:
            raise ForecastError(f"`{spec}` asks for `{name}` to hold and not to hold")
        wanted[name] = value
    position = {n: i for i, n in enumerate(model.names)}
    return [s for s in model.states if all(s.values[position[n]] == v for n, v in wanted.items())]


def _split(spec: str) -> list[str]:
    """``spec`` split at its commas, except those inside parentheses or a string (a pattern's)."""
    parts, current, depth, quoted, escaped = [], [], 0, False, False
    for char in spec:
        if quoted:
            quoted = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif char == '"':
            quoted = True
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def session_text(report: SessionForecast, threshold: float, unsafe: str) -> str:
    lines = [f"session {report.name}"]
    names = [s.event or ("(start)" if i == 0 else f"(event {i})") for i, s in enumerate(report.steps)]
    width = max((len(n) + len(s.tool or "") + 1 for n, s in zip(names, report.steps, strict=True)), default=8)
    failed = next(((i, s.error) for i, s in enumerate(report.steps) if s.error is not None), None)
    for i, step in enumerate(report.steps):
        what = names[i] + (f" {step.tool}" if step.tool else "")
        if step.unsafe_now:
            state = f"`{unsafe}` holds"
        else:
            unknown = " (predicates unknown)" if step.error is not None else " (unseen state)"
            state = f"P(safe) {step.safe:.2f}" + ("" if step.known else unknown)
            if step.warned and (report.violation is None or i < report.violation):
                state += "  WARNING"
        verdict = ""
        if step.denied:
            verdict = f"  DENIED [{', '.join(step.rules)}]" if step.rules else "  DENIED"
        lines.append(f"  {i:>3} {what:<{width}}  {state}{verdict}".rstrip())
    if failed is not None:
        lines.append(f"  at step {failed[0]}: {failed[1]}")
    if report.violation is not None:
        if report.lead is not None:
            lines.append(f"  warned {report.lead} event{'s' * (report.lead != 1)} before `{unsafe}`")
        else:
            lines.append(f"  reached `{unsafe}` without a warning")
    elif report.first_warning is not None and not report.failed:
        lines.append("  warned, and never reached the violation (a false alarm)")
    return "\n".join(lines)


def _sessions(count: int) -> str:
    return f"{count:,} session{'s' * (count != 1)}"
