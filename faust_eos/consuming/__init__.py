"""The consumer side: what the agents are handed, and how far a commit may reach.

:mod:`~faust_eos.consuming.consumer` is Faust's consumer with delivery decided by
:mod:`~faust_eos.consuming.delivery`; :mod:`~faust_eos.consuming.recovery_reads` answers
Faust's table recovery; :mod:`~faust_eos.consuming.timer` paces the commits. It calls the
commit side (:mod:`faust_eos.committing`) through the guarantee it chose, never the other way.
"""
