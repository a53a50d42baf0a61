"""Every Kafka client the project opens starts from the one place that adds the security settings.

librdkafka clients take their settings from ``Settings.kafka_client`` (the
pipeline, tools, harness and benchmarks) or ``faust_eos.security.librdkafka_client``
(the layer); Faust's aiokafka clients take ``broker_credentials``; the wire
client opens through ``kafka_ops.wire_security``. So a client spelled any other
way (a dict or an assignment naming ``bootstrap.servers``, an aiokafka client
of its own, a wire connection not opened through ``wire_security``), which
would speak plaintext to a secured cluster, fails here.
"""
import ast
from pathlib import Path

import pytest

import config

ROOT = Path(config.__file__).resolve().parent.parent
PACKAGES = ("app", "agents", "tables", "config", "faust_eos", "kafka_ops", "tools", "benchmarks")
#: the only functions that spell bootstrap.servers into a client's settings
SPELLERS = {("config/__init__.py", "kafka_client"), ("faust_eos/security.py", "librdkafka_client")}
#: the only modules that open wire-client connections
WIRE_OPENERS = {"kafka_ops/wire.py", "kafka_ops/wire_security.py"}


def modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def spells_bootstrap_servers(node: ast.AST) -> bool:
    """A dict with the key, or an assignment to it (``config["bootstrap.servers"] = ...``)."""
    if isinstance(node, ast.Dict):
        return any(isinstance(key, ast.Constant) and key.value == "bootstrap.servers" for key in node.keys)
    return (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
            and isinstance(node.slice, ast.Constant) and node.slice.value == "bootstrap.servers")


def functions_spelling_bootstrap_servers(tree: ast.AST, within: str = "<module>"):
    """The name of the innermost function around each place that spells the key (``<module>`` outside any)."""
    for node in ast.iter_child_nodes(tree):
        if spells_bootstrap_servers(node):
            yield within
        inner = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else within
        yield from functions_spelling_bootstrap_servers(node, inner)


def called_names(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            yield func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def test_the_scan_sees_the_two_functions_that_spell_the_settings():
    found = {(name, function) for name, tree in modules() for function in functions_spelling_bootstrap_servers(tree)}
    assert SPELLERS <= found  # the scan works: it finds the places that are allowed


@pytest.mark.parametrize("name, tree", list(modules()), ids=lambda value: value if isinstance(value, str) else "")
def test_no_client_settings_are_spelled_outside_the_two_that_add_security(name, tree):
    spelled = {(name, function) for function in functions_spelling_bootstrap_servers(tree)}
    assert spelled <= SPELLERS, f"{name} spells bootstrap.servers itself: start from settings.kafka_client()"
    calls = set(called_names(tree))
    assert not {call for call in calls if call.startswith("AIOKafka")}, \
        f"{name} opens an aiokafka client itself: Faust's take broker_credentials"
    if name not in WIRE_OPENERS:
        assert not calls & {"Cluster", "Connection"}, f"{name} opens the wire client: use kafka_ops.wire_security"
