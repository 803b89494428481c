"""Summaries of a sample of numbers: mean, median, percentiles, spread."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


class EmptySample(ValueError):
    """A statistic was asked of no values."""


def _sorted(values: Iterable[float]) -> list[float]:
    ordered = sorted(values)
    if not ordered:
        raise EmptySample("no values to summarise")
    return ordered


def mean(values: Iterable[float]) -> float:
    ordered = _sorted(values)
    return math.fsum(ordered) / len(ordered)


def median(values: Iterable[float]) -> float:
    ordered = _sorted(values)
    return ordered[len(ordered) // 2]


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile, q in (0, 100]."""
    if not 0 < q <= 100:
        raise ValueError("q must be in (0, 100]")
    ordered = _sorted(values)
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[rank - 1]


def stdev(values: Iterable[float]) -> float:
    ordered = _sorted(values)
    if len(ordered) < 2:
        return 0.0
    m = mean(ordered)
    return math.sqrt(math.fsum((x - m) ** 2 for x in ordered) / (len(ordered) - 1))


@dataclass(frozen=True)
class Summary:
    count: int
    mean: float
    median: float
    p95: float


def summarise(values: Iterable[float]) -> Summary:
    ordered = _sorted(values)
    return Summary(len(ordered), mean(ordered), median(ordered), percentile(ordered, 95))
