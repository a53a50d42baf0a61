"""Exactly-once processing for any Faust app.

Enable it with one line: point the app at the ``eos://`` transport and ask
for exactly-once::

    app = faust.App("my-app", broker="eos://localhost:9092", processing_guarantee="exactly_once")

(``eos://`` is registered for Faust when this package is installed, through the
``faust.transports`` entry point; importing :mod:`app.eos` registers it too.)
How it works: :mod:`app.eos.transport`; the commit itself:
:mod:`app.eos.transaction`.
"""
from faust.transport.drivers import TRANSPORTS

TRANSPORTS.aliases.setdefault("eos", "app.eos.transport:Transport")
