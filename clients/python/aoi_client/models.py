"""Typed views of what the server sends and accepts (docs/api.md).

Each view keeps the JSON it was read from in ``raw``, so that a field a newer server adds is never out of
reach, and reads only what it needs from it, so that an added field never breaks an older client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import APIError, ProtocolError, error_from_object

__all__ = [
    "Retention",
    "ReadyQuestion",
    "Regions",
    "RetentionState",
    "RecordCounts",
    "KvCells",
    "Budget",
    "FlashQuery",
    "Session",
    "BatchAck",
    "PushResult",
    "TokenCounts",
    "Timings",
    "Answer",
    "Event",
    "Snapshot",
    "SaveResult",
    "WindowRecord",
    "Context",
]


def _int(d: Mapping[str, Any], key: str, default: int = 0) -> int:
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _opt_int(d: Mapping[str, Any], key: str) -> Optional[int]:
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(d: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _opt_float(d: Mapping[str, Any], key: str) -> Optional[float]:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _str(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    return v if isinstance(v, str) else default


def _opt_str(d: Mapping[str, Any], key: str) -> Optional[str]:
    v = d.get(key)
    return v if isinstance(v, str) else None


def _opt_object(d: Mapping[str, Any], key: str) -> Optional[Dict[str, Any]]:
    v = d.get(key)
    return dict(v) if isinstance(v, Mapping) else None


def _obj(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = d.get(key)
    return v if isinstance(v, Mapping) else {}


def expect_object(value: Any, what: str) -> Dict[str, Any]:
    """``value`` if it is a JSON object, else a ``ProtocolError`` naming what was expected."""
    if not isinstance(value, dict):
        raise ProtocolError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return value


# ---- what the client sends ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Retention:
    """How much of the stream a session keeps (``retention`` of ``POST /v1/sessions``).

    ``max_tokens`` is exactly the window asked for, or a 422 naming ``retention.max_tokens`` when the
    session's sequence cannot hold it; never silently smaller.
    """

    max_tokens: Optional[int] = None
    max_records: Optional[int] = None
    eviction: Optional[str] = None  # "recompute" (exact, default) or "shift"
    evict_fraction: Optional[float] = None  # in [0, 1); default 0.25

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.max_records is not None:
            out["max_records"] = self.max_records
        if self.eviction is not None:
            out["eviction"] = self.eviction
        if self.evict_fraction is not None:
            out["evict_fraction"] = self.evict_fraction
        return out


@dataclass(frozen=True)
class ReadyQuestion:
    """A session's ready question: answered from the ready logits, without decoding, when one of ``vocab``
    leads by more than ``tau``."""

    question: str
    vocab: Sequence[str]
    tau: Optional[float] = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"question": self.question, "vocab": list(self.vocab)}
        if self.tau is not None:
            out["tau"] = self.tau
        return out


# ---- sessions -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Regions:
    system_tokens: int
    data_tokens: int
    scaffold_tokens: int
    records: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Regions":
        return cls(_int(d, "system_tokens"), _int(d, "data_tokens"), _int(d, "scaffold_tokens"), _int(d, "records"))


@dataclass(frozen=True)
class RetentionState:
    """The window the session holds: ``max_tokens`` is always set (the whole sequence when not asked for)."""

    max_tokens: Optional[int]
    max_records: Optional[int]
    evict_fraction: float

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RetentionState":
        return cls(_opt_int(d, "max_tokens"), _opt_int(d, "max_records"), _float(d, "evict_fraction"))


@dataclass(frozen=True)
class RecordCounts:
    """Every pushed record ends up exactly once in ``ingested``, ``dropped`` or ``rejected``."""

    pushed: int
    ingested: int
    dropped: int
    rejected: int
    evicted: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RecordCounts":
        return cls(_int(d, "pushed"), _int(d, "ingested"), _int(d, "dropped"), _int(d, "rejected"), _int(d, "evicted"))


@dataclass(frozen=True)
class KvCells:
    cells_used: int
    cells_reserved: int
    bytes: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "KvCells":
        return cls(_int(d, "cells_used"), _int(d, "cells_reserved"), _int(d, "bytes"))


@dataclass(frozen=True)
class Budget:
    """Background cost per data version, in milliseconds."""

    ingest_ms: float
    flash_ms: float
    background_ms: float
    data_interval_ms: float
    flash_rounds: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Budget":
        return cls(
            _float(d, "ingest_ms"),
            _float(d, "flash_ms"),
            _float(d, "background_ms"),
            _float(d, "data_interval_ms"),
            _int(d, "flash_rounds"),
        )


@dataclass(frozen=True)
class FlashQuery:
    """A registered flash question; the answer fields are ``None`` until its first round."""

    fid: str
    question: str
    max_tokens: int
    answer: Optional[str]
    logit_gap: Optional[float]
    version: Optional[int]
    eval_ms: Optional[float]
    json_schema: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FlashQuery":
        d = expect_object(d, "flash query")
        return cls(
            fid=_str(d, "fid"),
            question=_str(d, "question"),
            max_tokens=_int(d, "max_tokens"),
            answer=_opt_str(d, "answer"),
            logit_gap=_opt_float(d, "logit_gap"),
            version=_opt_int(d, "version"),
            eval_ms=_opt_float(d, "eval_ms"),
            json_schema=_opt_object(d, "json_schema"),
            raw=dict(d),
        )


@dataclass(frozen=True)
class Session:
    """A session as ``GET /v1/sessions/{id}`` shows it."""

    id: str
    tenant: str
    residency: str  # "resident", "on_disk", "restoring" or "damaged"
    mode: str
    eviction: str
    data_version: int
    queries: int
    regions: Regions
    retention: RetentionState
    last_seq_pushed: int
    last_seq_ingested: int
    pending: int
    records: RecordCounts
    tokens_ingested: int
    kv: KvCells
    query_budget: int
    flash: Tuple[FlashQuery, ...]
    created: float  # Unix seconds
    budget: Optional[Budget]
    damage: Optional[str]
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Session":
        d = expect_object(d, "session")
        flash = d.get("flash")
        return cls(
            id=_str(d, "id"),
            tenant=_str(d, "tenant"),
            residency=_str(d, "residency"),
            mode=_str(d, "mode"),
            eviction=_str(d, "eviction"),
            data_version=_int(d, "data_version"),
            queries=_int(d, "queries"),
            regions=Regions.from_json(_obj(d, "regions")),
            retention=RetentionState.from_json(_obj(d, "retention")),
            last_seq_pushed=_int(d, "last_seq_pushed"),
            last_seq_ingested=_int(d, "last_seq_ingested"),
            pending=_int(d, "pending"),
            records=RecordCounts.from_json(_obj(d, "records")),
            tokens_ingested=_int(d, "tokens_ingested"),
            kv=KvCells.from_json(_obj(d, "kv")),
            query_budget=_int(d, "query_budget"),
            flash=tuple(FlashQuery.from_json(f) for f in flash) if isinstance(flash, list) else (),
            created=_float(d, "created"),
            budget=Budget.from_json(d["budget"]) if isinstance(d.get("budget"), Mapping) else None,
            damage=_opt_str(d, "damage"),
            raw=dict(d),
        )


# ---- data ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchAck:
    """One batch of a push, as the server acknowledged it.

    ``first_seq``..``last_seq`` are the sequence numbers the server gave the batch's records, in the session's
    queue order across all connections. ``offset`` is the index of the batch's first record in the caller's
    list. ``recovered`` is true when the answer was lost and the batch was found accepted by reading the
    session's ``last_seq_pushed`` instead (``dropped`` is then unknown and counted as 0). ``attempts`` counts
    the requests the batch took.
    """

    offset: int
    size: int
    accepted: int
    first_seq: int
    last_seq: int
    dropped: int
    attempts: int = 1
    recovered: bool = False


@dataclass(frozen=True)
class PushResult:
    """The outcome of ``push``: every batch's acknowledgement, and their totals.

    ``first_seq`` is the first batch's first sequence number and ``last_seq`` the last batch's last: pass
    ``last_seq`` as ``min_seq`` to ``ask`` to read your own writes. ``contiguous`` is false when another
    writer's records landed between two of the batches (their numbers follow the session's queue order).
    ``dropped`` counts older pending records the session displaced to make room (a full queue), not records
    of this push.
    """

    batches: Tuple[BatchAck, ...] = ()
    retries: int = 0

    @property
    def accepted(self) -> int:
        return sum(b.accepted for b in self.batches)

    @property
    def dropped(self) -> int:
        return sum(b.dropped for b in self.batches)

    @property
    def first_seq(self) -> Optional[int]:
        for b in self.batches:
            if b.accepted:
                return b.first_seq
        return None

    @property
    def last_seq(self) -> Optional[int]:
        for b in reversed(self.batches):
            if b.accepted:
                return b.last_seq
        return None

    @property
    def contiguous(self) -> bool:
        taken = [b for b in self.batches if b.accepted]
        return all(b.first_seq == a.last_seq + 1 for a, b in zip(taken, taken[1:]))


# ---- queries ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenCounts:
    question: int
    answer: int


@dataclass(frozen=True)
class Timings:
    queue_ms: float
    prompt_ms: float
    generate_ms: float
    total_ms: float


@dataclass(frozen=True)
class Answer:
    """The answer to a question (``POST /v1/sessions/{id}/query``, or a stream's ``done`` event).

    ``path`` is "flash" (a cached flash answer), "speculative" (the ready logits) or "standard".
    ``details`` is the server's ``details`` object when it was asked for.
    """

    answer: str
    path: str
    data_version: int
    tokens: TokenCounts
    finish_reason: str
    logit_gap: Optional[float]
    timings: Timings
    details: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Answer":
        d = expect_object(d, "answer")
        tokens = _obj(d, "tokens")
        timings = _obj(d, "timings")
        details = d.get("details")
        return cls(
            answer=_str(d, "answer"),
            path=_str(d, "path"),
            data_version=_int(d, "data_version"),
            tokens=TokenCounts(_int(tokens, "question"), _int(tokens, "answer")),
            finish_reason=_str(d, "finish_reason"),
            logit_gap=_opt_float(d, "logit_gap"),
            timings=Timings(
                _float(timings, "queue_ms"),
                _float(timings, "prompt_ms"),
                _float(timings, "generate_ms"),
                _float(timings, "total_ms"),
            ),
            details=dict(details) if isinstance(details, Mapping) else None,
            raw=dict(d),
        )


# ---- events -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One event of a session's stream: ``data_updated``, ``flash_ready``, ``error``, ``warning``,
    ``session_deleted`` (the last one) or ``session_moved`` (a cluster's replica no longer holds the session:
    its stream ends, and the next connection resumes at the replica holding it now). ``id`` increases per
    session, across moves too; it is what a reconnection resumes after. ``data`` is the event's JSON object."""

    id: Optional[int]
    type: str
    data: Dict[str, Any]

    @property
    def error(self) -> Optional[APIError]:
        """For an ``error`` event, the exception it stands for (not raised): an ingestion that rejected a
        record, records dropped by a failed batch, a failed flash query."""
        if self.type != "error":
            return None
        return error_from_object(self.data)


# ---- snapshots and operations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """An exported session (``GET /v1/sessions/{id}/snapshot``): records up to ``last_seq`` are in it."""

    session_id: str
    data: bytes = field(repr=False)
    last_seq: Optional[int]
    data_version: Optional[int]


@dataclass(frozen=True)
class SaveResult:
    id: str
    bytes: int
    tokens: int
    last_seq: int
    copy_ms: float
    write_ms: float

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SaveResult":
        d = expect_object(d, "save")
        t = _obj(d, "timings")
        return cls(
            _str(d, "id"),
            _int(d, "bytes"),
            _int(d, "tokens"),
            _int(d, "last_seq"),
            _float(t, "copy_ms"),
            _float(t, "write_ms"),
        )


@dataclass(frozen=True)
class WindowRecord:
    """A record of a session's window as the model reads it (the rendered template line)."""

    seq: int
    text: str
    tokens: int


@dataclass(frozen=True)
class Context:
    """What a full recompute decodes (``GET /v1/sessions/{id}/context``)."""

    data_version: int
    tokens: List[int]
    question_tokens: List[int]
    text: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Context":
        d = expect_object(d, "context")
        tokens = d.get("tokens")
        qtokens = d.get("question_tokens")
        return cls(
            _int(d, "data_version"),
            [int(t) for t in tokens] if isinstance(tokens, list) else [],
            [int(t) for t in qtokens] if isinstance(qtokens, list) else [],
            _str(d, "text"),
        )
