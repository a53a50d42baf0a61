"""Delivery: each input record reaches the agents once per ownership, and commits never pass unprocessed records."""
from dataclasses import dataclass

from faust.types import TP

from faust_eos.consuming.delivery import Delivery

PAYMENTS = TP("payments", 0)
CHANGELOG = TP("app-totals-changelog", 0)


@dataclass(eq=False)
class Record:
    offset: int


@dataclass(eq=False)
class Message:
    tp: TP
    offset: int
    acked: bool = False


def fetch_and_ignored(delivery, tp, *offsets, started=None):
    """What one fetch of ``tp`` offers, as Faust's fetch loop would see it, and what must be sought again."""
    token = delivery.fetch_started() if started is None else started
    return delivery.fetched({tp: [Record(o) for o in offsets]} if offsets else {}, token)


def fetch(delivery, tp, *offsets, started=None):
    return fetch_and_ignored(delivery, tp, *offsets, started=started)[0]


def hand_out(delivery, offered, tp=PAYMENTS, stop_after=None):
    """Offer each record to admit() as Faust would; return the messages handed out."""
    handed = []
    for record in offered.get(tp, [])[:stop_after]:
        message = Message(tp, record.offset)
        if delivery.admit(tp, message):
            handed.append(message)
    return handed


def offsets(messages):
    return [m.offset for m in messages]


def positioned(at=100):
    delivery = Delivery()
    delivery.position(PAYMENTS, at)
    return delivery


def test_records_are_handed_out_in_order_once():
    delivery = positioned()
    assert offsets(hand_out(delivery, fetch(delivery, PAYMENTS, 100, 101, 103))) == [100, 101, 103]
    # a seek back (Faust's, to the committed offset) fetches them again: not handed out again
    assert hand_out(delivery, fetch(delivery, PAYMENTS, 100, 101, 103)) == []
    assert offsets(hand_out(delivery, fetch(delivery, PAYMENTS, 103, 104))) == [104]


def test_records_below_the_starting_offset_are_not_handed_out():
    delivery = positioned(at=100)
    assert offsets(hand_out(delivery, fetch(delivery, PAYMENTS, 98, 99, 100))) == [100]


def test_nothing_is_handed_out_before_the_partition_is_positioned():
    delivery = Delivery()
    offered = fetch(delivery, PAYMENTS, 5, 6)
    assert offsets(offered[PAYMENTS]) == [5, 6]  # passed through: the consumer refuses them
    assert hand_out(delivery, offered) == []


def test_partitions_never_positioned_pass_through_unchanged():
    delivery = positioned()
    assert offsets(fetch(delivery, CHANGELOG, 7, 8)[CHANGELOG]) == [7, 8]


def test_records_a_fetch_dropped_are_offered_again_before_later_ones():
    delivery = positioned()
    # Faust stops in the middle of the batch (the flow stopped, say) and drops 102 and 103
    assert offsets(hand_out(delivery, fetch(delivery, PAYMENTS, 100, 101, 102, 103), stop_after=2)) == [100, 101]
    offered = fetch(delivery, PAYMENTS, 104, 105)
    assert offsets(offered[PAYMENTS]) == [102, 103, 104, 105]
    assert offsets(hand_out(delivery, offered)) == [102, 103, 104, 105]


def test_a_record_is_not_handed_out_while_an_earlier_fetched_one_waits():
    delivery = positioned()
    fetch(delivery, PAYMENTS, 100, 101)
    assert not delivery.admit(PAYMENTS, Message(PAYMENTS, 101))
    assert delivery.admit(PAYMENTS, Message(PAYMENTS, 100))
    assert delivery.admit(PAYMENTS, Message(PAYMENTS, 101))


def test_only_fetched_records_are_handed_out():
    delivery = positioned()
    assert not delivery.admit(PAYMENTS, Message(PAYMENTS, 100))


def test_a_fetch_that_overlapped_a_seek_is_ignored_for_that_partition():
    delivery = positioned()
    started = delivery.fetch_started()
    with delivery.seeking(PAYMENTS):
        during, seek_again = fetch_and_ignored(delivery, PAYMENTS, 150, 151)  # from the old position
    assert PAYMENTS not in during and seek_again == {PAYMENTS}
    # began before the seek ended: these may be the new position's records, which the
    # consumer has now passed, so the partition must be sought back to fetch them again
    offered, seek_again = fetch_and_ignored(delivery, PAYMENTS, 100, started=started)
    assert PAYMENTS not in offered and seek_again == {PAYMENTS}
    assert delivery.resume_point(PAYMENTS) == 100
    assert offsets(hand_out(delivery, fetch(delivery, PAYMENTS, 100))) == [100]


def test_a_fetch_that_overlapped_the_positioning_is_ignored():
    delivery = Delivery()
    started = delivery.fetch_started()
    delivery.position(PAYMENTS, 100)
    offered, seek_again = fetch_and_ignored(delivery, PAYMENTS, 120, started=started)
    assert PAYMENTS not in offered and seek_again == {PAYMENTS}


def test_a_refetch_after_a_seek_back_keeps_the_waiting_records_in_order():
    delivery = positioned()
    fetch(delivery, PAYMENTS, 102, 103)  # 100 and 101 hold commit markers
    offered = fetch(delivery, PAYMENTS, 102, 103, 104)
    assert offsets(offered[PAYMENTS]) == [102, 103, 104]


def test_a_commit_reaches_past_the_last_record_handed_out_once_all_are_processed():
    delivery = positioned()
    handed = hand_out(delivery, fetch(delivery, PAYMENTS, 100, 102, 105))  # gaps: markers
    assert delivery.committable(PAYMENTS) == 100
    for message in handed:
        message.acked = True
    assert delivery.committable(PAYMENTS) == 106


def test_a_commit_stops_at_the_first_record_not_processed():
    delivery = positioned()
    first, second, third = hand_out(delivery, fetch(delivery, PAYMENTS, 100, 101, 102))
    first.acked = True
    third.acked = True
    assert delivery.committable(PAYMENTS) == 101
    second.acked = True
    assert delivery.committable(PAYMENTS) == 103


def test_a_commit_does_not_pass_records_fetched_and_not_handed_out():
    delivery = positioned()
    for message in hand_out(delivery, fetch(delivery, PAYMENTS, 100, 101, 102), stop_after=1):
        message.acked = True
    assert delivery.committable(PAYMENTS) == 101


def test_an_acknowledgement_from_an_earlier_ownership_does_not_count():
    delivery = positioned()
    (old,) = hand_out(delivery, fetch(delivery, PAYMENTS, 100))
    delivery.close()
    delivery.position(PAYMENTS, 100)
    (new,) = hand_out(delivery, fetch(delivery, PAYMENTS, 100))
    old.acked = True  # a stale event the stream skipped and acknowledged
    assert delivery.committable(PAYMENTS) == 100
    new.acked = True
    assert delivery.committable(PAYMENTS) == 101


def test_after_close_nothing_is_handed_out_or_committed():
    delivery = positioned()
    offered = fetch(delivery, PAYMENTS, 100)
    delivery.close()
    assert hand_out(delivery, offered) == []
    assert delivery.committable(PAYMENTS) is None
    assert delivery.resume_point(PAYMENTS) is None


def test_the_resume_point_follows_the_records_handed_out():
    delivery = positioned()
    assert delivery.resume_point(PAYMENTS) == 100
    hand_out(delivery, fetch(delivery, PAYMENTS, 100, 103))
    assert delivery.resume_point(PAYMENTS) == 104


# -- batches (faust_eos.short_paths.batches): one message stands for several records -------------
def hand_out_batch(delivery, first, last, tp=PAYMENTS):
    message = Message(tp, last)
    return message if delivery.admit(tp, message, first_offset=first) else None


def test_a_batch_is_handed_out_whole_when_its_first_record_is_the_first_waiting():
    delivery = positioned()
    fetch(delivery, PAYMENTS, 100, 101, 103, 104)
    assert hand_out_batch(delivery, 101, 103) is None  # 100 still waits
    assert hand_out_batch(delivery, 100, 103) is not None
    assert delivery.resume_point(PAYMENTS) == 104
    assert offsets(fetch(delivery, PAYMENTS)[PAYMENTS]) == [104]  # the rest of the fetch still waits


def test_a_commit_stops_at_an_unprocessed_batchs_first_record_and_passes_it_once_processed():
    delivery = positioned()
    fetch(delivery, PAYMENTS, 100, 101, 102, 103)
    first, second = hand_out_batch(delivery, 100, 101), hand_out_batch(delivery, 102, 103)
    first.acked = True
    assert delivery.committable(PAYMENTS) == 102
    second.acked = True
    assert delivery.committable(PAYMENTS) == 104


def test_a_batch_faust_dropped_is_offered_again_with_the_records_fetched_after_it():
    delivery = positioned()
    fetch(delivery, PAYMENTS, 100, 101)  # condensed into one batch, which Faust drops
    offered = fetch(delivery, PAYMENTS, 102)
    assert offsets(offered[PAYMENTS]) == [100, 101, 102]
    assert hand_out_batch(delivery, 100, 102) is not None
    assert delivery.committable(PAYMENTS) == 100
