"""How Kueue bounds the messages it writes (its ``pkg/util/api``): an Event's note at 1024 bytes, a
condition's or an admission check's message at 32 KiB, each cut with " ..." in the last four bytes. Pure: the
scheduler cuts the check messages it decides, the connectors the Events and the creation errors they
record."""

from __future__ import annotations

EVENT_MESSAGE_BYTES = 1024
CONDITION_MESSAGE_BYTES = 32 * 1024


def truncate_message(message: str, limit: int = EVENT_MESSAGE_BYTES) -> str:
    """Kueue's ``api.TruncateEventMessage``: at most 1024 bytes, cut to 1020 plus " ..." (bytes of a character
    cut in two each read as U+FFFD, as Go's JSON encoding writes them); with ``limit`` 32 KiB, its
    ``api.TruncateConditionMessage``."""
    if len(message) <= limit // 4:
        return message  # no character takes more than four bytes
    data = message.encode()
    if len(data) <= limit:
        return message
    head = data[: limit - 4].decode("utf-8", errors="surrogateescape")
    return "".join("\ufffd" if "\udc80" <= c <= "\udcff" else c for c in head) + " ..."
