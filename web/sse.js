// A server-sent event stream read from a fetch() body: EventSource cannot send an Authorization header.
// Follows the WHATWG parsing rules for the fields aoi sends (event, data, id; comments ignored).

// Calls onEvent({event, data, id}) for each event, `data` parsed as JSON when it is JSON; resolves when the
// stream ends.
export async function readEventStream(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  let event = '';
  let data = [];
  let id = null;

  const dispatch = () => {
    if (data.length > 0) {
      const text = data.join('\n');
      let parsed = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // plain text data stays a string
      }
      onEvent({ event: event || 'message', data: parsed, id });
    }
    event = '';
    data = [];
    id = null;
  };
  const line = (l) => {
    if (l === '') return dispatch();
    if (l.startsWith(':')) return undefined;
    const colon = l.indexOf(':');
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? '' : l.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id' && !value.includes('\0')) id = value;
    return undefined;
  };

  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    for (;;) {
      const m = /\r\n|\n|\r/.exec(buffer);
      // A lone \r at the end may be half of \r\n: wait for the next chunk.
      if (!m || (m[0] === '\r' && m.index === buffer.length - 1)) break;
      line(buffer.slice(0, m.index));
      buffer = buffer.slice(m.index + m[0].length);
    }
  }
  // An event not closed by a blank line before the end is incomplete: it is dropped, as EventSource does.
}
