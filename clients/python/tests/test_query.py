"""Questions and flash questions against a live server. The model has random weights: the tests check
shapes, paths, versions and that the streamed pieces make the answer, never what the answer says."""

from __future__ import annotations

import json
import unittest

from tests.support import SMALL, ModuleServer, SessionCleanup, text_records, unique_id, wait_until

from aoi_client import (
    Answer,
    Client,
    ConflictError,
    InvalidValueError,
    NotFoundError,
    ServerTimeoutError,
)

SERVER = ModuleServer()


def setUpModule() -> None:
    SERVER.start()


def tearDownModule() -> None:
    SERVER.stop()


class QueryTest(SessionCleanup):
    server_holder = SERVER

    def setUp(self) -> None:
        server = SERVER.get()
        self.client = Client(server.url, api_key=server.api_key)
        self.addCleanup(self.client.close)
        self.sid = unique_id("q")
        self.client.create_session(self.sid, **SMALL)
        self.pushed = self.client.push(self.sid, text_records(20))

    def assert_answer(self, a: Answer, max_tokens: int) -> None:
        self.assertIsInstance(a.answer, str)
        self.assertIn(a.path, ("flash", "speculative", "standard"))
        self.assertIn(a.finish_reason, ("stop", "length"))
        self.assertLessEqual(a.tokens.answer, max_tokens)
        self.assertGreaterEqual(a.timings.total_ms, 0.0)

    def test_ask_reads_its_writes(self) -> None:
        answer = self.client.ask(self.sid, "What was the last close?", max_tokens=6, min_seq=self.pushed.last_seq)
        self.assert_answer(answer, 6)
        self.assertEqual(answer.path, "standard")
        self.assertGreater(answer.tokens.question, 0)
        self.assertGreaterEqual(answer.data_version, 1)
        session = self.client.get_session(self.sid)
        self.assertEqual(session.last_seq_ingested, 20)  # min_seq waited for the push
        self.assertGreaterEqual(session.queries, 1)

        detailed = self.client.ask(self.sid, "And the volume?", max_tokens=3, details=True, stop=["\n"])
        self.assertIsNotNone(detailed.details)
        self.assertEqual(len(detailed.details["token_ids"]), detailed.tokens.answer)

    def test_ask_stream_yields_the_answer_in_pieces(self) -> None:
        with self.client.ask_stream(self.sid, "Summarise the bars.", max_tokens=8, min_seq=self.pushed.last_seq) as s:
            pieces = list(s)
        self.assertIsNotNone(s.answer)
        self.assert_answer(s.answer, 8)
        self.assertGreater(len(pieces), 0)
        self.assertEqual("".join(pieces), s.answer.answer)
        self.assertEqual(s.text, s.answer.answer)

        # The same question greedy: the same answer, streamed or not.
        whole = self.client.ask(self.sid, "Summarise the bars.", max_tokens=8)
        self.assertEqual(whole.answer, s.answer.answer)

        # final_answer() reads the rest without iterating by hand.
        stream = self.client.ask_stream(self.sid, "Summarise the bars.", max_tokens=8)
        self.assertEqual(stream.final_answer().answer, whole.answer)

    def test_ask_errors_are_typed(self) -> None:
        with self.assertRaises(ServerTimeoutError) as caught:
            self.client.ask(self.sid, "Later?", min_seq=10_000, wait_ms=100)
        self.assertEqual((caught.exception.status, caught.exception.type), (504, "timeout"))
        # A stream refused before it started is the same plain error.
        with self.assertRaises(ServerTimeoutError):
            with self.client.ask_stream(self.sid, "Later?", min_seq=10_000, wait_ms=100) as s:
                list(s)
        with self.assertRaises(InvalidValueError) as caught:
            self.client.ask(self.sid, "Hot?", temperature=99)
        self.assertEqual(caught.exception.field, "temperature")
        with self.assertRaises(InvalidValueError) as caught:
            self.client.ask(self.sid, "Hot?", extra_fields={"max_token": 3})
        self.assertEqual(caught.exception.field, "max_token")
        with self.assertRaises(NotFoundError):
            self.client.ask(unique_id("missing"), "Anyone?")

    def test_leaving_a_stream_early_closes_it(self) -> None:
        with self.client.ask_stream(self.sid, "Tell a long story.", max_tokens=64) as s:
            first = next(s)
        self.assertIsInstance(first, str)
        self.assertIsNone(s.answer)
        # The connection is gone; the server still answers the next question.
        self.assert_answer(self.client.ask(self.sid, "Still there?", max_tokens=2), 2)

    def test_flash_register_list_answer_remove(self) -> None:
        question = "Is the trend UP or DOWN?"
        fq = self.client.add_flash(self.sid, question, max_tokens=4)
        self.assertTrue(fq.fid)
        self.assertEqual((fq.question, fq.max_tokens), (question, 4))
        with self.assertRaises(ConflictError):
            self.client.add_flash(self.sid, question, max_tokens=4)
        with self.assertRaises(InvalidValueError) as caught:
            self.client.add_flash(self.sid, "Too long?", max_tokens=5000)
        self.assertEqual(caught.exception.field, "max_tokens")

        # A new data version starts a flash round that answers it.
        pushed = self.client.push(self.sid, text_records(3, 20))
        self.client.wait_ingested(self.sid, pushed.last_seq)
        version = self.client.get_session(self.sid).data_version

        def answered():
            listed = {f.fid: f for f in self.client.list_flash(self.sid)}
            f = listed.get(fq.fid)
            return f if f is not None and f.answer is not None and f.version == version else None

        flash = wait_until(answered, f"flash query {fq.fid} answered at version {version}")
        self.assertIsNotNone(flash.logit_gap)
        self.assertIn(fq.fid, [f.fid for f in self.client.get_session(self.sid).flash])

        # Asked the same way (greedy, the same max_tokens), it is answered from the flash cache.
        answer = self.client.ask(self.sid, "  Is the trend   UP or DOWN?", max_tokens=4)
        self.assertEqual(answer.path, "flash")
        self.assertEqual(answer.answer, flash.answer)

        self.client.remove_flash(self.sid, fq.fid)
        self.assertEqual(self.client.list_flash(self.sid), [])
        with self.assertRaises(NotFoundError):
            self.client.remove_flash(self.sid, fq.fid)

    def test_json_schema_holds_questions_and_flash_answers(self) -> None:
        schema = {
            "type": "object",
            "properties": {"trend": {"enum": ["UP", "DOWN"]}},
            "required": ["trend"],
            "additionalProperties": False,
        }

        def in_schema(text: str) -> bool:
            try:
                value = json.loads(text)
            except ValueError:
                return False
            return isinstance(value, dict) and list(value) == ["trend"] and value["trend"] in ("UP", "DOWN")

        asked = self.client.ask(self.sid, "The trend, as JSON?", max_tokens=32, json_schema=schema)
        self.assertTrue(in_schema(asked.answer), asked.answer)
        with self.assertRaises(InvalidValueError) as caught:
            self.client.ask(self.sid, "q", json_schema={"$ref": "#/definitions/none"})
        self.assertEqual(caught.exception.field, "json_schema")

        question = "Trend in JSON?"
        fq = self.client.add_flash(self.sid, question, max_tokens=32, json_schema=schema)
        self.assertEqual(fq.json_schema, schema)
        pushed = self.client.push(self.sid, text_records(3, 20))
        self.client.wait_ingested(self.sid, pushed.last_seq)
        version = self.client.get_session(self.sid).data_version

        def answered():
            f = {f.fid: f for f in self.client.list_flash(self.sid)}.get(fq.fid)
            return f if f is not None and f.answer is not None and f.version == version else None

        flash = wait_until(answered, f"flash query {fq.fid} answered at version {version}")
        self.assertTrue(in_schema(flash.answer), flash.answer)
        hit = self.client.ask(self.sid, question, max_tokens=32, json_schema=schema)
        self.assertEqual((hit.path, hit.answer), ("flash", flash.answer))
        self.assertEqual(self.client.ask(self.sid, question, max_tokens=32).path, "standard")


if __name__ == "__main__":
    unittest.main()
