"""A worker's HTTP endpoints change nothing and listen on localhost unless told otherwise."""
from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

from app.loadgen import LoadSpec
from tools.workers import Worker, wait_for

pytestmark = pytest.mark.broker

DRAIN_S = 180  # bounds a hang on a shared machine; not a timing check
PATHS = ("/", "/metrics", "/health", "/ready", "/commits/", "/router/", "/merchants/", "/merchants/m001/",
         "/merchants/m001/windows/")
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def status_of(worker: Worker, method: str, path: str) -> int:
    request = urllib.request.Request(f"http://localhost:{worker.web_port}{path}", data=b"{}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def outward_address() -> str | None:
    """An IPv4 address of this machine other than loopback, if it has one."""
    candidates = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 9))  # no packet is sent: this only picks the default route
            candidates.append(probe.getsockname()[0])
        except OSError:
            pass
    try:
        candidates += socket.gethostbyname_ex(socket.gethostname())[2]
    except OSError:
        pass
    return next((address for address in candidates if not address.startswith("127.")), None)


def answers_on(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=5).close()
        return True
    except OSError:
        return False


def test_every_endpoint_answers_reads_only_and_no_table_is_served_whole(pipeline):
    run = pipeline("exactly_once")
    worker = run.add_worker()
    run.produce(LoadSpec(count=200, seed=51))
    wait_for(lambda: run.reconcile()["ok"], timeout=DRAIN_S, what="the outputs")

    refused = {(method, path): status_of(worker, method, path) for path in PATHS for method in WRITES}

    assert set(refused.values()) == {405}, {key: status for key, status in refused.items() if status != 405}
    assert worker.get("/table/")[0] == 404  # Faust's own table views are switched off
    assert all(worker.get(path)[0] in (200, 404) for path in PATHS)
    assert run.reconcile()["ok"]


def test_a_worker_listens_on_localhost_unless_told_otherwise(pipeline):
    address = outward_address()
    if address is None:
        pytest.skip("this machine has no address but loopback to reach a worker by")
    run = pipeline("exactly_once")
    local = run.add_worker()
    everywhere = run.add_worker(WEB_BIND="0.0.0.0")
    wait_for(lambda: local.ready() and everywhere.ready(), timeout=DRAIN_S, what="both workers")

    assert not answers_on(address, local.web_port)
    assert answers_on(address, everywhere.web_port)
