"""What faust-eos raises when an app uses it in a way it cannot honour."""
from __future__ import annotations


class SendNotCommittable(RuntimeError):
    """A record was sent, or waited for, in a way exactly-once cannot commit."""


class StoreRefused(RuntimeError):
    """A table is on a store, or written in a way, that exactly-once cannot keep consistent."""


class SettingRefused(RuntimeError):
    """A Faust setting would let records bypass the transactions."""


class OutputNotWritten(RuntimeError):
    """Under at-least-once, a record could not be written: its event's offset must not commit, the worker stops."""


class LocalStateNotWritten(RuntimeError):
    """A transaction committed, but its table writes could not reach the local store: the worker must stop.

    Nothing is lost: the store's checkpoint is still before those writes, so the
    worker's next start restores them from the changelog.
    """


class OffsetsLost(RuntimeError):
    """The consumer group holds no committed offset for input partitions whose transactions committed: the
    worker stops rather than process their events again from the first offset."""


class MissingTopic(RuntimeError):
    """Records are sent to a topic the cluster lacks, and this app may not create it."""


def wait_inside_event_refused() -> SendNotCommittable:
    return SendNotCommittable(
        "waiting for a record sent while an agent processes an event (send_and_wait, or awaiting send()'s "
        "future) would wait for the commit that waits for that event to finish: send() and go on; its "
        "future resolves when the event's commit makes the record durable"
    )
