"""The project's error tree. Every error says what is wrong and where, so a user can fix it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar


class KueueEsError(Exception):
    """Root of every error kueue-es raises on purpose."""

    exit_code: ClassVar[int] = 1


class InvalidInput(KueueEsError):
    """User input (a file, a flag, an object) is wrong; nothing was written. CLI exit code 2."""

    exit_code: ClassVar[int] = 2


class SchemaRefused(InvalidInput):
    """An object refused for the rules of its CRD (its OpenAPI schema and CEL rules: types, bounds, patterns, list
    maps, immutable fields), which the apiserver checks before any admission webhook and answers 422 ``Invalid``
    (not a webhook's 403). ``errors``: the field errors (``field `path`: problem``), in order; the message reads as
    any refusal's."""

    def __init__(self, where: str, errors: list[str]) -> None:
        self.where, self.errors = where, errors
        super().__init__(f"{where}: {aggregate(errors)}")


def refuse_field(problem: str | None, where: str, path: str) -> None:
    """Refuse field ``path`` of the object ``where`` names when a check found ``problem`` with it (None: none)."""
    if problem is not None:
        raise InvalidInput(f"{where}: field `{path}`: {problem}")


def aggregate(errors: Iterable[str]) -> str | None:
    """Several field errors as Kubernetes prints them together (its aggregate error): none, the one alone, or
    ``[a, b]`` with repeats dropped."""
    unique = list(dict.fromkeys(errors))
    if not unique:
        return None
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class LogError(KueueEsError):
    """Something is wrong with a log. ``retriable`` tells callers whether trying again may help."""

    retriable: ClassVar[bool] = False


class LogLocked(LogError):
    """Another process holds the single-writer lock. To the CLI, pointing a writing command at a log another
    writer holds is misuse (exit code 2), as a missing log is: nothing was read or written."""

    exit_code: ClassVar[int] = 2
    retriable: ClassVar[bool] = True


class LogClosed(LogError):
    pass


class CorruptRecord(LogError):
    """Stored bytes fail their checksum or framing somewhere other than a torn tail."""

    def __init__(self, segment: str, offset: int, position: int, detail: str) -> None:
        self.segment, self.offset, self.position = segment, offset, position
        super().__init__(
            f"corrupt record in segment {segment} at byte {position} (log offset {offset}): {detail}; "
            "the log was not modified — restore the segment from a replica or backup"
        )


class UndecodableRecord(LogError):
    """A frame is intact but its event cannot be decoded (unknown type, wrong field type)."""

    def __init__(self, offset: int, detail: str) -> None:
        self.offset = offset
        super().__init__(
            f"cannot decode event at log offset {offset}: {detail}; "
            "upgrade kueue-es, or read with --quarantine to set it aside and report it"
        )


class InvalidRecord(LogError):
    """An event decodes, but holds an object the projections cannot take (a quantity that is not one): written
    by a producer that did not check it, as ``kueue-es import`` now does."""

    def __init__(self, offset: int, detail: str) -> None:
        self.offset, self.detail = offset, detail
        super().__init__(f"the event at log offset {offset} holds an invalid object: {detail}; "
                         "`kueue-es replay --quarantine` sets it aside and reports it")
