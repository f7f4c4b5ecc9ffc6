"""Sessions against a live server: create, get, list, delete, snapshots and residency, and the typed errors
the server's answers turn into."""

from __future__ import annotations

import re
import unittest

from tests.support import ADMIN_KEY, REPO_ROOT, SMALL, ModuleServer, SessionCleanup, text_records, unique_id

import aoi_client
from aoi_client import (
    Client,
    ConflictError,
    InvalidValueError,
    NotFoundError,
    ReadyQuestion,
    Retention,
    UnauthorizedError,
)

SERVER = ModuleServer()


def setUpModule() -> None:
    SERVER.start()


def tearDownModule() -> None:
    SERVER.stop()


class SessionsTest(SessionCleanup):
    server_holder = SERVER

    def setUp(self) -> None:
        server = SERVER.get()
        self.client = Client(server.url, api_key=server.api_key)
        self.addCleanup(self.client.close)

    def test_create_get_list_delete(self) -> None:
        sid = unique_id("crud")
        created = self.client.create_session(
            sid,
            system="You are a log analyst.",
            retention=Retention(max_tokens=512, evict_fraction=0.5),
            query_budget=128,
            mode="stateful",
        )
        self.assertEqual(created.id, sid)
        self.assertEqual(created.tenant, "")  # an admin's session
        self.assertEqual(created.mode, "stateful")
        self.assertEqual(created.eviction, "recompute")
        self.assertEqual(created.retention.max_tokens, 512)
        self.assertIsNone(created.retention.max_records)
        self.assertAlmostEqual(created.retention.evict_fraction, 0.5)
        self.assertEqual(created.query_budget, 128)
        self.assertEqual(created.residency, "resident")
        self.assertGreater(created.regions.system_tokens, 0)
        self.assertEqual((created.last_seq_pushed, created.last_seq_ingested, created.pending), (0, 0, 0))
        self.assertEqual(created.flash, ())
        self.assertGreater(created.kv.cells_reserved, 0)
        self.assertEqual(created.raw["id"], sid)

        got = self.client.get_session(sid)
        self.assertEqual(got.id, sid)
        self.assertEqual(got.created, created.created)

        listed = {s.id: s for s in self.client.list_sessions()}
        self.assertIn(sid, listed)
        self.assertEqual(listed[sid].query_budget, 128)

        self.assertTrue(self.client.delete_session(created))  # a Session is as good as its id
        with self.assertRaises(NotFoundError) as caught:
            self.client.get_session(sid)
        self.assertEqual(caught.exception.status, 404)
        self.assertEqual(caught.exception.type, "not_found")
        self.assertNotIn(sid, {s.id for s in self.client.list_sessions()})
        self.assertFalse(self.client.delete_session(sid, missing_ok=True))
        with self.assertRaises(NotFoundError):
            self.client.delete_session(sid)

    def test_generated_id_template_and_ready_question(self) -> None:
        created = self.client.create_session(
            template="{t} C={c}",
            ready=ReadyQuestion("Is the trend UP or DOWN?", ["UP", "DOWN"], tau=2.0),
            **SMALL,
        )
        self.assertTrue(created.id)
        pushed = self.client.push(created.id, [{"t": "10:00", "c": 101.5}, {"t": "10:01", "c": 102}])
        self.assertEqual(pushed.accepted, 2)
        session = self.client.wait_ingested(created.id, pushed.last_seq)
        self.assertEqual(session.records.ingested, 2)
        window = self.client.window_records(created.id, last=5)
        self.assertEqual([r.seq for r in window], [1, 2])
        self.assertEqual(window[1].text, "10:01 C=102")

    def test_errors_are_typed_and_carry_the_field(self) -> None:
        with self.assertRaises(InvalidValueError) as caught:
            self.client.create_session(unique_id(), retention={"max_tokens": 0})
        err = caught.exception
        self.assertEqual((err.status, err.type, err.field), (422, "invalid_value", "retention.max_tokens"))
        self.assertTrue(err.message)
        self.assertEqual(err.body["error"]["field"], "retention.max_tokens")
        self.assertIn("retention.max_tokens", str(err))

        with self.assertRaises(InvalidValueError) as caught:
            self.client.create_session(unique_id(), extra_fields={"retentoin": {}}, **SMALL)
        self.assertEqual(caught.exception.field, "retentoin")

        with self.assertRaises(InvalidValueError) as caught:
            self.client.create_session(unique_id(), mode="lazy", **SMALL)
        self.assertEqual(caught.exception.field, "mode")

        sid = unique_id()
        self.client.create_session(sid, **SMALL)
        with self.assertRaises(ConflictError) as caught:
            self.client.create_session(sid, **SMALL)
        self.assertEqual(caught.exception.status, 409)

        with self.assertRaises(NotFoundError):
            self.client.push(unique_id("missing"), ["a line"])

        server = SERVER.get()
        with Client(server.url, api_key="sk-wrong") as wrong:
            with self.assertRaises(UnauthorizedError) as caught:
                wrong.list_sessions()
            self.assertEqual((caught.exception.status, caught.exception.type), (401, "unauthorized"))
            self.assertEqual(wrong.health()["status"], "ok")  # /health needs no key

    def test_every_server_error_type_has_its_class(self) -> None:
        # The server's error types are named in one place (src/common/error.cpp); a type added there without
        # a class here would reach callers as the generic APIError.
        source = (REPO_ROOT / "src" / "common" / "error.cpp").read_text()
        names = set(re.findall(r'case ErrorType::\w+: return "(\w+)";', source))
        self.assertGreaterEqual(len(names), 10, "the error type table in src/common/error.cpp was not found")
        self.assertEqual(names - set(aoi_client.ERROR_TYPES), set())
        for name, cls in aoi_client.ERROR_TYPES.items():
            self.assertEqual(cls.error_type, name)

    def test_snapshots_save_unload_load(self) -> None:
        sid = unique_id("snap")
        self.client.create_session(sid, **SMALL)
        pushed = self.client.push(sid, text_records(12))
        self.client.wait_ingested(sid, pushed.last_seq)

        saved = self.client.save_session(sid)
        self.assertEqual(saved.id, sid)
        self.assertEqual(saved.last_seq, 12)
        self.assertGreater(saved.bytes, 0)

        snapshot = self.client.export_session(sid)
        self.assertEqual(snapshot.last_seq, 12)
        self.assertIsNotNone(snapshot.data_version)
        self.assertGreater(len(snapshot.data), 0)

        copy_id = unique_id("copy")
        copy = self.client.import_session(snapshot, id=copy_id)
        self.assertEqual(copy.id, copy_id)
        self.assertEqual(copy.last_seq_pushed, 12)
        self.assertEqual(copy.regions.records, self.client.get_session(sid).regions.records)
        with self.assertRaises(InvalidValueError) as caught:
            self.client.import_session(b"not a snapshot", id=unique_id())
        self.assertEqual(caught.exception.field, "body")

        self.client.unload_session(sid)
        self.assertEqual(self.client.get_session(sid).residency, "on_disk")
        load_ms = self.client.load_session(sid)
        self.assertGreaterEqual(load_ms, 0.0)
        self.assertEqual(self.client.get_session(sid).residency, "resident")

        context = self.client.context(sid, question="What was the last close?")
        self.assertGreater(len(context.tokens), 0)
        self.assertGreater(len(context.question_tokens), 0)
        self.assertIn("O=100.00", context.text)

    def test_api_key_comes_from_the_environment(self) -> None:
        server = SERVER.get()
        import os
        from unittest import mock

        with mock.patch.dict(os.environ, {"AOI_SERVER": server.url, "AOI_API_KEY": ADMIN_KEY}):
            with Client() as c:
                self.assertEqual(c.base_url, server.url)
                self.assertIsInstance(c.list_sessions(), list)


if __name__ == "__main__":
    unittest.main()
