"""Pushing records to a live server: batching, the sequence numbers of the acknowledgements, a bad record's
field, and retries after real 429 refusals (a tenant over its records_per_s quota)."""

from __future__ import annotations

import json
import time
import unittest

from tests.support import (
    BAR_TEMPLATE,
    SMALL,
    ModuleServer,
    SessionCleanup,
    bar_records,
    text_records,
    unique_id,
)

from aoi_client import Client, InvalidValueError, QuotaExceededError, RetryPolicy

TENANT_KEY = "sk-python-client-slow"
# 10 records a second: a bucket of 10 that a push of 10 empties, so the next push is refused for ~0.1 s
# (Retry-After: 1).
SERVER = ModuleServer(tenants=[f"{TENANT_KEY} slowpoke records_per_s=10"])


def setUpModule() -> None:
    SERVER.start()


def tearDownModule() -> None:
    SERVER.stop()


class PushTest(SessionCleanup):
    server_holder = SERVER

    def setUp(self) -> None:
        server = SERVER.get()
        self.client = Client(server.url, api_key=server.api_key)
        self.addCleanup(self.client.close)

    def test_batches_follow_the_session_sequence(self) -> None:
        sid = unique_id("batch")
        self.client.create_session(sid, **SMALL)
        records = text_records(300)
        result = self.client.push(sid, records, batch_size=64)

        self.assertEqual(len(result.batches), 5)  # 4 x 64 + 44
        self.assertEqual([b.size for b in result.batches], [64] * 4 + [44])
        self.assertEqual([b.offset for b in result.batches], [i * 64 for i in range(5)])
        self.assertEqual(result.accepted, 300)
        self.assertEqual((result.first_seq, result.last_seq), (1, 300))
        self.assertTrue(result.contiguous)
        for b in result.batches:
            self.assertEqual(b.last_seq - b.first_seq + 1, b.size)
            self.assertEqual(b.first_seq, b.offset + 1)  # this test is the session's only writer
            self.assertEqual((b.attempts, b.recovered), (1, False))
        self.assertEqual(result.retries, 0)
        self.assertEqual(result.dropped, 0)

        session = self.client.get_session(sid)
        self.assertEqual(session.last_seq_pushed, 300)
        self.assertEqual(session.records.pushed, 300)
        session = self.client.wait_ingested(sid, result.last_seq)
        counts = session.records
        self.assertEqual(counts.ingested + counts.dropped + counts.rejected, 300)

        # The next push carries on from there.
        more = self.client.push(sid, text_records(3, 300))
        self.assertEqual((more.first_seq, more.last_seq), (301, 303))

    def test_batches_bounded_by_bytes(self) -> None:
        sid = unique_id("bytes")
        self.client.create_session(sid, **SMALL)
        records = ["x" * 100] * 30
        result = self.client.push(sid, records, batch_size=1000, max_batch_bytes=1024)
        # Each record takes 103 bytes of JSON (quotes and comma) in a body of 14 bytes around them: 9 a batch.
        self.assertEqual([b.size for b in result.batches], [9, 9, 9, 3])
        self.assertEqual(result.accepted, 30)
        self.assertTrue(result.contiguous)

    def test_object_records_and_an_iterator(self) -> None:
        sid = unique_id("bars")
        self.client.create_session(sid, template=BAR_TEMPLATE, **SMALL)
        result = self.client.push(sid, iter(bar_records(25)), batch_size=10)  # any iterable, read lazily
        self.assertEqual([b.size for b in result.batches], [10, 10, 5])
        self.client.wait_ingested(sid, result.last_seq)
        window = self.client.window_records(sid, last=1)
        self.assertEqual(window[0].seq, 25)
        self.assertEqual(window[0].text, "2024-01-02 10:24 O=124 H=125 L=123 C=124.5 V=1024")

    def test_a_bad_record_names_its_index_in_the_callers_list(self) -> None:
        sid = unique_id("bad")
        self.client.create_session(sid, **SMALL)  # no template: an object without fields is refused
        records = text_records(12) + [{}] + text_records(5, 12)
        with self.assertRaises(InvalidValueError) as caught:
            self.client.push(sid, records, batch_size=5)
        err = caught.exception
        self.assertEqual(err.status, 422)
        self.assertEqual(err.field, "records[12]")
        self.assertEqual(err.server_field, "records[2]")  # its index in the third batch
        self.assertIsNotNone(err.partial)
        self.assertEqual(err.partial.accepted, 10)
        self.assertEqual(err.partial.last_seq, 10)
        # The refused batch took nothing, and the batches after it were not sent.
        self.assertEqual(self.client.get_session(sid).last_seq_pushed, 10)

        with self.assertRaises(TypeError):
            self.client.push(sid, "one line")  # a str is not a list of records
        with self.assertRaises(TypeError):
            self.client.push(sid, [b"bytes"])
        with self.assertRaises(ValueError):
            self.client.push(sid, [{"c": float("nan")}])

    def test_retries_after_quota_refusals(self) -> None:
        server = SERVER.get()
        with Client(server.url, api_key=TENANT_KEY) as tenant:
            sid = unique_id("quota")
            tenant.create_session(sid, **SMALL)
            start = time.monotonic()
            result = tenant.push(sid, text_records(30), batch_size=10)
            elapsed = time.monotonic() - start
            self.assertGreaterEqual(result.retries, 1, "the quota should have refused a batch at least once")
            self.assertGreaterEqual(elapsed, 0.9, "a refusal's Retry-After: 1 should have been waited out")
            self.assertEqual(result.accepted, 30)
            self.assertEqual((result.first_seq, result.last_seq), (1, 30))
            self.assertTrue(result.contiguous)
            self.assertTrue(any(b.attempts > 1 for b in result.batches))
            session = tenant.get_session(sid)
            self.assertEqual(session.tenant, "slowpoke")
            self.assertEqual(session.records.pushed, 30)  # nothing sent twice

            # Without retries the refusal comes through, typed, with the quota named and what was taken.
            with self.assertRaises(QuotaExceededError) as caught:
                tenant.push(sid, text_records(30), batch_size=10, retry=RetryPolicy.disabled())
            err = caught.exception
            self.assertEqual((err.status, err.type, err.field), (429, "quota_exceeded", "records_per_s"))
            self.assertIsNotNone(err.retry_after)
            self.assertGreaterEqual(err.retry_after, 1)
            self.assertIsNotNone(err.partial)
            taken = err.partial.accepted
            self.assertEqual(tenant.get_session(sid).records.pushed, 30 + taken)

    def test_wire_format(self) -> None:
        # What push sends is what docs/api.md shows: {"records": [...]} with strings and flat objects.
        from aoi_client import _requests

        batches = list(_requests.batches(["a", {"t": "x", "c": 1.5}], 10, 1 << 20))
        self.assertEqual(len(batches), 1)
        self.assertEqual(json.loads(batches[0].body), {"records": ["a", {"t": "x", "c": 1.5}]})


if __name__ == "__main__":
    unittest.main()
