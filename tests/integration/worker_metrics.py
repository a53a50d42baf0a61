"""Reading a worker's /metrics and /ready in integration tests."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tools.workers import Worker


def scrape(worker: Worker) -> list[Sample]:
    status, body = worker.get("/metrics")
    assert status == 200, body
    return [sample for family in text_string_to_metric_families(body.decode()) for sample in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels``."""
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


def series(samples: list[Sample], name: str) -> list[dict[str, str]]:
    return [s.labels for s in samples if s.name == name]


