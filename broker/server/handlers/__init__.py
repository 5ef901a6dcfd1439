"""One module per API family; importing this package registers every handler."""
from . import (api_versions, configs, coordinator, fetch, metadata, offsets, produce,  # noqa: F401
               producer_id, topics)
