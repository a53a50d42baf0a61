"""The shipped alert rules: valid, and each fires on the series it is about and stays quiet otherwise.

promtool (Debian's prometheus package) checks the files and runs each case as a
rule unit test: series given sample by sample, the alerts expected at one time.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import NamedTuple, Optional

import pytest

from tests.prometheus_files import ALERT_RULES, SCRAPE_CONFIG, alert_rules, command

JOB = 'job="faust-eos"'
WORKER = f'{JOB}, instance="w1:6066"'
RECONCILER = 'job="faust-eos-reconciler", instance="r1:6070"'


class Case(NamedTuple):
    alert: str
    series: dict[str, str]  # series -> its samples, one a minute, in promtool's notation
    at: str  # when the alerts are looked at
    fires: Optional[dict[str, str]] = None  # the labels of the one alert expected (besides alertname and severity)
    summary: str = ""


CASES = {
    "worker down for 3 minutes": Case(
        "FaustEosWorkerDown", {f"up{{{WORKER}}}": "0x5"}, "3m",
        {"instance": "w1:6066", "job": "faust-eos"}, "w1:6066 has not answered a scrape for 2 minutes"),
    "worker missed one scrape": Case("FaustEosWorkerDown", {f"up{{{WORKER}}}": "0 1 1 1 1"}, "3m"),
    "worker not ready for 6 minutes": Case(
        "FaustEosWorkerNotReady", {f"faust_eos_ready{{{WORKER}}}": "0x8"}, "6m",
        {"instance": "w1:6066", "job": "faust-eos"}, "w1:6066 has not served for 5 minutes"),
    "worker ready after a 3-minute restore": Case(
        "FaustEosWorkerNotReady", {f"faust_eos_ready{{{WORKER}}}": "0 0 0 1 1 1 1 1"}, "6m"),
    "LSO standing for 5 minutes with records behind it": Case(
        "FaustEosHangingTransaction",
        {f'faust_eos_lso_lag_records{{{WORKER}, topic="merchant-totals", partition="2"}}': "3 5 8 9 12 15 20 22",
         f'faust_eos_last_stable_offset{{{WORKER}, topic="merchant-totals", partition="2"}}': "100x8"}, "7m",
        {"job": "faust-eos", "topic": "merchant-totals", "partition": "2"},
        "merchant-totals[2]: read_committed readers held back for 5 minutes"),
    "LSO lag of commits that end": Case(
        "FaustEosHangingTransaction",
        {f'faust_eos_lso_lag_records{{{WORKER}, topic="merchant-totals", partition="2"}}': "0 30 0 12 0 40 0 25",
         f'faust_eos_last_stable_offset{{{WORKER}, topic="merchant-totals", partition="2"}}': "100+30x8"}, "7m"),
    "LSO lag of back-to-back commits, never 0 at a scrape": Case(
        "FaustEosHangingTransaction",
        {f'faust_eos_lso_lag_records{{{WORKER}, topic="merchant-totals", partition="2"}}': "30 12 40 25 31 18 22 35",
         f'faust_eos_last_stable_offset{{{WORKER}, topic="merchant-totals", partition="2"}}': "100+30x8"}, "7m"),
    "LSO lag rising for 25 minutes": Case(
        "FaustEosLsoLagGrowing",
        {f'faust_eos_lso_lag_records{{{WORKER}, topic="merchant-totals", partition="2"}}': "1000+200x30"}, "25m",
        {"job": "faust-eos", "topic": "merchant-totals", "partition": "2"},
        "merchant-totals[2]: over 1,000 records held back, and rising"),
    "LSO lag high but flat": Case(
        "FaustEosLsoLagGrowing",
        {f'faust_eos_lso_lag_records{{{WORKER}, topic="merchant-totals", partition="2"}}': "5000x30"}, "25m"),
    "consumer lag rising past 10,000": Case(
        "FaustEosConsumerLagGrowing",
        {f'faust_eos_consumer_lag_records{{{WORKER}, topic="payments", partition="0"}}': "4000+100x30",
         f'faust_eos_consumer_lag_records{{{WORKER}, topic="payments", partition="1"}}': "4000+100x30"}, "25m",
        {"job": "faust-eos", "topic": "payments"}, "payments: the workers fall further behind the input"),
    "consumer lag high but flat": Case(
        "FaustEosConsumerLagGrowing",
        {f'faust_eos_consumer_lag_records{{{WORKER}, topic="payments", partition="0"}}': "20000x30"}, "25m"),
    "a transaction aborted": Case(
        "FaustEosCommitFailures", {f"faust_eos_transactions_aborted_total{{{WORKER}}}": "0 0 0 1 1 1"}, "5m",
        {"instance": "w1:6066", "job": "faust-eos"}, "w1:6066: transactions aborted in the last 5 minutes"),
    "no transaction aborted": Case(
        "FaustEosCommitFailures", {f"faust_eos_transactions_aborted_total{{{WORKER}}}": "0x10"}, "5m"),
    "nothing committed while input waits": Case(
        "FaustEosCommitsStalled",
        {f"faust_eos_input_partitions_committed_total{{{WORKER}}}": "100x12",
         f'faust_eos_consumer_lag_records{{{WORKER}, topic="payments", partition="0"}}': "5x12"}, "11m",
        {"job": "faust-eos"}, "No input offsets committed for 5 minutes while input waits"),
    "commits going on while input waits": Case(
        "FaustEosCommitsStalled",
        {f"faust_eos_input_partitions_committed_total{{{WORKER}}}": "100+10x12",
         f'faust_eos_consumer_lag_records{{{WORKER}, topic="payments", partition="0"}}': "5x12"}, "11m"),
    "nothing committed because nothing waits": Case(
        "FaustEosCommitsStalled",
        {f"faust_eos_input_partitions_committed_total{{{WORKER}}}": "100x12",
         f'faust_eos_consumer_lag_records{{{WORKER}, topic="payments", partition="0"}}': "0x12"}, "11m"),
    "reconciler not answering": Case(
        "FaustEosReconcilerStalled", {f"up{{{RECONCILER}}}": "0x10"}, "7m",
        {"job": "faust-eos-reconciler", "instance": "r1:6070"},
        "reconcile --follow has stopped checking the pipeline's output"),
    "reconciler up but no round finished for 20 minutes": Case(
        "FaustEosReconcilerStalled",
        {f"up{{{RECONCILER}}}": "1x25", f"faust_eos_reconciler_rounds_total{{{RECONCILER}}}": "0x25"},
        "20m", {"job": "faust-eos-reconciler"}, "reconcile --follow has stopped checking the pipeline's output"),
    "reconciler's watermark standing while input waits": Case(
        "FaustEosReconcilerStalled",
        {f"up{{{RECONCILER}}}": "1x25", f"faust_eos_reconciler_rounds_total{{{RECONCILER}}}": "0+6x25",
         f'faust_eos_reconciler_watermark{{{RECONCILER}, partition="0"}}': "100x25",
         f'faust_eos_reconciler_lag_records{{{RECONCILER}, partition="0"}}': "50x25"},
        "22m", {"job": "faust-eos-reconciler"}, "reconcile --follow has stopped checking the pipeline's output"),
    "reconciler rounds going on, watermark moving": Case(
        "FaustEosReconcilerStalled",
        {f"up{{{RECONCILER}}}": "1x25", f"faust_eos_reconciler_rounds_total{{{RECONCILER}}}": "0+6x25",
         f'faust_eos_reconciler_watermark{{{RECONCILER}, partition="0"}}': "100+10x25",
         f'faust_eos_reconciler_lag_records{{{RECONCILER}, partition="0"}}': "50x25"}, "22m"),
    "the reconciler found an extra update": Case(
        "FaustEosReconcilerDifferences",
        {f'faust_eos_reconciler_differences_total{{{RECONCILER}, kind="extra"}}': "0 0 1 1 1",
         f'faust_eos_reconciler_differences_total{{{RECONCILER}, kind="missing"}}': "0x5"}, "4m",
        {"job": "faust-eos-reconciler", "kind": "extra"}, "reconcile --follow found extra output in the last hour"),
    "the reconciler found nothing": Case(
        "FaustEosReconcilerDifferences",
        {f'faust_eos_reconciler_differences_total{{{RECONCILER}, kind="extra"}}': "3x5"}, "4m"),
}


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([command("promtool"), *args], capture_output=True, text=True, timeout=60)


def test_the_rules_and_the_scrape_config_are_valid():
    for check in (("check", "rules", str(ALERT_RULES)), ("check", "config", str(SCRAPE_CONFIG))):
        result = promtool(*check)
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_has_a_case_that_fires_it_and_one_that_does_not():
    fired = {case.alert for case in CASES.values() if case.fires}
    quiet = {case.alert for case in CASES.values() if not case.fires}
    assert fired == quiet == set(alert_rules())


@pytest.mark.parametrize("name", CASES)
def test_alert(name: str, tmp_path: Path):
    case = CASES[name]
    rule = alert_rules()[case.alert]
    expected = []
    if case.fires:
        expected.append({
            "exp_labels": {**case.fires, "severity": rule["labels"]["severity"]},
            "exp_annotations": {"summary": case.summary, "description": rule["annotations"]["description"]},
        })
    test_file = tmp_path / "rules_test.json"  # JSON is YAML too
    test_file.write_text(json.dumps({
        "rule_files": [str(ALERT_RULES)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [{"series": series, "values": values} for series, values in case.series.items()],
            "alert_rule_test": [{"eval_time": case.at, "alertname": case.alert, "exp_alerts": expected}],
        }],
    }))

    result = promtool("test", "rules", str(test_file))

    assert result.returncode == 0, result.stdout + result.stderr
