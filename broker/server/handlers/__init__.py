"""One module per API family; importing this package registers every handler."""
from . import (api_versions, configs, controller_requests, coordinator, fetch, groups,  # noqa: F401
               metadata, offset_commit, offsets, produce, producer_id, topics, transactions,
               txn_markers)
