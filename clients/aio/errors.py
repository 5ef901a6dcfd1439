"""Errors raised by the asyncio client core that are not broker error codes.

Broker errors (a wire error code in a response) are the classes of
`clients.protocol.errors`, all subclasses of `KafkaError` with a `code`. The errors here
describe what happened to the *connection* and have no wire code, so a caller can always
tell "the broker said no" from "we never got an answer":

    KafkaClientError
      KafkaConnectionError   (also a ConnectionError)  retriable: connect failed, the
                                                       connection was lost or closed
      KafkaTimeoutError      (also a TimeoutError)     retriable: no response in time

`UnsupportedVersionError` is the error table's class for UNSUPPORTED_VERSION (35): raised
when the broker and this client share no version of an API, as Kafka's clients do.
"""
from __future__ import annotations

from clients.protocol.errors import BY_NAME, KafkaError

__all__ = ["KafkaClientError", "KafkaConnectionError", "KafkaTimeoutError", "RecordDeserializationError",
           "UnsupportedVersionError"]


class KafkaClientError(Exception):
    """Base of client-side errors (no wire error code)."""

    retriable: bool = False


class KafkaConnectionError(KafkaClientError, ConnectionError):
    """The connection to a broker could not be opened, was lost, or was closed; requests
    in flight on it have no answer. Retriable on a new connection."""

    retriable = True


class KafkaTimeoutError(KafkaClientError, TimeoutError):
    """A request got no response within its timeout; its connection has been closed."""

    retriable = True


UnsupportedVersionError: type[KafkaError] = BY_NAME["UNSUPPORTED_VERSION"]


class RecordDeserializationError(KafkaClientError):
    """A deserializer failed on the record at `offset` of `partition` (Kafka's
    RecordDeserializationException). The consumer's position stays on that record, so
    each poll() raises again until the application seeks past it; the original error is
    the `__cause__`."""

    def __init__(self, partition: object, offset: int, cause: BaseException):
        super().__init__(f"error deserializing the record at offset {offset} of {partition}: "
                         f"{cause!r}; seek past it to continue")
        self.partition = partition
        self.offset = offset
