"""Small statistics over measurements: percentiles, medians with spread, rates."""
from __future__ import annotations

import math
import statistics
from typing import Iterable, Optional, Sequence


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """The ``q``-th percentile (0..100) of ``values``, linearly interpolated; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: Sequence[float], quantiles: Iterable[float] = (50, 95, 99)) -> dict[str, Optional[float]]:
    """``p50``, ``p95``, ... and ``max`` of ``values`` (None where there are none)."""
    result = {f"p{q:g}": percentile(values, q) for q in quantiles}
    result["max"] = max(values) if values else None
    return result


def spread(values: Sequence[Optional[float]]) -> dict[str, Optional[float]]:
    """Median, minimum and maximum of the repeats of one measurement (missing repeats ignored)."""
    present = [v for v in values if v is not None]
    if not present:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(present), "min": min(present), "max": max(present), "n": len(present)}


def drain_rate(times: Sequence[float], started: float) -> Optional[float]:
    """Events per second: how many completed, over the time from ``started`` to the last completion.

    For a backlog that is the rate the pipeline drains it at, start-up, commits
    and the last commit's tail included: no window of it can show a burst of
    completions (an agent starved by another, then catching up) as a rate.
    """
    if not times or max(times) <= started:
        return None
    return len(times) / (max(times) - started)


def marginal_drain_rate(small: tuple[float, float], large: tuple[float, float]) -> Optional[tuple[float, float]]:
    """From two backlogs' (events, seconds to drain): the rate each further event drains at, and the time
    the drain takes whatever its size (the start of the phase, and the commits an event's updates wait for
    after it is processed); None unless the larger backlog took longer.

    Drain times taken as ``fixed + events / rate``: no window of a drain is timed, so a burst of
    completions cannot pass for a rate, and the fixed part no longer lowers the rate of a short drain.
    """
    (events_small, seconds_small), (events_large, seconds_large) = small, large
    if events_large <= events_small or seconds_large <= seconds_small:
        return None
    rate = (events_large - events_small) / (seconds_large - seconds_small)
    return rate, seconds_small - events_small / rate


def overhead_pct(baseline: Optional[float], other: Optional[float]) -> Optional[float]:
    """How much lower ``other`` is than ``baseline``, in percent (negative: higher)."""
    if not baseline or other is None:
        return None
    return (baseline - other) / baseline * 100


def cdf_points(values: Sequence[float], points: int = 200) -> list[list[float]]:
    """Up to ``points`` (value, fraction at or below it) pairs describing the distribution."""
    if not values:
        return []
    ordered = sorted(values)
    n = len(ordered)
    step = max(1, n // points)
    indices = list(range(0, n, step))
    if indices[-1] != n - 1:
        indices.append(n - 1)
    return [[ordered[i], (i + 1) / n] for i in indices]
