"""One reader of the high watermark and the last stable offset: LSO first, then the high watermark."""
from kafka_ops.offsets import READ_COMMITTED, READ_UNCOMMITTED, PartitionOffsets, read_offsets


class GrowingLog:
    """End offsets of a partition that gains records between any two reads, like a busy one."""

    def __init__(self, stable: int, high: int, unanswered: frozenset = frozenset()) -> None:
        self.stable, self.high = stable, high
        self.unanswered = unanswered
        self.asked: list[tuple[str, list]] = []

    def __call__(self, isolation_level: str, partitions: list) -> dict:
        self.asked.append((isolation_level, list(partitions)))
        end = self.stable if isolation_level == READ_COMMITTED else self.high
        self.stable, self.high = self.stable + 5, self.high + 5
        return {tp: end for tp in partitions if (isolation_level, tp) not in self.unanswered}


def test_the_lso_is_read_before_the_high_watermark_so_the_high_watermark_is_never_below_it():
    log = GrowingLog(stable=100, high=100)
    (offsets,) = read_offsets(log, [("t", 0)]).values()
    assert [level for level, _ in log.asked] == [READ_COMMITTED, READ_UNCOMMITTED]
    assert offsets.high_watermark >= offsets.last_stable_offset


def test_each_partition_is_read_once_and_named():
    log = GrowingLog(stable=40, high=50)
    offsets = read_offsets(log, [("t", 1), ("t", 0), ("t", 1)])
    assert offsets == {("t", 0): PartitionOffsets("t", 0, 55, 40), ("t", 1): PartitionOffsets("t", 1, 55, 40)}
    assert log.asked[0] == (READ_COMMITTED, [("t", 0), ("t", 1)])


def test_a_partition_missing_from_either_answer_is_left_out():
    log = GrowingLog(stable=10, high=10,
                     unanswered=frozenset({(READ_COMMITTED, ("t", 0)), (READ_UNCOMMITTED, ("t", 1))}))
    assert read_offsets(log, [("t", 0), ("t", 1), ("t", 2)]).keys() == {("t", 2)}
    assert log.asked[1] == (READ_UNCOMMITTED, [("t", 1), ("t", 2)])  # no high watermark asked without an LSO


def test_no_partitions_ask_nothing():
    log = GrowingLog(stable=0, high=0)
    assert read_offsets(log, []) == {} and log.asked == []


def test_lso_lag_is_what_read_committed_readers_cannot_see_yet():
    assert PartitionOffsets("t", 0, 120, 100).lso_lag == 20
