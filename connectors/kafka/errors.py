"""aiokafka's exceptions turned into the project's errors, which say what failed and whether to retry."""

from __future__ import annotations

from aiokafka.errors import KafkaError

from events.errors import LogError


class KafkaLogError(LogError):
    """A Kafka operation failed; ``retriable`` says whether the same call may succeed later."""

    def __init__(self, message: str, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable  # type: ignore[misc]


class Fenced(KafkaLogError):
    """Another scheduler took over this shard (same transactional id, newer epoch)."""


def kafka_error(exc: BaseException, what: str) -> KafkaLogError:
    detail = str(exc) or type(exc).__name__
    retriable = bool(getattr(exc, "retriable", False)) or type(exc).__name__ in (
        "KafkaConnectionError", "KafkaTimeoutError", "RequestTimedOutError", "NodeNotReadyError",
        "NotLeaderForPartitionError", "LeaderNotAvailableError", "UnknownTopicOrPartitionError")
    if isinstance(exc, KafkaError) and type(exc).__name__ == "KafkaConnectionError":
        detail = f"no connection to the brokers ({detail})"
    return KafkaLogError(f"{what}: {detail}", retriable)
