"""The broker's JVM: its command line, its storage formatted, its launch, its pid file and its exit.

The broker runs as a detached ``java`` process that outlives the tool that
started it; the pid file records it, and process checks read ``/proc`` (so
this runs on Linux). Only the standard library is used.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from config import Settings
from tools.broker_files import BrokerError, Layout, say, uses_log4j2
from tools.broker_security import scram_format_arguments

JVM_FLAGS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

POLL_INTERVAL_S = 0.25


@dataclass(frozen=True)
class RunningBroker:
    """What the pid file records about the broker we started."""

    pid: int
    version: str
    port: int
    secured: bool = False


def ephemeral_ports(range_file: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> range:
    """The ports this machine gives outgoing connections (Linux's default: 32768 to 60999)."""
    try:
        low, high = (int(field) for field in range_file.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def ephemeral_port_warning(ports: list[int], ephemeral: range) -> str | None:
    """A warning if a broker port lies among the ports outgoing connections take, else None.

    While the broker restarts, its clients keep trying to reconnect, each attempt from a
    new ephemeral port; one of them can take a broker port, and the broker cannot listen there.
    """
    taken = [port for port in ports if port in ephemeral]
    if not taken:
        return None
    return (f"warning: broker port{'s' if len(taken) > 1 else ''} {', '.join(map(str, taken))} "
            f"{'lie' if len(taken) > 1 else 'lies'} in this machine's range for outgoing connections "
            f"({ephemeral.start}-{ephemeral.stop - 1}): a client reconnecting while the broker restarts can take "
            "one, and the broker then cannot start; choose ports below it (BROKER_PORT, BROKER_CONTROLLER_PORT)")


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` of the loopback address."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def java_command(java: str, layout: Layout, heap: str, main_class: str, *args: str) -> list[str]:
    """The ``java`` command line running ``main_class`` on the version's jars, with its logging config."""
    if uses_log4j2(layout.version):
        logging_flag = f"-Dlog4j2.configurationFile={layout.logging_config}"
    else:
        logging_flag = f"-Dlog4j.configuration=file:{layout.logging_config}"
    return [java, f"-Xms{heap}", f"-Xmx{heap}", *JVM_FLAGS, logging_flag, "-cp", f"{layout.libs}/*", main_class, *args]


def _new_cluster_id() -> str:
    """A random cluster id as Kafka writes them: 16 bytes in URL-safe base64."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):  # Kafka avoids ids that look like command-line flags
            return cluster_id


def format_storage(java: str, settings: Settings, layout: Layout) -> None:
    """Format the broker's storage, with the SCRAM users, unless it is formatted already."""
    if (layout.data / "meta.properties").exists():
        if settings.broker_secured and not layout.users_marker.exists():
            raise BrokerError(f"the broker storage in {layout.data} was formatted without SCRAM users: "
                              "delete it with `python -m tools.broker wipe` to start secured")
        return
    say(f"formatting broker storage in {layout.data} (first start of Kafka {layout.version})...")
    layout.data.mkdir(parents=True, exist_ok=True)
    arguments = ["--cluster-id", _new_cluster_id(), "--config", str(layout.server_properties), "--ignore-formatted",
                 *scram_format_arguments(settings.local_broker_files)]
    if int(layout.version.split(".")[0]) >= 4:
        # Kafka 4.x formats with transaction.version=2 by default. Under it, a broker restarted
        # after SIGTERM left committed transactions without their commit markers, in about one
        # broker-term fault run in four here (docs/limitations.md); with 1, none in six.
        arguments += ["--feature", "transaction.version=1"]
    command = java_command(java, layout, "256M", "kafka.tools.StorageTool", "format", *arguments)
    result = subprocess.run(command, capture_output=True, text=True, cwd=layout.home)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines() or ["no output"]
        raise BrokerError(f"formatting the broker storage failed: {output[-1]}")
    layout.users_marker.write_text("this storage holds the SCRAM users of tools/broker_security.py\n")


# `sh` puts the JVM in the background and exits at once, so the JVM is not our
# child: it outlives this process and never lingers as our zombie.
_DETACH_SCRIPT = 'out=$1; shift; "$@" >"$out" 2>&1 </dev/null & echo $!'


def launch_detached(command: list[str], out_file: Path) -> int:
    """Start ``command`` in a new session with its output in ``out_file``; return its pid."""
    result = subprocess.run(
        ["sh", "-c", _DETACH_SCRIPT, "sh", str(out_file), *command],
        capture_output=True,
        text=True,
        check=True,
        start_new_session=True,
        cwd=out_file.parent,
    )
    return int(result.stdout)


# --- the pid file and the process ------------------------------------------


def is_broker_process(pid: int) -> bool:
    """True if ``pid`` is a live Kafka broker JVM (a zombie's command line is empty)."""
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"kafka.Kafka" in command_line.split(b"\0")


def _read_pid_file(layout: Layout) -> RunningBroker | None:
    try:
        record = json.loads(layout.pid_file.read_text())
        return RunningBroker(pid=int(record["pid"]), version=str(record["version"]), port=int(record["port"]),
                             secured=bool(record.get("secured", False)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def live_broker(layout: Layout) -> RunningBroker | None:
    """The broker recorded in the pid file, if that process is still alive."""
    broker = _read_pid_file(layout)
    return broker if broker is not None and is_broker_process(broker.pid) else None


def write_pid_file(layout: Layout, broker: RunningBroker) -> None:
    """Record the broker just started."""
    record = {"pid": broker.pid, "version": broker.version, "port": broker.port, "secured": broker.secured}
    layout.pid_file.write_text(json.dumps(record) + "\n")


def _process_state(pid: int) -> str | None:
    """The state letter of ``pid`` in /proc (R, S, Z...), or None if there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def _has_exited(pid: int) -> bool:
    """True once every thread of ``pid`` is gone, so its sockets are closed too.

    A killed JVM's main thread turns zombie before its other threads finish.
    """
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return len(threads) <= 1 and _process_state(pid) in (None, "Z", "X")


def wait_for_exit(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` has fully exited (so its ports are free); False on timeout."""
    deadline = time.monotonic() + timeout
    while not _has_exited(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_INTERVAL_S)
    return True


@contextlib.contextmanager
def start_lock(layout: Layout) -> Iterator[None]:
    """Serialise start-ups, e.g. of parallel test workers, with a lock file."""
    layout.home.mkdir(parents=True, exist_ok=True)
    with open(layout.home / "broker.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        yield
