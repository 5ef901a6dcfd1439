"""One module per API family; importing this package registers every handler."""
from . import (acls, api_versions, configs, controller_requests, coordinator, elect_leaders, fetch,  # noqa: F401
               groups, metadata, offset_commit, offsets, produce, producer_id, sasl, scram_users,
               reassignments, topics, transactions, txn_markers)
from . import describe_topic_partitions  # noqa: F401,E402
from . import client_quotas  # noqa: F401,E402
from . import log_dirs  # noqa: F401,E402
