"""The corpus: ordinary Faust apps, as their authors wrote them, run on ``eos://`` and checked exact from outside.

Each app uses one of Faust's stream features on the library's per-record
delivery (:mod:`faust_eos.short_paths.unpacking`): ``group_by``, windowed tables relative
to the stream, ``take``, agents that yield replies to ``ask``, and a timer that
sends what a table holds. A ``read_committed`` reader checks every update,
for a few thousand inputs arriving while the worker runs and for a backlog of
100,000 waiting before it starts (for the agent that yields replies, requests
with Faust's reply headers, as another service's client sends them). The
two-agent app of the benchmarks, under a large backlog, is in
``test_ordinary_app.py``; the faults in ``tests/faults/test_corpus_faults.py``.
"""
from __future__ import annotations

import collections
import json
import time

import faust
import pytest

from tests.integration.corpus_support import CorpusApp

pytestmark = pytest.mark.broker

WAIT_S = 300  # generous: the machine is shared; this bounds a stall, it is not a timing check
BACKLOG = 100_000  # inputs waiting for an app's worker before it starts
LATE_TOPIC_WAIT_S = 120  # well below the consumer's metadata age (300 s); bounds a stall, not a timing check

WORD_COUNT = '''
class Word(faust.Record, serializer="json"):
    word: str
    n: int


words = app.topic("{words_topic}", value_type=Word)
counts_out = app.topic("{counts_topic}", key_type=str, value_type=bytes, value_serializer="json")
counts = app.Table("counts", default=int)


@app.agent(words)
async def count(stream):
    async for word in stream.group_by(Word.word, name="by-word"):
        counts[word.word] += 1
        await counts_out.send(key=word.word, value={{"word": word.word, "n": word.n, "count": counts[word.word]}})
'''


def test_a_word_count_that_repartitions_with_group_by_counts_every_word_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "group-by", WORD_COUNT, ["words", "counts"])
    words = [f"w{(i * 7) % 13}" for i in range(3_000)]
    corpus.start()
    corpus.wait_ready()
    # keyed by their number, not their word: the agent repartitions them by word
    corpus.produce("words", ((b"%d" % n, json.dumps({"word": w, "n": n}).encode(), None) for n, w in enumerate(words)))
    updates = corpus.wait_for_output("counts", lambda found: len(found) >= len(words), WAIT_S, "every word counted")
    assert corpus.stop() == 0

    by_word = collections.defaultdict(list)
    for update in updates:
        by_word[update["word"]].append(update["count"])
    assert {w: c for w, c in by_word.items() if c != list(range(1, len(c) + 1))} == {}
    assert {w: len(c) for w, c in by_word.items()} == dict(collections.Counter(words))
    assert sorted(update["n"] for update in updates) == list(range(len(words)))


def test_a_word_count_drains_a_backlog_of_a_hundred_thousand_words_counting_each_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "group-by-backlog", WORD_COUNT, ["words", "counts"])
    words = [f"w{(i * 7) % 101}" for i in range(BACKLOG)]
    corpus.produce("words", ((b"%d" % n, json.dumps({"word": w, "n": n}).encode(), None) for n, w in enumerate(words)))
    corpus.start()  # the whole backlog waits for it
    updates = corpus.wait_for_output("counts", lambda found: len(found) >= len(words), WAIT_S, "every word counted")
    assert corpus.stop() == 0

    assert sorted(update["n"] for update in updates) == list(range(len(words)))
    final = {}
    for update in updates:
        final[update["word"]] = max(final.get(update["word"], 0), update["count"])
    assert final == dict(collections.Counter(words))


def test_a_word_count_started_before_its_input_topic_exists_counts_the_words_once_the_topic_is_created(
        kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "group-by-late", WORD_COUNT, ["words", "counts"], created_later=["words"])
    corpus.start()
    corpus.wait_ready()  # with none of the input's partitions: the group found no such topic
    corpus.create_topics("words")
    words = [f"w{i % 5}" for i in range(500)]
    corpus.produce("words", ((b"%d" % n, json.dumps({"word": w, "n": n}).encode(), None) for n, w in enumerate(words)))
    # The worker would otherwise learn of the topic only when its metadata grows old: after 300 s
    updates = corpus.wait_for_output("counts", lambda found: len(found) >= len(words), LATE_TOPIC_WAIT_S,
                                     "every word counted")
    assert corpus.stop() == 0
    assert sorted(update["n"] for update in updates) == list(range(len(words)))
    assert "asking again until it has them" in corpus.log.read_text()


WINDOWED_COUNT = '''
from datetime import timedelta

clicks = app.topic("{clicks_topic}", key_type=str, value_type=bytes, key_serializer="raw", value_serializer="json")
counts_out = app.topic("{counts_topic}", key_type=str, value_type=bytes, value_serializer="json")
tumbling = app.Table("tumbling", default=int).tumbling(10.0, expires=timedelta(days=1)).relative_to_stream()
hopping = app.Table("hopping", default=int).hopping(10.0, 5.0, expires=timedelta(days=1)).relative_to_stream()


@app.agent(clicks)
async def count(stream):
    async for event in stream.events():
        page = event.key
        tumbling[page] += 1
        hopping[page] += 1
        await counts_out.send(key=page, value={{"page": page, "id": event.value["id"], "ts": event.message.timestamp,
                                               "tumbling": tumbling[page].current(),
                                               "hopping": hopping[page].current()}})
'''


def test_tumbling_and_hopping_counts_relative_to_the_stream_are_exact_at_every_event(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "windows", WINDOWED_COUNT, ["clicks", "counts"])
    clicks = clicks_40_ms_apart(3_000)  # two minutes of event time
    corpus.start()
    corpus.wait_ready()
    corpus.produce("clicks", ((page.encode(), json.dumps({"id": i}).encode(), ts)
                              for i, (page, ts) in enumerate(clicks)))
    updates = corpus.wait_for_output("counts", lambda found: len(found) >= len(clicks), WAIT_S, "every click counted")
    assert corpus.stop() == 0

    assert sorted(update["id"] for update in updates) == list(range(len(clicks)))
    assert wrong_window_counts(updates) == []


def test_windowed_counts_drain_a_backlog_of_a_hundred_thousand_clicks_exact_at_every_event(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "windows-backlog", WINDOWED_COUNT, ["clicks", "counts"])
    clicks = clicks_40_ms_apart(BACKLOG)
    corpus.produce("clicks", ((page.encode(), json.dumps({"id": i}).encode(), ts)
                              for i, (page, ts) in enumerate(clicks)))
    corpus.start()
    updates = corpus.wait_for_output("counts", lambda found: len(found) >= len(clicks), WAIT_S, "every click counted")
    assert corpus.stop() == 0

    assert sorted(update["id"] for update in updates) == list(range(len(clicks)))
    assert wrong_window_counts(updates) == []


def clicks_40_ms_apart(count: int) -> list[tuple[str, int]]:
    """``(page, timestamp_ms)`` of ``count`` clicks on five pages, 40 ms of event time apart, ending a minute ago."""
    start_ms = int(time.time() * 1000) - 60_000 - count * 40
    return [(f"p{i % 5}", start_ms + i * 40) for i in range(count)]


def wrong_window_counts(updates: list) -> list[tuple]:
    """The updates of the windowed count whose window counts are not what Faust's own window classes give
    for the clicks before them: ``(kind, id, found, expected)``."""
    windows = {"tumbling": faust.TumblingWindow(10.0), "hopping": faust.HoppingWindow(10.0, 5.0)}
    seen: dict[str, collections.Counter] = {kind: collections.Counter() for kind in windows}
    wrong = []
    for update in sorted(updates, key=lambda u: u["id"]):  # each page's clicks, in the order it read them
        for kind, window in windows.items():
            for ranged in window.ranges(update["ts"]):
                seen[kind][(update["page"], ranged)] += 1
            expected = seen[kind][(update["page"], window.current(update["ts"]))]
            if update[kind] != expected:
                wrong.append((kind, update["id"], update[kind], expected))
    return wrong


TAKE = '''
numbers = app.topic("{numbers_topic}", value_type=bytes, value_serializer="json")
sums_out = app.topic("{sums_topic}", value_type=bytes, value_serializer="json")


@app.agent(numbers)
async def add_up(stream):
    async for values in stream.take(100, within=1.0):
        await sums_out.send(value={{"numbers": [value["n"] for value in values]}})
'''


def test_an_agent_taking_values_a_hundred_at_a_time_sees_each_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "take", TAKE, ["numbers", "sums"])
    count = 5_000
    corpus.start()
    corpus.wait_ready()
    corpus.produce("numbers", ((b"%d" % n, json.dumps({"n": n}).encode(), None) for n in range(count)))
    sums = corpus.wait_for_output("sums", lambda found: sum(len(s["numbers"]) for s in found) >= count, WAIT_S,
                                  "every number taken")
    assert corpus.stop() == 0

    assert sorted(n for s in sums for n in s["numbers"]) == list(range(count))
    assert max(len(s["numbers"]) for s in sums) <= 100


def test_an_agent_taking_values_a_hundred_at_a_time_drains_a_backlog_of_a_hundred_thousand(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "take-backlog", TAKE, ["numbers", "sums"])
    corpus.produce("numbers", ((b"%d" % n, json.dumps({"n": n}).encode(), None) for n in range(BACKLOG)))
    corpus.start()
    sums = corpus.wait_for_output("sums", lambda found: sum(len(s["numbers"]) for s in found) >= BACKLOG, WAIT_S,
                                  "every number taken")
    assert corpus.stop() == 0

    assert sorted(n for s in sums for n in s["numbers"]) == list(range(BACKLOG))
    assert max(len(s["numbers"]) for s in sums) <= 100


DOUBLING = '''
import asyncio

requests = app.topic("{requests_topic}", value_type=bytes, value_serializer="json")


@app.agent(requests)
async def double(stream):
    async for request in stream:
        yield {{"n": request["n"], "double": request["n"] * 2}}
'''

ASK = DOUBLING + '''
answers_out = app.topic("{answers_topic}", value_type=bytes, value_serializer="json")


@app.task
async def ask_twenty():
    for n in range(20):
        reply = await double.ask(value={{"n": n}})
        await answers_out.send(value=reply)
'''


def test_an_agent_that_yields_replies_answers_each_ask_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "ask", ASK, ["requests", "answers"])
    corpus.start()
    answers = corpus.wait_for_output("answers", lambda found: len(found) >= 20, WAIT_S, "an answer to every ask")
    assert corpus.stop() == 0

    assert sorted((a["n"], a["double"]) for a in answers) == [(n, 2 * n) for n in range(20)]


def test_an_agent_that_yields_replies_drains_a_backlog_of_a_hundred_thousand_requests_answering_each_once(
        kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "ask-backlog", DOUBLING, ["requests", "replies"])
    replies = corpus.topics["replies"].encode()
    # requests as another service's client makes them: Faust's reply headers on plain values
    corpus.produce("requests", ((None, json.dumps({"n": n}).encode(), None,
                                 [("Faust-Ag-ReplyTo", replies), ("Faust-Ag-CorrelationId", b"%d" % n)])
                                for n in range(BACKLOG)))
    corpus.start()  # the whole backlog waits for it
    responses = corpus.wait_for_output("replies", lambda found: len(found) >= BACKLOG, WAIT_S,
                                       "a reply to every request")
    assert corpus.stop() == 0

    assert sorted(int(response["correlation_id"]) for response in responses) == list(range(BACKLOG))
    assert [response["value"] for response in responses if response["value"]["double"] != 2 * response["value"]["n"]
            or int(response["correlation_id"]) != response["value"]["n"]] == []


TIMER = '''
sales = app.topic("{sales_topic}", key_type=str, value_type=bytes, key_serializer="raw", value_serializer="json")
report_out = app.topic("{report_topic}", key_type=bytes, value_type=bytes, key_serializer="raw",
                       value_serializer="json")
totals = app.Table("totals", default=int)


@app.agent(sales)
async def tally(stream):
    async for event in stream.events():
        totals[event.key] += event.value["cents"]


@app.timer(1.0)
async def report():
    await report_out.send(key=b"report", value={{"totals": dict(totals.items())}})
'''


def test_a_timer_sends_what_the_table_holds_and_it_ends_at_the_exact_totals(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "timer", TIMER, ["sales", "report"])
    sales = [(f"s{i % 4}", i % 50) for i in range(4_000)]
    expected = collections.Counter()
    for shop, cents in sales:
        expected[shop] += cents
    corpus.start()
    corpus.wait_ready()
    corpus.produce("sales", ((shop.encode(), json.dumps({"cents": cents}).encode(), None) for shop, cents in sales))
    reports = corpus.wait_for_output("report", lambda found: any(r["totals"] == expected for r in found), WAIT_S,
                                     "a report of every sale")
    assert corpus.stop() == 0

    # the reports, in the order sent (one key: one partition), only ever grow towards the totals
    for earlier, later in zip(reports, reports[1:]):
        assert all(later["totals"].get(shop, 0) >= total for shop, total in earlier["totals"].items())
    assert all(r["totals"].get(shop, 0) <= total for r in reports for shop, total in expected.items())


def test_a_timer_reporting_a_table_fed_a_backlog_of_a_hundred_thousand_sales_ends_at_the_exact_totals(
        kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "timer-backlog", TIMER, ["sales", "report"])
    sales = [(f"s{i % 4}", i % 50) for i in range(BACKLOG)]
    expected = collections.Counter()
    for shop, cents in sales:
        expected[shop] += cents
    corpus.produce("sales", ((shop.encode(), json.dumps({"cents": cents}).encode(), None) for shop, cents in sales))
    corpus.start()
    reports = corpus.wait_for_output("report", lambda found: any(r["totals"] == expected for r in found), WAIT_S,
                                     "a report of every sale")
    assert corpus.stop() == 0
    assert all(r["totals"].get(shop, 0) <= total for r in reports for shop, total in expected.items())


FILTER_ECHO = '''
numbers = app.topic("{numbers_topic}", value_type=bytes, value_serializer="json")
copies = app.topic("{copies_topic}", value_type=bytes, value_serializer="json")
evens_out = app.topic("{evens_topic}", value_type=bytes, value_serializer="json")


@app.agent(numbers)
async def pick_evens(stream):
    async for i, value in stream.filter(lambda value: value["n"] % 2 == 0).echo(copies).enumerate():
        await evens_out.send(value={{"n": value["n"], "i": i}})
'''


def test_filter_echo_and_enumerate_see_each_value_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "filter", FILTER_ECHO, ["numbers", "copies", "evens"])
    count = 4_000
    corpus.start()
    corpus.wait_ready()
    corpus.produce("numbers", ((b"%d" % n, json.dumps({"n": n}).encode(), None) for n in range(count)))
    evens = corpus.wait_for_output("evens", lambda found: len(found) >= count // 2, WAIT_S, "every even number")
    copies = corpus.committed("copies")
    assert corpus.stop() == 0

    assert sorted(e["n"] for e in evens) == list(range(0, count, 2))
    assert sorted(e["i"] for e in evens) == list(range(count // 2))  # one agent: enumerate counts every value once
    assert sorted(c["n"] for c in copies) == list(range(0, count, 2))


def test_filter_echo_and_enumerate_drain_a_backlog_of_a_hundred_thousand_seeing_each_value_once(kafka, tmp_path):
    corpus = CorpusApp(kafka, tmp_path, "filter-backlog", FILTER_ECHO, ["numbers", "copies", "evens"])
    corpus.produce("numbers", ((b"%d" % n, json.dumps({"n": n}).encode(), None) for n in range(BACKLOG)))
    corpus.start()
    evens = corpus.wait_for_output("evens", lambda found: len(found) >= BACKLOG // 2, WAIT_S, "every even number")
    copies = corpus.committed("copies")
    assert corpus.stop() == 0

    assert sorted(e["n"] for e in evens) == list(range(0, BACKLOG, 2))
    assert sorted(e["i"] for e in evens) == list(range(BACKLOG // 2))
    assert sorted(c["n"] for c in copies) == list(range(0, BACKLOG, 2))
