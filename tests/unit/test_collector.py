"""The garbage collector as a worker sets it: what exists at start frozen, the youngest generation collected less often."""
from __future__ import annotations

import gc

from faust_eos.collector import YOUNG_THRESHOLD, collect_less_often


def test_objects_existing_at_start_are_frozen_and_young_collections_come_less_often():
    thresholds = gc.get_threshold()
    try:
        before = ["exists at start"]
        assert any(tracked is before for tracked in gc.get_objects())
        frozen_before = gc.get_freeze_count()
        collect_less_often()
        assert gc.get_freeze_count() > frozen_before
        assert not any(tracked is before for tracked in gc.get_objects())  # frozen: no collection scans it
        assert gc.get_threshold() == (YOUNG_THRESHOLD, thresholds[1], thresholds[2])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
