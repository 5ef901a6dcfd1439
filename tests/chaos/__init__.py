"""Fault-injection tests (marked slow) and the tools they share: `checker` (a client-agnostic
delivery checker: acknowledged, read back, lost, duplicated, out of order, offsets with two
different values), `ChaosProducer` and `read_back` (confluent-kafka feeding the checker)."""
