"""The asyncio client: ``AsyncClient``, with the same methods as ``Client``, awaited."""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from typing import (
    Any,
    AsyncIterable,
    AsyncIterator,
    Deque,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Union,
)

from . import _requests as api
from ._async_http import AsyncResponse, AsyncStreamResponse, AsyncTransport
from ._config import ClientConfig, Uncertain, check_uncertain, event_from_sse, reconnect_delay, session_id_of
from ._requests import Record, RequestSpec
from ._sse import SSEDecoder
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

__all__ = ["AsyncClient", "AsyncAnswerStream", "AsyncEventStream"]

SessionRef = Union[str, Session]

_SETTLE_S = 0.5


class AsyncClient:
    """The asyncio twin of ``Client``: the same arguments, methods and errors, awaited.

    Use it from one event loop (its kept-alive connections belong to the loop that opened them); tasks of
    that loop may share it. ``async with AsyncClient(...) as client:`` closes the connections at the end.
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
        self._transport = AsyncTransport(
            self._config.base_url, timeout=timeout, headers=self._config.headers, ssl_context=ssl_context
        )

    @property
    def base_url(self) -> str:
        return self._config.base_url

    @property
    def retry(self) -> RetryPolicy:
        return self._config.retry

    async def aclose(self) -> None:
        """Closes the kept-alive connections."""
        await self._transport.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # ---- plumbing ----

    async def _sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def _call(self, spec: RequestSpec, *, retry: Optional[RetryPolicy] = None) -> AsyncResponse:
        policy = retry or self._config.retry
        attempt = 0
        while True:
            failure: AoiError
            try:
                resp = await self._transport.request(spec)
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
            await self._sleep(delay)

    async def _json(self, spec: RequestSpec) -> Any:
        return api.loads((await self._call(spec)).body, f"{spec.method} {spec.path}")

    async def _open_stream(
        self, spec: RequestSpec, *, timeout: Optional[float] = None, headers: Optional[Mapping[str, str]] = None
    ) -> AsyncStreamResponse:
        policy = self._config.retry
        attempt = 0
        while True:
            failure: AoiError
            try:
                resp = await self._transport.stream(spec, extra_headers=headers, timeout=timeout)
            except TransportError as e:
                failure = e
            else:
                if resp.status == 200:
                    return resp
                failure = error_from_response(resp.status, resp.headers, await resp.read_all())
            delay = policy.delay_for(failure, attempt, repeatable=spec.repeatable)
            if delay is None:
                raise failure
            attempt += 1
            await self._sleep(delay)

    # ---- operations ----

    async def health(self) -> Dict[str, Any]:
        return expect_object(await self._json(api.health()), "health")

    async def wait_until_ready(self, timeout: float = 120.0, poll: float = 0.25) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                h = await self.health()
                if h.get("status") == "ok":
                    return h
                last: object = h
            except TransportError as e:
                last = e
            if time.monotonic() >= deadline:
                raise ConnectError(f"the server at {self.base_url} was not ready within {timeout} s: {last}")
            await self._sleep(poll)

    # ---- sessions ----

    async def create_session(
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
        return Session.from_json(await self._json(spec))

    async def get_session(self, session: SessionRef) -> Session:
        return Session.from_json(await self._json(api.get_session(session_id_of(session))))

    async def list_sessions(self) -> List[Session]:
        body = expect_object(await self._json(api.list_sessions()), "session list")
        return [Session.from_json(s) for s in body.get("sessions", [])]

    async def delete_session(self, session: SessionRef, *, missing_ok: bool = False) -> bool:
        try:
            await self._call(api.delete_session(session_id_of(session)))
        except APIError as e:
            if missing_ok and e.type == "not_found":
                return False
            raise
        return True

    async def export_session(self, session: SessionRef) -> Snapshot:
        sid = session_id_of(session)
        resp = await self._call(api.export_session(sid))
        return Snapshot(
            session_id=sid,
            data=resp.body,
            last_seq=_header_int(resp.headers, "x-aoi-last-seq"),
            data_version=_header_int(resp.headers, "x-aoi-data-version"),
        )

    async def import_session(self, snapshot: Union[Snapshot, bytes], id: Optional[str] = None) -> Session:
        data = snapshot.data if isinstance(snapshot, Snapshot) else bytes(snapshot)
        return Session.from_json(await self._json(api.import_session(data, id)))

    async def save_session(self, session: SessionRef) -> SaveResult:
        return SaveResult.from_json(await self._json(api.save_session(session_id_of(session))))

    async def unload_session(self, session: SessionRef) -> None:
        await self._call(api.unload_session(session_id_of(session)))

    async def load_session(self, session: SessionRef) -> float:
        body = expect_object(await self._json(api.load_session(session_id_of(session))), "load")
        timings = body.get("timings") if isinstance(body.get("timings"), dict) else {}
        return float(timings.get("load_ms", 0.0))

    async def context(self, session: SessionRef, question: Optional[str] = None) -> Context:
        return Context.from_json(await self._json(api.context(session_id_of(session), question)))

    async def window_records(self, session: SessionRef, last: Optional[int] = None) -> List[WindowRecord]:
        body = expect_object(await self._json(api.window_records(session_id_of(session), last)), "records")
        return [WindowRecord(int(r["seq"]), str(r["text"]), int(r["tokens"])) for r in body.get("records", [])]

    async def wait_ingested(
        self, session: SessionRef, seq: int, *, timeout: float = 60.0, poll: float = 0.05
    ) -> Session:
        deadline = time.monotonic() + timeout
        while True:
            s = await self.get_session(session)
            if s.last_seq_ingested >= seq and s.pending == 0:
                return s
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"session {s.id}: record {seq} not ingested within {timeout} s "
                    f"(ingested up to {s.last_seq_ingested}, {s.pending} pending)"
                )
            await self._sleep(poll)

    # ---- data ----

    async def push(
        self,
        session: SessionRef,
        records: Union[Iterable[Record], AsyncIterable[Record]],
        *,
        batch_size: Optional[int] = None,
        max_batch_bytes: Optional[int] = None,
        retry: Optional[RetryPolicy] = None,
        on_uncertain: Uncertain = "verify",
    ) -> PushResult:
        """As ``Client.push``; ``records`` may also be an async iterable (it is read whole first)."""
        check_uncertain(on_uncertain)
        if isinstance(records, (str, bytes, Mapping)):
            raise TypeError("records is an iterable of records: wrap a single record in a list")
        if hasattr(records, "__aiter__"):
            records = [r async for r in records]  # type: ignore[union-attr]
        sid = session_id_of(session)
        policy = retry or self._config.retry
        path = api.session_path(sid, "/data")
        acks: List[BatchAck] = []
        retries = 0
        before: Optional[int] = None
        previous: Optional[int] = None
        batches = api.batches(
            records,  # type: ignore[arg-type]
            batch_size or self._config.batch_size,
            max_batch_bytes or self._config.max_batch_bytes,
        )
        try:
            for batch in batches:
                spec = RequestSpec("POST", path, batch.body, "application/json", ok=(202,))
                if on_uncertain == "verify" and before is None:
                    before = (await self.get_session(sid)).last_seq_pushed
                attempt = 0
                while True:
                    failure: AoiError
                    repeatable = False
                    try:
                        resp = await self._transport.request(spec)
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
                            recovered = await self._settle(sid, batch, before, acks, retries, attempt, e)
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
                    await self._sleep(delay)
                acks.append(ack)
                if ack.accepted:
                    previous = ack.last_seq
                    before = ack.last_seq
        except (APIError, TransportError) as e:
            if e.partial is None:
                e.partial = PushResult(tuple(acks), retries)
            raise
        return PushResult(tuple(acks), retries)

    async def _settle(
        self,
        sid: str,
        batch: api.Batch,
        before: int,
        acks: List[BatchAck],
        retries: int,
        attempt: int,
        cause: ConnectionLostError,
    ) -> Optional[BatchAck]:
        await self._sleep(_SETTLE_S)
        try:
            seen = (await self.get_session(sid)).last_seq_pushed
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

    async def ask(
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
        return Answer.from_json(await self._json(api.query(session_id_of(session), body)))

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
    ) -> "AsyncAnswerStream":
        """As ``Client.ask_stream``: ``async with client.ask_stream(...) as s: async for piece in s: ...``."""
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
        return AsyncAnswerStream(self, api.query(session_id_of(session), body))

    # ---- flash ----

    async def add_flash(
        self,
        session: SessionRef,
        question: str,
        max_tokens: Optional[int] = None,
        *,
        json_schema: Optional[Mapping[str, Any]] = None,
    ) -> FlashQuery:
        return FlashQuery.from_json(
            await self._json(api.add_flash(session_id_of(session), question, max_tokens, json_schema))
        )

    async def list_flash(self, session: SessionRef) -> List[FlashQuery]:
        body = expect_object(await self._json(api.list_flash(session_id_of(session))), "flash list")
        return [FlashQuery.from_json(f) for f in body.get("flash", [])]

    async def remove_flash(self, session: SessionRef, fid: str) -> None:
        await self._call(api.remove_flash(session_id_of(session), fid))

    # ---- events ----

    def events(
        self,
        session: SessionRef,
        *,
        last_event_id: Optional[int] = None,
        reconnect: bool = True,
        idle_timeout: float = 45.0,
        max_reconnects: Optional[int] = None,
    ) -> "AsyncEventStream":
        """As ``Client.events``: ``async for event in client.events("btc"): ...``."""
        return AsyncEventStream(self, session_id_of(session), last_event_id, reconnect, idle_timeout, max_reconnects)


def _header_int(headers: Mapping[str, str], name: str) -> Optional[int]:
    try:
        return int(headers[name])
    except (KeyError, ValueError):
        return None


class AsyncAnswerStream(AsyncIterator[str]):
    """The pieces of a streamed answer; ``answer`` is set once the ``done`` event arrived."""

    def __init__(self, client: AsyncClient, spec: RequestSpec) -> None:
        self._client = client
        self._spec = spec
        self._response: Optional[AsyncStreamResponse] = None
        self._decoder = SSEDecoder()
        self._pieces: Deque[str] = collections.deque()
        self._text: List[str] = []
        self._closed = False
        self._error: Optional[APIError] = None  # an error event, raised once the pieces before it are read
        self.answer: Optional[Answer] = None

    async def __aenter__(self) -> "AsyncAnswerStream":
        await self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __aiter__(self) -> "AsyncAnswerStream":
        return self

    @property
    def text(self) -> str:
        return "".join(self._text)

    async def _open(self) -> None:
        if self._response is None and not self._closed:
            self._response = await self._client._open_stream(self._spec)

    async def __anext__(self) -> str:
        await self._open()
        while True:
            if self._pieces:
                return self._pieces.popleft()
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if self.answer is not None or self._closed:
                raise StopAsyncIteration
            assert self._response is not None
            try:
                chunk = await self._response.read_chunk()
            except ConnectionLostError:
                await self.aclose()
                raise
            if not chunk:
                await self.aclose()
                raise ConnectionLostError("the answer stream ended before its done event")
            for ev in self._decoder.feed(chunk):
                await self._handle(ev.event, ev.data)

    async def _handle(self, event: str, data: str) -> None:
        if event == "token":
            piece = api.loads(data.encode("utf-8"), "token event")
            text = piece.get("text", "") if isinstance(piece, dict) else ""
            if text:
                self._pieces.append(text)
                self._text.append(text)
        elif event == "done":
            self.answer = Answer.from_json(api.loads(data.encode("utf-8"), "done event"))
            await self.aclose()
        elif event == "error":
            self._error = error_from_object(api.loads(data.encode("utf-8"), "error event"))
            await self.aclose()

    async def final_answer(self) -> Answer:
        async for _ in self:
            pass
        if self.answer is None:
            raise ConnectionLostError("the answer stream ended before its done event")
        return self.answer

    async def aclose(self) -> None:
        self._closed = True
        if self._response is not None:
            await self._response.close()


class AsyncEventStream(AsyncIterator[Event]):
    """A session's events; see ``Client.events``. ``last_event_id`` and ``reconnects`` as there."""

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        last_event_id: Optional[int],
        reconnect: bool,
        idle_timeout: float,
        max_reconnects: Optional[int],
    ) -> None:
        self._client = client
        self.session_id = session_id
        self.last_event_id: Optional[int] = last_event_id
        self._resume_id: Optional[int] = last_event_id
        self._reconnect = reconnect
        self._idle_timeout = idle_timeout
        self._max_reconnects = max_reconnects
        self._response: Optional[AsyncStreamResponse] = None
        self._decoder = SSEDecoder()
        self._queue: Deque[Event] = collections.deque()
        self._opened = False
        self._finished = False
        self._closed = False
        self._retry_s: Optional[float] = None
        self.reconnects = 0

    async def __aenter__(self) -> "AsyncEventStream":
        await self._connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._queue:
                ev = self._queue.popleft()
                if ev.id is not None:
                    self.last_event_id = ev.id
                if ev.type == "session_deleted":
                    self._finished = True
                    await self._drop()
                return ev
            if self._finished or self._closed:
                raise StopAsyncIteration
            if self._response is None:
                await self._connect()
                continue
            try:
                chunk = await self._response.read_chunk()
            except ConnectionLostError as e:
                await self._lost(e)
                continue
            if not chunk:
                await self._lost(None)
                continue
            for sse in self._decoder.feed(chunk):
                ev = event_from_sse(sse)
                if sse.retry is not None:
                    self._retry_s = sse.retry / 1000.0
                if ev.id is not None:
                    self._resume_id = ev.id
                self._queue.append(ev)

    async def _connect(self) -> None:
        if self._response is not None or self._closed or self._finished:
            return
        spec = api.events(self.session_id)
        failures = 0
        while True:
            headers = {"Last-Event-ID": str(self._resume_id)} if self._resume_id is not None else None
            failure: AoiError
            if not self._opened:
                self._response = await self._client._open_stream(spec, timeout=self._idle_timeout, headers=headers)
                self._opened = True
                self._decoder = SSEDecoder()
                return
            try:
                resp = await self._client._transport.stream(spec, extra_headers=headers, timeout=self._idle_timeout)
            except TransportError as e:
                failure = e
            else:
                if resp.status == 200:
                    self._response = resp
                    self._decoder = SSEDecoder()
                    return
                failure = error_from_response(resp.status, resp.headers, await resp.read_all())
            if isinstance(failure, APIError) and not isinstance(failure, RefusedError):
                raise failure
            failures += 1
            if self._max_reconnects is not None and failures > self._max_reconnects:
                raise failure
            if self._closed:
                raise StopAsyncIteration
            await self._client._sleep(reconnect_delay(failure, failures, self._retry_s))

    async def _lost(self, cause: Optional[BaseException]) -> None:
        await self._drop()
        if self._closed:
            return
        if not self._reconnect:
            self._finished = True
            if cause is not None:
                raise cause
            return
        self.reconnects += 1

    async def _drop(self) -> None:
        if self._response is not None:
            response, self._response = self._response, None
            await response.close()

    async def aclose(self) -> None:
        self._closed = True
        await self._drop()
