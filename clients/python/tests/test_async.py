"""The asyncio client against a live server: the main calls, streamed answers, typed errors, and events that
resume after a cut connection."""

from __future__ import annotations

import asyncio
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

from aoi_client import (
    AsyncClient,
    AsyncEventStream,
    ConflictError,
    Event,
    InvalidValueError,
    NotFoundError,
    ServerTimeoutError,
    UnauthorizedError,
)

SERVER = ModuleServer()


def setUpModule() -> None:
    SERVER.start()


def tearDownModule() -> None:
    SERVER.stop()


async def read_until(stream: AsyncEventStream, pred, what: str, timeout: float = WAIT_TIMEOUT_S) -> List[Event]:
    """Events from ``stream`` up to and including the first for which ``pred`` holds, within ``timeout``."""
    seen: List[Event] = []

    async def read() -> List[Event]:
        async for ev in stream:
            seen.append(ev)
            if pred(ev):
                return seen
        raise AssertionError(f"the stream ended before {what}; saw {[(e.id, e.type) for e in seen]}")

    try:
        return await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"no {what} within {timeout} s; saw {[(e.id, e.type) for e in seen]}") from None


def data_through(seq: int):
    return lambda ev: ev.type == "data_updated" and ev.data.get("last_seq", 0) >= seq


class AsyncClientTest(unittest.IsolatedAsyncioTestCase, SessionCleanup):
    server_holder = SERVER

    async def asyncSetUp(self) -> None:
        server = SERVER.get()
        self.client = AsyncClient(server.url, api_key=server.api_key)

    async def asyncTearDown(self) -> None:
        await self.client.aclose()

    async def test_sessions(self) -> None:
        sid = unique_id("async")
        created = await self.client.create_session(sid, system="You watch a feed.", **SMALL)
        self.assertEqual(created.id, sid)
        self.assertEqual((await self.client.get_session(sid)).retention.max_tokens, 512)
        self.assertIn(sid, [s.id for s in await self.client.list_sessions()])
        with self.assertRaises(ConflictError):
            await self.client.create_session(sid, **SMALL)
        self.assertTrue(await self.client.delete_session(sid))
        with self.assertRaises(NotFoundError):
            await self.client.get_session(sid)
        self.assertFalse(await self.client.delete_session(sid, missing_ok=True))

    async def test_push_ask_and_stream(self) -> None:
        sid = unique_id("async")
        await self.client.create_session(sid, **SMALL)
        pushed = await self.client.push(sid, text_records(50), batch_size=16)
        self.assertEqual([b.size for b in pushed.batches], [16, 16, 16, 2])
        self.assertEqual((pushed.first_seq, pushed.last_seq, pushed.accepted), (1, 50, 50))
        self.assertTrue(pushed.contiguous)

        async def more():
            for r in text_records(5, 50):
                yield r

        tail = await self.client.push(sid, more())  # an async iterable too
        self.assertEqual((tail.first_seq, tail.last_seq), (51, 55))

        answer = await self.client.ask(sid, "What was the last close?", max_tokens=5, min_seq=tail.last_seq)
        self.assertEqual(answer.path, "standard")
        self.assertLessEqual(answer.tokens.answer, 5)
        self.assertEqual((await self.client.get_session(sid)).last_seq_ingested, 55)

        async with self.client.ask_stream(sid, "What was the last close?", max_tokens=5) as stream:
            pieces = [p async for p in stream]
        self.assertIsNotNone(stream.answer)
        self.assertEqual("".join(pieces), stream.answer.answer)
        self.assertEqual(stream.answer.answer, answer.answer)  # greedy: the same answer, streamed or not

        again = await self.client.ask_stream(sid, "Again?", max_tokens=3).final_answer()
        self.assertLessEqual(again.tokens.answer, 3)

        # Several questions at once on one client: its connections are pooled per request.
        answers = await asyncio.gather(*(self.client.ask(sid, f"Question {i}?", max_tokens=2) for i in range(3)))
        self.assertEqual(len(answers), 3)

    async def test_errors(self) -> None:
        sid = unique_id("async")
        await self.client.create_session(sid, **SMALL)
        with self.assertRaises(InvalidValueError) as caught:
            await self.client.push(sid, text_records(7) + [""], batch_size=5)  # a blank record is refused
        self.assertEqual(caught.exception.field, "records[7]")
        self.assertEqual(caught.exception.server_field, "records[2]")
        self.assertEqual(caught.exception.partial.accepted, 5)
        with self.assertRaises(ServerTimeoutError):
            await self.client.ask(sid, "Later?", min_seq=1000, wait_ms=50)
        with self.assertRaises(ServerTimeoutError):
            async with self.client.ask_stream(sid, "Later?", min_seq=1000, wait_ms=50) as s:
                async for _ in s:
                    pass
        with self.assertRaises(InvalidValueError) as caught:
            await self.client.create_session(unique_id(), retention={"max_tokens": -1})
        self.assertEqual(caught.exception.field, "retention.max_tokens")
        async with AsyncClient(SERVER.get().url, api_key="sk-wrong") as wrong:
            with self.assertRaises(UnauthorizedError):
                await wrong.list_sessions()

    async def test_flash(self) -> None:
        sid = unique_id("async")
        await self.client.create_session(sid, **SMALL)
        fq = await self.client.add_flash(sid, "Up or down?", max_tokens=3)
        self.assertEqual([f.fid for f in await self.client.list_flash(sid)], [fq.fid])
        async with self.client.events(sid, last_event_id=0, idle_timeout=30) as stream:
            await self.client.push(sid, text_records(4))
            ready = (await read_until(stream, lambda e: e.type == "flash_ready", "flash_ready"))[-1]
        self.assertEqual(ready.data["id"], fq.fid)
        self.assertEqual(ready.data["question"], "Up or down?")
        await self.client.remove_flash(sid, fq.fid)
        self.assertEqual(await self.client.list_flash(sid), [])

    async def test_events_resume_after_a_cut(self) -> None:
        server = SERVER.get()
        sid = unique_id("async")
        await self.client.create_session(sid, **SMALL)
        proxy = CuttableProxy(server.address)
        self.addCleanup(proxy.close)
        async with AsyncClient(proxy.url, api_key=server.api_key) as via_proxy:
            async with via_proxy.events(sid, last_event_id=0, idle_timeout=30) as stream:
                first = await self.client.push(sid, text_records(5))
                seen = await read_until(stream, data_through(first.last_seq), "data_updated for the first push")
                proxy.cut()
                second = await self.client.push(sid, text_records(5, 5))
                await self.client.wait_ingested(sid, second.last_seq)
                seen += await read_until(stream, data_through(second.last_seq), "data_updated after the cut")
                self.assertEqual(stream.reconnects, 1)
                last = stream.last_event_id
        ids = [e.id for e in seen]
        self.assertEqual(ids, list(range(ids[0], ids[0] + len(ids))))
        self.assertEqual(last, ids[-1])

        # A new stream from the last id sees only what came after it, up to the session's deletion.
        async with self.client.events(sid, last_event_id=last) as resumed:
            await self.client.delete_session(sid)
            rest = [e async for e in resumed]
        self.assertEqual(rest[-1].type, "session_deleted")
        self.assertEqual([e.id for e in rest], list(range(last + 1, last + 1 + len(rest))))


if __name__ == "__main__":
    unittest.main()
