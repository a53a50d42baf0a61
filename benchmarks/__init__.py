"""What exactly-once costs: the pipeline under both guarantees, side by side (``python -m benchmarks``)."""
