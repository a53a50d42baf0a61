"""faust-eos: the exactly-once layer (:mod:`app.eos`) and the app built on it.

``faust -A app worker`` finds the app as ``app.app``, built by
:mod:`app.pipeline` the first time it is asked for. Built on first use rather
than at import so that another Faust app can use ``eos://`` (which imports
:mod:`app.eos`) without building this one.
"""
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from app.pipeline import app

        return app
    raise AttributeError(f"module 'app' has no attribute {name!r}")
