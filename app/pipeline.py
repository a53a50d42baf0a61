"""The faust-eos Faust app (``app.app``): ``faust -A app worker`` starts a worker.

Builds the :class:`faust.App` from :mod:`config`, then imports the tables,
agents, web views and commands that register themselves on it. Workers check
the settings against the cluster before starting (:mod:`app.preflight`).
"""
from __future__ import annotations

import faust

import faust_eos  # registers the eos:// transport (the installed entry point does too)
from app.preflight import Worker
from config import SecurityError, settings

settings.data_dir.mkdir(parents=True, exist_ok=True)
try:  # the same security settings as every other client of the project (config.security)
    credentials = faust_eos.credentials(settings.security.librdkafka())
except (SecurityError, faust_eos.SettingRefused) as exc:
    raise SystemExit(f"error: {exc}") from None
app = faust.App(
    settings.app_id,
    broker=(f"eos://{settings.bootstrap_servers}?transaction_timeout_ms={settings.transaction_timeout_ms}"
            f"&max_uncommitted_records={settings.max_uncommitted_records}"),
    broker_credentials=credentials,
    processing_guarantee=settings.processing_guarantee,
    broker_commit_interval=settings.commit_interval_ms / 1000,
    store="eos-rocksdb://",
    Topic=faust_eos.Topic,  # sends without yielding to the event loop (faust_eos.short_paths.topic)
    Table=faust_eos.Table,  # reads and writes without Faust's per-operation machinery (faust_eos.short_paths.table)
    datadir=str(settings.data_dir),
    topic_partitions=settings.partitions,
    topic_replication_factor=settings.replication_factor,
    topic_disable_leader=True,
    # 0 by default: a standby saves seconds per million keys at a takeover, for twice the
    # disk and changelog reads (docs/operations.md, Standby replicas)
    table_standby_replicas=settings.standby_replicas,
    broker_session_timeout=settings.session_timeout_s,
    broker_heartbeat_interval=max(settings.session_timeout_s / 10, 0.5),
    web_port=settings.web_port,
    web_host=settings.web_host,
    web_bind=settings.web_bind,  # localhost unless told otherwise (docs/operations.md)
    web_tables_enabled=False,  # Faust's /table/ views would serve every table whole, dedup ids included
    Worker=Worker,  # checks the settings against the cluster before a worker starts
)

import agents.payments  # noqa: E402,F401
import tables  # noqa: E402,F401
from app import commands, commit_timer, transaction_commands, views  # noqa: E402,F401
