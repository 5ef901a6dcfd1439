"""strom's REST proxy: Kafka over HTTP with the API of Confluent's REST Proxy (v2 and v3).

An application of the client library, as Connect is: it imports the clients' public API,
never the broker, and speaks HTTP through aiohttp (the framework Connect's REST API uses).
`server.RestProxyServer` holds the routes of `v3_*` and `v2_*`, `kafka.ClientPool` the
Kafka clients they share, `main` the `kafka-rest-start.sh` entry point.
"""
