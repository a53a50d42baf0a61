"""The files of the project's broker: where they live, its jars and its configuration.

Everything lives under ``settings.broker_home`` (:class:`Layout`, the tree in
:mod:`tools.broker`). The jars are fetched once from Maven Central with ``mvn``
(:func:`fetch`); the configuration files are written again on every start
(:func:`write_configs`). Only the standard library is used.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from config import Settings, settings
from tools.broker_security import SecurityFilesError, listener_properties, write_private

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
        return self.conf / ("log4j2.properties" if uses_log4j2(self.version) else "log4j.properties")

    @property
    def log_file(self) -> Path:
        return self.home / "broker.log"

    @property
    def out_file(self) -> Path:
        return self.home / "broker.out"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"


def say(message: str) -> None:
    """Tell the user what the broker tooling does (stdout, at once)."""
    print(message, flush=True)


def require_tool(name: str, advice: str) -> str:
    """The path of the program ``name``; :class:`BrokerError` with ``advice`` if it is not on the PATH."""
    path = shutil.which(name)
    if path is None:
        raise BrokerError(f"{name} not found on PATH: {advice}")
    return path


def uses_log4j2(version: str) -> bool:
    """True for Kafka 4.x (log4j 2), False for 3.x (reload4j); rejects other versions."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if not match or tuple(map(int, match.groups())) < (3, 3, 0):
        raise BrokerError(
            f"KAFKA_VERSION={version!r} is not supported: use a Kafka release 3.3.0 or newer, e.g. 4.4.0 or 3.9.1"
        )
    return int(match.group(1)) >= 4


# --- fetching the jars -----------------------------------------------------


def _logging_jars(version: str) -> list[tuple[str, str, str]]:
    """The SLF4J binding and logging backend that make the broker write its log."""
    if uses_log4j2(version):
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
  <!-- Throwaway pom written by tools/broker_files.py to download Kafka jars. -->
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
    pom = _pom(version)  # refuses an unsupported version before anything is fetched
    mvn = require_tool("mvn", "install Maven 3.8 or newer (e.g. `apt-get install maven`) to fetch the Kafka jars")
    say(f"fetching Kafka {version} and its dependencies from Maven Central (first time only)...")
    started = time.monotonic()
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    pom_file.parent.mkdir(parents=True, exist_ok=True)
    pom_file.write_text(pom)
    goal = [f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={libs}"]
    # --update-snapshots also retries downloads that failed before (Maven caches failures).
    command = [mvn, "--batch-mode", "--quiet", "--update-snapshots", "-Dstyle.color=never", "-f", str(pom_file), *goal]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(libs, ignore_errors=True)
        raise BrokerError(f"could not fetch Kafka {version} from Maven Central: "
                          f"{_maven_error(result.stdout + result.stderr)}")
    marker.write_text(f"fetched {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    jars = len(list(libs.glob("*.jar")))
    say(f"fetched {jars} jars into {libs} in {time.monotonic() - started:.1f} s")
    return libs


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
    if uses_log4j2(settings.kafka_version):  # share groups exist from Kafka 4.0
        properties["share.coordinator.state.topic.replication.factor"] = "1"
        properties["share.coordinator.state.topic.min.isr"] = "1"
    properties.update(listener_properties(settings))
    lines = [f"{key}={value}" for key, value in properties.items()]
    return "# Written by tools/broker_files.py on every start; edit that file instead.\n" + "\n".join(lines) + "\n"


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


def write_configs(settings: Settings, layout: Layout) -> None:
    """Write ``server.properties`` and the logging config for this start."""
    layout.conf.mkdir(parents=True, exist_ok=True)
    try:
        write_private(layout.server_properties, _server_properties(settings, layout))  # it holds PLAIN passwords
    except SecurityFilesError as error:
        raise BrokerError(f"cannot make the secured listeners' files: {error}") from None
    render = _log4j2_properties if uses_log4j2(settings.kafka_version) else _log4j_properties
    layout.logging_config.write_text(render(layout.log_file))
