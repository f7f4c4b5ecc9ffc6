"""What the sync and async clients share: how each API call is written, how a push is cut into batches and
how its acknowledgements are checked. No I/O here, so both clients behave the same by construction."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode

from .errors import APIError, ProtocolError
from .models import BatchAck, ReadyQuestion, Retention

Record = Union[str, Mapping[str, Any]]


@dataclass(frozen=True)
class RequestSpec:
    """One HTTP request of the API, before it is sent.

    ``repeatable``: sending it twice does no harm, so it is retried even when its answer was lost.
    ``extra_timeout``: seconds the server may legitimately take beyond the client's timeout (a question
    waiting ``wait_ms`` for a record).
    """

    method: str
    path: str
    body: Optional[bytes] = None
    content_type: Optional[str] = None
    accept: str = "application/json"
    ok: Tuple[int, ...] = (200,)
    repeatable: bool = False
    extra_timeout: float = 0.0


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON; NaN and infinities are refused here (they are not JSON)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def loads(body: bytes, what: str) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"{what}: the answer is not JSON: {body[:200]!r}") from e


def session_path(session_id: str, suffix: str = "") -> str:
    if not isinstance(session_id, str) or not session_id:
        raise ValueError("a session id is a non-empty string")
    return "/v1/sessions/" + quote(session_id, safe="") + suffix


def _json_request(method: str, path: str, body: Mapping[str, Any], **kw: Any) -> RequestSpec:
    return RequestSpec(method, path, dumps(dict(body)), "application/json", **kw)


# ---- sessions -----------------------------------------------------------------------------------------


def create_session(
    session_id: Optional[str],
    *,
    system: Optional[str],
    template: Optional[str],
    scaffold: Optional[str],
    question_suffix: Optional[str],
    mode: Optional[str],
    query_budget: Optional[int],
    retention: Union[Retention, Mapping[str, Any], None],
    ready: Union[ReadyQuestion, Mapping[str, Any], None],
    extra_fields: Optional[Mapping[str, Any]],
) -> RequestSpec:
    body: Dict[str, Any] = {}
    for key, value in (
        ("id", session_id),
        ("system", system),
        ("template", template),
        ("scaffold", scaffold),
        ("question_suffix", question_suffix),
        ("mode", mode),
        ("query_budget", query_budget),
    ):
        if value is not None:
            body[key] = value
    if retention is not None:
        body["retention"] = retention.to_json() if isinstance(retention, Retention) else dict(retention)
    if ready is not None:
        body["ready"] = ready.to_json() if isinstance(ready, ReadyQuestion) else dict(ready)
    if extra_fields:
        body.update(extra_fields)
    # Not repeatable: a create whose answer was lost and is sent again answers 409 for its own session.
    return _json_request("POST", "/v1/sessions", body, ok=(201,))


def import_session(data: bytes, session_id: Optional[str]) -> RequestSpec:
    path = "/v1/sessions" + ("?" + urlencode({"id": session_id}) if session_id is not None else "")
    return RequestSpec("POST", path, bytes(data), "application/octet-stream", ok=(201,))


def get_session(session_id: str) -> RequestSpec:
    return RequestSpec("GET", session_path(session_id), repeatable=True)


def list_sessions() -> RequestSpec:
    return RequestSpec("GET", "/v1/sessions", repeatable=True)


def delete_session(session_id: str) -> RequestSpec:
    return RequestSpec("DELETE", session_path(session_id))


def export_session(session_id: str) -> RequestSpec:
    return RequestSpec("GET", session_path(session_id, "/snapshot"), accept="application/octet-stream", repeatable=True)


def save_session(session_id: str) -> RequestSpec:
    return RequestSpec("POST", session_path(session_id, "/save"), repeatable=True)


def unload_session(session_id: str) -> RequestSpec:
    return RequestSpec("POST", session_path(session_id, "/unload"), repeatable=True)


def load_session(session_id: str) -> RequestSpec:
    return RequestSpec("POST", session_path(session_id, "/load"), repeatable=True)


def context(session_id: str, question: Optional[str]) -> RequestSpec:
    suffix = "/context" + ("?" + urlencode({"question": question}) if question is not None else "")
    return RequestSpec("GET", session_path(session_id, suffix), repeatable=True)


def window_records(session_id: str, last: Optional[int]) -> RequestSpec:
    suffix = "/records" + (f"?last={int(last)}" if last is not None else "")
    return RequestSpec("GET", session_path(session_id, suffix), repeatable=True)


def health() -> RequestSpec:
    # /health answers 503 {"status": "loading"} while the model loads: both are answers, not failures.
    return RequestSpec("GET", "/health", ok=(200, 503), repeatable=True)


# ---- queries and flash --------------------------------------------------------------------------------


def query_body(
    question: str,
    *,
    max_tokens: Optional[int],
    stop: Union[str, Sequence[str], None],
    temperature: Optional[float],
    top_p: Optional[float],
    top_k: Optional[int],
    seed: Optional[int],
    min_seq: Optional[int],
    wait_ms: Optional[int],
    details: bool,
    stream: bool,
    extra_fields: Optional[Mapping[str, Any]],
    json_schema: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"question": question}
    for key, value in (
        ("max_tokens", max_tokens),
        ("temperature", temperature),
        ("top_p", top_p),
        ("top_k", top_k),
        ("seed", seed),
        ("min_seq", min_seq),
        ("wait_ms", wait_ms),
    ):
        if value is not None:
            body[key] = value
    if stop is not None:
        body["stop"] = [stop] if isinstance(stop, str) else list(stop)
    if json_schema is not None:
        body["json_schema"] = dict(json_schema)
    if details:
        body["details"] = True
    if stream:
        body["stream"] = True
    if extra_fields:
        body.update(extra_fields)
    return body


def query(session_id: str, body: Mapping[str, Any]) -> RequestSpec:
    # A question changes nothing in the session: one whose answer was lost may be asked again. It may wait
    # wait_ms (default 10 s) for a record before its own work starts.
    extra = 0.0
    if body.get("min_seq"):
        wait_ms = body.get("wait_ms")
        extra = (float(wait_ms) if isinstance(wait_ms, (int, float)) else 10000.0) / 1000.0
    accept = "text/event-stream" if body.get("stream") else "application/json"
    return RequestSpec(
        "POST",
        session_path(session_id, "/query"),
        dumps(dict(body)),
        "application/json",
        accept=accept,
        repeatable=True,
        extra_timeout=extra,
    )


def add_flash(
    session_id: str, question: str, max_tokens: Optional[int], json_schema: Optional[Mapping[str, Any]] = None
) -> RequestSpec:
    body: Dict[str, Any] = {"question": question}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if json_schema is not None:
        body["json_schema"] = dict(json_schema)
    return _json_request("POST", session_path(session_id, "/flash"), body, ok=(201,))


def list_flash(session_id: str) -> RequestSpec:
    return RequestSpec("GET", session_path(session_id, "/flash"), repeatable=True)


def remove_flash(session_id: str, fid: str) -> RequestSpec:
    return RequestSpec("DELETE", session_path(session_id, "/flash/" + quote(fid, safe="")))


def events(session_id: str) -> RequestSpec:
    return RequestSpec("GET", session_path(session_id, "/events"), accept="text/event-stream", repeatable=True)


# ---- push ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    offset: int  # index of the first record in the caller's records
    records: List[Record]
    body: bytes


def _encode_record(record: Record, index: int) -> bytes:
    if isinstance(record, str):
        return dumps(record)
    if isinstance(record, Mapping):
        try:
            return dumps(dict(record))
        except TypeError as e:  # a value JSON cannot hold
            raise TypeError(f"records[{index}]: {e}") from e
        except ValueError as e:  # NaN or an infinity
            raise ValueError(f"records[{index}]: {e}") from e
    raise TypeError(f"records[{index}]: a record is a str or a mapping of field to str/number, not {type(record).__name__}")


_BODY_OVERHEAD = len(b'{"records":[]}')


def batches(records: Iterable[Record], batch_size: int, max_batch_bytes: int) -> Iterator[Batch]:
    """Cuts ``records`` into request bodies of at most ``batch_size`` records and ``max_batch_bytes`` bytes
    (a single record larger than that goes alone). Lazy: an endless iterator of records is pushed batch by
    batch as it yields."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    pending: List[Record] = []
    parts: List[bytes] = []
    size = _BODY_OVERHEAD
    offset = 0
    index = 0

    def flush() -> Batch:
        return Batch(offset, list(pending), b'{"records":[' + b",".join(parts) + b"]}")

    for record in records:
        encoded = _encode_record(record, index)
        grown = size + len(encoded) + (1 if parts else 0)
        if parts and (len(parts) >= batch_size or grown > max_batch_bytes):
            yield flush()
            offset += len(pending)
            pending, parts, size = [], [], _BODY_OVERHEAD
            grown = size + len(encoded)
        pending.append(record)
        parts.append(encoded)
        size = grown
        index += 1
    if parts:
        yield flush()


def check_ack(body: Any, batch: Batch, previous_last_seq: Optional[int], attempts: int) -> BatchAck:
    """The acknowledgement of ``batch`` from a 202, checked against what the API promises: the whole batch
    is accepted (a bad record refuses the whole body), its records are numbered consecutively, after
    everything acknowledged before."""
    if not isinstance(body, dict):
        raise ProtocolError(f"push: expected a JSON object, got {body!r}")
    try:
        accepted = int(body["accepted"])
        first_seq = int(body["first_seq"])
        last_seq = int(body["last_seq"])
        dropped = int(body.get("dropped", 0))
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(f"push: the acknowledgement lacks accepted/first_seq/last_seq: {body!r}") from e
    n = len(batch.records)
    if accepted != n:
        raise ProtocolError(f"push: the server accepted {accepted} of a batch of {n} records: {body!r}")
    if n and last_seq - first_seq + 1 != n:
        raise ProtocolError(f"push: {n} records numbered {first_seq}..{last_seq}: {body!r}")
    if n and previous_last_seq is not None and first_seq <= previous_last_seq:
        raise ProtocolError(
            f"push: a batch numbered from {first_seq} after one acknowledged up to {previous_last_seq}: {body!r}"
        )
    return BatchAck(
        offset=batch.offset,
        size=n,
        accepted=accepted,
        first_seq=first_seq,
        last_seq=last_seq,
        dropped=dropped,
        attempts=attempts,
    )


def settle_lost_batch(before: int, seen: int, size: int) -> Optional[bool]:
    """Was a batch whose answer was lost accepted? ``before``: the session's ``last_seq_pushed`` before it
    was sent; ``seen``: after. ``True``/``False`` when the numbers tell, ``None`` when another writer's
    records make them ambiguous."""
    if seen == before:
        return False
    if seen == before + size:
        return True
    return None


_RECORD_FIELD = re.compile(r"^records\[(\d+)\](.*)$", re.S)


def renumber(error: APIError, offset: int) -> APIError:
    """``error`` with ``records[i]`` in its field turned into the caller's index ``records[offset + i]``."""
    if offset == 0 or not error.field:
        return error
    m = _RECORD_FIELD.match(error.field)
    if not m:
        return error
    return error._with_field(f"records[{offset + int(m.group(1))}]{m.group(2)}")


def parse_retry_delay(retry_ms: Optional[int]) -> Optional[float]:
    """An SSE ``retry:`` field as seconds."""
    if retry_ms is None or retry_ms < 0 or math.isinf(retry_ms):
        return None
    return retry_ms / 1000.0
