"""An incremental server-sent events decoder (the WHATWG "event stream interpretation").

Bytes go in as they arrive, whole events come out. An event is dispatched only at its blank line: one cut
short by a dropped connection is never returned, so that the id a client resumes after always belongs to an
event it has fully seen.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import List, Optional


@dataclass(frozen=True)
class ServerSentEvent:
    event: str  # "message" when the stream named none
    data: str
    id: Optional[str]  # this event's own id: field, if it had one
    last_event_id: str  # the stream's last event id after this event (what Last-Event-ID should carry)
    retry: Optional[int]  # a retry: field seen with this event (milliseconds)


class SSEDecoder:
    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""  # the start of a line whose end has not come yet
        self._after_cr = False  # the last chunk ended with \r: a \n opening the next one belongs to it
        self._first = True
        self._event = ""
        self._data: List[str] = []
        self._id: Optional[str] = None
        self._retry: Optional[int] = None
        self.last_event_id = ""
        self.comments = 0  # comment lines seen (the server's ": ping" keep-alives)

    def feed(self, chunk: bytes) -> List[ServerSentEvent]:
        """The events completed by ``chunk``."""
        text = self._text.decode(chunk)
        if self._first and text:
            self._first = False
            if text.startswith("\ufeff"):
                text = text[1:]
        out: List[ServerSentEvent] = []
        start = 0
        for i, c in enumerate(text):
            if c == "\n" and self._after_cr and i == 0 and not self._buffer:
                # The \n of a \r\n whose \r ended the previous chunk.
                self._after_cr = False
                start = 1
                continue
            if c == "\r" or c == "\n":
                if c == "\n" and i > 0 and text[i - 1] == "\r":
                    start = i + 1  # the second half of \r\n: the line ended at the \r
                    continue
                line = self._buffer + text[start:i]
                self._buffer = ""
                start = i + 1
                ev = self._line(line)
                if ev is not None:
                    out.append(ev)
        if text:
            self._after_cr = text[-1] == "\r"
        self._buffer += text[start:]
        return out

    def _line(self, line: str) -> Optional[ServerSentEvent]:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        return None

    def _dispatch(self) -> Optional[ServerSentEvent]:
        own_id = self._id
        if own_id is not None:
            self.last_event_id = own_id
        retry = self._retry
        event, data = self._event, self._data
        self._event, self._data, self._id, self._retry = "", [], None, None
        if not data:
            return None
        return ServerSentEvent(
            event=event or "message",
            data="\n".join(data),
            id=own_id,
            last_event_id=self.last_event_id,
            retry=retry,
        )
