"""The library's layers import one way: each subpackage only those below it (docs/architecture.md)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import faust_eos
from faust_eos.committing.at_least_once import AtLeastOnce
from faust_eos.committing.exactly_once import TransactionManager
from faust_eos.committing.guarantee import ConsumerCalls, Guarantee
from faust_eos.consuming.consumer import Consumer
from faust_eos.transport import AtLeastOnceProducer, ExactlyOnceProducer
from tests.unit.faust_contract_support import worker_app

LIBRARY = Path(faust_eos.__file__).parent

#: each part of the library, from the top down; a module may import its own part and those below it
LAYERS = ["__init__", "transport", "consuming", "short_paths", "committing", "state", "top", "faust_internals"]
TOP_MODULES = {"errors", "options", "metrics", "security", "codec"}


def layer_of(module: str) -> str:
    """The layer of a module named ``faust_eos.x.y`` (or ``faust_eos``)."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    return "top" if parts[0] in TOP_MODULES else parts[0]


def library_imports(path: Path) -> list[str]:
    """The library modules ``path`` imports, at run time or for type checking."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("faust_eos"):
            if node.module == "faust_eos":
                found += [f"faust_eos.{alias.name}" for alias in node.names if alias.name in TOP_MODULES
                          or alias.name == "faust_internals"]
            else:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("faust_eos")]
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(LIBRARY.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(path.relative_to(LIBRARY)) for path in MODULES])
def test_a_module_imports_nothing_of_the_layers_above_its_own(path: Path):
    own = LAYERS.index(layer_of(module_name(path)))
    above = [imported for imported in library_imports(path) if LAYERS.index(layer_of(imported)) < own]
    assert above == []


def test_the_layer_rule_sees_an_import_that_goes_up():
    commit_side = LIBRARY / "committing" / "exactly_once.py"
    assert layer_of(module_name(commit_side)) == "committing"
    assert LAYERS.index(layer_of("faust_eos.consuming.consumer")) < LAYERS.index("committing")
    assert "faust_eos.state.staging" in library_imports(commit_side)


@pytest.mark.parametrize("guarantee, chosen, producer", [
    ("exactly_once", TransactionManager, ExactlyOnceProducer),
    ("at_least_once", AtLeastOnce, AtLeastOnceProducer),
])
def test_the_guarantee_and_its_producer_are_chosen_once_from_faust_s_processing_guarantee(guarantee, chosen,
                                                                                        producer):
    app = worker_app(guarantee)
    consumer = app.consumer
    assert isinstance(consumer, Consumer)
    assert type(consumer.guarantee) is chosen and consumer.guarantee is consumer.guarantee
    assert list(consumer.on_init_dependencies()) == [consumer.guarantee]  # started and stopped with the consumer
    assert type(app.producer) is producer


def test_the_consumer_is_what_the_commit_side_may_call_and_both_guarantees_are_guarantees():
    def answers(cls: type, protocol: type) -> list[str]:
        return [name for name in vars(protocol) if not name.startswith("_") and not hasattr(cls, name)]

    assert answers(Consumer, ConsumerCalls) == []
    assert answers(TransactionManager, Guarantee) == []  # its methods; ``tables`` is set per instance
    assert answers(AtLeastOnce, Guarantee) == []
