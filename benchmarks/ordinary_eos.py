"""An ordinary Faust app on faust-eos, a reference line: ``faust -A benchmarks.ordinary_eos worker``.

The app of :mod:`benchmarks.two_hops`, with nothing of faust-eos in its code but its
broker (``eos://``) and store (``eos-rocksdb://``) URLs, under the run's guarantee.
"""
from benchmarks.two_hops import two_hop_app
from config import settings

app = two_hop_app(f"{settings.app_id}-ordinary", broker=f"eos://{settings.bootstrap_servers}",
                  store="eos-rocksdb://", guarantee=settings.processing_guarantee)
