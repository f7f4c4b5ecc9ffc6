"""Session events against a live server: the SSE iterator, resuming by Last-Event-ID after the client closes
its connection and after the connection is cut under it (through a proxy), error events, and the end of the
stream when the session is deleted."""

from __future__ import annotations

import threading
import unittest
from typing import List

from tests.support import (
    SMALL,
    WAIT_TIMEOUT_S,
    CuttableProxy,
    ModuleServer,
    SessionCleanup,
    text_records,
    unique_id,
)

from aoi_client import Client, Event, EventStream, NotFoundError

SERVER = ModuleServer()


def setUpModule() -> None:
    SERVER.start()


def tearDownModule() -> None:
    SERVER.stop()


def read_until(stream: EventStream, pred, what: str, timeout: float = WAIT_TIMEOUT_S) -> List[Event]:
    """Events from ``stream`` up to and including the first for which ``pred`` holds. Past ``timeout`` the
    stream is closed (from another thread, which ends a waiting iteration) and the test fails."""
    seen: List[Event] = []
    watchdog = threading.Timer(timeout, stream.close)
    watchdog.start()
    try:
        for ev in stream:
            seen.append(ev)
            if pred(ev):
                return seen
    finally:
        watchdog.cancel()
    raise AssertionError(f"no {what} within {timeout} s; saw {[(e.id, e.type) for e in seen]}")


def data_through(seq: int):
    return lambda ev: ev.type == "data_updated" and ev.data.get("last_seq", 0) >= seq


class EventsTest(SessionCleanup):
    server_holder = SERVER

    def setUp(self) -> None:
        server = SERVER.get()
        self.client = Client(server.url, api_key=server.api_key)
        self.addCleanup(self.client.close)
        self.sid = unique_id("ev")
        self.client.create_session(self.sid, **SMALL)

    def assert_consecutive(self, events: List[Event]) -> None:
        ids = [e.id for e in events]
        self.assertTrue(all(i is not None for i in ids), ids)
        self.assertEqual(ids, list(range(ids[0], ids[0] + len(ids))), f"ids with a gap or a repeat: {ids}")

    def test_events_then_resume_after_closing(self) -> None:
        # From id 0 on a fresh session: every event it has. (A stream without Last-Event-ID starts with new
        # events only, and the server answers its head before it subscribes, so the events of a push sent
        # right after the head could come before the subscription.)
        with self.client.events(self.sid, last_event_id=0, idle_timeout=30) as stream:
            first = self.client.push(self.sid, text_records(5))
            before = read_until(stream, data_through(first.last_seq), "data_updated for the first push")
            last_id = stream.last_event_id
        self.assertEqual(last_id, before[-1].id)
        updated = before[-1]
        for key in ("version", "records_added", "tokens_added", "pending", "last_seq", "ingest_ms"):
            self.assertIn(key, updated.data)

        # While nobody listens, more data comes and is ingested...
        second = self.client.push(self.sid, text_records(5, 5))
        self.client.wait_ingested(self.sid, second.last_seq)
        # ...and a new stream resuming after the last id seen gets exactly what was missed.
        with self.client.events(self.sid, last_event_id=last_id, idle_timeout=30) as resumed:
            after = read_until(resumed, data_through(second.last_seq), "data_updated for the second push")
        self.assertEqual(after[0].id, last_id + 1)
        self.assert_consecutive(before + after)

        # From id 0, every kept event comes again, in order.
        with self.client.events(self.sid, last_event_id=0) as replay:
            everything = read_until(replay, data_through(second.last_seq), "the replay's last data_updated")
        self.assertEqual([e.id for e in everything], [e.id for e in before + after if e.id >= everything[0].id])

    def test_a_cut_connection_is_resumed_without_loss_or_repeat(self) -> None:
        server = SERVER.get()
        proxy = CuttableProxy(server.address)
        self.addCleanup(proxy.close)
        with Client(proxy.url, api_key=server.api_key) as via_proxy:
            stream = via_proxy.events(self.sid, last_event_id=0, idle_timeout=30)
            self.addCleanup(stream.close)
            first = self.client.push(self.sid, text_records(5))
            seen = read_until(stream, data_through(first.last_seq), "data_updated for the first push")
            self.assertEqual(proxy.connections, 1)

            self.assertEqual(proxy.cut(), 1)
            # Events published while the connection is down must come on the next one.
            second = self.client.push(self.sid, text_records(5, 5))
            self.client.wait_ingested(self.sid, second.last_seq)
            seen += read_until(stream, data_through(second.last_seq), "data_updated after the cut")
            self.assertEqual(stream.reconnects, 1)
            self.assertEqual(proxy.connections, 2)

            # Once more, cut in the middle of nothing: the stream goes on.
            proxy.cut()
            third = self.client.push(self.sid, text_records(5, 10))
            seen += read_until(stream, data_through(third.last_seq), "data_updated after the second cut")
            self.assertEqual(stream.reconnects, 2)
            stream.close()
        self.assert_consecutive(seen)
        self.assertEqual(stream.last_event_id, seen[-1].id)

    def test_error_events_are_typed(self) -> None:
        sid = unique_id("tight")
        self.client.create_session(sid, retention={"max_tokens": 32}, query_budget=64)
        with self.client.events(sid, last_event_id=0, idle_timeout=30) as stream:
            too_long = " ".join(f"word{i}" for i in range(200))
            pushed = self.client.push(sid, [too_long])  # accepted; refused at ingestion: too long for the window
            ev = read_until(stream, lambda e: e.type == "error", "an error event")[-1]
        err = ev.error
        self.assertIsNotNone(err)
        self.assertEqual(err.field, "records")
        self.assertTrue(err.type)
        self.assertTrue(err.message)
        self.assertEqual(ev.data.get("seq"), pushed.last_seq)
        self.assertEqual(self.client.get_session(sid).records.rejected, 1)

    def test_the_stream_ends_when_the_session_is_deleted(self) -> None:
        stream = self.client.events(self.sid, idle_timeout=30)
        self.addCleanup(stream.close)
        stream.__enter__()
        deleter = threading.Timer(0.3, lambda: self.client.delete_session(self.sid))
        deleter.start()
        self.addCleanup(deleter.cancel)
        events = list(stream)  # ends by itself
        deleter.join()
        self.assertEqual(events[-1].type, "session_deleted")
        self.assertEqual(events[-1].data.get("id"), self.sid)
        with self.assertRaises(NotFoundError):
            with self.client.events(self.sid) as gone:
                next(gone)

    def test_close_from_another_thread_ends_iteration(self) -> None:
        stream = self.client.events(self.sid, idle_timeout=30)
        stream.__enter__()
        threading.Timer(0.3, stream.close).start()
        self.assertEqual(list(stream), [])


if __name__ == "__main__":
    unittest.main()
