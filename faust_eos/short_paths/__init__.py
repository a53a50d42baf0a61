"""The short paths an app's topics, tables and streams take per event.

Faust's own classes, subclassed (:mod:`~faust_eos.short_paths.topic`,
:mod:`~faust_eos.short_paths.table`, :mod:`~faust_eos.short_paths.stream`) and given to an
ordinary app as its worker starts (:mod:`~faust_eos.short_paths.adoption`); fetched batches
handed out an event per record (:mod:`~faust_eos.short_paths.unpacking`) or whole
(:mod:`~faust_eos.short_paths.batches`); one path per event to where its records are staged
(:mod:`~faust_eos.short_paths.event_path`).
"""
