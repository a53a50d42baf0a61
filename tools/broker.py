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

Only the standard library is used (this runs before the venv has packages),
and process checks read ``/proc``, so this runs on Linux.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from config import Settings, settings
from kafka_ops.wire import KafkaWireError, answers_kafka, bootstrap_addresses
from kafka_ops.wire_security import WireSecurity
from tools.broker_security import SecurityFilesError, listener_properties, scram_format_arguments, write_private

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
LOG4J2_VERSION = "2.25.5"  # the log4j 2 release Kafka 4.x itself depends on
SLF4J_VERSION = "1.7.36"  # the slf4j-api release of Kafka 3.9 and 4.x
RELOAD4J_VERSION = "1.2.25"  # the log4j 1 fork Kafka 3.x ships with

# Loggers that are chatty at INFO without telling a developer anything useful.
NOISY_LOGGERS = (
    "kafka.request.logger",
    "kafka.network.RequestChannel$",
    "kafka.authorizer.logger",
    "state.change.logger",
    "org.apache.kafka.clients",
    "org.apache.kafka.common.metrics",
    "org.apache.kafka.common.config.AbstractConfig",  # dumps every config (2,500 lines a start)
)

JVM_FLAGS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

STOP_TIMEOUT_S = 60.0
LOG_TAIL_LINES = 20
POLL_INTERVAL_S = 0.25


class BrokerError(Exception):
    """Something the user can fix; the message is one sentence saying what."""


@dataclass(frozen=True)
class Layout:
    """Where the files of one Kafka version live under ``broker_home``."""

    home: Path
    version: str

    @classmethod
    def of(cls, settings: Settings) -> Layout:
        return cls(settings.broker_home, settings.kafka_version)

    @property
    def libs(self) -> Path:
        return self.home / "libs" / self.version

    @property
    def conf(self) -> Path:
        return self.home / "conf" / self.version

    @property
    def data(self) -> Path:
        return self.home / "data" / self.version

    @property
    def users_marker(self) -> Path:
        return self.home / "data" / f"{self.version}.users"

    @property
    def server_properties(self) -> Path:
        return self.conf / "server.properties"

    @property
    def logging_config(self) -> Path:
        return self.conf / ("log4j2.properties" if _uses_log4j2(self.version) else "log4j.properties")

    @property
    def log_file(self) -> Path:
        return self.home / "broker.log"

    @property
    def out_file(self) -> Path:
        return self.home / "broker.out"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"


@dataclass(frozen=True)
class RunningBroker:
    """What the pid file records about the broker we started."""

    pid: int
    version: str
    port: int
    secured: bool = False


# --- small helpers ---------------------------------------------------------


def _say(message: str) -> None:
    print(message, flush=True)


def _require_tool(name: str, advice: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BrokerError(f"{name} not found on PATH: {advice}")
    return path


def _uses_log4j2(version: str) -> bool:
    """True for Kafka 4.x (log4j 2), False for 3.x (reload4j); rejects other versions."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if not match or tuple(map(int, match.groups())) < (3, 3, 0):
        raise BrokerError(
            f"KAFKA_VERSION={version!r} is not supported: use a Kafka release 3.3.0 or newer, e.g. 4.4.0 or 3.9.1"
        )
    return int(match.group(1)) >= 4


def _check_heap(heap: str) -> None:
    if not re.fullmatch(r"\d+[kKmMgG]?", heap):
        raise BrokerError(f"BROKER_HEAP={heap!r} is not a JVM heap size such as 1G or 768M")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# --- fetching the jars -----------------------------------------------------


def _logging_jars(version: str) -> list[tuple[str, str, str]]:
    """The SLF4J binding and logging backend that make the broker write its log."""
    if _uses_log4j2(version):
        return [
            ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J2_VERSION),  # binding for SLF4J 1.7
            ("org.apache.logging.log4j", "log4j-core", LOG4J2_VERSION),
        ]
    return [("org.slf4j", "slf4j-reload4j", SLF4J_VERSION), ("ch.qos.reload4j", "reload4j", RELOAD4J_VERSION)]


def _pom(version: str) -> str:
    dependencies = [("org.apache.kafka", "kafka_2.13", version), *_logging_jars(version)]
    entries = "\n".join(
        f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{release}</version></dependency>"
        for group, artifact, release in dependencies
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <!-- Throwaway pom written by tools/broker.py to download Kafka jars. -->
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.faust-eos</groupId>
  <artifactId>kafka-broker-{version}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{entries}
  </dependencies>
</project>
"""


def _maven_error(output: str) -> str:
    """The first meaningful ``[ERROR]`` line of mvn's output, without Maven's boilerplate."""
    errors = [line.partition("[ERROR]")[2].strip() for line in output.splitlines() if "[ERROR]" in line]
    first = next((line for line in errors if line), output.strip()[-500:] or "mvn failed without output")
    return re.sub(r"^Failed to execute goal on project [^:]*: | -> \[Help 1\]$", "", first)


def fetch(settings: Settings = settings) -> Path:
    """Download Kafka and its runtime jars once (reused afterwards); return their folder."""
    layout = Layout.of(settings)
    version, libs, pom_file = settings.kafka_version, layout.libs, layout.conf / "pom.xml"
    marker = libs / ".complete"
    if marker.exists():
        return libs
    mvn = _require_tool("mvn", "install Maven 3.8 or newer (e.g. `apt-get install maven`) to fetch the Kafka jars")
    _say(f"fetching Kafka {version} and its dependencies from Maven Central (first time only)...")
    started = time.monotonic()
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    pom_file.parent.mkdir(parents=True, exist_ok=True)
    pom_file.write_text(_pom(version))
    goal = [f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={libs}"]
    # --update-snapshots also retries downloads that failed before (Maven caches failures).
    command = [mvn, "--batch-mode", "--quiet", "--update-snapshots", "-Dstyle.color=never", "-f", str(pom_file), *goal]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(libs, ignore_errors=True)
        raise BrokerError(f"could not fetch Kafka {version} from Maven Central: {_maven_error(result.stdout + result.stderr)}")
    marker.write_text(f"fetched {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    jars = len(list(libs.glob("*.jar")))
    _say(f"fetched {jars} jars into {libs} in {time.monotonic() - started:.1f} s")
    return libs


def pid(settings: Settings = settings) -> int | None:
    """Process id of the local broker this project started, if it is running."""
    broker = _live_broker(Layout.of(settings))
    return broker.pid if broker is not None else None


# --- configuration files ---------------------------------------------------


def _server_properties(settings: Settings, layout: Layout) -> str:
    port, controller_port = settings.broker_port, settings.broker_controller_port
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@localhost:{controller_port}",
        "listeners": f"PLAINTEXT://localhost:{port},CONTROLLER://localhost:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://localhost:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": str(layout.data),
        # A single node: every replication factor and in-sync minimum is 1.
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "min.insync.replicas": "1",
        "default.replication.factor": "1",
        # One partition per internal topic: faster start-up and first commit.
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        # After a crash (kill) the restarted broker cannot register until the old
        # incarnation's session expires: keep that wait at 4 s instead of 9 s.
        "broker.heartbeat.interval.ms": "1000",
        "broker.session.timeout.ms": "4000",
        "transaction.max.timeout.ms": "900000",
        # Small-machine sizing (the defaults assume a dedicated server).
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.dedupe.buffer.size": str(32 * 1024 * 1024),
    }
    if _uses_log4j2(settings.kafka_version):  # share groups exist from Kafka 4.0
        properties["share.coordinator.state.topic.replication.factor"] = "1"
        properties["share.coordinator.state.topic.min.isr"] = "1"
    properties.update(listener_properties(settings))
    lines = [f"{key}={value}" for key, value in properties.items()]
    return "# Written by tools/broker.py on every start; edit that file instead.\n" + "\n".join(lines) + "\n"


def _log4j2_properties(log_file: Path) -> str:
    lines = [
        "status = warn",
        "appender.file.type = RollingFile",
        "appender.file.name = file",
        f"appender.file.fileName = {log_file}",
        f"appender.file.filePattern = {log_file}.%i",
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = [%d] %p %m (%c)%n",
        "appender.file.policies.type = Policies",
        "appender.file.policies.size.type = SizeBasedTriggeringPolicy",
        "appender.file.policies.size.size = 100MB",
        "appender.file.strategy.type = DefaultRolloverStrategy",
        "appender.file.strategy.max = 2",
        "rootLogger.level = info",
        "rootLogger.appenderRef.file.ref = file",
    ]
    for number, name in enumerate(NOISY_LOGGERS):
        lines += [f"logger.quiet{number}.name = {name}", f"logger.quiet{number}.level = warn"]
    return "\n".join(lines) + "\n"


def _log4j_properties(log_file: Path) -> str:
    lines = [
        "log4j.rootLogger=INFO, file",
        "log4j.appender.file=org.apache.log4j.RollingFileAppender",
        f"log4j.appender.file.File={log_file}",
        "log4j.appender.file.MaxFileSize=100MB",
        "log4j.appender.file.MaxBackupIndex=2",
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n",
    ]
    lines += [f"log4j.logger.{name}=WARN" for name in NOISY_LOGGERS]
    return "\n".join(lines) + "\n"


def _write_configs(settings: Settings, layout: Layout) -> None:
    layout.conf.mkdir(parents=True, exist_ok=True)
    try:
        write_private(layout.server_properties, _server_properties(settings, layout))  # it holds PLAIN passwords
    except SecurityFilesError as error:
        raise BrokerError(f"cannot make the secured listeners' files: {error}") from None
    render = _log4j2_properties if _uses_log4j2(settings.kafka_version) else _log4j_properties
    layout.logging_config.write_text(render(layout.log_file))


# --- running java ----------------------------------------------------------


def _java_command(java: str, layout: Layout, heap: str, main_class: str, *args: str) -> list[str]:
    if _uses_log4j2(layout.version):
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


def _format_storage(java: str, settings: Settings, layout: Layout) -> None:
    if (layout.data / "meta.properties").exists():
        if settings.broker_secured and not layout.users_marker.exists():
            raise BrokerError(f"the broker storage in {layout.data} was formatted without SCRAM users: "
                              "delete it with `python -m tools.broker wipe` to start secured")
        return
    _say(f"formatting broker storage in {layout.data} (first start of Kafka {layout.version})...")
    layout.data.mkdir(parents=True, exist_ok=True)
    arguments = ["--cluster-id", _new_cluster_id(), "--config", str(layout.server_properties), "--ignore-formatted",
                 *scram_format_arguments(settings.local_broker_files)]
    if int(layout.version.split(".")[0]) >= 4:
        # Kafka 4.x formats with transaction.version=2 by default. Under it, a broker restarted
        # after SIGTERM left committed transactions without their commit markers, in about one
        # broker-term fault run in four here (README, Known limitations); with 1, none in six.
        arguments += ["--feature", "transaction.version=1"]
    command = _java_command(java, layout, "256M", "kafka.tools.StorageTool", "format", *arguments)
    result = subprocess.run(command, capture_output=True, text=True, cwd=layout.home)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines() or ["no output"]
        raise BrokerError(f"formatting the broker storage failed: {output[-1]}")
    layout.users_marker.write_text("this storage holds the SCRAM users of tools/broker_security.py\n")


# `sh` puts the JVM in the background and exits at once, so the JVM is not our
# child: it outlives this process and never lingers as our zombie.
_DETACH_SCRIPT = 'out=$1; shift; "$@" >"$out" 2>&1 </dev/null & echo $!'


def _launch_detached(command: list[str], out_file: Path) -> int:
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


def _is_broker_process(pid: int) -> bool:
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


def _live_broker(layout: Layout) -> RunningBroker | None:
    """The broker recorded in the pid file, if that process is still alive."""
    broker = _read_pid_file(layout)
    return broker if broker is not None and _is_broker_process(broker.pid) else None


def _write_pid_file(layout: Layout, broker: RunningBroker) -> None:
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


def _wait_for_exit(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` has fully exited (so its ports are free); False on timeout."""
    deadline = time.monotonic() + timeout
    while not _has_exited(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_INTERVAL_S)
    return True


@contextlib.contextmanager
def _start_lock(layout: Layout) -> Iterator[None]:
    """Serialise start-ups, e.g. of parallel test workers, with a lock file."""
    layout.home.mkdir(parents=True, exist_ok=True)
    with open(layout.home / "broker.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        yield


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
        if not _is_broker_process(pid):
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
    broker = _live_broker(Layout.of(settings))
    if broker is None:
        raise BrokerError("no local broker is running: start one with `python -m tools.broker start`")
    return _wait_local(settings, broker.pid, timeout)


# --- starting and stopping -------------------------------------------------


def _start(settings: Settings, layout: Layout) -> int:
    """Start a new broker process and wait until it is ready; return its pid."""
    java = _require_tool("java", "install a JDK 17 or newer (e.g. `apt-get install openjdk-17-jdk-headless`)")
    _check_heap(settings.broker_heap)
    ports = [settings.broker_port, settings.broker_controller_port]
    if settings.broker_secured:
        ports += [settings.broker_sasl_ssl_port, settings.broker_ssl_port]
    for port in ports:
        if not _port_free(port):
            raise BrokerError(
                f"port {port} is in use by another program (not a broker started from {layout.home}): "
                "stop that program or choose other ports with BROKER_PORT / BROKER_CONTROLLER_PORT "
                "(and BROKER_SASL_SSL_PORT / BROKER_SSL_PORT)"
            )
    fetch(settings)
    _write_configs(settings, layout)
    _format_storage(java, settings, layout)
    log_offset = layout.log_file.stat().st_size if layout.log_file.exists() else 0
    command = _java_command(java, layout, settings.broker_heap, "kafka.Kafka", str(layout.server_properties))
    pid = _launch_detached(command, layout.out_file)
    _write_pid_file(layout, RunningBroker(pid, settings.kafka_version, settings.broker_port, settings.broker_secured))
    secured = (f", SASL_SSL on {settings.broker_sasl_ssl_port}, mutual TLS on {settings.broker_ssl_port}"
               if settings.broker_secured else "")
    _say(f"starting Kafka {settings.kafka_version} on localhost:{settings.broker_port}{secured} (pid {pid})...")
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
    _say(f"reusing the running broker: Kafka {broker.version} on localhost:{broker.port} (pid {broker.pid})")


def ensure_running(settings: Settings = settings) -> float:
    """Fetch, start and wait for the local broker as needed; return the seconds it took.

    With KAFKA_BOOTSTRAP_SERVERS set, nothing local happens: this only waits
    until the external cluster answers.
    """
    started = time.monotonic()
    if not settings.use_local_broker:
        _say(f"using the external Kafka cluster at {settings.bootstrap_servers}; no local broker is started")
        wait_ready(settings)
        return time.monotonic() - started
    layout = Layout.of(settings)
    with _start_lock(layout):
        broker = _live_broker(layout)
        if broker is not None:
            _reuse(settings, broker)
            return time.monotonic() - started
        pid = _start(settings, layout)
    elapsed = time.monotonic() - started
    _say(
        f"Kafka {settings.kafka_version} ready on localhost:{settings.broker_port} in {elapsed:.1f} s "
        f"(pid {pid}, log {layout.log_file})"
    )
    return elapsed


def _end(settings: Settings, sig: signal.Signals) -> bool:
    """Send ``sig`` to the local broker and wait for it to exit; False if none was running."""
    layout = Layout.of(settings)
    broker = _live_broker(layout)
    if broker is None:
        layout.pid_file.unlink(missing_ok=True)
        _say("no broker is running")
        return False
    started = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.kill(broker.pid, sig)
    if not _wait_for_exit(broker.pid, STOP_TIMEOUT_S) and _is_broker_process(broker.pid):
        _say(f"warning: the broker (pid {broker.pid}) did not stop within {STOP_TIMEOUT_S:.0f} s; killing it")
        with contextlib.suppress(ProcessLookupError):
            os.kill(broker.pid, signal.SIGKILL)
        _wait_for_exit(broker.pid, 10.0)
    layout.pid_file.unlink(missing_ok=True)
    verb = "stopped" if sig == signal.SIGTERM else "killed"
    _say(f"{verb} Kafka {broker.version} (pid {broker.pid}) in {time.monotonic() - started:.1f} s")
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
    _say(f"deleted the broker data in {data}")


def is_running(settings: Settings = settings) -> bool:
    """True if the broker (local, or the external cluster) answers Kafka requests right now."""
    if not settings.use_local_broker:
        return _answers_external(settings)
    broker = _live_broker(Layout.of(settings))
    return broker is not None and answers_kafka(f"localhost:{broker.port}")


# --- command line ----------------------------------------------------------


def _print_status(settings: Settings) -> None:
    if not settings.use_local_broker:
        state = "answering" if is_running(settings) else "NOT answering"
        _say(f"external cluster at {settings.bootstrap_servers}: {state}")
        return
    layout = Layout.of(settings)
    broker = _live_broker(layout)
    if broker is None:
        _say(f"not running (would start Kafka {settings.kafka_version} on localhost:{settings.broker_port})")
        return
    state = "running" if answers_kafka(f"localhost:{broker.port}") else "starting or not answering"
    _say(f"{state}: Kafka {broker.version} on localhost:{broker.port}, pid {broker.pid}, log {layout.log_file}")


def _print_wait(settings: Settings) -> None:
    waited = wait_ready(settings)
    _say(f"Kafka at {settings.bootstrap_servers} is ready (waited {waited:.1f} s)")


def _print_fetch(settings: Settings) -> None:
    _say(f"Kafka {settings.kafka_version} jars are in {fetch(settings)}")


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
