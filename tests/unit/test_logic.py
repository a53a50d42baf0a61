"""The pipeline's decisions: dedup verdicts, running totals, tumbling windows, stream time."""
from agents.logic import (
    Verdict,
    add_to_total,
    add_to_window,
    advance_stream_time,
    dedup_expired,
    dedup_verdict,
    is_late,
    seen_entry,
    window_closed,
    window_key,
    window_start,
)
from agents.models import Payment

RETENTION_S = 7 * 86_400


def payment(event_id="e-1", merchant_id="m001", amount_cents=100, ts=1000.0, customer_id="c1"):
    return Payment(event_id=event_id, merchant_id=merchant_id, customer_id=customer_id,
                   amount_cents=amount_cents, ts=ts)


# --- dedup ---------------------------------------------------------------

def test_first_sighting_of_an_event_is_new():
    assert dedup_verdict(None, payment(), now=5000.0, retention_s=RETENTION_S) is Verdict.NEW


def test_repeat_with_same_content_is_a_duplicate():
    seen = seen_entry(payment(), now=5000.0)
    assert dedup_verdict(seen, payment(), now=5001.0, retention_s=RETENTION_S) is Verdict.DUPLICATE


def test_repeat_with_other_content_is_a_conflict():
    seen = seen_entry(payment(amount_cents=100), now=5000.0)
    for other in (payment(amount_cents=101), payment(merchant_id="m002"), payment(customer_id="c2"),
                  payment(ts=1000.001)):
        assert dedup_verdict(seen, other, now=5001.0, retention_s=RETENTION_S) is Verdict.CONFLICT


def test_repeat_after_retention_has_expired_counts_as_new():
    seen = seen_entry(payment(), now=5000.0)
    assert dedup_verdict(seen, payment(), now=5000.0 + RETENTION_S + 1, retention_s=RETENTION_S) is Verdict.NEW
    conflicting = payment(amount_cents=999)
    assert dedup_verdict(seen, conflicting, now=5000.0 + RETENTION_S + 1, retention_s=RETENTION_S) is Verdict.NEW


def test_repeat_exactly_at_retention_is_still_remembered():
    seen = seen_entry(payment(), now=5000.0)
    assert dedup_verdict(seen, payment(), now=5000.0 + RETENTION_S, retention_s=RETENTION_S) is Verdict.DUPLICATE


# --- running total -------------------------------------------------------

def test_first_payment_starts_the_total():
    total = add_to_total(None, payment(event_id="e-1", amount_cents=250))
    assert (total.merchant_id, total.count, total.amount_cents, total.event_id) == ("m001", 1, 250, "e-1")


def test_each_later_payment_adds_one_and_its_amount_and_names_its_event():
    total = add_to_total(None, payment(event_id="e-1", amount_cents=250))
    total = add_to_total(total, payment(event_id="e-2", amount_cents=50))
    total = add_to_total(total, payment(event_id="e-3", amount_cents=0))
    assert (total.count, total.amount_cents, total.event_id) == (3, 300, "e-3")


# --- tumbling windows ----------------------------------------------------

def test_ts_exactly_on_a_boundary_belongs_to_the_window_starting_there():
    assert window_start(120.0, 60) == 120
    assert window_start(119.999, 60) == 60
    assert window_start(0.0, 60) == 0


def test_ts_inside_a_window_maps_to_its_start():
    assert window_start(1000.5, 60) == 960


def test_first_payment_in_a_window_opens_it_with_end_start_plus_size():
    window = add_to_window(None, payment(ts=1000.5, amount_cents=70), 60)
    assert (window.window_start, window.window_end) == (960, 1020)
    assert (window.count, window.amount_cents, window.event_id, window.merchant_id) == (1, 70, "e-1", "m001")


def test_later_payment_in_the_window_adds_to_it():
    window = add_to_window(None, payment(event_id="e-1", ts=960.0, amount_cents=70), 60)
    window = add_to_window(window, payment(event_id="e-2", ts=1019.9, amount_cents=30), 60)
    assert (window.window_start, window.window_end) == (960, 1020)
    assert (window.count, window.amount_cents, window.event_id) == (2, 100, "e-2")


def test_window_key_names_merchant_and_start():
    assert window_key("m001", window_start(1000.5, 60)) == "m001@960"


# --- retention and stream time ----------------------------------------------

def test_a_dedup_entry_expires_once_older_than_the_retention_and_then_counts_a_repeat_again():
    seen = seen_entry(payment(), now=5000.0)
    assert not dedup_expired(seen, now=5000.0 + RETENTION_S, retention_s=RETENTION_S)
    assert dedup_expired(seen, now=5000.1 + RETENTION_S, retention_s=RETENTION_S)
    assert dedup_verdict(seen, payment(), now=5000.1 + RETENTION_S, retention_s=RETENTION_S) is Verdict.NEW


def test_stream_time_is_the_largest_event_time_seen_and_never_goes_back():
    assert advance_stream_time(None, 100.0) == 100.0
    assert advance_stream_time(100.0, 90.0) == 100.0
    assert advance_stream_time(100.0, 120.5) == 120.5


def test_a_window_closes_when_stream_time_reaches_its_end_plus_grace():
    assert not window_closed(60.0, None, grace_s=6.0)
    assert not window_closed(60.0, 65.9, grace_s=6.0)
    assert window_closed(60.0, 66.0, grace_s=6.0)
    assert window_closed(60.0, 60.0, grace_s=0.0)


def test_an_event_is_late_only_once_its_own_window_has_closed():
    # window [0, 60) closes at stream time 66 with 6 s of grace
    assert not is_late(59.0, stream_time=65.9, size_s=60, grace_s=6.0)
    assert is_late(59.0, stream_time=66.0, size_s=60, grace_s=6.0)
    assert not is_late(61.0, stream_time=125.9, size_s=60, grace_s=6.0)  # window [60, 120) still open
    assert not is_late(500.0, stream_time=500.0, size_s=60, grace_s=0.0)  # an event never closes its own window
