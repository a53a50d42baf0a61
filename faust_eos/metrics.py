"""Prometheus series of the exactly-once commits, the table restores and the sweeps, in the default registry.

Any app using ``eos://`` gets them; expose them the way the app exposes the rest
(this project: the ``/metrics`` web view).
"""
from prometheus_client import Counter, Histogram

transactions_begun = Counter("faust_eos_transactions_begun_total",
                             "Transactions begun (one per worker and commit round)")
transactions_committed = Counter("faust_eos_transactions_committed_total", "Transactions committed")
transactions_aborted = Counter("faust_eos_transactions_aborted_total", "Transactions aborted after a failed step")
producers_fenced = Counter(
    "faust_eos_producers_fenced_total",
    "Commits refused because another producer claimed the worker's transactional id "
    "(another process on its data directory)",
)
partitions_given_up = Counter(
    "faust_eos_partitions_given_up_total",
    "Input partitions given up because their commit did not go through; "
    "each round given up asks the group to rebalance",
)
input_partitions_committed = Counter(
    "faust_eos_input_partitions_committed_total",
    "Input partitions whose offsets committed: each partition of a transaction that committed under exactly_once, "
    "one per partition of an offset commit the group accepted under at_least_once",
)
commit_duration = Histogram(
    "faust_eos_commit_duration_seconds",
    "Duration of one transaction: begin, produce, flush, send offsets, commit (failed ones included)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
#: the steps of a transaction, each a librdkafka call on the producer's thread (``produce``: handing
#: over every record of the commit; ``flush``: until each is acknowledged)
TRANSACTION_STEPS = ("init_transactions", "begin_transaction", "list_topics", "produce", "flush",
                     "send_offsets_to_transaction", "commit_transaction", "abort_transaction")
transaction_step_duration = Histogram(
    "faust_eos_transaction_step_seconds",
    "Duration of each step of a transaction on its producer's thread (failed steps included)",
    ["step"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
for _step in TRANSACTION_STEPS:
    transaction_step_duration.labels(_step)  # every series exists from the start
input_paused = Counter(
    "faust_eos_input_paused_seconds_total",
    "Seconds no input was handed to the agents because max_uncommitted_records waited for their commit",
)
entries_swept = Counter(
    "faust_eos_table_entries_swept_total", "Table entries a sweep found expired and deleted (before their commit)",
    ["table"],
)
changelog_records_restored = Counter(
    "faust_eos_changelog_records_restored_total",
    "Changelog records applied to a table while restoring it (active) or keeping a standby replica",
    ["table", "partition", "kind"],
)
