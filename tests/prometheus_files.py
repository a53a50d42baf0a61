"""The Prometheus files faust-eos ships (docs/prometheus/), and the Prometheus commands the tests run."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

PROMETHEUS_DIR = Path(__file__).resolve().parent.parent / "docs" / "prometheus"
SCRAPE_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
ALERT_RULES = PROMETHEUS_DIR / "alerts.yml"
DASHBOARD = PROMETHEUS_DIR.parent / "grafana" / "faust-eos.json"


def command(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; a clear failure when missing (never a skip)."""
    path = shutil.which(name)
    assert path is not None, f"{name} is missing: scripts/setup installs it (apt-get install prometheus)"
    return path


def alert_rules() -> dict[str, dict[str, Any]]:
    """The shipped alert rules by name."""
    groups = yaml.safe_load(ALERT_RULES.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}
