"""``GET /metrics`` of a service of several processes (serve/metrics.py): every process's
counters summed into one service's. The oracle: one :class:`Metrics` that saw everything the
processes' saw."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from policyc.serve.metrics import Metrics, summed

# what a process's counters may see: a decision (verdict, seconds), the sessions it holds, a
# connection accepted and what became of it, a request forwarded
EVENTS = st.one_of(
    st.tuples(st.just("decided"), st.sampled_from(["allow", "deny", "escalate"]), st.floats(0, 2)),
    st.tuples(st.just("holding"), st.integers(0, 50)),
    st.tuples(st.just("handed"), st.sampled_from(["kept", "passed", "received", "unrouted"])),
    st.tuples(st.just("forwarded")),
)


def _apply(metrics: Metrics, events: list[tuple]) -> None:
    for kind, *args in events:
        if kind == "forwarded":
            metrics.forwarded.inc()
        else:
            getattr(metrics, kind)(*args)


def _samples(text: str | bytes) -> tuple[dict[tuple, float], dict[tuple, float]]:
    """The samples of a /metrics text by (name, labels): the values, and the ``_created`` times."""
    values, created = {}, {}
    text = text.decode() if isinstance(text, bytes) else text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            (created if sample.name.endswith("_created") else values)[key] = sample.value
    return values, created


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(EVENTS, max_size=12), min_size=1, max_size=4))
def test_the_processes_counters_summed_are_those_of_one_service_that_saw_it_all(
    processes: list[list[tuple]],
) -> None:
    each, everything = [], Metrics()
    for events in processes:
        one = Metrics()
        _apply(one, events)
        each.append(one)
        _apply(everything, events)
    # sessions held is a gauge: each process's last, and the service's the sum of them
    everything.holding(sum(next((e[1] for e in reversed(ev) if e[0] == "holding"), 0) for ev in processes))

    values, created = _samples(summed(metrics.text().decode() for metrics in each))
    expected, _ = _samples(everything.text())
    assert values.keys() == expected.keys()
    for key, value in expected.items():
        assert abs(values[key] - value) <= 1e-9 * max(1.0, abs(value)), key
    firsts: dict[tuple, float] = {}
    for metrics in each:
        for key, when in _samples(metrics.text())[1].items():
            firsts[key] = min(firsts.get(key, when), when)
    assert created == firsts  # a counter's creation: the earliest process's
