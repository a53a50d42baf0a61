"""The rules that keep faust-eos's reliance on Faust's private parts checkable.

* Only the tested releases of Faust and aiokafka are accepted.
* One door: only ``faust_eos/faust_internals/`` touches private names of
  Faust, aiokafka, mode, or of any object not its own.
* Each method faust-eos overrides keeps the parameters of Faust's, so every
  way Faust calls it still binds.
"""
from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import faust_eos
from faust_eos import faust_internals, transport
from faust_eos.state import store

LIBRARY = Path(faust_eos.__file__).parent
THE_DOOR = "faust_internals"  # the package that names each private part it touches
THIRD_PARTY = {"faust", "mode", "aiokafka"}
#: every module of the library but the door's, as its path inside the package ("committing/commit.py")
MODULES = sorted(str(path.relative_to(LIBRARY)) for path in LIBRARY.rglob("*.py")
                 if path.relative_to(LIBRARY).parts[0] != THE_DOOR)


# -- tested releases -------------------------------------------------------------
def test_untested_versions_is_none_for_the_installed_releases():
    assert faust_internals.untested_versions() is None
    assert faust_internals.TESTED_VERSIONS == {
        package: importlib.metadata.version(package) for package in ("faust-streaming", "aiokafka")
    }


def test_untested_versions_is_one_line_naming_each_wrong_release_and_the_tested_one():
    installed = {"faust-streaming": "0.16.0", "aiokafka": "0.13.0"}
    line = faust_internals.untested_versions(installed.__getitem__)
    assert line is not None and "\n" not in line
    assert "faust-streaming 0.16.0 (tested: 0.15.3)" in line and "aiokafka 0.13.0 (tested: 0.14.0)" in line
    assert "faust-streaming==0.15.3 aiokafka==0.14.0" in line


def test_untested_versions_names_a_package_that_is_not_installed():
    def version_of(package: str) -> str:
        if package == "aiokafka":
            raise importlib.metadata.PackageNotFoundError(package)
        return faust_internals.TESTED_VERSIONS[package]

    line = faust_internals.untested_versions(version_of)
    assert line is not None and "aiokafka not installed (tested: 0.14.0)" in line and "faust-streaming 0" not in line


def test_importing_the_transport_under_another_faust_release_exits_1_with_one_error_line_naming_the_versions():
    program = (
        "import importlib.metadata as metadata\n"
        "installed = metadata.version\n"
        "metadata.version = lambda name: '0.15.2' if name == 'faust-streaming' else installed(name)\n"
        "import faust_eos.transport\n"
        "print('imported')\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and "imported" not in result.stdout
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert "faust-streaming 0.15.2 (tested: 0.15.3)" in errors[0]


# -- one door ----------------------------------------------------------------------
def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_own(node: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own attributes."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def is_librdkafka_error_code(node: ast.Attribute) -> bool:
    # confluent-kafka names librdkafka's local error codes with a leading
    # underscore (KafkaError._TIMED_OUT): documented constants, not private parts
    return isinstance(node.value, ast.Name) and node.value.id == "KafkaError" and node.attr[1:].isupper()


def foreign_private_accesses(source: str) -> list[str]:
    """Each ``x._name`` (and ``getattr(x, "_name")``) where ``x`` is not the object itself, by line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            if not is_own(node.value) and not is_librdkafka_error_code(node):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2:
            name = node.args[1]
            if node.func.id in ("getattr", "setattr", "hasattr", "delattr") and isinstance(name, ast.Constant):
                if isinstance(name.value, str) and is_private(name.value):
                    found.append((node.lineno, ast.unparse(node)))
    return [f"line {line}: {text}" for line, text in sorted(found)]


def third_party_names(cls: type) -> set[str]:
    """Names (attributes, methods, annotations) the Faust, mode or aiokafka bases of ``cls`` define."""
    names: set[str] = set()
    for base in cls.__mro__[1:]:
        if base.__module__.split(".")[0] in THIRD_PARTY:
            names |= set(vars(base)) | set(vars(base).get("__annotations__", {}))
    return names


def faust_private_names_used(module: Any) -> Iterator[str]:
    """Each private name of a Faust base that a class of ``module`` defines, or reads on ``self``."""
    tree = ast.parse(inspect.getsource(module))
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for name, cls in vars(module).items():
        if not (inspect.isclass(cls) and cls.__module__ == module.__name__ and name in classes):
            continue
        theirs = {n for n in third_party_names(cls) if is_private(n) and n != "_abc_impl"}
        for node in ast.walk(classes[name]):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in theirs:
                yield f"{name}.{node.name} (line {node.lineno}) overrides Faust's private {node.name}"
            elif isinstance(node, ast.Attribute) and node.attr in theirs and is_own(node.value):
                yield f"{name} (line {node.lineno}) uses Faust's private {ast.unparse(node)}"


@pytest.mark.parametrize("module", MODULES)
def test_no_module_but_faust_internals_touches_a_private_attribute_of_another_object(module: str):
    assert foreign_private_accesses((LIBRARY / module).read_text()) == []


@pytest.mark.parametrize("module", MODULES)
def test_no_module_but_faust_internals_overrides_or_reads_a_private_name_of_faust(module: str):
    name = "faust_eos." + module[:-3].replace("/", ".").removesuffix("__init__")
    name = name.rstrip(".")
    assert list(faust_private_names_used(importlib.import_module(name))) == []


def test_the_one_door_scan_finds_what_it_forbids_and_allows_the_rest():
    source = (
        "consumer._acked[tp]\n"
        "getattr(store, '_dbs', None)\n"
        "self._staging\n"
        "super()._seek(tp, offset)\n"
        "KafkaError._TIMED_OUT\n"
        "message.__class__\n"
    )
    assert foreign_private_accesses(source) == [
        "line 1: consumer._acked",
        "line 2: getattr(store, '_dbs', None)",
    ]
    assert list(faust_private_names_used(faust_internals.consumer)) != []  # the door itself overrides them


# -- overrides keep Faust's parameters -----------------------------------------------
def faust_definition(cls: type, name: str) -> Any:
    for base in cls.__mro__[1:]:
        if base.__module__.split(".")[0] in THIRD_PARTY and name in vars(base):
            return vars(base)[name]
    return None


def overrides() -> Iterator[tuple[str, Any, Any]]:
    """Each method of faust-eos's Faust subclasses that replaces one of Faust's."""
    classes = (faust_internals.ConsumerHooks, transport.Consumer, transport.TransactionManager,
               transport.ExactlyOnceProducer, transport.AtLeastOnceProducer, store.Store)
    for cls in classes:
        for name, method in vars(cls).items():
            theirs = faust_definition(cls, name)
            if callable(method) and theirs is not None and name not in ("__init__", "__post_init__"):
                yield f"{cls.__name__}.{name}", method, theirs


def parameters(function: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name, ours, theirs", list(overrides()), ids=[entry[0] for entry in overrides()])
def test_each_override_keeps_the_names_kinds_and_defaults_of_fausts_parameters(name: str, ours: Any, theirs: Any):
    assert parameters(ours) == parameters(theirs), f"{name}{inspect.signature(ours)} vs {inspect.signature(theirs)}"
