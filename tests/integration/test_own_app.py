"""Another team's Faust app gets exactly-once from one line: ``broker="eos://..."``.

The app below knows nothing of this project's pipeline or settings (an app of the
corpus: :mod:`corpus_support`). It is killed (SIGKILL) while it counts, restarted
on the same data directory, and its output must still count every word exactly once.
"""
from __future__ import annotations

import collections
import threading

import pytest

from tests.integration.corpus_support import CorpusApp

pytestmark = pytest.mark.broker

WORD_COUNT = '''
words = app.topic("{words_topic}", key_serializer="raw", value_serializer="raw")
counts_out = app.topic("{counts_topic}", key_serializer="raw", value_serializer="json")
counts = app.Table("counts", default=int)


@app.agent(words)
async def count(stream):
    async for word in stream:
        word = word.decode()
        counts[word] += 1
        await counts_out.send(key=word.encode(), value={{"word": word, "count": counts[word]}})
'''

WORDS = [f"word{i:02d}" for i in range(20)]
EVENTS = 3_000
RATE = 150.0  # words per second: the load goes on while the worker is killed and restarted


def steady_words() -> list[tuple[bytes, bytes, None]]:
    return [(word.encode(), word.encode(), None) for word in (WORDS[(i * 7) % len(WORDS)] for i in range(EVENTS))]


def test_another_faust_app_counts_exactly_once_across_a_crash(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "own-app", WORD_COUNT, ["words", "counts"])
    expected = collections.Counter(WORDS[(i * 7) % len(WORDS)] for i in range(EVENTS))
    feeder = threading.Thread(target=corpus.produce, args=("words", steady_words()), kwargs={"rate": RATE},
                              daemon=True)
    corpus.start()
    try:
        corpus.wait_ready()
        feeder.start()
        corpus.wait_for_output("counts", lambda found: len(found) >= 500, 180, "the first counts")
        assert feeder.is_alive(), "the load was over before the crash"
        corpus.kill()
        corpus.start()
        updates = corpus.wait_for_output("counts", lambda found: len(found) >= EVENTS, 240, "every count")
    finally:
        feeder.join(60)
        assert corpus.stop() == 0

    by_word = collections.defaultdict(list)
    for update in updates:
        by_word[update["word"]].append(update["count"])
    assert {word: counts for word, counts in by_word.items() if counts != list(range(1, len(counts) + 1))} == {}
    assert {word: len(counts) for word, counts in by_word.items()} == dict(expected)
    assert corpus.log.read_text().count("Worker ready") >= 2, "the worker did not start twice"
