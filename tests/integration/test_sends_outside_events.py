"""Under exactly_once, records sent outside any input event commit in transactions of their own.

A Faust app sends from a timer (awaiting each record's commit), from a web view
(``app.producer.send_and_wait``, which commits at once), and, inside an agent,
awaits the commit of a record the event being processed sent: that wait is
refused with the reason (it would wait for ever) and the agent goes on. A
``read_committed`` reader must see every record once, and no transaction may be
left open.
"""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from app.kafka import admin, producer_config
from app.reconcile import read_committed
from kafka_ops.offsets import admin_end_offsets, read_offsets
from tools.workers import free_port, http_get, wait_for

pytestmark = pytest.mark.broker

APP = '''
import faust
from faust.web import Request, Response, View
from faust_eos import SendNotCommittable

app = faust.App("{app_id}", broker="eos://{bootstrap}", processing_guarantee="exactly_once",
                store="eos-rocksdb://", datadir="{datadir}", topic_partitions=2, topic_replication_factor=1,
                broker_commit_interval=0.2, web_port={web_port}, web_host="localhost", web_bind="localhost")
requests = app.topic("{requests}", key_serializer="raw", value_serializer="raw")
out = app.topic("{out}", key_serializer="raw", value_serializer="json")
committed_ticks = []


@app.agent(requests)
async def answer(stream):
    async for request in stream:
        try:
            await (await out.send(key=b"agent", value={{"request": request.decode()}}))
        except SendNotCommittable as refusal:
            await out.send(key=b"refused", value={{"request": request.decode(), "why": str(refusal)}})


@app.timer(0.3)
async def tick():
    if len(committed_ticks) >= {ticks}:  # then quiet: a read_committed reader reaches the end of the topic
        return
    metadata = await (await out.send(key=b"tick", value={{"tick": len(committed_ticks) + 1}}))
    committed_ticks.append(metadata.offset)


@app.page("/send/{{n}}/")
class Send(View):
    async def get(self, request: Request, n: str) -> Response:
        metadata = await app.producer.send_and_wait("{out}", b"view", b'{{"n": %d}}' % int(n), None, None, None)
        return self.json({{"partition": metadata.partition, "offset": metadata.offset}})
'''

VIEW_SENDS = 20
TICKS = 10


def test_timer_web_view_and_refused_agent_sends_all_commit(kafka, tmp_path):
    suffix = uuid.uuid4().hex[:6]
    requests_topic, out_topic = f"outside-requests-{suffix}", f"outside-out-{suffix}"
    client = admin(kafka)
    for future in client.create_topics([NewTopic(requests_topic, num_partitions=2, replication_factor=1)]).values():
        future.result(30)
    web_port = free_port()
    (tmp_path / "outside.py").write_text(APP.format(
        app_id=f"outside-{suffix}", bootstrap=kafka.bootstrap_servers, datadir=tmp_path / "data",
        web_port=web_port, requests=requests_topic, out=out_topic, ticks=TICKS))
    log = tmp_path / "worker.log"
    with open(log, "ab") as output:
        worker = subprocess.Popen([sys.executable, "-m", "faust", "-A", "outside", "worker", "-l", "info"],
                                  cwd=tmp_path, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: "Worker ready" in log.read_text(), timeout=180, what="the worker to be ready")
        producer = Producer(producer_config(kafka))
        for i in range(3):
            producer.produce(requests_topic, key=b"r", value=f"request-{i}".encode())
        producer.flush(30)
        answers = []
        for n in range(VIEW_SENDS):
            status, body = http_get(f"http://localhost:{web_port}/send/{n}/")
            assert status == 200, body
            answers.append(json.loads(body))
        # send_and_wait returned once committed: a read_committed reader sees each record at once
        view_records = {(r.partition, r.offset) for r in read_committed(kafka, out_topic) if r.key == b"view"}
        assert {(a["partition"], a["offset"]) for a in answers} <= view_records

        def by_key() -> dict[bytes, list[dict]]:
            seen: dict[bytes, list[dict]] = {}
            for record in read_committed(kafka, out_topic):
                seen.setdefault(record.key, []).append(json.loads(record.value))
            return seen

        wait_for(lambda: len(by_key().get(b"refused", [])) == 3 and len(by_key().get(b"tick", [])) == TICKS,
                 timeout=120, what="every record committed")
        seen = by_key()
    finally:
        worker.kill()
        worker.wait(30)

    assert sorted(value["n"] for value in seen[b"view"]) == list(range(VIEW_SENDS))
    assert sorted(value["request"] for value in seen[b"refused"]) == ["request-0", "request-1", "request-2"]
    assert all("would wait for the commit" in value["why"] for value in seen[b"refused"])
    # the record whose commit the agent could not wait for was sent all the same, once
    assert sorted(value["request"] for value in seen[b"agent"]) == ["request-0", "request-1", "request-2"]
    assert [value["tick"] for value in seen[b"tick"]] == list(range(1, TICKS + 1)), "each tick commits once, in order"
    offsets = read_offsets(admin_end_offsets(client, 30), [(out_topic, p) for p in range(2)])
    assert [o.lso_lag for o in offsets.values()] == [0, 0], "a transaction was left open"
    assert "Claimed outside-" in log.read_text() and "for records sent outside an event" in log.read_text()
