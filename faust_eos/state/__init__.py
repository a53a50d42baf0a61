"""State: records staged until their commit, and tables that hold only committed writes.

:mod:`~faust_eos.state.staging` keeps output records by the input partition and offset
they commit with; :mod:`~faust_eos.state.table_writes` and
:mod:`~faust_eos.state.table_state` keep table writes until their commit;
:mod:`~faust_eos.state.store` is the ``eos-rocksdb://`` store; :mod:`~faust_eos.state.sweep`
deletes expired entries.
"""
