"""Stock Faust on the pipeline's two hops, a reference line: ``faust -A benchmarks.stock_faust worker``.

The app of :mod:`benchmarks.two_hops` on Faust's own transport (``kafka://``) and
store (``rocksdb://``), under at_least_once.
"""
from benchmarks.two_hops import two_hop_app
from config import settings

app = two_hop_app(f"{settings.app_id}-stock", broker=f"kafka://{settings.bootstrap_servers}", store="rocksdb://",
                  guarantee="at_least_once")
