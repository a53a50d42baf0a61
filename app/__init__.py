"""The example payment pipeline, built on the :mod:`faust_eos` library.

``faust -A app worker`` finds the app as ``app.app``, built by
:mod:`app.pipeline` the first time it is asked for, so that importing a module
of this package (a test, a tool) builds nothing it does not use.
"""
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from app.pipeline import app

        return app
    raise AttributeError(f"module 'app' has no attribute {name!r}")
