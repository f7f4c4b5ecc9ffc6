"""The exceptions this client raises.

Every error the server returns is one JSON body, ``{"type": "error", "error": {"type", "message", "field"?}}``
(docs/api.md, "Errors"); the same inner object travels in the ``error`` events of a streamed answer and of a
session's event stream. Each error ``type`` has its own exception class here, so that callers can catch what
they can act on (``except QuotaExceededError``) and read the request field at fault (``err.field``).

Failures that happen before the server answered are ``TransportError``s: ``ConnectError`` when the request
never reached the server (safe to send again), ``ConnectionLostError`` when it may have (the answer was lost).
That distinction is what lets ``push`` retry without ever sending an acknowledged batch twice.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Type

if TYPE_CHECKING:
    from .models import PushResult

__all__ = [
    "AoiError",
    "APIError",
    "MalformedRequestError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "MethodNotAllowedError",
    "ConflictError",
    "TooLargeError",
    "InvalidValueError",
    "RefusedError",
    "OverloadedError",
    "QuotaExceededError",
    "NotReadyError",
    "ServerTimeoutError",
    "StorageError",
    "DamagedStateError",
    "InternalServerError",
    "TransportError",
    "ConnectError",
    "ConnectionLostError",
    "ProtocolError",
    "PushUncertainError",
    "ERROR_TYPES",
]


class AoiError(Exception):
    """The base of every exception this package raises."""


class APIError(AoiError):
    """An error answer from the server.

    ``status`` is the HTTP status. For an error that arrived inside a stream (an ``error`` event after a
    ``200``), it is the status the server maps that type to (docs/api.md's table), so that handling code does
    not depend on where the error came from.

    ``field`` names the request field at fault when the server names one (``"retention.max_tokens"``,
    ``"records[3].c"``). For a push split into batches, ``field`` is renumbered to index the caller's own list
    of records; ``server_field`` keeps what the server said about its batch.

    ``retry_after`` is the ``Retry-After`` header in seconds, when the answer had one. ``partial`` is set on
    errors raised by ``push``: what was acknowledged before the failure.
    """

    #: the error type string this class stands for ("invalid_value", ...); empty on the base class
    error_type: str = ""
    #: the HTTP status the server gives this type
    default_status: Optional[int] = None

    def __init__(
        self,
        message: str,
        *,
        status: Optional[int] = None,
        type: Optional[str] = None,
        field: Optional[str] = None,
        retry_after: Optional[float] = None,
        body: Optional[Mapping[str, Any]] = None,
        server_field: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status if status is not None else self.default_status
        self.type = type if type is not None else self.error_type
        self.field = field
        self.server_field = server_field if server_field is not None else field
        self.retry_after = retry_after
        self.body = dict(body) if body is not None else None
        self.partial: Optional[PushResult] = None

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        status = f"{self.status} " if self.status is not None else ""
        return f"{status}{self.type}{where}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, type={self.type!r}, "
            f"message={self.message!r}, field={self.field!r})"
        )

    def _with_field(self, field: Optional[str]) -> "APIError":
        """A copy whose ``field`` is ``field`` (the server's stays in ``server_field``)."""
        copy = type(self)(
            self.message,
            status=self.status,
            type=self.type,
            field=field,
            retry_after=self.retry_after,
            body=self.body,
            server_field=self.server_field,
        )
        copy.partial = self.partial
        return copy


class MalformedRequestError(APIError):
    """400: the body is not JSON, not UTF-8, not an object, or a header is wrong."""

    error_type = "malformed_request"
    default_status = 400


class UnauthorizedError(APIError):
    """401: a missing or wrong API key."""

    error_type = "unauthorized"
    default_status = 401


class ForbiddenError(APIError):
    """403: a tenant's key on an admin endpoint."""

    error_type = "forbidden"
    default_status = 403


class NotFoundError(APIError):
    """404: an unknown session (or another tenant's), flash query or route."""

    error_type = "not_found"
    default_status = 404


class MethodNotAllowedError(APIError):
    """405: the route exists with other methods."""

    error_type = "method_not_allowed"
    default_status = 405


class ConflictError(APIError):
    """409: the session id (or flash question) exists already, or a session asked to leave the cache works."""

    error_type = "conflict"
    default_status = 409


class TooLargeError(APIError):
    """413 (``field`` "body") or 431 (``field`` "headers"): over the server's size limits."""

    error_type = "too_large"
    default_status = 413


class InvalidValueError(APIError):
    """422: a field has the wrong type or value, or is unknown; ``field`` names it."""

    error_type = "invalid_value"
    default_status = 422


class RefusedError(APIError):
    """A refusal that passes with time: nothing of the request was taken, and it may be sent again.

    The client retries these itself (``RetryPolicy``), waiting what ``Retry-After`` says; it raises one only
    when its retries are spent or the server asks for a longer wait than the policy allows.
    """


class OverloadedError(RefusedError):
    """429: no free session sequence, no completion slot in time, or too many connections."""

    error_type = "overloaded"
    default_status = 429


class QuotaExceededError(RefusedError):
    """429: the tenant is over a quota; ``field`` names it ("records_per_s", "sessions", ...)."""

    error_type = "quota_exceeded"
    default_status = 429


class NotReadyError(RefusedError):
    """503: the model is loading, the server is stopping, or a session is moving between cache and disk."""

    error_type = "not_ready"
    default_status = 503


class ServerTimeoutError(APIError):
    """504 ``timeout``: a read-your-writes wait (``min_seq``) ran out before the record was ingested."""

    error_type = "timeout"
    default_status = 504


class StorageError(APIError):
    """507: the data directory cannot take the write; nothing of the request was accepted."""

    error_type = "storage_error"
    default_status = 507


class DamagedStateError(APIError):
    """500: the session's stored state failed its checks; the session can only be deleted."""

    error_type = "damaged_state"
    default_status = 500


class InternalServerError(APIError):
    """500: a bug or an engine failure in the server."""

    error_type = "internal_error"
    default_status = 500


#: error type string -> exception class
ERROR_TYPES: Dict[str, Type[APIError]] = {
    cls.error_type: cls
    for cls in (
        MalformedRequestError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        MethodNotAllowedError,
        ConflictError,
        TooLargeError,
        InvalidValueError,
        OverloadedError,
        QuotaExceededError,
        NotReadyError,
        ServerTimeoutError,
        StorageError,
        DamagedStateError,
        InternalServerError,
    )
}

# A status without a recognisable body (a proxy's 502 page, say) still gets the most fitting class.
_STATUS_CLASSES: Dict[int, Type[APIError]] = {
    400: MalformedRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    413: TooLargeError,
    422: InvalidValueError,
    429: OverloadedError,
    431: TooLargeError,
    503: NotReadyError,
    504: ServerTimeoutError,
    507: StorageError,
}


class TransportError(AoiError):
    """No complete answer came from the server.

    ``request_sent`` says whether the request may have reached the server: ``False`` for ``ConnectError``
    (it did not, so sending it again is safe), ``True`` for ``ConnectionLostError``.
    """

    request_sent: bool = True

    def __init__(self, message: str, *, cause: Optional[BaseException] = None) -> None:
        super().__init__(message)
        self.message = message
        self.__cause__ = cause
        self.partial: Optional[PushResult] = None


class ConnectError(TransportError):
    """The request did not reach the server: no connection, or it broke before the request was sent whole."""

    request_sent = False


class ConnectionLostError(TransportError):
    """The request was sent but no complete answer came back: the server may or may not have acted on it."""

    request_sent = True


class ProtocolError(AoiError):
    """The server's answer is not what the API promises (a body that is not JSON, sequence numbers that do
    not add up). Not retried: it points at a proxy in the way or a client/server version mismatch."""


class PushUncertainError(AoiError):
    """A batch of records may or may not have been accepted, and the client could not tell which.

    Raised by ``push`` when a batch's answer was lost and the session's ``last_seq_pushed`` moved by a number
    that is neither 0 (not accepted: the client sends it again) nor the batch's size (accepted): another
    writer pushed to the session meanwhile. ``records`` is the batch, ``offset`` the index of its first record
    in the caller's list, ``partial`` what was acknowledged before it, ``seen`` and ``expected`` the sequence
    numbers compared.
    """

    def __init__(
        self,
        message: str,
        *,
        records: list,
        offset: int,
        partial: "PushResult",
        before: Optional[int],
        seen: Optional[int],
        cause: Optional[BaseException] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.records = records
        self.offset = offset
        self.partial = partial
        self.before = before
        self.seen = seen
        self.__cause__ = cause


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date; ``None`` if unusable."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def error_from_object(
    obj: Any,
    *,
    status: Optional[int] = None,
    retry_after: Optional[float] = None,
    body: Optional[Mapping[str, Any]] = None,
) -> APIError:
    """The exception for an inner error object ``{"type", "message", "field"?}``."""
    if not isinstance(obj, Mapping):
        obj = {}
    err_type = obj.get("type") if isinstance(obj.get("type"), str) else None
    message = obj.get("message") if isinstance(obj.get("message"), str) else None
    field = obj.get("field") if isinstance(obj.get("field"), str) else None
    if err_type in ERROR_TYPES:
        cls: Type[APIError] = ERROR_TYPES[err_type]
    elif status is not None:
        cls = _STATUS_CLASSES.get(status, InternalServerError if status >= 500 else APIError)
    else:
        cls = APIError
    if retry_after is None and isinstance(obj.get("retry_after"), (int, float)):
        retry_after = float(obj["retry_after"])  # the WebSocket form of Retry-After
    if err_type is None:
        err_type = cls.error_type or (f"http_{status}" if status is not None else "error")
    if message is None:
        message = f"HTTP {status}" if status is not None else "error"
    return cls(
        message,
        status=status,
        type=err_type,
        field=field,
        retry_after=retry_after,
        body=body if body is not None else (obj if isinstance(obj, Mapping) else None),
    )


def error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> APIError:
    """The exception for a non-success HTTP answer (``headers`` keys in lower case)."""
    retry_after = parse_retry_after(headers.get("retry-after"))
    parsed: Any = None
    try:
        parsed = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        parsed = None
    if isinstance(parsed, Mapping) and isinstance(parsed.get("error"), Mapping):
        return error_from_object(parsed["error"], status=status, retry_after=retry_after, body=parsed)
    text = body.decode("utf-8", "replace").strip()[:500]
    return error_from_object(
        {"message": f"HTTP {status}" + (f": {text}" if text else "")},
        status=status,
        retry_after=retry_after,
        body=None,
    )
