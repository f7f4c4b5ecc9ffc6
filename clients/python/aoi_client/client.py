"""The synchronous client: ``Client``."""

from __future__ import annotations

import collections
import ssl
import time
from typing import Any, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import _requests as api
from ._config import ClientConfig, Uncertain, check_uncertain, event_from_sse, reconnect_delay, session_id_of
from ._requests import Record, RequestSpec
from ._sse import SSEDecoder
from ._sync_http import Response, StreamResponse, SyncTransport
from .errors import (
    APIError,
    AoiError,
    ConnectError,
    ConnectionLostError,
    PushUncertainError,
    RefusedError,
    TransportError,
    error_from_object,
    error_from_response,
)
from .models import (
    Answer,
    BatchAck,
    Context,
    Event,
    FlashQuery,
    PushResult,
    ReadyQuestion,
    Retention,
    SaveResult,
    Session,
    Snapshot,
    WindowRecord,
    expect_object,
)
from .retry import RetryPolicy

__all__ = ["Client", "AnswerStream", "EventStream"]

SessionRef = Union[str, Session]


class Client:
    """A client of one aoi server. Thread-safe: threads may share it (each request takes its own connection).

    ``base_url`` defaults to ``$AOI_SERVER``, else ``http://127.0.0.1:8080``; ``api_key`` to ``$AOI_API_KEY``
    (as the ``aoi`` command's). ``timeout`` bounds connecting and each wait for data, in seconds. ``retry``
    says how refusals that pass (429, 503) and failed connections are retried. ``batch_size`` and
    ``max_batch_bytes`` are ``push``'s defaults: the server takes up to ``--max-body-bytes`` (16 MiB) a
    request, and smaller batches are acknowledged, and retried, sooner. ``ssl_context`` is for an
    ``https://`` base URL (aoi behind a TLS proxy); the default verifies the certificate.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        *,
        timeout: float = 60.0,
        retry: Optional[RetryPolicy] = None,
        batch_size: int = 256,
        max_batch_bytes: int = 1 << 20,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        self._config = ClientConfig.make(base_url, api_key, timeout, retry, batch_size, max_batch_bytes)
        self._transport = SyncTransport(
            self._config.base_url, timeout=timeout, headers=self._config.headers, ssl_context=ssl_context
        )

    @property
    def base_url(self) -> str:
        return self._config.base_url

    @property
    def retry(self) -> RetryPolicy:
        return self._config.retry

    def close(self) -> None:
        """Closes the kept-alive connections. (A closed client still works, without keeping connections.)"""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- plumbing ----

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def _call(self, spec: RequestSpec, *, retry: Optional[RetryPolicy] = None) -> Response:
        """Sends ``spec``, retrying what the policy allows; a non-success answer raises its typed error."""
        policy = retry or self._config.retry
        attempt = 0
        while True:
            failure: AoiError
            try:
                resp = self._transport.request(spec)
            except TransportError as e:
                failure = e
            else:
                if resp.status in spec.ok:
                    return resp
                failure = error_from_response(resp.status, resp.headers, resp.body)
            delay = policy.delay_for(failure, attempt, repeatable=spec.repeatable)
            if delay is None:
                raise failure
            attempt += 1
            self._sleep(delay)

    def _json(self, spec: RequestSpec) -> Any:
        return api.loads(self._call(spec).body, f"{spec.method} {spec.path}")

    def _open_stream(self, spec: RequestSpec, *, timeout: Optional[float] = None, headers: Optional[Mapping[str, str]] = None) -> StreamResponse:
        """Opens a server-sent event stream, retrying its opening as ``_call`` does."""
        policy = self._config.retry
        attempt = 0
        while True:
            failure: AoiError
            try:
                resp = self._transport.stream(spec, extra_headers=headers, timeout=timeout)
            except TransportError as e:
                failure = e
            else:
                if resp.status == 200:
                    return resp
                failure = error_from_response(resp.status, resp.headers, resp.read_all())
            delay = policy.delay_for(failure, attempt, repeatable=spec.repeatable)
            if delay is None:
                raise failure
            attempt += 1
            self._sleep(delay)

    # ---- operations ----

    def health(self) -> Dict[str, Any]:
        """``GET /health``: ``{"status": "ok", ...}``, or ``{"status": "loading"}`` while the model loads."""
        return expect_object(self._json(api.health()), "health")

    def wait_until_ready(self, timeout: float = 120.0, poll: float = 0.25) -> Dict[str, Any]:
        """Waits until ``/health`` says ``ok`` (the server is up and its model loaded)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                h = self.health()
                if h.get("status") == "ok":
                    return h
                last: object = h
            except TransportError as e:
                last = e
            if time.monotonic() >= deadline:
                raise ConnectError(f"the server at {self.base_url} was not ready within {timeout} s: {last}")
            self._sleep(poll)

    # ---- sessions ----

    def create_session(
        self,
        id: Optional[str] = None,
        *,
        system: Optional[str] = None,
        template: Optional[str] = None,
        scaffold: Optional[str] = None,
        question_suffix: Optional[str] = None,
        mode: Optional[str] = None,
        query_budget: Optional[int] = None,
        retention: Union[Retention, Mapping[str, Any], None] = None,
        ready: Union[ReadyQuestion, Mapping[str, Any], None] = None,
        extra_fields: Optional[Mapping[str, Any]] = None,
    ) -> Session:
        """Creates a session (``POST /v1/sessions``); every field is optional (the server names the session
        ``s1``, ``s2``, ... without ``id``). ``template`` renders object records (``"{t} C={c}"``); without it
        an object record reads as ``name=value`` text (docs/api.md, Decoding records). ``extra_fields`` passes fields this client does not know yet."""
        spec = api.create_session(
            id,
            system=system,
            template=template,
            scaffold=scaffold,
            question_suffix=question_suffix,
            mode=mode,
            query_budget=query_budget,
            retention=retention,
            ready=ready,
            extra_fields=extra_fields,
        )
        return Session.from_json(self._json(spec))

    def get_session(self, session: SessionRef) -> Session:
        return Session.from_json(self._json(api.get_session(session_id_of(session))))

    def list_sessions(self) -> List[Session]:
        body = expect_object(self._json(api.list_sessions()), "session list")
        return [Session.from_json(s) for s in body.get("sessions", [])]

    def delete_session(self, session: SessionRef, *, missing_ok: bool = False) -> bool:
        """Deletes a session; ``False`` when it did not exist and ``missing_ok`` is set."""
        try:
            self._call(api.delete_session(session_id_of(session)))
        except APIError as e:
            if missing_ok and e.type == "not_found":
                return False
            raise
        return True

    def export_session(self, session: SessionRef) -> Snapshot:
        """The session as a self-contained file, to ``import_session`` here or on a server with the same model."""
        sid = session_id_of(session)
        resp = self._call(api.export_session(sid))
        return Snapshot(
            session_id=sid,
            data=resp.body,
            last_seq=_header_int(resp.headers, "x-aoi-last-seq"),
            data_version=_header_int(resp.headers, "x-aoi-data-version"),
        )

    def import_session(self, snapshot: Union[Snapshot, bytes], id: Optional[str] = None) -> Session:
        """Brings an exported session back, under ``id`` or its old id."""
        data = snapshot.data if isinstance(snapshot, Snapshot) else bytes(snapshot)
        return Session.from_json(self._json(api.import_session(data, id)))

    def save_session(self, session: SessionRef) -> SaveResult:
        """A snapshot now, answered once it is on disk (422 naming ``data_dir`` on a memory-only server)."""
        return SaveResult.from_json(self._json(api.save_session(session_id_of(session))))

    def unload_session(self, session: SessionRef) -> None:
        """Moves the session to disk now (409 while it works)."""
        self._call(api.unload_session(session_id_of(session)))

    def load_session(self, session: SessionRef) -> float:
        """Brings the session back into the cache now; returns the milliseconds it took."""
        body = expect_object(self._json(api.load_session(session_id_of(session))), "load")
        timings = body.get("timings") if isinstance(body.get("timings"), dict) else {}
        return float(timings.get("load_ms", 0.0))

    def context(self, session: SessionRef, question: Optional[str] = None) -> Context:
        """What a full recompute would decode (for comparing with another server fed the same tokens)."""
        return Context.from_json(self._json(api.context(session_id_of(session), question)))

    def window_records(self, session: SessionRef, last: Optional[int] = None) -> List[WindowRecord]:
        """The newest records of the session's window as the model reads them (empty when not resident)."""
        body = expect_object(self._json(api.window_records(session_id_of(session), last)), "records")
        return [WindowRecord(int(r["seq"]), str(r["text"]), int(r["tokens"])) for r in body.get("records", [])]

    def wait_ingested(self, session: SessionRef, seq: int, *, timeout: float = 60.0, poll: float = 0.05) -> Session:
        """Polls the session until record ``seq`` is ingested and nothing is pending. (To ask about your own
        writes, ``ask(..., min_seq=seq)`` waits on the server instead.)"""
        deadline = time.monotonic() + timeout
        while True:
            s = self.get_session(session)
            if s.last_seq_ingested >= seq and s.pending == 0:
                return s
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"session {s.id}: record {seq} not ingested within {timeout} s "
                    f"(ingested up to {s.last_seq_ingested}, {s.pending} pending)"
                )
            self._sleep(poll)

    # ---- data ----

    def push(
        self,
        session: SessionRef,
        records: Iterable[Record],
        *,
        batch_size: Optional[int] = None,
        max_batch_bytes: Optional[int] = None,
        retry: Optional[RetryPolicy] = None,
        on_uncertain: Uncertain = "verify",
    ) -> PushResult:
        """Pushes records (``str`` lines, or JSON-able mappings: nested fields read as ``a.b``, see
        docs/api.md, Decoding records) in batches, one request each, in order; ``records`` may be any
        iterable, an endless one included.

        Refusals that pass (429, 503) and failed connections are retried per ``retry``, waiting what
        ``Retry-After`` says. A batch the server acknowledged is never sent again. When a batch's answer is
        lost (the connection broke after it was sent), ``on_uncertain`` decides:

        - ``"verify"`` (default): read the session's ``last_seq_pushed`` and compare it with its value before
          the batch: unchanged, the batch was not taken and is sent again; moved by the batch's size, it was
          taken (its ack is marked ``recovered``); moved otherwise (another writer), ``PushUncertainError``.
          This reads the session once per call before the first batch. It is exact while this call is the
          session's only writer.
        - ``"raise"``: ``PushUncertainError`` at once.
        - ``"resend"``: send it again (at-least-once: it may then be in the session twice).

        Any other error is raised with ``err.partial``, the ``PushResult`` of the batches acknowledged before
        it; a bad record's ``err.field`` indexes ``records`` (``"records[1207]"``), not its batch.
        """
        check_uncertain(on_uncertain)
        if isinstance(records, (str, bytes, Mapping)):
            raise TypeError("records is an iterable of records: wrap a single record in a list")
        sid = session_id_of(session)
        policy = retry or self._config.retry
        path = api.session_path(sid, "/data")
        acks: List[BatchAck] = []
        retries = 0
        before: Optional[int] = None  # the session's last_seq_pushed before the batch being sent ("verify")
        previous: Optional[int] = None  # the last sequence number acknowledged so far
        batches = api.batches(
            records, batch_size or self._config.batch_size, max_batch_bytes or self._config.max_batch_bytes
        )
        try:
            for batch in batches:
                spec = RequestSpec("POST", path, batch.body, "application/json", ok=(202,))
                if on_uncertain == "verify" and before is None:
                    before = self.get_session(sid).last_seq_pushed
                attempt = 0
                while True:
                    failure: AoiError
                    repeatable = False
                    try:
                        resp = self._transport.request(spec)
                    except ConnectError as e:
                        failure = e
                    except ConnectionLostError as e:
                        if on_uncertain == "raise":
                            raise PushUncertainError(
                                f"the answer to a batch of {len(batch.records)} records was lost: {e.message}",
                                records=batch.records,
                                offset=batch.offset,
                                partial=PushResult(tuple(acks), retries),
                                before=before,
                                seen=None,
                                cause=e,
                            )
                        if on_uncertain == "verify":
                            assert before is not None
                            recovered = self._settle(sid, batch, before, acks, retries, attempt, e)
                            if recovered is not None:
                                ack = recovered
                                break
                        failure, repeatable = e, True
                    else:
                        if resp.status == 202:
                            body = api.loads(resp.body, f"POST {path}")
                            ack = api.check_ack(body, batch, previous, attempt + 1)
                            break
                        failure = api.renumber(
                            error_from_response(resp.status, resp.headers, resp.body), batch.offset
                        )
                    delay = policy.delay_for(failure, attempt, repeatable=repeatable)
                    if delay is None:
                        raise failure
                    attempt += 1
                    retries += 1
                    self._sleep(delay)
                acks.append(ack)
                if ack.accepted:
                    previous = ack.last_seq
                    before = ack.last_seq
        except (APIError, TransportError) as e:
            if e.partial is None:
                e.partial = PushResult(tuple(acks), retries)
            raise
        return PushResult(tuple(acks), retries)

    def _settle(
        self,
        sid: str,
        batch: api.Batch,
        before: int,
        acks: List[BatchAck],
        retries: int,
        attempt: int,
        cause: ConnectionLostError,
    ) -> Optional[BatchAck]:
        """After a lost answer: the batch's ack when the session shows it accepted, ``None`` when it shows it
        was not; otherwise ``PushUncertainError``."""
        # A request the server read whole may still be on its way in: give it a moment before looking.
        self._sleep(_SETTLE_S)
        try:
            seen = self.get_session(sid).last_seq_pushed
        except (APIError, TransportError) as e:
            raise PushUncertainError(
                f"the answer to a batch of {len(batch.records)} records was lost, and the session could not be read to tell whether it was accepted: {e}",
                records=batch.records,
                offset=batch.offset,
                partial=PushResult(tuple(acks), retries),
                before=before,
                seen=None,
                cause=cause,
            ) from e
        n = len(batch.records)
        verdict = api.settle_lost_batch(before, seen, n)
        if verdict is None:
            raise PushUncertainError(
                f"the answer to a batch of {n} records was lost and the session's last_seq_pushed went from "
                f"{before} to {seen}: another writer pushed meanwhile, so whether the batch was accepted is unknown",
                records=batch.records,
                offset=batch.offset,
                partial=PushResult(tuple(acks), retries),
                before=before,
                seen=seen,
                cause=cause,
            )
        if not verdict:
            return None
        return BatchAck(
            offset=batch.offset,
            size=n,
            accepted=n,
            first_seq=before + 1,
            last_seq=seen,
            dropped=0,
            attempts=attempt + 1,
            recovered=True,
        )

    # ---- queries ----

    def ask(
        self,
        session: SessionRef,
        question: str,
        *,
        max_tokens: Optional[int] = None,
        stop: Union[str, Sequence[str], None] = None,
        temperature: Optional[float] = None,
        top_p: Optional[float] = None,
        top_k: Optional[int] = None,
        seed: Optional[int] = None,
        min_seq: Optional[int] = None,
        wait_ms: Optional[int] = None,
        json_schema: Optional[Mapping[str, Any]] = None,
        details: bool = False,
        extra_fields: Optional[Mapping[str, Any]] = None,
    ) -> Answer:
        """Asks a question about the session's data and returns the whole answer.

        ``json_schema``: the answer is JSON that validates against this schema (a grammar holds it to it).
        ``min_seq`` (read-your-writes): answer only once record ``min_seq`` is ingested, waiting up to
        ``wait_ms`` (``ServerTimeoutError`` after). A question changes nothing, so one whose answer was lost
        is asked again per the retry policy.
        """
        body = api.query_body(
            question,
            max_tokens=max_tokens,
            stop=stop,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=seed,
            min_seq=min_seq,
            wait_ms=wait_ms,
            details=details,
            stream=False,
            extra_fields=extra_fields,
            json_schema=json_schema,
        )
        return Answer.from_json(self._json(api.query(session_id_of(session), body)))

    def ask_stream(
        self,
        session: SessionRef,
        question: str,
        *,
        max_tokens: Optional[int] = None,
        stop: Union[str, Sequence[str], None] = None,
        temperature: Optional[float] = None,
        top_p: Optional[float] = None,
        top_k: Optional[int] = None,
        seed: Optional[int] = None,
        min_seq: Optional[int] = None,
        wait_ms: Optional[int] = None,
        json_schema: Optional[Mapping[str, Any]] = None,
        details: bool = False,
        extra_fields: Optional[Mapping[str, Any]] = None,
    ) -> "AnswerStream":
        """Asks a question and streams the answer: iterating yields its text pieces as they are generated;
        then ``stream.answer`` holds the whole ``Answer`` (path, data version, timings). Use it in a ``with``
        block: leaving early closes the connection, which cancels the question on the server."""
        body = api.query_body(
            question,
            max_tokens=max_tokens,
            stop=stop,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=seed,
            min_seq=min_seq,
            wait_ms=wait_ms,
            details=details,
            stream=True,
            extra_fields=extra_fields,
            json_schema=json_schema,
        )
        return AnswerStream(self, api.query(session_id_of(session), body))

    # ---- flash ----

    def add_flash(
        self,
        session: SessionRef,
        question: str,
        max_tokens: Optional[int] = None,
        *,
        json_schema: Optional[Mapping[str, Any]] = None,
    ) -> FlashQuery:
        """Registers a flash question: answered after every data version, so that asking it (greedy, with
        the same ``max_tokens`` and ``json_schema``) is answered without inference. With ``json_schema`` every
        answer is JSON that validates against it. 409 when registered already."""
        return FlashQuery.from_json(
            self._json(api.add_flash(session_id_of(session), question, max_tokens, json_schema))
        )

    def list_flash(self, session: SessionRef) -> List[FlashQuery]:
        body = expect_object(self._json(api.list_flash(session_id_of(session))), "flash list")
        return [FlashQuery.from_json(f) for f in body.get("flash", [])]

    def remove_flash(self, session: SessionRef, fid: str) -> None:
        self._call(api.remove_flash(session_id_of(session), fid))

    # ---- events ----

    def events(
        self,
        session: SessionRef,
        *,
        last_event_id: Optional[int] = None,
        reconnect: bool = True,
        idle_timeout: float = 45.0,
        max_reconnects: Optional[int] = None,
    ) -> "EventStream":
        """The session's events as an iterator that survives dropped connections.

        Without ``last_event_id`` it starts with new events; with it, with the kept events after that id
        (the server keeps the latest 256). When the connection drops (or stays silent for ``idle_timeout``
        seconds, three of the server's 15 s pings), it reconnects with ``Last-Event-ID`` set to the last
        event it received whole, so no event is lost or repeated; ``max_reconnects`` bounds the consecutive
        failed attempts (``None``: no bound). Iteration ends after ``session_deleted``. To resume later, or
        from another process, pass ``stream.last_event_id`` to a new ``events`` call.
        """
        return EventStream(self, session_id_of(session), last_event_id, reconnect, idle_timeout, max_reconnects)


_SETTLE_S = 0.5


def _header_int(headers: Mapping[str, str], name: str) -> Optional[int]:
    try:
        return int(headers[name])
    except (KeyError, ValueError):
        return None


class AnswerStream(Iterator[str]):
    """The pieces of a streamed answer; ``answer`` is set once the ``done`` event arrived."""

    def __init__(self, client: Client, spec: RequestSpec) -> None:
        self._client = client
        self._spec = spec
        self._response: Optional[StreamResponse] = None
        self._decoder = SSEDecoder()
        self._pieces: Deque[str] = collections.deque()
        self._text: List[str] = []
        self._closed = False
        self._error: Optional[APIError] = None  # an error event, raised once the pieces before it are read
        self.answer: Optional[Answer] = None

    def __enter__(self) -> "AnswerStream":
        self._open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> "AnswerStream":
        return self

    @property
    def text(self) -> str:
        """The answer's text received so far."""
        return "".join(self._text)

    def _open(self) -> None:
        if self._response is None and not self._closed:
            self._response = self._client._open_stream(self._spec)

    def __next__(self) -> str:
        self._open()
        while True:
            if self._pieces:
                return self._pieces.popleft()
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if self.answer is not None or self._closed:
                raise StopIteration
            assert self._response is not None
            try:
                chunk = self._response.read_chunk()
            except ConnectionLostError:
                self.close()
                raise
            if not chunk:
                self.close()
                raise ConnectionLostError("the answer stream ended before its done event")
            for ev in self._decoder.feed(chunk):
                self._handle(ev.event, ev.data)

    def _handle(self, event: str, data: str) -> None:
        if event == "token":
            piece = api.loads(data.encode("utf-8"), "token event")
            text = piece.get("text", "") if isinstance(piece, dict) else ""
            if text:
                self._pieces.append(text)
                self._text.append(text)
        elif event == "done":
            self.answer = Answer.from_json(api.loads(data.encode("utf-8"), "done event"))
            self.close()
        elif event == "error":
            self._error = error_from_object(api.loads(data.encode("utf-8"), "error event"))
            self.close()

    def final_answer(self) -> Answer:
        """Reads the rest of the stream and returns the whole answer."""
        for _ in self:
            pass
        if self.answer is None:
            raise ConnectionLostError("the answer stream ended before its done event")
        return self.answer

    def close(self) -> None:
        """Closes the connection (a question still generating is cancelled on the server)."""
        self._closed = True
        if self._response is not None:
            self._response.close()


class EventStream(Iterator[Event]):
    """A session's events; see ``Client.events``.

    ``last_event_id`` is the id of the last event this iterator returned; ``reconnects`` counts the dropped
    connections it resumed. ``close()`` may be called from another thread to end a blocked iteration.
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        last_event_id: Optional[int],
        reconnect: bool,
        idle_timeout: float,
        max_reconnects: Optional[int],
    ) -> None:
        self._client = client
        self.session_id = session_id
        self.last_event_id: Optional[int] = last_event_id
        self._resume_id: Optional[int] = last_event_id  # the last event received whole (queued or returned)
        self._reconnect = reconnect
        self._idle_timeout = idle_timeout
        self._max_reconnects = max_reconnects
        self._response: Optional[StreamResponse] = None
        self._decoder = SSEDecoder()
        self._queue: Deque[Event] = collections.deque()
        self._opened = False
        self._finished = False
        self._closed = False
        self._retry_s: Optional[float] = None  # the server's retry: field, if it sends one
        self.reconnects = 0

    def __enter__(self) -> "EventStream":
        self._connect()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        while True:
            if self._queue:
                ev = self._queue.popleft()
                if ev.id is not None:
                    self.last_event_id = ev.id
                if ev.type == "session_deleted":
                    self._finished = True
                    self._drop()
                return ev
            if self._finished or self._closed:
                raise StopIteration
            if self._response is None:
                self._connect()
                continue
            try:
                chunk = self._response.read_chunk()
            except ConnectionLostError as e:
                self._lost(e)
                continue
            if not chunk:
                self._lost(None)
                continue
            for sse in self._decoder.feed(chunk):
                ev = event_from_sse(sse)
                if sse.retry is not None:
                    self._retry_s = sse.retry / 1000.0
                if ev.id is not None:
                    self._resume_id = ev.id
                self._queue.append(ev)

    def _connect(self) -> None:
        if self._response is not None or self._closed or self._finished:
            return
        spec = api.events(self.session_id)
        failures = 0
        while True:
            headers = {"Last-Event-ID": str(self._resume_id)} if self._resume_id is not None else None
            failure: AoiError
            if not self._opened:
                # The first opening fails as any request does (a wrong id is a NotFoundError at once).
                self._response = self._client._open_stream(spec, timeout=self._idle_timeout, headers=headers)
                self._opened = True
                self._decoder = SSEDecoder()
                return
            try:
                resp = self._client._transport.stream(spec, extra_headers=headers, timeout=self._idle_timeout)
            except TransportError as e:
                failure = e
            else:
                if resp.status == 200:
                    self._response = resp
                    self._decoder = SSEDecoder()
                    return
                failure = error_from_response(resp.status, resp.headers, resp.read_all())
            if isinstance(failure, APIError) and not isinstance(failure, RefusedError):
                raise failure  # the session is gone, the key revoked: waiting will not help
            failures += 1
            if self._max_reconnects is not None and failures > self._max_reconnects:
                raise failure
            if self._closed:
                raise StopIteration
            self._client._sleep(reconnect_delay(failure, failures, self._retry_s))

    def _lost(self, cause: Optional[BaseException]) -> None:
        self._drop()
        if self._closed:
            return
        if not self._reconnect:
            self._finished = True
            if cause is not None:
                raise cause
            return
        self.reconnects += 1

    def _drop(self) -> None:
        if self._response is not None:
            self._response.close()
            self._response = None

    def close(self) -> None:
        self._closed = True
        response = self._response
        if response is not None:
            response.close()
