"""One module per API family; importing this package registers every handler."""
from . import api_versions, configs, fetch, metadata, offsets, produce, producer_id, topics  # noqa: F401
