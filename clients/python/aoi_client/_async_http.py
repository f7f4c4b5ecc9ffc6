"""HTTP/1.1 for the asyncio client, on asyncio streams, with kept-alive connections.

The standard library has no asyncio HTTP client; this one speaks the part of HTTP/1.1 the API needs
(Content-Length, chunked and close-delimited bodies, keep-alive) and, like the sync transport, tells a
request that cannot have reached the server (``ConnectError``) from one whose answer was lost
(``ConnectionLostError``).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Awaitable, Dict, List, Mapping, Optional, Tuple, TypeVar
from urllib.parse import urlsplit

from ._requests import RequestSpec
from .errors import ConnectError, ConnectionLostError

T = TypeVar("T")

_MAX_HEADER_LINES = 200


class AsyncResponse:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers  # lower-case names
        self.body = body


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        # A server that closed the kept-alive connection while it was idle has sent its FIN by now.
        return not (self.reader.at_eof() or self.writer.is_closing() or self.reader.exception() is not None)

    async def close(self) -> None:
        try:
            self.writer.close()
            await self.writer.wait_closed()
        except (OSError, asyncio.CancelledError, RuntimeError):
            pass

    def abort(self) -> None:
        transport = self.writer.transport
        if transport is not None:
            transport.abort()


async def _within(awaitable: Awaitable[T], timeout: float, what: str) -> T:
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError as e:
        raise ConnectionLostError(f"{what}: nothing within {timeout} s", cause=e)
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
        raise ConnectionLostError(f"{what}: the connection broke: {e!r}", cause=e)


class _Body:
    """Reads one response body according to its framing."""

    def __init__(self, conn: _Connection, headers: Dict[str, str], status: int, method: str, timeout: float) -> None:
        self.conn = conn
        self.timeout = timeout
        self.done = False
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self.remaining: Optional[int] = None
        self.until_close = False
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            self.remaining = 0
        elif self.chunked:
            pass
        elif "content-length" in headers:
            try:
                self.remaining = int(headers["content-length"])
            except ValueError:
                raise ConnectionLostError(f"bad Content-Length {headers['content-length']!r}")
        else:
            self.until_close = True
        self._chunk_left = 0
        if self.remaining == 0:
            self.done = True

    async def read(self, n: int = 65536) -> bytes:
        """Up to ``n`` bytes of the body, ``b""`` at its end."""
        if self.done:
            return b""
        reader = self.conn.reader
        if self.until_close:
            data = await _within(reader.read(n), self.timeout, "reading the answer")
            if not data:
                self.done = True
            return data
        if self.remaining is not None:
            data = await _within(reader.read(min(n, self.remaining)), self.timeout, "reading the answer")
            if not data:
                raise ConnectionLostError(f"the answer ended {self.remaining} bytes short")
            self.remaining -= len(data)
            if self.remaining == 0:
                self.done = True
            return data
        # chunked
        if self._chunk_left == 0:
            line = await _within(reader.readline(), self.timeout, "reading a chunk")
            if not line:
                raise ConnectionLostError("the chunked answer ended early")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ConnectionLostError(f"bad chunk size line {line!r}")
            if size == 0:
                for _ in range(_MAX_HEADER_LINES):
                    trailer = await _within(reader.readline(), self.timeout, "reading the trailer")
                    if trailer in (b"\r\n", b"\n", b""):
                        break
                self.done = True
                return b""
            self._chunk_left = size
        data = await _within(reader.read(min(n, self._chunk_left)), self.timeout, "reading a chunk")
        if not data:
            raise ConnectionLostError("the chunked answer ended early")
        self._chunk_left -= len(data)
        if self._chunk_left == 0:
            await _within(reader.readexactly(2), self.timeout, "reading a chunk")
        return data

    async def read_all(self) -> bytes:
        parts: List[bytes] = []
        while True:
            data = await self.read()
            if not data:
                return b"".join(parts)
            parts.append(data)


class AsyncStreamResponse:
    """A response whose body is read as it arrives (server-sent events)."""

    def __init__(self, conn: _Connection, status: int, headers: Dict[str, str], body: _Body) -> None:
        self._conn = conn
        self.status = status
        self.headers = headers
        self._body = body
        self._closed = False

    async def read_chunk(self) -> bytes:
        if self._closed:
            return b""
        try:
            return await self._body.read()
        except ConnectionLostError:
            if self._closed:
                return b""
            raise

    async def read_all(self) -> bytes:
        try:
            return await self._body.read_all()
        finally:
            await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._conn.abort()
        await self._conn.close()


class AsyncTransport:
    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        headers: Mapping[str, str],
        ssl_context: Optional[ssl.SSLContext] = None,
        max_idle: int = 8,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be http://HOST[:PORT][/PREFIX] or https://...: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = 443 if self.scheme == "https" else 80
        self.host_header = host if self.port == default_port else f"{host}:{self.port}"
        self.timeout = timeout
        self.headers = dict(headers)
        self.ssl_context = ssl_context
        self.max_idle = max_idle
        self._idle: List[_Connection] = []
        self._closed = False  # after close(), connections that come back are closed, not kept

    async def _connect(self) -> _Connection:
        ssl_arg = None
        if self.scheme == "https":
            ssl_arg = self.ssl_context or ssl.create_default_context()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=ssl_arg), self.timeout
            )
        except asyncio.TimeoutError as e:
            raise ConnectError(f"cannot connect to {self.host}:{self.port} within {self.timeout} s", cause=e)
        except OSError as e:
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {e}", cause=e)
        return _Connection(reader, writer)

    async def _acquire(self) -> Tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn, True
            await conn.close()
        return await self._connect(), False

    async def _release(self, conn: _Connection) -> None:
        if not self._closed and conn.usable() and len(self._idle) < self.max_idle:
            self._idle.append(conn)
        else:
            await conn.close()

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()

    def _head(self, spec: RequestSpec, extra_headers: Optional[Mapping[str, str]]) -> bytes:
        headers: Dict[str, str] = {"Host": self.host_header}
        headers.update(self.headers)
        headers["Accept"] = spec.accept
        if spec.content_type is not None:
            headers["Content-Type"] = spec.content_type
        if spec.body is not None or spec.method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(spec.body or b""))
        if extra_headers:
            headers.update(extra_headers)
        lines = [f"{spec.method} {self.prefix + spec.path} HTTP/1.1"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {name} holds a line break")
            lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _send(
        self, spec: RequestSpec, extra_headers: Optional[Mapping[str, str]], timeout: float
    ) -> Tuple[_Connection, int, Dict[str, str], _Body, bool]:
        data = self._head(spec, extra_headers) + (spec.body or b"")
        for fresh_try in (False, True):
            conn, reused = (await self._connect(), False) if fresh_try else await self._acquire()
            try:
                conn.writer.write(data)
            except (OSError, RuntimeError) as e:
                conn.abort()
                if reused and not fresh_try:
                    continue
                raise ConnectError(f"{spec.method} {spec.path}: the request could not be sent: {e!r}", cause=e)
            try:
                await _within(conn.writer.drain(), timeout, f"{spec.method} {spec.path}: sending")
                status, headers, keep_alive = await self._read_head(conn, timeout, spec)
            except BaseException:
                conn.abort()
                raise
            return conn, status, headers, _Body(conn, headers, status, spec.method, timeout), keep_alive
        raise AssertionError("unreachable")

    async def _read_head(
        self, conn: _Connection, timeout: float, spec: RequestSpec
    ) -> Tuple[int, Dict[str, str], bool]:
        """The status and headers (lower-case names), and whether the connection may carry another request."""
        what = f"{spec.method} {spec.path}: waiting for the answer"
        while True:
            line = await _within(conn.reader.readline(), timeout, what)
            if not line:
                raise ConnectionLostError(f"{spec.method} {spec.path}: the connection closed before the answer")
            parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
                raise ConnectionLostError(f"{spec.method} {spec.path}: not an HTTP status line: {line!r}")
            status = int(parts[1])
            headers: Dict[str, str] = {}
            for _ in range(_MAX_HEADER_LINES):
                h = await _within(conn.reader.readline(), timeout, what)
                if h in (b"\r\n", b"\n"):
                    break
                if not h:
                    raise ConnectionLostError(f"{spec.method} {spec.path}: the answer's head broke off")
                name, _, value = h.decode("latin-1").partition(":")
                key = name.strip().lower()
                value = value.strip()
                headers[key] = f"{headers[key]}, {value}" if key in headers else value
            if 100 <= status < 200 and status != 101:
                continue  # an interim answer; the real one follows
            keep_alive = parts[0] != "HTTP/1.0" and "close" not in headers.get("connection", "").lower()
            return status, headers, keep_alive

    async def request(
        self, spec: RequestSpec, *, extra_headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None
    ) -> AsyncResponse:
        t = (timeout if timeout is not None else self.timeout) + spec.extra_timeout
        conn, status, headers, body, keep_alive = await self._send(spec, extra_headers, t)
        try:
            data = await body.read_all()
        except BaseException:
            conn.abort()
            raise
        if keep_alive and body.done and not body.until_close:
            await self._release(conn)
        else:
            await conn.close()
        return AsyncResponse(status, headers, data)

    async def stream(
        self, spec: RequestSpec, *, extra_headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None
    ) -> AsyncStreamResponse:
        t = (timeout if timeout is not None else self.timeout) + spec.extra_timeout
        conn, status, headers, body, _ = await self._send(spec, extra_headers, t)
        return AsyncStreamResponse(conn, status, headers, body)
