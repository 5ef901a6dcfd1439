"""Client quotas (Kafka's KIP-13, KIP-55, KIP-124, KIP-219, KIP-546).

  rate.py      sampled rate windows with Kafka's first-window rule (sans-io)
  entities.py  quota entities and keys; which of the eight levels applies to a connection
  manager.py   sensors per (user, client-id) and throttle times (sans-io)
  service.py   the configs from the metadata store put in force; Describe/Alter logic

The request path (broker.server.dispatch) records produce request bytes, fetch response
bytes and request handler time, sets throttle_time_ms in the response and has the listener
mute the connection for that long (broker.server.network).
"""
