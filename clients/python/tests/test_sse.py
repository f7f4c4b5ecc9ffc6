"""The SSE decoder alone: events come out whole whatever the chunking of the bytes, and an event cut short by
a dropped connection never comes out (so a resumption's Last-Event-ID names an event received whole)."""

from __future__ import annotations

import unittest

from aoi_client._sse import SSEDecoder

STREAM = (
    "\ufeffid: 7\nevent: data_updated\ndata: {\"version\": 3}\n\n"
    ": ping\n\n"
    "id: 8\r\nevent: flash_ready\r\ndata: {\"answer\": \"H\u00e9llo \u2192 \U0001f600\"}\r\n\r\n"
    "data: line one\rdata: line two\r\r"
    "retry: 1500\nid: 9\nevent: x\ndata\n\n"
).encode("utf-8")


def decode_in_chunks(data: bytes, size: int):
    decoder = SSEDecoder()
    events = []
    for i in range(0, len(data), size):
        events += decoder.feed(data[i : i + size])
    return decoder, events


class SSEDecoderTest(unittest.TestCase):
    def test_any_chunking_gives_the_same_events(self) -> None:
        _, whole = decode_in_chunks(STREAM, len(STREAM))
        self.assertEqual(
            [(e.event, e.data, e.id, e.last_event_id) for e in whole],
            [
                ("data_updated", '{"version": 3}', "7", "7"),
                ("flash_ready", '{"answer": "H\u00e9llo \u2192 \U0001f600"}', "8", "8"),
                ("message", "line one\nline two", None, "8"),
                ("x", "", "9", "9"),
            ],
        )
        self.assertEqual(whole[3].retry, 1500)
        for size in (1, 2, 3, 5, 7, 64):
            decoder, events = decode_in_chunks(STREAM, size)
            self.assertEqual(events, whole, f"chunks of {size} bytes")
            self.assertEqual(decoder.comments, 1)

    def test_a_lone_cr_ends_a_line_at_once(self) -> None:
        decoder = SSEDecoder()
        self.assertEqual([e.data for e in decoder.feed(b"data: a\r\r")], ["a"])
        self.assertEqual(decoder.feed(b"\ndata: b\n\n")[0].data, "b")  # its \n ends the \r\n begun before

    def test_an_event_cut_short_never_comes_out(self) -> None:
        decoder = SSEDecoder()
        events = decoder.feed(b'id: 1\nevent: a\ndata: {}\n\nid: 2\nevent: b\ndata: {"half')
        self.assertEqual([e.id for e in events], ["1"])
        self.assertEqual(decoder.last_event_id, "1")  # what a reconnection resumes after


if __name__ == "__main__":
    unittest.main()
