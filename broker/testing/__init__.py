"""Tools for testing with strom and against faults, shipped with it.

- `pytest_plugin`: the `strom_broker` and `strom_cluster` fixtures (a pytest11 entry point).
- `containers`: `StromContainer` and `StromClusterContainer` for testcontainers.
- `verify`: `strom-verify`, the durability checker the chaos tests use too.

They drive brokers as separate processes; nothing else in `broker` imports this package."""
