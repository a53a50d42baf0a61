"""An ordinary Faust app on eos:// takes the library's short paths: its topics and tables are adopted at start."""
from __future__ import annotations

import gc

import faust
from store_support import event_loop_for_faust  # noqa: F401 (an autouse fixture)

import faust_eos
from faust_eos.short_paths.adoption import adopt


class OwnTopic(faust.Topic):
    """A topic class of the app's own."""


def test_topics_and_tables_of_faust_s_own_classes_become_the_library_s_and_so_do_those_made_later(tmp_path):
    app = faust.App("ordinary", broker="eos://localhost:9092", store="eos-rocksdb://", datadir=str(tmp_path))
    payments = app.topic("payments", value_type=bytes)
    own = OwnTopic(app, topics=["own"])
    totals = app.Table("totals", default=int)
    other_app = faust.App("other", broker="kafka://localhost:9092")
    others = other_app.topic("payments")

    assert adopt(app) >= 3  # the two, and the table's changelog topic
    assert type(payments) is faust_eos.Topic and type(totals) is faust_eos.Table
    assert type(totals.changelog_topic) is faust_eos.Topic
    assert type(own) is OwnTopic and type(others) is faust.Topic  # the app's own class; another app's topic
    assert type(app.topic("later")) is faust_eos.Topic and type(app.Table("later-table")) is faust_eos.Table
    assert adopt(app) == 0  # nothing left to adopt


def test_an_app_that_chose_its_own_classes_keeps_them(tmp_path):
    class OwnTable(faust.Table):
        """A table class of the app's own."""

    app = faust.App("own", broker="eos://localhost:9092", store="eos-rocksdb://", datadir=str(tmp_path),
                    Topic=OwnTopic, Table=OwnTable)
    topic, table = app.topic("payments"), app.Table("totals")
    assert adopt(app) == 0
    assert (type(topic), type(table), app.conf.Topic, app.conf.Table) == (OwnTopic, OwnTable, OwnTopic, OwnTable)


def test_topics_and_tables_the_app_froze_out_of_the_collector_s_sight_are_adopted_too(tmp_path):
    app = faust.App("frozen", broker="eos://localhost:9092", store="eos-rocksdb://", datadir=str(tmp_path))
    payments, totals = app.topic("payments", value_type=bytes), app.Table("totals", default=int)
    gc.freeze()  # as an app may before its worker starts: gc.get_objects() no longer lists them
    try:
        assert adopt(app) >= 2
        assert type(payments) is faust_eos.Topic and type(totals) is faust_eos.Table
        assert gc.get_freeze_count() > 0  # still frozen, as the app left them
    finally:
        gc.unfreeze()
