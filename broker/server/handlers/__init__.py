"""One module per API family; importing this package registers every handler."""
from . import (api_versions, configs, coordinator, fetch, groups, metadata, offset_commit,  # noqa: F401
               offsets, produce, producer_id, topics)
