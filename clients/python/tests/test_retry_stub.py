"""The client's retry logic against a scripted stand-in for the server.

A stub is used here, and only here, because what is under test is the client's decisions, in cases a live
server cannot be made to produce on demand: a 503 with a given Retry-After, and above all an answer lost
after the server did (or did not) accept a batch, which is what "never send an acknowledged batch twice"
is about. The stub speaks just enough of the API (the session's ``last_seq_pushed``, the push acknowledgement,
the error body) for those decisions; test_push.py checks the same client against real 429 refusals.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Deque, Dict, List, Optional, Tuple

from aoi_client import (
    AsyncClient,
    Client,
    ConnectError,
    ConnectionLostError,
    InternalServerError,
    NotReadyError,
    PushUncertainError,
    QuotaExceededError,
    RetryPolicy,
)

FAST = RetryPolicy(max_retries=5, backoff=0.01, max_backoff=0.05)


class StubAoi:
    """Scripted answers for ``POST /v1/sessions/stub/data`` (and ``/query``, ``POST /v1/sessions``).

    Script entries, taken one per request: ``("accept",)``; ``("refuse", status, type, retry_after)``;
    ``("lost", accepted, other_writer_records)``: the connection is closed without an answer, after
    accepting the batch or not, and after another writer's records moved the sequence on or not;
    ``("sse", text)``: a 200 event stream of ``text``, as aoi writes one (no length, closed at the end).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last_seq = 0
        self.accepted: List[List[Any]] = []  # the batches taken, in order
        self.requests: List[Tuple[str, str]] = []
        self.script: Deque[Tuple[Any, ...]] = collections.deque()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Dict[str, Any], headers: Optional[Dict[str, str]] = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _drop(self) -> None:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"{}")

            def do_GET(self) -> None:
                with stub.lock:
                    stub.requests.append(("GET", self.path))
                    seq = stub.last_seq
                if self.path == "/v1/sessions/stub":
                    self._send(200, {"id": "stub", "last_seq_pushed": seq, "last_seq_ingested": seq, "pending": 0})
                else:
                    self._send(404, {"type": "error", "error": {"type": "not_found", "message": "no route"}})

            def do_POST(self) -> None:
                body = self._body()
                with stub.lock:
                    stub.requests.append(("POST", self.path))
                    action = stub.script.popleft() if stub.script else ("accept",)
                    if action[0] == "refuse":
                        _, status, err_type, retry_after = action
                        headers = {"Retry-After": retry_after} if retry_after is not None else {}
                        err = {"type": err_type, "message": "scripted refusal"}
                        if err_type == "quota_exceeded":
                            err["field"] = "records_per_s"
                        self._send(status, {"type": "error", "error": err}, headers)
                        return
                    if self.path == "/v1/sessions/stub/data":
                        records = body["records"]
                        taken = action[0] == "accept" or (action[0] == "lost" and action[1])
                        first = stub.last_seq + 1
                        if taken:
                            stub.accepted.append(records)
                            stub.last_seq += len(records)
                        if action[0] == "lost":
                            stub.last_seq += action[2]  # another writer's records
                            self._drop()
                            return
                        self._send(
                            202,
                            {"accepted": len(records), "first_seq": first, "last_seq": stub.last_seq, "dropped": 0},
                        )
                        return
                    if action[0] == "lost":
                        self._drop()
                        return
                    if action[0] == "sse":  # a streamed answer, written as given, then the connection closes
                        self.send_response(200)
                        self.send_header("Content-Type", "text/event-stream")
                        self.send_header("Connection", "close")
                        self.end_headers()
                        self.wfile.write(action[1].encode())
                        self.close_connection = True
                        return
                    if self.path == "/v1/sessions/stub/query":
                        self._send(200, {"answer": "UP", "path": "standard", "data_version": 1,
                                         "tokens": {"question": 3, "answer": 1}, "finish_reason": "stop",
                                         "logit_gap": 1.0, "timings": {"queue_ms": 0, "prompt_ms": 1,
                                                                       "generate_ms": 1, "total_ms": 2}})
                        return
                    self._send(201, {"id": "stub"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def data_posts(self) -> int:
        return sum(1 for m, p in self.requests if m == "POST" and p.endswith("/data"))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# A streamed answer that fails after two pieces, with CRLF line ends and a comment, which SSE allows.
FAILING_STREAM = (
    'event: token\r\ndata: {"text":"Hel"}\r\n\r\n: ping\n\nevent: token\ndata: {"text":"lo"}\n\n'
    'event: error\ndata: {"type":"internal_error","message":"engine failed"}\n\n'
)


class SyncRetryTest(unittest.TestCase):
    def setUp(self) -> None:
        self.stub = StubAoi()
        self.addCleanup(self.stub.close)
        self.client = Client(self.stub.url, retry=FAST)
        self.addCleanup(self.client.close)

    def test_a_refusal_is_retried_after_its_retry_after(self) -> None:
        self.stub.script.append(("refuse", 503, "not_ready", "1"))
        start = time.monotonic()
        result = self.client.push("stub", ["a", "b", "c"])
        self.assertGreaterEqual(time.monotonic() - start, 1.0)  # not FAST's 10 ms backoff
        self.assertEqual(result.retries, 1)
        self.assertEqual(result.batches[0].attempts, 2)
        self.assertEqual(self.stub.accepted, [["a", "b", "c"]])

    def test_a_refusal_without_retry_after_backs_off(self) -> None:
        self.stub.script.extend([("refuse", 429, "overloaded", None)] * 2)
        result = self.client.push("stub", ["a"])
        self.assertEqual(result.retries, 2)
        self.assertEqual(self.stub.accepted, [["a"]])

    def test_a_lost_answer_of_an_accepted_batch_is_not_sent_again(self) -> None:
        self.stub.script.append(("lost", True, 0))
        result = self.client.push("stub", ["a", "b", "c", "d"], batch_size=2)
        self.assertEqual(self.stub.accepted, [["a", "b"], ["c", "d"]])  # each batch once
        self.assertEqual(self.stub.data_posts(), 2)
        first, second = result.batches
        self.assertTrue(first.recovered)
        self.assertEqual((first.first_seq, first.last_seq, first.accepted), (1, 2, 2))
        self.assertFalse(second.recovered)
        self.assertEqual((second.first_seq, second.last_seq), (3, 4))
        self.assertEqual((result.first_seq, result.last_seq, result.accepted), (1, 4, 4))

    def test_a_lost_answer_of_a_batch_not_taken_is_sent_again(self) -> None:
        self.stub.script.append(("lost", False, 0))
        result = self.client.push("stub", ["a", "b"])
        self.assertEqual(self.stub.accepted, [["a", "b"]])
        self.assertEqual(self.stub.data_posts(), 2)
        self.assertEqual(result.batches[0].attempts, 2)
        self.assertFalse(result.batches[0].recovered)
        self.assertEqual(result.retries, 1)

    def test_another_writer_makes_a_lost_answer_uncertain(self) -> None:
        self.client.push("stub", ["x"])  # acknowledged before
        self.stub.script.append(("lost", False, 3))
        with self.assertRaises(PushUncertainError) as caught:
            self.client.push("stub", ["a", "b", "c", "d"], batch_size=2)
        err = caught.exception
        self.assertEqual((err.before, err.seen, err.offset), (1, 4, 0))
        self.assertEqual(err.records, ["a", "b"])
        self.assertEqual(err.partial.accepted, 0)
        self.assertIsInstance(err.__cause__, ConnectionLostError)
        self.assertEqual(self.stub.accepted, [["x"]])  # nothing sent blindly

    def test_on_uncertain_raise_and_resend(self) -> None:
        self.stub.script.append(("lost", True, 0))
        with self.assertRaises(PushUncertainError):
            self.client.push("stub", ["a"], on_uncertain="raise")
        self.assertEqual(self.stub.data_posts(), 1)
        # "resend" is at-least-once: the batch the server took goes again.
        self.stub.script.append(("lost", True, 0))
        result = self.client.push("stub", ["b"], on_uncertain="resend")
        self.assertEqual(result.accepted, 1)
        self.assertEqual(self.stub.accepted, [["a"], ["b"], ["b"]])

    def test_a_long_retry_after_is_not_waited_out(self) -> None:
        self.stub.script.append(("refuse", 429, "quota_exceeded", "60"))
        start = time.monotonic()
        with self.assertRaises(QuotaExceededError) as caught:
            self.client.push("stub", ["a"])
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(caught.exception.retry_after, 60)
        self.assertEqual(caught.exception.field, "records_per_s")
        self.assertEqual(self.stub.data_posts(), 1)

    def test_retries_run_out(self) -> None:
        self.stub.script.extend([("refuse", 503, "not_ready", "0")] * 4)
        with Client(self.stub.url, retry=RetryPolicy(max_retries=2, backoff=0.01)) as c:
            with self.assertRaises(NotReadyError) as caught:
                c.push("stub", ["a", "b"], batch_size=1)
        self.assertEqual(self.stub.data_posts(), 3)
        self.assertEqual(caught.exception.partial.accepted, 0)

    def test_a_lost_question_is_asked_again_a_lost_create_is_not(self) -> None:
        self.stub.script.append(("lost", False, 0))
        self.assertEqual(self.client.ask("stub", "Trend?").answer, "UP")
        self.assertEqual(sum(1 for m, p in self.stub.requests if p.endswith("/query")), 2)
        self.stub.script.append(("lost", False, 0))
        with self.assertRaises(ConnectionLostError):
            self.client.create_session("stub")  # sent again it could answer 409 for its own session
        self.assertEqual(sum(1 for m, p in self.stub.requests if p == "/v1/sessions"), 1)

    def test_an_error_event_ends_a_streamed_answer_after_its_pieces(self) -> None:
        self.stub.script.append(("sse", FAILING_STREAM))
        pieces = []
        with self.assertRaises(InternalServerError) as caught:
            with self.client.ask_stream("stub", "Trend?") as stream:
                for piece in stream:
                    pieces.append(piece)
        self.assertEqual(pieces, ["Hel", "lo"])
        self.assertEqual((caught.exception.status, caught.exception.message), (500, "engine failed"))
        self.assertIsNone(stream.answer)
        # A stream cut before its done event is a lost answer, not a short one.
        self.stub.script.append(("sse", 'event: token\ndata: {"text":"Hel"}\n\n'))
        with self.assertRaises(ConnectionLostError):
            self.client.ask_stream("stub", "Trend?").final_answer()

    def test_no_server_is_a_connect_error(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # free once closed: nothing listens there
        with Client(f"http://127.0.0.1:{port}", retry=RetryPolicy(max_retries=2, backoff=0.01)) as c:
            with self.assertRaises(ConnectError) as caught:
                c.push("stub", ["a"], on_uncertain="resend")
        self.assertFalse(caught.exception.request_sent)


class AsyncRetryTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.stub = StubAoi()
        self.client = AsyncClient(self.stub.url, retry=FAST)

    async def asyncTearDown(self) -> None:
        await self.client.aclose()

    def tearDown(self) -> None:
        self.stub.close()  # blocks until the stub's thread ends: outside the event loop

    async def test_a_refusal_is_retried_after_its_retry_after(self) -> None:
        self.stub.script.append(("refuse", 503, "not_ready", "1"))
        start = time.monotonic()
        result = await self.client.push("stub", ["a", "b", "c"])
        self.assertGreaterEqual(time.monotonic() - start, 1.0)
        self.assertEqual(result.retries, 1)
        self.assertEqual(self.stub.accepted, [["a", "b", "c"]])

    async def test_a_lost_answer_of_an_accepted_batch_is_not_sent_again(self) -> None:
        self.stub.script.append(("lost", True, 0))
        result = await self.client.push("stub", ["a", "b", "c", "d"], batch_size=2)
        self.assertEqual(self.stub.accepted, [["a", "b"], ["c", "d"]])
        self.assertTrue(result.batches[0].recovered)
        self.assertEqual((result.first_seq, result.last_seq), (1, 4))

    async def test_a_lost_answer_of_a_batch_not_taken_is_sent_again(self) -> None:
        self.stub.script.append(("lost", False, 0))
        result = await self.client.push("stub", ["a", "b"])
        self.assertEqual(self.stub.accepted, [["a", "b"]])
        self.assertEqual(result.batches[0].attempts, 2)

    async def test_another_writer_makes_a_lost_answer_uncertain(self) -> None:
        self.stub.script.append(("lost", False, 2))
        with self.assertRaises(PushUncertainError) as caught:
            await self.client.push("stub", ["a"])
        self.assertEqual((caught.exception.before, caught.exception.seen), (0, 2))
        self.assertEqual(self.stub.accepted, [])

    async def test_an_error_event_ends_a_streamed_answer_after_its_pieces(self) -> None:
        self.stub.script.append(("sse", FAILING_STREAM))
        pieces = []
        with self.assertRaises(InternalServerError):
            async with self.client.ask_stream("stub", "Trend?") as stream:
                async for piece in stream:
                    pieces.append(piece)
        self.assertEqual(pieces, ["Hel", "lo"])

    async def test_a_lost_question_is_asked_again(self) -> None:
        self.stub.script.append(("lost", False, 0))
        answer = await self.client.ask("stub", "Trend?")
        self.assertEqual(answer.answer, "UP")


if __name__ == "__main__":
    unittest.main()
