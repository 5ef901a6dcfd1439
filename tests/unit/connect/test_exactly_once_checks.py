"""KIP-618's checks when a source connector is created on a worker with exactly-once
support: `exactly.once.support=required` needs the connector's SUPPORTED, and only
poll() batches are transaction boundaries in strom."""
import pytest

from clients.connect.connectors.file_sink import FileStreamSinkConnector
from clients.connect.connectors.file_source import FileStreamSourceConnector
from clients.connect.errors import BadRequestError
from clients.connect.runtime.distributed import check_exactly_once


def test_required_and_supported_is_accepted():
    check_exactly_once(FileStreamSourceConnector, {"file": "/tmp/x", "topic": "t",
                                                   "exactly.once.support": "required"})


def test_required_but_unsupported_is_refused():
    with pytest.raises(BadRequestError, match="exactly-once"):     # stdin has no offsets
        check_exactly_once(FileStreamSourceConnector, {"topic": "t", "exactly.once.support": "required"})


def test_requested_and_unsupported_is_accepted():
    check_exactly_once(FileStreamSourceConnector, {"topic": "t"})


@pytest.mark.parametrize("boundary", ["interval", "connector"])
def test_other_transaction_boundaries_are_refused_by_name(boundary):
    with pytest.raises(BadRequestError, match="transaction.boundary"):
        check_exactly_once(FileStreamSourceConnector, {"file": "/x", "topic": "t",
                                                       "transaction.boundary": boundary})


def test_sinks_are_not_checked():
    check_exactly_once(FileStreamSinkConnector, {"topics": "t", "transaction.boundary": "interval"})
