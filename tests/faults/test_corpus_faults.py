"""Apps of the corpus stay exact when a worker is killed, turns zombie or loses its broker in the middle of
their input.

The apps are those of ``tests/integration/test_corpus.py``, run as their authors
wrote them on ``eos://``. A worker is killed with SIGKILL while their input
arrives, so that batches, transactions, ``take`` chunks, windowed tables, a
timer's sends and a ``group_by`` repartition are cut short, and started again on
the same data directory; or, of two workers, one is paused until the group has
given its partitions to the other, then woken with the work it held; or the
broker is killed and started again. A ``read_committed`` reader then checks that
every input counts exactly once.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import threading
from typing import Any, Callable, ContextManager, Iterator

import pytest

from config import Settings
from tests.faults.broker_restarts import broker_restarted
from tests.integration.corpus_support import CorpusApp
from tests.integration.test_corpus import (
    FILTER_ECHO,
    TAKE,
    TIMER,
    WINDOWED_COUNT,
    WORD_COUNT,
    clicks_40_ms_apart,
    wrong_window_counts,
)

pytestmark = pytest.mark.broker

WAIT_S = 600  # generous: the machine is shared; this bounds a stall, it is not a timing check
INPUTS = 20_000
RATE = 2_000  # inputs a second
#: inputs a second with a paused worker: the input lasts about as long as the group takes to give its
#: partitions away (a 10 s session), so that the other worker takes them over in the middle of it
ZOMBIE_RATE = 500


def killed_midway(corpus: CorpusApp, input_topic: str, inputs: list, output: str,
                  inputs_in: Callable[[list], int]) -> list[Any]:
    """:func:`faulted_midway`, the fault a SIGKILL of the worker, started again at once."""
    @contextlib.contextmanager
    def killed() -> Iterator[None]:
        corpus.kill()
        corpus.start()
        yield

    return faulted_midway(corpus, input_topic, inputs, output, inputs_in, killed)


def broker_restarted_midway(corpus: CorpusApp, kafka: Settings, input_topic: str, inputs: list,
                            output: str) -> list[Any]:
    """:func:`faulted_midway`, the fault the broker killed and started again (:func:`broker_restarted`)."""
    on_its_topics = dataclasses.replace(kafka, topic_prefix=corpus.topic_prefix, app_id=corpus.app_id)
    return faulted_midway(corpus, input_topic, inputs, output, len, lambda: broker_restarted(on_its_topics))


def faulted_midway(corpus: CorpusApp, input_topic: str, inputs: list, output: str,
                   inputs_in: Callable[[list], int], fault: Callable[[], ContextManager[None]]) -> list[Any]:
    """Produce the first half of ``inputs`` to ``corpus``'s worker at :data:`RATE`; once a quarter of them have
    committed outputs (``inputs_in(outputs)`` counts the inputs they stand for), enter ``fault()``; inside it,
    produce the other half and return the committed outputs once they stand for every input."""
    half = len(inputs) // 2
    corpus.start()
    corpus.wait_ready()
    producing = threading.Thread(target=corpus.produce, args=(input_topic, inputs[:half], RATE))
    producing.start()
    try:
        corpus.wait_for_output(output, lambda found: inputs_in(found) >= len(inputs) // 4, WAIT_S, "a quarter done")
        with fault():
            producing.join()
            corpus.produce(input_topic, inputs[half:], RATE)  # input still arrives after the fault
            return corpus.wait_for_output(output, lambda found: inputs_in(found) >= len(inputs), WAIT_S,
                                          "all of it done")
    finally:
        producing.join()


def zombie_midway(corpus: CorpusApp, input_topic: str, inputs: list, output: str) -> list[Any]:
    """Produce ``inputs`` at :data:`ZOMBIE_RATE` to two workers of ``corpus``; once a quarter have committed
    outputs, pause worker 0 until three quarters have (its partitions then went to worker 1), and wake it;
    the committed outputs once there is one per input."""
    for index in (0, 1):
        corpus.start(index)
        corpus.wait_ready(index=index)
    producing = threading.Thread(target=corpus.produce, args=(input_topic, inputs, ZOMBIE_RATE))
    producing.start()
    try:
        corpus.wait_for_output(output, lambda found: len(found) >= len(inputs) // 4, WAIT_S, "a quarter done")
        corpus.pause(0)
        try:
            corpus.wait_for_output(output, lambda found: len(found) >= len(inputs) * 3 // 4, WAIT_S,
                                   "three quarters done without the paused worker")
        finally:
            corpus.resume(0)  # it wakes with work of a generation that has passed
    finally:
        producing.join()
    return corpus.wait_for_output(output, lambda found: len(found) >= len(inputs), WAIT_S, "all of it done")


def word_inputs() -> tuple[list[str], list]:
    words = [f"w{(i * 7) % 13}" for i in range(INPUTS)]
    return words, [(b"%d" % n, json.dumps({"word": w, "n": n}).encode(), None) for n, w in enumerate(words)]


def assert_counted_once(words: list[str], updates: list[Any]) -> None:
    assert sorted(update["n"] for update in updates) == list(range(len(words)))  # each word once
    by_word = collections.defaultdict(list)
    for update in updates:
        by_word[update["word"]].append(update["count"])
    assert {w: c for w, c in by_word.items() if c != list(range(1, len(c) + 1))} == {}  # counts restored exactly


#: each fault the word count goes through, in the middle of its repartition: its committed outputs after it
WORD_COUNT_FAULTS: dict[str, Callable[[CorpusApp, Settings, list], list[Any]]] = {
    "kill": lambda corpus, kafka, inputs: killed_midway(corpus, "words", inputs, "counts", len),
    "zombie": lambda corpus, kafka, inputs: zombie_midway(corpus, "words", inputs, "counts"),
    "broker-restart": lambda corpus, kafka, inputs: broker_restarted_midway(corpus, kafka, "words", inputs, "counts"),
}


@pytest.mark.parametrize("fault", list(WORD_COUNT_FAULTS))
def test_a_word_count_through_a_fault_in_the_middle_of_its_repartition_counts_every_word_once(
        kafka, tmp_path, fault):
    corpus = CorpusApp(kafka, tmp_path, f"group-by-{fault}", WORD_COUNT, ["words", "counts"])
    words, inputs = word_inputs()
    updates = WORD_COUNT_FAULTS[fault](corpus, kafka, inputs)
    assert corpus.stop() == 0
    assert_counted_once(words, updates)


def test_an_agent_taking_values_a_hundred_at_a_time_killed_midway_sees_each_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "take-kill", TAKE, ["numbers", "sums"])
    inputs = [(b"%d" % n, json.dumps({"n": n}).encode(), None) for n in range(INPUTS)]
    sums = killed_midway(corpus, "numbers", inputs, "sums", lambda found: sum(len(s["numbers"]) for s in found))
    assert corpus.stop() == 0

    assert sorted(n for s in sums for n in s["numbers"]) == list(range(INPUTS))


def test_windowed_counts_relative_to_the_stream_killed_midway_are_exact_at_every_event(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "windows-kill", WINDOWED_COUNT, ["clicks", "counts"])
    clicks = clicks_40_ms_apart(INPUTS)
    inputs = [(page.encode(), json.dumps({"id": i}).encode(), ts) for i, (page, ts) in enumerate(clicks)]
    updates = killed_midway(corpus, "clicks", inputs, "counts", len)
    assert corpus.stop() == 0

    assert sorted(update["id"] for update in updates) == list(range(INPUTS))
    assert wrong_window_counts(updates) == []  # the windowed tables restored exactly


def test_a_timer_reporting_a_table_killed_midway_ends_at_the_exact_totals(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "timer-kill", TIMER, ["sales", "report"])
    sales = [(f"s{i % 4}", 1 + i % 50) for i in range(INPUTS)]
    expected = collections.Counter()
    for shop, cents in sales:
        expected[shop] += cents
    cents_per_sale = sum(expected.values()) / INPUTS

    def sales_in(reports: list) -> int:
        """About how many sales the largest report stands for."""
        return round(max((sum(r["totals"].values()) for r in reports), default=0) / cents_per_sale)

    inputs = [(shop.encode(), json.dumps({"cents": cents}).encode(), None) for shop, cents in sales]
    reports = killed_midway(corpus, "sales", inputs, "report", sales_in)
    assert corpus.stop() == 0

    assert reports[-1]["totals"] == expected  # nothing counted twice, nothing lost
    assert all(r["totals"].get(shop, 0) <= total for r in reports for shop, total in expected.items())


def test_filter_and_echo_killed_midway_send_each_value_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "filter-kill", FILTER_ECHO, ["numbers", "copies", "evens"])
    inputs = [(b"%d" % n, json.dumps({"n": n}).encode(), None) for n in range(INPUTS)]
    evens = killed_midway(corpus, "numbers", inputs, "evens", lambda found: 2 * len(found))
    copies = corpus.committed("copies")
    assert corpus.stop() == 0

    assert sorted(e["n"] for e in evens) == list(range(0, INPUTS, 2))
    assert sorted(c["n"] for c in copies) == list(range(0, INPUTS, 2))
    # enumerate counts from 0 again in the restarted worker: its indexes are not checked across the kill
