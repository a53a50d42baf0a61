"""Under at_least_once, an event whose output was never written is processed again: nothing is lost.

Its table writes are produced only after its outputs are acknowledged, so a
commit that fails part-way cannot leave a table write, such as the
deduplication mark of the ingest agent, saying the event was handled while its
output is missing.
"""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

from app import acls
from app.loadgen import LoadSpec, produce
from app.reconcile import reconcile_until_settled
from tests.integration.principals import Principal, as_super_user, lacking, settings_of
from tools.workers import wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check


def test_events_whose_output_could_not_be_written_are_counted_after_the_restart(kafka, pipeline):
    principal = Principal(AdminClient(kafka.kafka_client()))  # granted through the plaintext super user
    name = f"t-alo-{uuid.uuid4().hex[:6]}"
    settings = settings_of(name, principal)
    principal.grant(acls.required(settings))
    run = pipeline("at_least_once", name=name, **principal.env())  # creates the topics as the principal
    as_admin = as_super_user(run.env)
    first = run.add_worker()
    before = produce(LoadSpec(count=300, seed=51, duplicate_rate=0.0, bad_rate=0.0), as_admin)
    assert reconcile_until_settled(as_admin, DRAIN_S)["counted_events"] == before.by_kind["valid"]

    # the ingest agent's output topic refuses the worker: its next commit cannot write the outputs
    write_by_merchant = next(p for p in acls.required(settings)
                             if p.resource == ResourceType.TOPIC and p.name == settings.by_merchant_topic
                             and p.operation == AclOperation.WRITE)
    principal.revoke(write_by_merchant)
    wait_for(lambda: any(str(write_by_merchant) in line for line in lacking(settings)), timeout=DRAIN_S,
             what="the broker to apply the revoked ACL")
    after = produce(LoadSpec(count=300, seed=52, duplicate_rate=0.0, bad_rate=0.0), as_admin)
    wait_for(lambda: not first.alive(), timeout=DRAIN_S, what="the worker to stop on the unwritable output")
    assert "cannot be written" in first.log_text()

    principal.grant([write_by_merchant])
    wait_for(lambda: not lacking(settings), timeout=DRAIN_S, what="the broker to apply the granted ACL")
    run.add_worker()
    report = reconcile_until_settled(as_admin, DRAIN_S)

    lost = {kind: problem for kind, problem in report["problems"].items() if "lost" in kind or "missing" in kind}
    assert not lost, lost
    assert report["counted_events"] == before.by_kind["valid"] + after.by_kind["valid"]
    assert run.stop_all()["worker-1"] == 0
