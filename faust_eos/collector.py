"""Python's garbage collector, set for a worker that holds many objects for a commit interval.

Under load a worker holds hundreds of thousands of objects that live for about
a commit interval: fetched batches, staged records, table writes waiting for
their commit. With CPython's default thresholds they survive the young
collections, and each full collection then scans the whole heap: measured on
the pipeline at 1,000 ms commits, 41 full collections of up to a million
objects took 7 s of a 50 s run. Collecting the youngest generation less often
lets those objects die young, and freezing what exists at start (modules,
Faust's app) keeps it out of every later scan.
"""
from __future__ import annotations

import gc

#: allocations between collections of the youngest generation (CPython's default: 700)
YOUNG_THRESHOLD = 50_000


def collect_less_often() -> None:
    """Freeze the objects that exist now, and collect the youngest generation every ``YOUNG_THRESHOLD`` allocations."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
