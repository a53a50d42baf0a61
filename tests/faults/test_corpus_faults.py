"""Apps of the corpus stay exact when their worker is killed in the middle of their input.

The apps are those of ``tests/integration/test_corpus.py``, run as their authors
wrote them on ``eos://``. Their worker is killed with SIGKILL while their input
arrives, so that batches, transactions, ``take`` chunks and a ``group_by``
repartition are cut short, and started again on the same data directory. A ``read_committed``
reader then checks that every input counts exactly once.
"""
from __future__ import annotations

import collections
import json
import threading
from typing import Any, Callable

import pytest

from tests.integration.corpus_support import CorpusApp
from tests.integration.test_corpus import TAKE, WORD_COUNT

pytestmark = pytest.mark.broker

WAIT_S = 600  # generous: the machine is shared; this bounds a stall, it is not a timing check
INPUTS = 20_000
RATE = 2_000  # inputs a second: the input still arrives when the worker is killed


def killed_midway(corpus: CorpusApp, input_topic: str, inputs: list, output: str,
                  inputs_in: Callable[[list], int]) -> list[Any]:
    """Produce ``inputs`` to ``corpus``'s worker at :data:`RATE`, kill the worker once a quarter of them have
    committed outputs (``inputs_in(outputs)`` counts the inputs they stand for), start it again; its committed
    outputs once they stand for every input."""
    corpus.start()
    corpus.wait_ready()
    producing = threading.Thread(target=corpus.produce, args=(input_topic, inputs, RATE))
    producing.start()
    try:
        corpus.wait_for_output(output, lambda found: inputs_in(found) >= len(inputs) // 4, WAIT_S, "a quarter done")
        corpus.kill()
        assert producing.is_alive(), "the input was all produced before the kill: nothing arrived meanwhile"
        corpus.start()
    finally:
        producing.join()
    return corpus.wait_for_output(output, lambda found: inputs_in(found) >= len(inputs), WAIT_S, "all of it done")


def test_a_word_count_killed_in_the_middle_of_its_repartition_counts_every_word_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "group-by-kill", WORD_COUNT, ["words", "counts"])
    words = [f"w{(i * 7) % 13}" for i in range(INPUTS)]
    inputs = [(b"%d" % n, json.dumps({"word": w, "n": n}).encode(), None) for n, w in enumerate(words)]
    updates = killed_midway(corpus, "words", inputs, "counts", len)
    assert corpus.stop() == 0

    assert sorted(update["n"] for update in updates) == list(range(len(words)))  # each word once
    by_word = collections.defaultdict(list)
    for update in updates:
        by_word[update["word"]].append(update["count"])
    assert {w: c for w, c in by_word.items() if c != list(range(1, len(c) + 1))} == {}  # counts restored exactly


def test_an_agent_taking_values_a_hundred_at_a_time_killed_midway_sees_each_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "take-kill", TAKE, ["numbers", "sums"])
    inputs = [(b"%d" % n, json.dumps({"n": n}).encode(), None) for n in range(INPUTS)]
    sums = killed_midway(corpus, "numbers", inputs, "sums", lambda found: sum(len(s["numbers"]) for s in found))
    assert corpus.stop() == 0

    assert sorted(n for s in sums for n in s["numbers"]) == list(range(INPUTS))
