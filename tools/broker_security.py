"""The secured listeners of the local broker: certificates, SCRAM users, and their settings.

With ``BROKER_SECURED=true`` the broker (:mod:`tools.broker`) listens three ways:

* PLAINTEXT on BROKER_PORT, as always (the project's tools and tests use it);
* SASL_SSL on BROKER_SASL_SSL_PORT: SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN logins;
* SSL on BROKER_SSL_PORT: mutual TLS, a client certificate required.

Its files are made on the fly with the ``openssl`` command, in
``settings.local_broker_files.directory`` (``.kafka/security``): a CA, the
broker's certificate (for ``localhost`` only, so another name fails the
hostname check), a client certificate, and one password file per user. The
SCRAM users are added when the storage is formatted, whether or not the broker
is secured, so a broker can be secured later without a wipe.
"""
from __future__ import annotations

import datetime
import os
import secrets
import subprocess
import tempfile
from pathlib import Path

from config import LocalBrokerFiles, Settings
from config.security import LOCAL_USER

#: the SCRAM users: the pipeline's, and an administrator for tests that need a second principal
USERS = (LOCAL_USER, "admin")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
CERTIFICATE_DAYS = 825


class SecurityFilesError(Exception):
    """The broker's certificates could not be made; one line saying why."""


def _openssl(*args: str, cwd: Path) -> None:
    try:
        result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise SecurityFilesError("the openssl command is missing: install it (`apt-get install openssl`)") from None
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
        raise SecurityFilesError(f"openssl {args[0]} failed: {lines[-1]}")


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by the owner only from the start, whole or not at all."""
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    os.replace(partial, path)


def _openssl_time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).strftime("%Y%m%d%H%M%SZ")


def make_ca(directory: Path, name: str = "ca", common_name: str = "faust-eos local CA") -> Path:
    """A self-signed CA ``<name>.pem`` with its key ``<name>.key``; returns the certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem",
             "-days", str(CERTIFICATE_DAYS), "-subj", f"/CN={common_name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=directory)
    return directory / f"{name}.pem"


def issue(directory: Path, name: str, common_name: str, ca: Path, *, hostnames: tuple[str, ...] = (),
          not_before: datetime.datetime | None = None, not_after: datetime.datetime | None = None) -> Path:
    """A certificate ``<name>.pem`` (key ``<name>.key``) in ``directory``, signed by the CA ``ca`` (key beside it).

    ``hostnames`` go in its subject alternative names; ``not_before`` and
    ``not_after`` default to now and :data:`CERTIFICATE_DAYS` from now (a past
    pair makes an expired certificate).
    """
    now = datetime.datetime.now(datetime.timezone.utc)
    not_before = not_before or now - datetime.timedelta(minutes=5)
    not_after = not_after or now + datetime.timedelta(days=CERTIFICATE_DAYS)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={common_name}", cwd=directory)
    extensions = ["basicConstraints = CA:FALSE", "extendedKeyUsage = serverAuth, clientAuth"]
    if hostnames:
        extensions.append("subjectAltName = " + ", ".join(f"DNS:{host}" for host in hostnames))
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "index.txt").write_text("")
        (Path(scratch) / "serial").write_text(secrets.token_hex(8) + "\n")
        config = Path(scratch) / "ca.cnf"
        config.write_text("\n".join([
            "[ca]", "default_ca = local", "[local]",
            f"database = {scratch}/index.txt", f"new_certs_dir = {scratch}", f"serial = {scratch}/serial",
            f"certificate = {ca}", f"private_key = {ca.with_suffix('.key')}",
            "default_md = sha256", "policy = any", "unique_subject = no", "email_in_dn = no",
            "[any]", "commonName = supplied", "[certificate]", *extensions, "",
        ]))
        _openssl("ca", "-batch", "-notext", "-config", str(config), "-extensions", "certificate",
                 "-startdate", _openssl_time(not_before), "-enddate", _openssl_time(not_after),
                 "-in", f"{name}.csr", "-out", f"{name}.pem", cwd=directory)
    (directory / f"{name}.csr").unlink()
    return directory / f"{name}.pem"


def ensure_passwords(files: LocalBrokerFiles) -> dict[str, str]:
    """Each SCRAM user's password, made once and kept in its file (readable by the owner only)."""
    files.directory.mkdir(parents=True, exist_ok=True)
    passwords = {}
    for user in USERS:
        path = files.password_file(user)
        if not path.exists():
            write_private(path, secrets.token_hex(16) + "\n")
        passwords[user] = path.read_text().strip()
    return passwords


def ensure_certificates(files: LocalBrokerFiles) -> None:
    """The CA, the broker's and the client's certificates, made if missing."""
    directory = files.directory
    if not files.ca_file.exists():
        make_ca(directory)
        for stale in ("broker.pem", "client.pem"):  # signed by a CA that is gone
            (directory / stale).unlink(missing_ok=True)
    if not (directory / "broker.pem").exists():
        issue(directory, "broker", "localhost", files.ca_file, hostnames=("localhost",))
    if not files.client_cert_file.exists():
        issue(directory, "client", LOCAL_USER, files.ca_file)
    keystore = directory / "broker-keystore.pem"  # key and chain in one file, as Kafka's PEM keystore takes them
    write_private(keystore, "".join((directory / part).read_text() for part in ("broker.key", "broker.pem", "ca.pem")))


def scram_format_arguments(files: LocalBrokerFiles) -> list[str]:
    """``kafka-storage format`` arguments that create every SCRAM user with its password."""
    arguments = []
    for user, password in ensure_passwords(files).items():
        for mechanism in SCRAM_MECHANISMS:
            arguments += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
    return arguments


def listener_properties(settings: Settings) -> dict[str, str]:
    """The server.properties entries of the secured listeners (empty unless BROKER_SECURED)."""
    if not settings.broker_secured:
        return {}
    files = settings.local_broker_files
    ensure_certificates(files)
    plain_users = " ".join(f'user_{user}="{password}"' for user, password in ensure_passwords(files).items())
    sasl, tls = settings.broker_sasl_ssl_port, settings.broker_ssl_port
    port, controller = settings.broker_port, settings.broker_controller_port
    return {
        "listeners": (f"PLAINTEXT://localhost:{port},CONTROLLER://localhost:{controller},"
                      f"SASL_SSL://localhost:{sasl},SSL://localhost:{tls}"),
        "advertised.listeners": f"PLAINTEXT://localhost:{port},SASL_SSL://localhost:{sasl},SSL://localhost:{tls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.directory / "broker-keystore.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_file),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        **{f"listener.name.sasl_ssl.{m.lower()}.sasl.jaas.config":
           "org.apache.kafka.common.security.scram.ScramLoginModule required;" for m in SCRAM_MECHANISMS},
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
        # Other principals need ACLs; the plaintext listener (and the controller's) stay all-powerful.
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ";".join(["User:ANONYMOUS", *(f"User:{user}" for user in USERS), f"User:CN={LOCAL_USER}"]),
    }
