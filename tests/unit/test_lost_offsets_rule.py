"""A consumer group that lost its committed offsets is told apart from one that never committed.

Under exactly-once a table partition is written only in transactions that commit
offsets of input partitions of the same number. Changelog records committed for a
number whose input partitions all have no committed offset mean the offsets were
lost; resuming from the first offset would then process every event again.
"""
from __future__ import annotations

from faust.types import TP

from faust_eos import OffsetsLost
from faust_eos.committing.offsets import changelogs_to_check, lost_offsets
from faust_eos.state.table_state import ChangelogBounds

PAYMENTS = [TP("payments", 0), TP("payments", 1)]
BY_MERCHANT = [TP("by-merchant", 0), TP("by-merchant", 1)]
CHANGELOGS = [TP("seen-changelog", 0), TP("seen-changelog", 1), TP("totals-changelog", 0), TP("totals-changelog", 1)]
EMPTY, HOLDING = ChangelogBounds(0, 0, False), ChangelogBounds(0, 42, False)


def test_a_group_with_every_offset_committed_needs_no_changelog_read():
    committed = dict.fromkeys(PAYMENTS + BY_MERCHANT, 10)

    assert changelogs_to_check(committed, PAYMENTS + BY_MERCHANT, CHANGELOGS) == []


def test_a_partition_number_with_no_committed_input_offset_has_its_changelogs_checked():
    committed = {**dict.fromkeys(PAYMENTS + BY_MERCHANT, 10), TP("payments", 1): None, TP("by-merchant", 1): None}

    assert changelogs_to_check(committed, PAYMENTS + BY_MERCHANT, CHANGELOGS) == [
        TP("seen-changelog", 1), TP("totals-changelog", 1)]


def test_a_number_where_another_input_topic_committed_is_not_judged():
    # payments[1] never had input, but by-merchant[1] did: totals-changelog[1] holds its records rightly
    committed = {**dict.fromkeys(PAYMENTS + BY_MERCHANT, 10), TP("payments", 1): None}

    assert changelogs_to_check(committed, PAYMENTS + BY_MERCHANT, CHANGELOGS) == []


def test_a_number_with_an_input_partition_not_claimed_is_not_judged():
    # by-merchant[1] is assigned but its claim failed: its committed offset was not read
    committed = {TP("payments", 0): 10, TP("by-merchant", 0): 10, TP("payments", 1): None}

    assert changelogs_to_check(committed, PAYMENTS + BY_MERCHANT, CHANGELOGS) == []


def test_a_changelog_partition_kept_only_as_a_standby_is_not_judged():
    # a worker rejoining the group got Faust's leader topic (one partition, never committed) and
    # payments[1]; totals-changelog[0] is a standby copy of what payments[0]'s owner writes
    leader = TP("app-__assignor-__leader", 0)
    committed = {leader: None, TP("payments", 1): 10}

    assert changelogs_to_check(committed, [leader, TP("payments", 1)], [TP("totals-changelog", 0)],
                               standbys={TP("totals-changelog", 0)}) == []
    assert changelogs_to_check(committed, [leader, TP("payments", 1)], [TP("totals-changelog", 0)]) == [
        TP("totals-changelog", 0)]  # served actively, it would hold records of the lost offsets of number 0


def test_a_group_that_never_committed_has_empty_changelogs_and_goes_on():
    committed = dict.fromkeys(PAYMENTS + BY_MERCHANT)
    bounds = dict.fromkeys(changelogs_to_check(committed, PAYMENTS + BY_MERCHANT, CHANGELOGS), EMPTY)

    assert len(bounds) == 4
    assert lost_offsets("pipeline", committed, bounds) is None


def test_changelogs_holding_committed_records_mean_the_offsets_were_lost():
    committed = dict.fromkeys(PAYMENTS + BY_MERCHANT)
    bounds = {**dict.fromkeys(CHANGELOGS, EMPTY), TP("totals-changelog", 1): HOLDING}

    error = lost_offsets("pipeline", committed, bounds)

    assert isinstance(error, OffsetsLost)
    text = str(error)
    assert "'pipeline' holds no committed offset for by-merchant[1], payments[1], but" in text  # [0]: nothing to show
    assert "changelogs totals-changelog[1] hold records" in text
    assert "--reset-offsets" in text


def test_the_partitions_of_a_topic_are_named_together():
    committed = dict.fromkeys(PAYMENTS)
    bounds = dict.fromkeys(CHANGELOGS, HOLDING)

    text = str(lost_offsets("pipeline", committed, bounds))

    assert "offset for payments[0, 1], but" in text
    assert "changelogs seen-changelog[0, 1], totals-changelog[0, 1] hold" in text


def test_a_compacted_changelog_whose_start_moved_past_its_records_holds_none():
    committed = dict.fromkeys(PAYMENTS)
    bounds = {TP("seen-changelog", 0): ChangelogBounds(7, 7, False)}

    assert lost_offsets("pipeline", committed, bounds) is None
