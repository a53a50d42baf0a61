"""The benchmark's profile summary: shares of the event-loop thread's samples (py-spy's raw format), and CPU by
thread."""
import pytest

from benchmarks import profile

MAIN = ("_run_module_as_main (<frozen runpy>:198);<module> (faust/__main__.py:6);"
        "BaseEventLoop.run_forever (asyncio/base_events.py:608)")
RAW = "\n".join([
    f"{MAIN};EpollSelector.select (selectors.py:468) 50",
    f"{MAIN};ingest (agents/payments.py:68);ingest_one (agents/payments.py:80);"
    "Store.value_of (faust_eos/state/store.py:233) 20",
    f"{MAIN};ingest (agents/payments.py:68);Topic.send (faust_eos/short_paths/topic.py:70);"
    "Record.to_representation (faust/models/record.py:1) 10",
    f"{MAIN};aggregate (agents/payments.py:97);loads (json/__init__.py:346) 10",
    f"{MAIN};WorkerCommits.run (faust_eos/committing/commit.py:99);Task.__step (asyncio/tasks.py:267) 10",
    # a producer's thread
    "Thread._bootstrap (threading.py:1002);CallThread._serve (faust_eos/committing/produce.py:128) 500",
    "Schema.decode.<locals>.<genexpr> (aiokafka/protocol/types.py:203) 7",  # a stack cut short: whose is unknown
])


def test_only_the_event_loop_thread_counts_and_shares_add_up():
    summary = profile.summarise(RAW, rate_hz=100)
    assert summary["samples"] == 100 and summary["seconds"] == 1.0
    assert sum(summary["own"].values()) == pytest.approx(1.0)


def test_samples_count_for_the_code_running_and_for_each_part_enclosing_it():
    summary = profile.summarise(RAW, rate_hz=100)
    assert summary["own"] == pytest.approx({
        "waiting for I/O (selectors)": 0.5, "the exactly-once layer (faust_eos/)": 0.2, "Faust": 0.1,
        "JSON codecs": 0.1, "asyncio": 0.1,
    })
    within = summary["within"]
    assert within["agent `ingest`"] == pytest.approx(0.3) and within["agent `aggregate`"] == pytest.approx(0.1)
    assert within["exactly_once commit rounds"] == pytest.approx(0.1)
    assert within["waiting for I/O (selectors)"] == pytest.approx(0.5) and within["at_least_once commits"] == 0


def test_nothing_sampled_gives_no_shares():
    assert profile.summarise("", rate_hz=100) == {"samples": 0, "seconds": 0.0, "own": {}, "within": {
        name: 0.0 for name, _, _ in profile.PARTS}}


def test_thread_cpu_is_summed_by_kind_with_the_process_own_thread_as_the_event_loop():
    before = {100: ("python", 10.0), 101: ("python", 1.0), 102: ("rdk:broker1", 0.5), 103: ("rocksdb:high", 0.0)}
    after = {100: ("python", 16.0), 101: ("python", 2.0), 102: ("rdk:broker1", 1.0), 103: ("rocksdb:high", 0.5),
             104: ("python", 0.0)}  # a thread started meanwhile counts from zero
    used = profile.cpu_by_thread_kind(100, before, after, seconds=8.0)
    assert used[profile.EVENT_LOOP_THREAD] == pytest.approx({"cores": 0.75, "share": 0.75})
    other_python, rdkafka, rocksdb = (used[kind] for kind, _ in reversed(profile.THREAD_KINDS))
    assert other_python == pytest.approx({"cores": 0.125, "share": 0.125})
    assert rdkafka == pytest.approx({"cores": 0.0625, "share": 0.0625}) == rocksdb
    assert sum(u["share"] for u in used.values()) == pytest.approx(1.0)


def test_a_process_that_used_no_cpu_has_no_shares():
    used = profile.cpu_by_thread_kind(1, {1: ("python", 2.0)}, {1: ("python", 2.0)}, seconds=0.0)
    assert all(u == {"cores": 0.0, "share": 0.0} for u in used.values())


def test_thread_cpu_reads_every_thread_of_a_running_process():
    import os
    import threading

    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        threads = profile.thread_cpu(os.getpid())
    finally:
        release.set()
        worker.join()
    assert os.getpid() in threads and worker.native_id in threads
    assert all(seconds >= 0 for _, seconds in threads.values())
