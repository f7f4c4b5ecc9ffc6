"""What the tests share: a live ``aoi serve`` per test module, a TCP proxy whose connections a test can cut,
and small helpers. Only the standard library.

The server is started as tests/integration/harness.js starts it: ``aoi serve --model MODEL --host 127.0.0.1
--port 0 --threads $AOI_TEST_THREADS (else 2) --data-dir TMP``, plus ``$AOI_SERVE_ARGS``, and is ready when it
prints ``aoi: listening on URL``. ``AOI_BIN`` and ``AOI_MODEL`` name the binary and the model (defaults: the
build tree's); a missing one fails the tests with a message saying so, never skips them.
"""

from __future__ import annotations

import atexit
import collections
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent  # clients/python
REPO_ROOT = HERE.parents[2]

AOI_BIN = Path(os.environ.get("AOI_BIN") or REPO_ROOT / "build" / "tools" / "aoi")
AOI_MODEL = Path(os.environ.get("AOI_MODEL") or REPO_ROOT / "build" / "models" / "test-micro.gguf")
STARTUP_TIMEOUT_S = float(os.environ.get("AOI_STARTUP_TIMEOUT_MS", "120000")) / 1000.0
WAIT_TIMEOUT_S = 60.0
ADMIN_KEY = "sk-python-client-admin"

# Servers still running when the tests' process ends (a failed run, an interrupted one, a SIGTERM) are
# killed and their data directories removed, rather than left behind.
_LIVE: "set[LiveServer]" = set()


def _kill_live() -> None:
    for server in list(_LIVE):
        server.kill()


atexit.register(_kill_live)
if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

# Sessions the tests make are small: a session reserves KV cells for its whole window plus its query budget.
SMALL = {"retention": {"max_tokens": 512}, "query_budget": 128}


class LiveServer:
    """One ``aoi serve`` process on a free loopback port with a data directory of its own."""

    def __init__(
        self,
        *,
        api_keys: Sequence[str] = (ADMIN_KEY,),
        tenants: Sequence[str] = (),
        args: Sequence[str] = (),
    ) -> None:
        self.api_keys = list(api_keys)
        self.tenants = list(tenants)  # lines of an --api-keys file
        self.args = list(args)
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""
        self.tmp = ""
        self._lines: Deque[str] = collections.deque(maxlen=400)
        self._ready = threading.Event()
        self._reader: Optional[threading.Thread] = None

    @property
    def api_key(self) -> Optional[str]:
        return self.api_keys[0] if self.api_keys else None

    def logs(self) -> str:
        return "\n".join(self._lines)

    def start(self) -> "LiveServer":
        if not AOI_BIN.is_file():
            raise AssertionError(f"aoi binary not found: {AOI_BIN} (build it, or set AOI_BIN)")
        if not AOI_MODEL.is_file():
            raise AssertionError(f"test model not found: {AOI_MODEL} (build the tests' models, or set AOI_MODEL)")
        self.tmp = tempfile.mkdtemp(prefix="aoi-pyclient-")
        threads = os.environ.get("AOI_TEST_THREADS") or "2"
        cmd = [
            str(AOI_BIN), "serve", "--model", str(AOI_MODEL), "--host", "127.0.0.1", "--port", "0",
            "--threads", threads, "--data-dir", os.path.join(self.tmp, "data"),
        ]
        for key in self.api_keys:
            cmd += ["--api-key", key]
        if self.tenants:
            keys_file = os.path.join(self.tmp, "keys.txt")
            Path(keys_file).write_text("\n".join(self.tenants) + "\n")
            cmd += ["--api-keys", keys_file]
        cmd += self.args
        cmd += os.environ.get("AOI_SERVE_ARGS", "").split()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            encoding="utf-8", errors="replace",
        )
        _LIVE.add(self)
        self._reader = threading.Thread(target=self._read_output, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self._ready.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                code = self.proc.poll()
                self.kill()
                raise AssertionError(
                    f"aoi serve did not become ready (exit status {code}) within {STARTUP_TIMEOUT_S} s\n"
                    f"command: {' '.join(cmd)}\n{self.logs()[-4000:]}"
                )
        self._wait_health(deadline)
        return self

    def _read_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        pattern = re.compile(r"aoi: listening on (http://\S+)")
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self._lines.append(line)
            if os.environ.get("AOI_TEST_VERBOSE"):
                print(line, file=sys.stderr)
            m = pattern.search(line)
            if m and not self._ready.is_set():
                self.url = m.group(1).rstrip("/")
                self._ready.set()

    def _wait_health(self, deadline: float) -> None:
        host, port = self.address
        while True:
            try:
                conn = http.client.HTTPConnection(host, port, timeout=5)
                conn.request("GET", "/health")
                resp = conn.getresponse()
                body = resp.read()
                conn.close()
                if resp.status == 200 and json.loads(body).get("status") == "ok":
                    return
            except (OSError, ValueError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"/health did not answer ok within {STARTUP_TIMEOUT_S} s\n{self.logs()[-4000:]}")
            time.sleep(0.05)

    @property
    def address(self) -> Tuple[str, int]:
        m = re.match(r"http://([^:/]+):(\d+)", self.url)
        assert m, self.url
        return m.group(1), int(m.group(2))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 20.0) -> Tuple[Optional[int], bool]:
        """SIGTERM, then SIGKILL after ``grace_s``: (exit status, whether it had to be killed)."""
        forced = False
        code: Optional[int] = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(grace_s)
                except subprocess.TimeoutExpired:
                    forced = True
                    self.proc.kill()
                    self.proc.wait()
            code = self.proc.returncode
            if self._reader is not None:
                self._reader.join(5)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        self._remove_tmp()
        return code, forced

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        _LIVE.discard(self)
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = ""

    def stop_and_check(self) -> None:
        """Stops the server; fails if it died during the tests or did not exit cleanly on SIGTERM."""
        was_alive = self.alive()
        code, forced = self.stop()
        logs = self.logs()[-4000:]
        if not was_alive:
            raise AssertionError(f"the server died during the tests (exit status {code})\n{logs}")
        if forced:
            raise AssertionError(f"the server did not stop within 20 s of SIGTERM\n{logs}")
        if code != 0:
            raise AssertionError(f"the server's exit status after SIGTERM is {code}\n{logs}")


class ModuleServer:
    """Starts one server for a test module (``setUpModule``/``tearDownModule``)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.server: Optional[LiveServer] = None

    def start(self) -> None:
        self.server = LiveServer(**self.kwargs).start()

    def stop(self) -> None:
        if self.server is not None:
            server, self.server = self.server, None
            server.stop_and_check()

    def get(self) -> LiveServer:
        if self.server is None:
            raise AssertionError("the module's server is not running (setUpModule failed)")
        return self.server


_counter = 0


def unique_id(prefix: str = "py") -> str:
    global _counter
    _counter += 1
    return f"{prefix}-{os.getpid()}-{_counter}"


def text_records(n: int, start: int = 0) -> List[str]:
    """OHLCV-like text lines, as the integration tests push."""
    out = []
    for i in range(start, start + n):
        p = f"{100 + i * 0.25:.2f}"
        out.append(f"2024-01-02 10:{i % 60:02d},O={p},H={p},L={p},C={p},V={1000 + i}")
    return out


def bar_records(n: int, start: int = 0) -> List[Dict[str, Any]]:
    return [
        {"t": f"2024-01-02 10:{i % 60:02d}", "o": 100 + i, "h": 101 + i, "l": 99 + i, "c": 100.5 + i, "v": 1000 + i}
        for i in range(start, start + n)
    ]


BAR_TEMPLATE = "{t} O={o} H={h} L={l} C={c} V={v}"


def wait_until(pred: Callable[[], Any], what: str, timeout: float = WAIT_TIMEOUT_S, poll: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)


class SessionCleanup(unittest.TestCase):
    """Deletes the sessions a test made (every session the admin key sees), so that the tests of a module do
    not hold each other's KV cells."""

    server_holder: ModuleServer

    def tearDown(self) -> None:
        server = self.server_holder.server
        if server is None or not server.alive():
            return
        from aoi_client import Client

        try:
            with Client(server.url, api_key=server.api_key, timeout=30) as c:
                for s in c.list_sessions():
                    c.delete_session(s.id, missing_ok=True)
        except Exception:  # cleanup only: the test itself reports a broken server
            pass


class CuttableProxy:
    """A loopback TCP proxy to ``target`` whose open connections a test can cut at once: what a client sees
    when a network path or a load balancer drops its connection, while the server stays up."""

    def __init__(self, target: Tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._pairs: List[Tuple[socket.socket, socket.socket]] = []
        self.connections = 0
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.connections += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> int:
        """Closes every connection open now; returns how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()
