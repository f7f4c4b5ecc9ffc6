"""Settings and small helpers both clients share."""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from typing import Any, Dict, Literal, Optional, Union

from ._sse import ServerSentEvent
from .errors import RefusedError
from .models import Event, Session
from .retry import RetryPolicy
from .version import __version__

#: what ``push`` does when a batch's answer is lost
Uncertain = Literal["verify", "raise", "resend"]

DEFAULT_BASE_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class ClientConfig:
    base_url: str
    headers: Dict[str, str]
    timeout: float
    retry: RetryPolicy
    batch_size: int
    max_batch_bytes: int

    @classmethod
    def make(
        cls,
        base_url: Optional[str],
        api_key: Optional[str],
        timeout: float,
        retry: Optional[RetryPolicy],
        batch_size: int,
        max_batch_bytes: int,
    ) -> "ClientConfig":
        url = (base_url or os.environ.get("AOI_SERVER") or DEFAULT_BASE_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("AOI_API_KEY")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if max_batch_bytes < 64:
            raise ValueError("max_batch_bytes is too small to hold a request")
        headers = {"User-Agent": f"aoi-client-python/{__version__}"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return cls(url, headers, timeout, retry or RetryPolicy(), batch_size, max_batch_bytes)


def check_uncertain(value: str) -> None:
    if value not in ("verify", "raise", "resend"):
        raise ValueError(f'on_uncertain must be "verify", "raise" or "resend", not {value!r}')


def session_id_of(session: Union[str, Session]) -> str:
    return session.id if isinstance(session, Session) else session


def event_from_sse(sse: ServerSentEvent) -> Event:
    """A session event from its SSE frame (``data`` is JSON; anything else is kept as ``{"text": ...}``)."""
    try:
        data: Any = json.loads(sse.data)
    except ValueError:
        data = {"text": sse.data}
    if not isinstance(data, dict):
        data = {"value": data}
    event_id: Optional[int] = None
    if sse.id is not None:
        try:
            event_id = int(sse.id)
        except ValueError:
            event_id = None
    return Event(id=event_id, type=sse.event, data=data)


def reconnect_delay(failure: BaseException, failures: int, server_retry_s: Optional[float]) -> float:
    """The wait before reconnecting an event stream after ``failures`` failed attempts in a row: what the
    server asked for (``Retry-After``, SSE ``retry:``), else 0.25 s doubling to 5 s, with jitter."""
    if isinstance(failure, RefusedError) and failure.retry_after is not None:
        return min(failure.retry_after, 60.0)
    base = server_retry_s if server_retry_s is not None else 0.25
    ceiling = min(5.0, base * (2 ** (failures - 1)))
    return random.uniform(ceiling / 2, ceiling)
