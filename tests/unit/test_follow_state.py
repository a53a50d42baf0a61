"""reconcile --follow's judgement, without Kafka: each valid event counted once and consistently, or reported."""
from __future__ import annotations

import json

from app.follow_state import FollowState

INPUT, BY_MERCHANT = "payments", "payments-by-merchant"
DAY = 86_400.0


def state() -> FollowState:
    return FollowState(input_topic=INPUT, by_merchant_topic=BY_MERCHANT, retention_s=DAY,
                       max_event_bytes=10_000, max_amount_cents=10**9)


def payment(event_id: str, merchant: str = "m1", amount: int = 100, customer: str = "c1") -> bytes:
    return json.dumps({"event_id": event_id, "merchant_id": merchant, "customer_id": customer,
                       "amount_cents": amount, "ts": 1_000.0}).encode()


def update(event_id: str, count: int, amount: int, merchant: str = "m1") -> bytes:
    return json.dumps({"merchant_id": merchant, "count": count, "amount_cents": amount, "event_id": event_id}).encode()


def read_inputs(s: FollowState, *values: bytes, partition: int = 0, read_at: float = 5_000.0) -> None:
    for offset, value in enumerate(values):
        s.read_input(partition, offset, value, read_at)
    s.positions.setdefault(INPUT, {})[partition] = len(values)


def test_events_counted_once_in_order_leave_no_difference_and_move_the_watermark_to_the_end():
    s = state()
    read_inputs(s, payment("e1", amount=100), payment("e2", amount=50))
    assert s.watermarks() == {0: 0}
    assert s.read_total(update("e1", 1, 100)) == []
    assert s.watermarks() == {0: 1}
    assert s.read_total(update("e2", 2, 150)) == []
    assert s.watermarks() == {0: 2} and s.checked_events == 2 and sum(s.differences.values()) == 0


def test_repeats_and_bad_records_expect_no_update():
    s = state()
    read_inputs(s, payment("e1"), payment("e1"), b"not json", payment("e2", amount=-5))
    assert list(s.expected) == ["e1"]


def test_an_update_applied_twice_is_extra():
    s = state()
    read_inputs(s, payment("e1"))
    s.read_total(update("e1", 1, 100))
    [difference] = s.read_total(update("e1", 2, 200))
    assert (difference.kind, difference.event_id) == ("extra", "e1") and "counted again" in difference.detail


def test_an_update_of_no_input_event_is_extra():
    s = state()
    [difference] = s.read_total(update("forged", 1, 100))
    assert (difference.kind, difference.event_id, difference.merchant_id) == ("extra", "forged", "m1")
    assert s.differences["extra"] == 1


def test_a_record_that_is_no_update_is_extra_and_checking_goes_on():
    s = state()
    read_inputs(s, payment("e1"))
    [difference] = s.read_total(b"{not json", "merchant-totals[2]@17")
    assert difference.kind == "extra" and "merchant-totals[2]@17 is no total update" in difference.detail
    assert s.read_total(update("e1", 1, 100)) == []


def test_a_wrong_amount_or_count_is_mismatched_and_later_updates_are_checked_against_what_readers_saw():
    s = state()
    read_inputs(s, payment("e1", amount=100), payment("e2", amount=50), payment("e3", amount=1))
    [wrong_amount] = s.read_total(update("e1", 1, 999))
    assert wrong_amount.kind == "mismatched" and "amount 999 after 0 + 100" in wrong_amount.detail
    [gap] = s.read_total(update("e2", 3, 1_049))
    assert gap.kind == "mismatched" and gap.detail == "count 3 after 1"
    assert s.read_total(update("e3", 4, 1_050)) == []  # consistent with the update before it


def test_an_event_the_pipeline_committed_past_without_passing_it_on_is_missing():
    s = state()
    read_inputs(s, payment("e1"), payment("e2"))
    [missing] = s.judge_missing({(INPUT, 0): 1})
    assert (missing.kind, missing.event_id) == ("missing", "e1") and BY_MERCHANT in missing.detail
    assert list(s.expected) == ["e2"] and s.watermarks() == {0: 1}


def test_an_event_passed_on_but_never_counted_is_missing_once_its_second_hop_committed_past_it():
    s = state()
    read_inputs(s, payment("e1"))
    s.read_by_merchant(3, 40, payment("e1"))
    assert s.judge_missing({(INPUT, 0): 1, (BY_MERCHANT, 3): 40}) == []  # not yet processed by the aggregate
    [missing] = s.judge_missing({(INPUT, 0): 1, (BY_MERCHANT, 3): 41})
    assert missing.kind == "missing" and "total update never came" in missing.detail


def test_dedup_memory_and_counted_ids_are_forgotten_past_the_retention_counted_from_when_they_were_read():
    s = state()
    read_inputs(s, payment("old"), read_at=0.0)
    read_inputs(s, payment("new"), partition=1, read_at=2 * DAY)
    s.read_total(update("old", 1, 100))
    s.read_total(update("new", 2, 200))
    s.forget_expired()
    assert set(s.seen[0]) == set() and set(s.seen[1]) == {"new"} and set(s.counted) == {"new"}


def test_an_id_new_in_two_input_partitions_expects_two_updates():
    s = state()
    read_inputs(s, payment("e1", amount=100), partition=0)
    read_inputs(s, payment("e1", amount=100), partition=1)
    assert s.waiting() == 2
    assert s.read_total(update("e1", 1, 100)) == [] and s.read_total(update("e1", 2, 200)) == []
    [extra] = s.read_total(update("e1", 3, 300))
    assert extra.kind == "extra" and s.waiting() == 0


def test_the_state_saved_is_the_state_resumed(tmp_path):
    s = state()
    read_inputs(s, payment("e1"), payment("e2", amount=7))
    s.read_by_merchant(1, 5, payment("e2"))
    s.read_total(update("e1", 1, 100))
    s.read_total(update("forged", 2, 100))
    s.save(tmp_path / "state.json")

    resumed = state()
    assert resumed.load(tmp_path / "state.json")
    assert (resumed.positions, resumed.expected, resumed.counted, resumed.totals, resumed.differences) == (
        s.positions, s.expected, s.counted, s.totals, s.differences)
    assert resumed.read_total(update("e2", 3, 107)) == []  # checked against the last total read before the save
    assert resumed.watermarks() == {0: 2}
    assert not state().load(tmp_path / "none.json")
