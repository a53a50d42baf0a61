"""Developer tools of faust-eos: the local Kafka broker and friends."""
