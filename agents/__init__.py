"""Stream logic: the agents of the payment aggregation pipeline (see agents.payments)."""
