"""A principal with exactly the ACLs `faust -A app acls` lists runs the pipeline exact; without any one
of them, a worker stops at start with one line naming it.

The local secured broker runs the StandardAuthorizer; each test makes a SCRAM
user of its own and grants it ACLs through the plaintext listener (whose
principal is a super user there).
"""
from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

import config
from app import acls
from app.loadgen import LoadSpec, produce
from app.reconcile import reconcile_until_settled
from tests.integration.principals import Principal, as_super_user, lacking, settings_of
from tools.workers import free_port, wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check
START_S = 90
ROOT = Path(config.__file__).resolve().parent.parent


def start_worker(settings_env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**settings_env, "DATA_DIR": str(tmp_path / f"data-{uuid.uuid4().hex[:6]}"), "WEB_PORT": str(free_port())}
    return subprocess.run([sys.executable, "-m", "faust", "-A", "app", "worker"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=START_S)


def stops_naming(result: subprocess.CompletedProcess, permission: acls.Permission) -> None:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and len(errors) == 1, result.stdout[-1500:] + result.stderr[-1500:]
    assert "Traceback" not in result.stdout + result.stderr
    wanted = ("Create on it" if permission.operation.name == "CREATE" and not permission.prefixed
              else str(permission))
    assert wanted in errors[0] and (permission.name or "cluster") in errors[0], errors[0]


@pytest.fixture
def superuser(kafka) -> AdminClient:
    return AdminClient(kafka.kafka_client())  # the plaintext listener: a super user on the local broker


def test_exactly_the_listed_acls_run_the_pipeline_exact_and_each_one_missing_is_named(superuser, pipeline, tmp_path):
    principal = Principal(superuser)
    name = f"t-acl-{uuid.uuid4().hex[:6]}"
    settings = settings_of(name, principal)
    principal.grant(acls.required(settings))
    run = pipeline(name=name, **principal.env())  # creates the topics as the principal
    as_admin = as_super_user(run.env)
    load = produce(LoadSpec(count=2_000, seed=41, duplicate_rate=0.05, bad_rate=0.02), as_admin)
    run.add_worker()

    report = reconcile_until_settled(as_admin, DRAIN_S)

    assert report["ok"], report["problems"]
    assert report["counted_events"] == load.by_kind["valid"]
    assert run.stop_all() == {"worker-0": 0}

    # now that every topic, changelog and the group exist, take each permission away in turn
    for permission in acls.required(settings):
        if permission.operation.name == "CREATE":
            continue  # needed only for topics still missing: below
        principal.revoke(permission)
        # the broker applies ACL changes a moment after it accepts them
        wait_for(lambda: any(str(permission) in line for line in lacking(settings)), timeout=DRAIN_S,
                 what=f"the broker to apply the revoked {permission}")
        stops_naming(start_worker(run.env, tmp_path), permission)
        principal.grant([permission])
        wait_for(lambda: not lacking(settings), timeout=DRAIN_S, what=f"the broker to apply the granted {permission}")


@pytest.mark.parametrize("which", ["pipeline topic", "changelog topics"])
def test_without_create_a_first_start_names_it(superuser, tmp_path, which):
    principal = Principal(superuser)
    name = f"t-acl-create-{uuid.uuid4().hex[:6]}"
    settings = settings_of(name, principal)
    creates = [p for p in acls.required(settings) if p.operation.name == "CREATE"]
    withheld = next(p for p in creates if p.prefixed == (which == "changelog topics"))
    principal.grant([p for p in acls.required(settings) if p != withheld])

    result = start_worker(config.child_env(TOPIC_PREFIX=f"{name}-", APP_ID=settings.app_id, **principal.env()),
                          tmp_path)

    stops_naming(result, withheld)
