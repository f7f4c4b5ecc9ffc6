// Requests to the aoi server with the user's API key, and what their failures mean to the page.
import { readEventStream } from './sse.js';

const KEY_STORAGE = 'aoi.apiKey';

// The server refused the key (401): the page asks for one.
export class AuthError extends Error {}
// The thing asked about is gone (404): a deleted session.
export class NotFoundError extends Error {}
// No answer, or the server cannot serve now (loading, stopping, overloaded): worth trying again later.
export class UnavailableError extends Error {}
// Any other refusal, with the server's error object.
export class RequestError extends Error {
  constructor(status, error) {
    super(error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

export function storedKey() {
  return sessionStorage.getItem(KEY_STORAGE) ?? '';
}

export function storeKey(key) {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
}

function headers(extra = {}) {
  const h = { ...extra };
  const key = storedKey();
  if (key) h.authorization = `Bearer ${key}`;
  return h;
}

async function errorFrom(res) {
  let body;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  const message = body?.error?.message ?? `HTTP ${res.status}`;
  if (res.status === 401) return new AuthError(message);
  if (res.status === 404) return new NotFoundError(message);
  if (res.status === 503 || res.status === 429 || res.status >= 502) return new UnavailableError(message);
  return new RequestError(res.status, body?.error);
}

// fetch() with the key; a network failure becomes an UnavailableError, an abort stays an AbortError.
async function send(path, init = {}) {
  let res;
  try {
    res = await fetch(path, { ...init, headers: headers(init.headers), cache: 'no-store' });
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    throw new UnavailableError(`the server does not answer (${err.message})`);
  }
  if (!res.ok) throw await errorFrom(res);
  return res;
}

export async function getJson(path, { signal } = {}) {
  const res = await send(path, { signal });
  return res.json();
}

export async function postJson(path, body, { signal } = {}) {
  const res = await send(path, {
    method: 'POST',
    signal,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return res;
}

// Whether the server wants a key (public, so that the page asks for one before sending anything).
export async function dashboardSettings() {
  let res;
  try {
    res = await fetch('dashboard.json', { cache: 'no-store' });
  } catch (err) {
    throw new UnavailableError(`the server does not answer (${err.message})`);
  }
  if (!res.ok) throw await errorFrom(res);
  return res.json();
}

// A session's events, read through fetch (EventSource cannot send the key). Calls onEvent({event, data, id})
// until the stream ends (resolves) or fails (rejects); `lastEventId` resumes after an event already seen.
export async function followEvents(sessionId, { lastEventId, signal, onOpen, onEvent }) {
  const extra = { accept: 'text/event-stream' };
  if (lastEventId) extra['last-event-id'] = lastEventId;
  const res = await send(`v1/sessions/${encodeURIComponent(sessionId)}/events`, { signal, headers: extra });
  onOpen?.();
  try {
    await readEventStream(res.body, onEvent);
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    throw new UnavailableError(`the event stream broke (${err.message})`);
  }
}

// Asks a question with the answer streamed: onText(piece) for each piece, then resolves with the `done`
// event's answer object.
export async function askStreaming(sessionId, question, maxTokens, { signal, onText }) {
  const res = await postJson(`v1/sessions/${encodeURIComponent(sessionId)}/query`,
    { question, max_tokens: maxTokens, stream: true }, { signal });
  let answer = null;
  let failure = null;
  await readEventStream(res.body, (ev) => {
    if (ev.event === 'token') onText(ev.data.text ?? '');
    else if (ev.event === 'done') answer = ev.data;
    else if (ev.event === 'error') failure = ev.data;
  });
  if (failure) throw new RequestError(200, failure.error ?? failure);
  if (!answer) throw new UnavailableError('the answer stream ended early');
  return answer;
}
