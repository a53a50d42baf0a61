"""The project's own single-node Apache Kafka broker (KRaft mode, no ZooKeeper).

The broker is plain Java: its jars are fetched once from Maven Central with
``mvn`` and it runs as a detached ``java`` process that outlives this tool.
Everything lives under ``settings.broker_home``::

    libs/<version>/   the jars (kept by ``wipe``)
    conf/<version>/   server.properties, the logging config, the throwaway pom.xml
    data/<version>/   the broker's storage (deleted by ``wipe``)
    data/<version>.users  written once the storage holds the SCRAM users
    security/         CA, certificates and SCRAM passwords (tools.broker_security)
    broker.log        the broker's log; broker.out has the JVM's own output
    broker.pid        pid, version and port of the running broker

Command line: ``python -m tools.broker {fetch,start,wait,stop,kill,wipe,status}``.
Python API: :func:`ensure_running`, :func:`wait_ready`, :func:`is_running`,
:func:`stop`, :func:`kill`, :func:`wipe` and :func:`fetch`.

Here: starting, waiting for, stopping and wiping the broker, and the command
line; its files (the layout, the jars, the configuration) are
:mod:`tools.broker_files`, its JVM process :mod:`tools.broker_process`. Only the
standard library is used (this runs before the venv has packages), and process
checks read ``/proc``, so this runs on Linux.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable

from config import Settings, settings
from kafka_ops.wire import KafkaWireError, answers_kafka, bootstrap_addresses
from kafka_ops.wire_security import WireSecurity
from tools.broker_files import BrokerError, Layout, fetch, require_tool, say, write_configs
from tools.broker_process import (
    POLL_INTERVAL_S,
    RunningBroker,
    ephemeral_port_warning,
    ephemeral_ports,
    format_storage,
    is_broker_process,
    java_command,
    launch_detached,
    live_broker,
    port_free,
    start_lock,
    wait_for_exit,
    write_pid_file,
)

STOP_TIMEOUT_S = 60.0
LOG_TAIL_LINES = 20


def _check_heap(heap: str) -> None:
    if not re.fullmatch(r"\d+[kKmMgG]?", heap):
        raise BrokerError(f"BROKER_HEAP={heap!r} is not a JVM heap size such as 1G or 768M")


def pid(settings: Settings = settings) -> int | None:
    """Process id of the local broker this project started, if it is running."""
    broker = live_broker(Layout.of(settings))
    return broker.pid if broker is not None else None


# --- waiting ---------------------------------------------------------------


def _check_bootstrap_servers(servers: str) -> None:
    try:
        bootstrap_addresses(servers)
    except KafkaWireError as error:
        raise BrokerError(f"KAFKA_BOOTSTRAP_SERVERS={servers!r} is not valid: {error}") from None


def _log_tail(layout: Layout, log_offset: int) -> str:
    """The last log lines written since ``log_offset``, then the JVM's own output."""
    lines: list[str] = []
    for path, offset in ((layout.log_file, log_offset), (layout.out_file, 0)):
        with contextlib.suppress(OSError), path.open("rb") as file:
            file.seek(offset if offset <= path.stat().st_size else 0)
            lines += file.read().decode(errors="replace").splitlines()
    tail = lines[-LOG_TAIL_LINES:] or ["(the log is empty)"]
    return "\n".join("    " + line for line in tail)


def _wait_local(settings: Settings, pid: int, timeout: float, log_offset: int = 0) -> float:
    layout = Layout.of(settings)
    started = time.monotonic()
    while not answers_kafka(f"localhost:{settings.broker_port}"):
        if not is_broker_process(pid):
            problem = f"the broker (pid {pid}) exited during start-up"
        elif time.monotonic() - started > timeout:
            problem = (
                f"the broker (pid {pid}, still running) did not answer on "
                f"localhost:{settings.broker_port} within {timeout:.0f} s"
            )
        else:
            time.sleep(POLL_INTERVAL_S)
            continue
        raise BrokerError(
            f"{problem}; see {layout.log_file} (and {layout.out_file.name} for JVM errors), last lines:\n"
            + _log_tail(layout, log_offset)
        )
    return time.monotonic() - started


def _answers_external(settings: Settings) -> bool:
    _check_bootstrap_servers(settings.bootstrap_servers)
    try:
        return answers_kafka(settings.bootstrap_servers, security=WireSecurity.of(settings.kafka_client()))
    except KafkaWireError as error:  # the security settings were refused: waiting will not help
        raise BrokerError(str(error)) from None


def _wait_external(settings: Settings, timeout: float) -> float:
    started = time.monotonic()
    while not _answers_external(settings):
        if time.monotonic() - started > timeout:
            raise BrokerError(
                f"no Kafka broker answered at KAFKA_BOOTSTRAP_SERVERS={settings.bootstrap_servers} "
                f"within {timeout:.0f} s (checked with ApiVersions and Metadata requests, "
                f"KAFKA_SECURITY_PROTOCOL={settings.security.protocol})"
            )
        time.sleep(POLL_INTERVAL_S)
    return time.monotonic() - started


def wait_ready(settings: Settings = settings, timeout: float | None = None) -> float:
    """Block until the broker (local, or the external cluster) answers requests; return seconds waited."""
    timeout = settings.broker_start_timeout_s if timeout is None else timeout
    if not settings.use_local_broker:
        return _wait_external(settings, timeout)
    broker = live_broker(Layout.of(settings))
    if broker is None:
        raise BrokerError("no local broker is running: start one with `python -m tools.broker start`")
    return _wait_local(settings, broker.pid, timeout)


# --- starting and stopping -------------------------------------------------


def _start(settings: Settings, layout: Layout) -> int:
    """Start a new broker process and wait until it is ready; return its pid."""
    java = require_tool("java", "install a JDK 17 or newer (e.g. `apt-get install openjdk-17-jdk-headless`)")
    _check_heap(settings.broker_heap)
    ports = [settings.broker_port, settings.broker_controller_port]
    if settings.broker_secured:
        ports += [settings.broker_sasl_ssl_port, settings.broker_ssl_port]
    warning = ephemeral_port_warning(ports, ephemeral_ports())
    if warning is not None:
        say(warning)
    for port in ports:
        if not port_free(port):
            raise BrokerError(
                f"port {port} is in use by another program (not a broker started from {layout.home}): "
                "stop that program or choose other ports with BROKER_PORT / BROKER_CONTROLLER_PORT "
                "(and BROKER_SASL_SSL_PORT / BROKER_SSL_PORT)"
            )
    fetch(settings)
    write_configs(settings, layout)
    format_storage(java, settings, layout)
    log_offset = layout.log_file.stat().st_size if layout.log_file.exists() else 0
    command = java_command(java, layout, settings.broker_heap, "kafka.Kafka", str(layout.server_properties))
    pid = launch_detached(command, layout.out_file)
    write_pid_file(layout, RunningBroker(pid, settings.kafka_version, settings.broker_port, settings.broker_secured))
    secured = (f", SASL_SSL on {settings.broker_sasl_ssl_port}, mutual TLS on {settings.broker_ssl_port}"
               if settings.broker_secured else "")
    say(f"starting Kafka {settings.kafka_version} on localhost:{settings.broker_port}{secured} (pid {pid})...")
    _wait_local(settings, pid, settings.broker_start_timeout_s, log_offset)
    return pid


def _reuse(settings: Settings, broker: RunningBroker) -> None:
    if (broker.version, broker.port) != (settings.kafka_version, settings.broker_port):
        raise BrokerError(
            f"Kafka {broker.version} is already running on localhost:{broker.port} (pid {broker.pid}) "
            f"from {settings.broker_home}: stop it first with `python -m tools.broker stop`"
        )
    if settings.broker_secured and not broker.secured:
        raise BrokerError(
            f"Kafka {broker.version} is already running on localhost:{broker.port} (pid {broker.pid}) without "
            "the secured listeners BROKER_SECURED=true asks for: stop it first with `python -m tools.broker stop`"
        )
    _wait_local(settings, broker.pid, settings.broker_start_timeout_s)
    say(f"reusing the running broker: Kafka {broker.version} on localhost:{broker.port} (pid {broker.pid})")


def ensure_running(settings: Settings = settings) -> float:
    """Fetch, start and wait for the local broker as needed; return the seconds it took.

    With KAFKA_BOOTSTRAP_SERVERS set, nothing local happens: this only waits
    until the external cluster answers.
    """
    started = time.monotonic()
    if not settings.use_local_broker:
        say(f"using the external Kafka cluster at {settings.bootstrap_servers}; no local broker is started")
        wait_ready(settings)
        return time.monotonic() - started
    layout = Layout.of(settings)
    with start_lock(layout):
        broker = live_broker(layout)
        if broker is not None:
            _reuse(settings, broker)
            return time.monotonic() - started
        pid = _start(settings, layout)
    elapsed = time.monotonic() - started
    say(
        f"Kafka {settings.kafka_version} ready on localhost:{settings.broker_port} in {elapsed:.1f} s "
        f"(pid {pid}, log {layout.log_file})"
    )
    return elapsed


def _end(settings: Settings, sig: signal.Signals) -> bool:
    """Send ``sig`` to the local broker and wait for it to exit; False if none was running."""
    layout = Layout.of(settings)
    broker = live_broker(layout)
    if broker is None:
        layout.pid_file.unlink(missing_ok=True)
        say("no broker is running")
        return False
    started = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.kill(broker.pid, sig)
    if not wait_for_exit(broker.pid, STOP_TIMEOUT_S) and is_broker_process(broker.pid):
        say(f"warning: the broker (pid {broker.pid}) did not stop within {STOP_TIMEOUT_S:.0f} s; killing it")
        with contextlib.suppress(ProcessLookupError):
            os.kill(broker.pid, signal.SIGKILL)
        wait_for_exit(broker.pid, 10.0)
    layout.pid_file.unlink(missing_ok=True)
    verb = "stopped" if sig == signal.SIGTERM else "killed"
    say(f"{verb} Kafka {broker.version} (pid {broker.pid}) in {time.monotonic() - started:.1f} s")
    return True


def stop(settings: Settings = settings) -> bool:
    """Stop the local broker gracefully (SIGKILL after 60 s); False if none was running."""
    return _end(settings, signal.SIGTERM)


def kill(settings: Settings = settings) -> bool:
    """Kill the local broker at once with SIGKILL, like a crash (for fault tests)."""
    return _end(settings, signal.SIGKILL)


def wipe(settings: Settings = settings) -> None:
    """Stop the local broker and delete its data for every version; the jars stay."""
    stop(settings)
    data = settings.broker_home / "data"
    shutil.rmtree(data, ignore_errors=True)
    say(f"deleted the broker data in {data}")


def is_running(settings: Settings = settings) -> bool:
    """True if the broker (local, or the external cluster) answers Kafka requests right now."""
    if not settings.use_local_broker:
        return _answers_external(settings)
    broker = live_broker(Layout.of(settings))
    return broker is not None and answers_kafka(f"localhost:{broker.port}")


# --- command line ----------------------------------------------------------


def _print_status(settings: Settings) -> None:
    if not settings.use_local_broker:
        state = "answering" if is_running(settings) else "NOT answering"
        say(f"external cluster at {settings.bootstrap_servers}: {state}")
        return
    layout = Layout.of(settings)
    broker = live_broker(layout)
    if broker is None:
        say(f"not running (would start Kafka {settings.kafka_version} on localhost:{settings.broker_port})")
        return
    state = "running" if answers_kafka(f"localhost:{broker.port}") else "starting or not answering"
    say(f"{state}: Kafka {broker.version} on localhost:{broker.port}, pid {broker.pid}, log {layout.log_file}")


def _print_wait(settings: Settings) -> None:
    waited = wait_ready(settings)
    say(f"Kafka at {settings.bootstrap_servers} is ready (waited {waited:.1f} s)")


def _print_fetch(settings: Settings) -> None:
    say(f"Kafka {settings.kafka_version} jars are in {fetch(settings)}")


COMMANDS: dict[str, tuple[Callable[[Settings], object], str]] = {
    "fetch": (_print_fetch, "download the Kafka jars from Maven Central (done by start when needed)"),
    "start": (ensure_running, "start the broker unless it runs already, and wait until it is ready"),
    "wait": (_print_wait, "wait until the broker answers Kafka requests"),
    "stop": (stop, "stop the broker gracefully"),
    "kill": (kill, "kill the broker with SIGKILL, like a crash"),
    "wipe": (wipe, "stop the broker and delete its data (the jars stay)"),
    "status": (_print_status, "say whether the broker runs, with its version, port and pid"),
}


def main(argv: list[str] | None = None) -> int:
    """Run one command of the command line; return the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.broker",
        description="Manage the project's single-node Kafka broker (KRaft), fetched from Maven Central.",
        epilog="Settings come from the environment via config: KAFKA_VERSION, BROKER_PORT, "
        "BROKER_CONTROLLER_PORT, BROKER_HEAP, BROKER_HOME, BROKER_START_TIMEOUT_S, BROKER_SECURED "
        "(with BROKER_SASL_SSL_PORT and BROKER_SSL_PORT); "
        "with KAFKA_BOOTSTRAP_SERVERS set, an external cluster is used instead.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, (_, help_text) in COMMANDS.items():
        commands.add_parser(name, help=help_text, description=help_text)
    action, _ = COMMANDS[parser.parse_args(argv).command]
    try:
        action(settings)
    except BrokerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
