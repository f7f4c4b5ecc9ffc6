"""HTTP/1.1 for the sync client, on the standard library's http.client, with kept-alive connections.

What matters beyond sending bytes is knowing, when a request fails, whether it can have reached the server:
a failure while connecting or while writing the request is a ``ConnectError`` (the server cannot have a
whole request, so it took nothing); a failure after the request was written is a ``ConnectionLostError``.
"""

from __future__ import annotations

import http.client
import selectors
import socket
import ssl
import threading
from typing import Dict, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from ._requests import RequestSpec
from .errors import ConnectError, ConnectionLostError


class Response:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers  # lower-case names
        self.body = body


def _headers(resp: http.client.HTTPResponse) -> Dict[str, str]:
    return {k.lower(): v for k, v in resp.getheaders()}


class StreamResponse:
    """A response whose body is read as it arrives (server-sent events)."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, timeout: float) -> None:
        self._conn = conn
        self._timeout = timeout
        self._resp = resp
        self.status = resp.status
        self.headers = _headers(resp)
        self._closed = False

    def read_chunk(self) -> bytes:
        """The next bytes of the body, ``b""`` at its end. A read that waits past the timeout, or fails, is a
        ``ConnectionLostError``."""
        if self._closed:
            return b""
        try:
            return self._resp.read1(65536)
        except socket.timeout as e:
            raise ConnectionLostError(f"no data for {self._timeout} s: the connection is taken as dead", cause=e)
        except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
            if self._closed:
                return b""
            raise ConnectionLostError(f"the stream broke: {e!r}", cause=e)

    def read_all(self) -> bytes:
        try:
            return self._resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionLostError(f"the answer broke off: {e!r}", cause=e)
        finally:
            self.close()

    def close(self) -> None:
        """Closes the connection; safe from another thread, where it ends a blocked ``read_chunk``."""
        if self._closed:
            return
        self._closed = True
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            self._resp.close()
        finally:
            self._conn.close()


def _readable(sock: Optional[socket.socket]) -> bool:
    """True when an idle connection has something to read: the server's FIN (or junk), so it is not reusable.
    (selectors, not select.select: the latter fails for descriptors past 1023.)"""
    if sock is None:
        return True
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(sock, selectors.EVENT_READ)
            return bool(sel.select(0))
    except (OSError, ValueError):
        return True


class SyncTransport:
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
        self.timeout = timeout
        self.headers = dict(headers)
        self.ssl_context = ssl_context
        self.max_idle = max_idle
        self._idle: List[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False  # after close(), connections that come back are closed, not kept

    # ---- connections ----

    def _new(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.timeout, context=self.ssl_context or ssl.create_default_context()
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def _acquire(self) -> Tuple[http.client.HTTPConnection, bool]:
        """A connection, and whether it was used before. An idle connection the server has closed (its
        ``--idle-timeout``) is readable with nothing to read: it is dropped here rather than failing a
        request that would then look as if the server might have taken it."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new(), False
            if not _readable(conn.sock):
                return conn, True
            conn.close()

    def _release(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        if resp.will_close or not resp.isclosed():
            conn.close()
            return
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ---- requests ----

    def _send(
        self, spec: RequestSpec, extra_headers: Optional[Mapping[str, str]], timeout: float
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        headers = dict(self.headers)
        headers["Accept"] = spec.accept
        if spec.content_type is not None:
            headers["Content-Type"] = spec.content_type
        if extra_headers:
            headers.update(extra_headers)
        target = self.prefix + spec.path
        for fresh_try in (False, True):
            conn, reused = self._acquire() if not fresh_try else (self._new(), False)
            try:
                if conn.sock is None:
                    conn.connect()
                conn.sock.settimeout(timeout)
            except OSError as e:
                conn.close()
                raise ConnectError(f"cannot connect to {self.host}:{self.port}: {e}", cause=e)
            try:
                conn.request(spec.method, target, body=spec.body, headers=headers)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                # Not sent whole, so not taken. A kept-alive connection that broke is tried once more at once.
                if reused and not fresh_try:
                    continue
                raise ConnectError(f"{spec.method} {spec.path}: the request could not be sent: {e}", cause=e)
            try:
                return conn, conn.getresponse()
            except socket.timeout as e:
                conn.close()
                raise ConnectionLostError(f"{spec.method} {spec.path}: no answer within {timeout} s", cause=e)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise ConnectionLostError(f"{spec.method} {spec.path}: the connection broke before the answer: {e!r}", cause=e)
        raise AssertionError("unreachable")

    def request(
        self, spec: RequestSpec, *, extra_headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None
    ) -> Response:
        t = (timeout if timeout is not None else self.timeout) + spec.extra_timeout
        conn, resp = self._send(spec, extra_headers, t)
        try:
            body = resp.read()
        except socket.timeout as e:
            conn.close()
            raise ConnectionLostError(f"{spec.method} {spec.path}: the answer stalled for {t} s", cause=e)
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ConnectionLostError(f"{spec.method} {spec.path}: the answer broke off: {e!r}", cause=e)
        headers = _headers(resp)
        self._release(conn, resp)
        return Response(resp.status, headers, body)

    def stream(
        self, spec: RequestSpec, *, extra_headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None
    ) -> StreamResponse:
        """Sends ``spec`` and returns once the answer's head is in; ``timeout`` bounds each wait for data."""
        t = (timeout if timeout is not None else self.timeout) + spec.extra_timeout
        conn, resp = self._send(spec, extra_headers, t)
        return StreamResponse(conn, resp, t)
