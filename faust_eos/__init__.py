"""Exactly-once processing for any Faust app.

Enable it with one line: point the app at the ``eos://`` transport and ask
for exactly-once::

    app = faust.App("my-app", broker="eos://localhost:9092", processing_guarantee="exactly_once")

(``eos://`` is registered for Faust when this package is installed, through the
``faust.transports`` entry point; importing :mod:`faust_eos` registers it too.)
How it works: :mod:`faust_eos.transport`; the commit itself:
:mod:`faust_eos.transaction`.
"""
from faust.transport.drivers import TRANSPORTS

TRANSPORTS.aliases.setdefault("eos", "faust_eos.transport:Transport")
