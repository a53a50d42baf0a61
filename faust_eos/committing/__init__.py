"""The commit side: where an event's records wait, and how they commit.

The guarantee is chosen once per worker, behind one interface
(:class:`~faust_eos.committing.guarantee.Guarantee`): exactly-once
(:mod:`~faust_eos.committing.exactly_once`, one transaction per commit round:
:mod:`~faust_eos.committing.commit`, :mod:`~faust_eos.committing.transaction`) or
at-least-once (:mod:`~faust_eos.committing.at_least_once`), both producing through
:mod:`~faust_eos.committing.produce`. It reads and judges committed offsets
(:mod:`~faust_eos.committing.offsets`) and calls the consumer only through
:class:`~faust_eos.committing.guarantee.ConsumerCalls`.
"""
