"""What ``GET /metrics`` shows, in the Prometheus text format (prometheus_client): decisions by
verdict, the latency of a decision inside the service, the sessions held and the requests on
sessions in progress (waiting for their session or being answered)."""

from __future__ import annotations

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

    def holding(self, sessions: int) -> None:
        self.held.set(sessions)

    def decided(self, verdict: str, seconds: float) -> None:
        self.decisions.labels(verdict=verdict).inc()
        self.latency.observe(seconds)

    def text(self) -> bytes:
        return generate_latest(self.registry)
