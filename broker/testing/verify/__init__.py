"""strom-verify: a Jepsen-style durability check against any Kafka-compatible cluster, and
the delivery checker strom's fault tests use too (one implementation).

- `checker`: `Checker`, `CheckReport`, `make_value`, `parse_value`: events in, faults out.
- `workload`: `RateProducer` and `read_back`, the checker's drivers on strom's own client.
- `cluster_view`: the topic, its leaders and the live brokers, over the Kafka protocol.
- `local_cluster`: the brokers of a local strom cluster by their pid files (kill -9, SIGSTOP,
  SIGCONT, start again).
- `faults`: the fault kinds (a registry: `register`) and the schedule that injects them.
- `netns_cluster`: the cluster `--netns-cluster N` starts itself, ZooKeeper and each broker in
  a network namespace of its own; `partition_faults`: the network partitions cut in it.
- `summary`: the table, JSON and exit code of a run.
- `cli`: the `strom-verify` command (`bin/strom-verify.sh`).
"""
from broker.testing.verify.checker import Checker, CheckReport, make_value, parse_value

__all__ = ["Checker", "CheckReport", "make_value", "parse_value"]
