"""The fault harness as the operator of a broker that loses markers: it writes what it finds on the
run's topics, keeps a line for each, and tries again after a failed round."""
import pytest

from kafka_ops.lost_markers import LoggedState, LostMarker, LostMarkers
from kafka_ops.transaction_requests import PartitionProducer, TransactionToolError
from tools import markers
from tools.markers import MarkerMender

OPEN_ON_T0 = PartitionProducer("t", 0, producer_id=7, producer_epoch=2, coordinator_epoch=1, txn_start_offset=40,
                               last_timestamp_ms=1_500)
COMMITTED = LoggedState("tid", 7, 2, "PrepareCommit", frozenset({("t", 0)}), 1_000, 2_000)


class FakeCluster:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


class FakeAdmin:
    class Metadata:
        topics = {"run-payments": None, "faust-eos-run-seen-changelog": None, "__consumer_offsets": None,
                  "other-run-payments": None}

    def list_topics(self, timeout):
        return self.Metadata()


class FakeSettings:
    topic_prefix = "run-"
    app_id = "faust-eos-run"

    def kafka_client(self, **extra):
        return {}


@pytest.fixture
def mender(monkeypatch):
    monkeypatch.setattr(markers, "wire_cluster", lambda client: FakeCluster())
    return MarkerMender(FakeSettings(), FakeAdmin, started=100.0, clock=lambda: 112.4)


def test_the_harness_writes_what_it_finds_on_the_runs_topics_and_keeps_a_line_for_each(monkeypatch, mender):
    marker = LostMarker(OPEN_ON_T0, COMMITTED)
    asked, wrote = [], []
    monkeypatch.setattr(markers, "find_lost_markers",
                        lambda c, a, client, topics: asked.append(topics) or LostMarkers([marker], [], []))
    monkeypatch.setattr(markers, "write_lost_markers", lambda c, a, lost: wrote.extend(lost))

    mender.mend_once()

    assert asked == [["__consumer_offsets", "faust-eos-run-seen-changelog", "run-payments"]]
    assert wrote == [marker]
    assert mender.written == ["t=12s t-0: commit marker of 'tid' (producer 7, transaction from offset 40)"]


def test_a_round_that_fails_writes_nothing_and_the_next_one_tries_again(monkeypatch, mender):
    def refused(*args):
        raise TransactionToolError("the leader of t-0 refused the commit marker: NOT_LEADER_OR_FOLLOWER")

    monkeypatch.setattr(markers, "find_lost_markers",
                        lambda *args: LostMarkers([LostMarker(OPEN_ON_T0, COMMITTED)], [], []))
    monkeypatch.setattr(markers, "write_lost_markers", refused)
    mender.mend_once()
    assert mender.written == []

    monkeypatch.setattr(markers, "write_lost_markers", lambda *args: None)
    mender.mend_once()
    assert len(mender.written) == 1


def test_stopping_checks_once_more_unless_told_not_to(monkeypatch, mender):
    rounds = []
    monkeypatch.setattr(markers, "find_lost_markers", lambda *args: rounds.append(1) or LostMarkers([], [], []))
    mender.stop(last_check=False)
    assert rounds == []
    mender.stop()
    assert rounds == [1]


def test_a_transaction_torn_past_mending_is_left_open_and_reported_once(monkeypatch, mender):
    aborted_next = LoggedState("tid", 7, 3, "PrepareAbort", frozenset({("t", 1)}), 3_000, 4_000)
    torn = LostMarker(OPEN_ON_T0, COMMITTED, torn_by=aborted_next)
    wrote = []
    monkeypatch.setattr(markers, "find_lost_markers", lambda *args: LostMarkers([], [], [torn]))
    monkeypatch.setattr(markers, "write_lost_markers", lambda c, a, lost: wrote.extend(lost))

    mender.mend_once()
    mender.mend_once()

    assert wrote == []
    assert len(mender.written) == 1 and "left open, torn past mending: t-0: abort marker" in mender.written[0]
