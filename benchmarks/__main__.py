"""``python -m benchmarks``: see :mod:`benchmarks.run`."""
import sys

try:
    from benchmarks.run import cli
except ValueError as exc:  # config.ConfigError: a bad setting, found while the settings load
    sys.exit(f"error: {exc}")

cli()
