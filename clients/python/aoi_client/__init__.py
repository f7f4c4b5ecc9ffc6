"""A Python client for aoi's HTTP API (docs/api.md): sessions, pushing records, questions (whole or streamed),
flash questions and session events, in a sync (``Client``) and an asyncio (``AsyncClient``) flavour.

    from aoi_client import Client

    with Client("http://127.0.0.1:8080") as aoi:
        aoi.create_session("logs", retention={"max_tokens": 4000})
        pushed = aoi.push("logs", ["GET /a 200", "GET /b 500"])
        print(aoi.ask("logs", "Which path failed?", min_seq=pushed.last_seq).answer)
"""

from .async_client import AsyncAnswerStream, AsyncClient, AsyncEventStream
from .client import AnswerStream, Client, EventStream
from . import errors as _errors
from .errors import *  # noqa: F401,F403 (every error type, as errors.__all__ lists them)
from .models import (
    Answer,
    BatchAck,
    Budget,
    Context,
    Event,
    FlashQuery,
    KvCells,
    PushResult,
    ReadyQuestion,
    RecordCounts,
    Regions,
    Retention,
    RetentionState,
    SaveResult,
    Session,
    Snapshot,
    Timings,
    TokenCounts,
    WindowRecord,
)
from .retry import RetryPolicy
from .version import __version__

__all__ = [
    "__version__",
    "Client",
    "AsyncClient",
    "AnswerStream",
    "AsyncAnswerStream",
    "EventStream",
    "AsyncEventStream",
    "RetryPolicy",
    # models
    "Answer",
    "BatchAck",
    "Budget",
    "Context",
    "Event",
    "FlashQuery",
    "KvCells",
    "PushResult",
    "ReadyQuestion",
    "RecordCounts",
    "Regions",
    "Retention",
    "RetentionState",
    "SaveResult",
    "Session",
    "Snapshot",
    "Timings",
    "TokenCounts",
    "WindowRecord",
    # errors
    *_errors.__all__,
]
