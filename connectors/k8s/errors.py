"""API-server failures as the project's errors: the HTTP status decides the class, so callers react by type."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from events.errors import KueueEsError


class KubeError(KueueEsError):
    """A request to the Kubernetes API failed. ``retriable``: the same request may succeed later."""

    retriable: ClassVar[bool] = False

    def __init__(self, message: str, status: int = 0, reason: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.detail = detail or message
        """The apiserver's own words (its Status ``message``), as a Go client's error reads: what Kueue
        quotes."""


class Unavailable(KubeError):
    """No answer (connection refused or cut, timeout) or a 5xx/429: try again."""

    retriable: ClassVar[bool] = True


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """409: the object changed since the resourceVersion (or uid) the write was conditioned on."""


class AlreadyExists(Conflict):
    pass


class Gone(KubeError):
    """410: the resourceVersion a list or watch asked for is too old; relist."""


class Forbidden(KubeError):
    pass


class Invalid(KubeError):
    """422 (or 400): the apiserver rejected the object itself; retrying the same write cannot help."""


class _Status(msgspec.Struct, rename="camel"):
    message: str = ""
    reason: str = ""
    code: int = 0


def from_response(status: int, body: bytes, what: str) -> KubeError:
    try:
        st = msgspec.json.decode(body, type=_Status)
    except (msgspec.DecodeError, msgspec.ValidationError):
        st = _Status(message=body[:200].decode(errors="replace"))
    text = f"{what}: {status} {st.reason or ''}".rstrip() + (f": {st.message}" if st.message else "")
    cls: type[KubeError]
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = AlreadyExists if st.reason == "AlreadyExists" else Conflict
    elif status == 410:
        cls = Gone
    elif status in (401, 403):
        cls = Forbidden
    elif status in (400, 422):
        cls = Invalid
    elif status == 429 or status >= 500:
        cls = Unavailable
    else:
        cls = KubeError
    return cls(text, status, st.reason, st.message)
