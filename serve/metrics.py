"""What ``GET /metrics`` shows, in the Prometheus text format (prometheus_client): decisions by
verdict, the latency of a decision inside the service, the sessions held and the requests on
sessions in progress (waiting for their session or being answered); with ``--processes N``,
what became of the connections each process accepted and the requests forwarded to another
process, and every process's counters summed into one service's (:func:`summed`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class Metrics:
    """The service's counters, in a registry of their own (two services in one process, as in
    tests, do not share them)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.decisions = Counter(
            "policyc_decisions", "Decisions made, by verdict", ["verdict"], registry=self.registry
        )
        self.latency = Histogram(
            "policyc_decision_seconds",
            "Time from reading an authorization request to its answer, inside the service",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.held = Gauge("policyc_sessions", "Sessions the service holds", registry=self.registry)
        self.waiting = Gauge(
            "policyc_queue_depth",
            "Requests on sessions being answered or waiting for their session",
            registry=self.registry,
        )
        self.connections = Counter(
            "policyc_connections",
            "Connections accepted by a process of --processes N, by what became of them: kept (its "
            "first request's session is the process's own), passed (to the process owning it), "
            "received (from the process that accepted it), unrouted (served where accepted: its first "
            "request named no session, was not whole in time, or its owner could not take it)",
            ["how"],
            registry=self.registry,
        )
        self.forwarded = Counter(
            "policyc_forwarded_requests",
            "Requests about a session of another process of --processes N, forwarded to it",
            registry=self.registry,
        )

    def holding(self, sessions: int) -> None:
        self.held.set(sessions)

    def decided(self, verdict: str, seconds: float) -> None:
        self.decisions.labels(verdict=verdict).inc()
        self.latency.observe(seconds)

    def handed(self, how: str) -> None:
        """A connection accepted with ``--processes``: ``kept``, ``passed``, ``received`` or
        ``unrouted``."""
        self.connections.labels(how=how).inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)


def summed(texts: Iterable[str]) -> bytes:
    """Several processes' ``/metrics`` answers as one service's: each sample summed over the
    processes (counters, histograms' buckets, sums and counts, and the gauges: sessions held and
    requests in progress), but a ``_created`` time, which is the earliest."""
    from prometheus_client.metrics_core import Metric
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Metric] = {}
    values: dict[tuple[str, str, tuple[tuple[str, str], ...]], float] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            for sample in family.samples:
                key = (family.name, sample.name, tuple(sorted(sample.labels.items())))
                if key not in values:
                    values[key] = sample.value
                elif sample.name.endswith("_created"):
                    values[key] = min(values[key], sample.value)
                else:
                    values[key] += sample.value
    for (family_name, name, labels), value in values.items():
        families[family_name].add_sample(name, dict(labels), value)

    class Summed:
        def collect(self) -> Iterator[Any]:
            return iter(families.values())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Summed())
    return generate_latest(registry)
