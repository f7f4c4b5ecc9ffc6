// The dashboard's start: the API key, the sessions list (polled), which session is shown, and the page's
// connection state (live, retrying while the server is away, waiting for a key).
import {
  AuthError, UnavailableError, dashboardSettings, getJson, storeKey, storedKey,
} from './api.js';
import { byId, formatTime, sleep } from './dom.js';
import { SessionView } from './detail.js';
import { renderSessions, tableHead } from './table.js';

const POLL_MS = 2000;
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 10_000;

const state = {
  run: null, // AbortController of the current connection (polling and the session view)
  sessions: [],
  cluster: null,  // { unanswered: [{replica, error}] } when the server is a cluster's replica
  selected: null,
  view: null,
};

function setStatus(kind, text) {
  const status = byId('status');
  status.dataset.state = kind;
  status.textContent = text;
}

function notice(text) {
  const n = byId('notice');
  n.textContent = text ?? '';
  n.hidden = !text;
}

function selectedFromHash() {
  const m = /^#session=(.+)$/.exec(window.location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

function stopView() {
  state.view?.stop();
  state.view = null;
}

function stopAll() {
  state.run?.abort();
  state.run = null;
  stopView();
}

function askForKey(message) {
  stopAll();
  byId('main').hidden = true;
  byId('key-panel').hidden = false;
  byId('key-message').textContent = message;
  byId('forget-key').hidden = true;
  setStatus('key', 'API key needed');
  byId('key-input').value = '';
  byId('key-input').focus();
}

function onAuthError() {
  askForKey(storedKey()
    ? 'The server refused this API key. Enter a valid key:'
    : 'This server needs an API key. Enter it to see its sessions:');
}

function select(id) {
  if (state.selected === id && state.view) return;
  stopView();
  state.selected = id;
  history.replaceState(null, '', id ? `#session=${encodeURIComponent(id)}` : window.location.pathname);
  const session = state.sessions.find((s) => s.id === id);
  if (session) {
    state.view = new SessionView(id, {
      onAuthError,
      onGone: (goneId) => gone(goneId),
    });
    state.view.start(session);
  }
  renderSessions(byId('sessions-body'), state.sessions, state.selected, select, state.cluster !== null);
}

// The shown session is gone: out of the table and the detail, and another one shown if there is one.
function gone(id) {
  if (state.selected !== id) return;
  notice(`Session ${id} was deleted.`);
  state.sessions = state.sessions.filter((s) => s.id !== id);
  stopView();
  state.selected = null;
  render();
}

function render() {
  const list = state.sessions;
  byId('no-sessions').hidden = list.length > 0;
  if (state.selected && !list.some((s) => s.id === state.selected)) {
    notice(`Session ${state.selected} was deleted.`);
    stopView();
    state.selected = null;
  }
  if (!state.selected && list.length > 0) {
    const wanted = selectedFromHash();
    select(list.some((s) => s.id === wanted) ? wanted : list[0].id);
    return; // select() renders the table
  }
  renderSessions(byId('sessions-body'), list, state.selected, select, state.cluster !== null);
  const shown = list.find((s) => s.id === state.selected);
  if (shown && state.view) state.view.update(shown);
}

async function poll(signal) {
  let delay = RETRY_MIN_MS;
  let failures = 0;
  while (!signal.aborted) {
    try {
      const body = await getJson('v1/sessions', { signal });
      state.sessions = body.sessions ?? [];
      // A cluster's replica lists the whole cluster, and names the replicas that did not answer.
      const cluster = Array.isArray(body.unanswered) ? { unanswered: body.unanswered } : null;
      if ((cluster !== null) !== (state.cluster !== null)) {
        byId('sessions-head').replaceChildren(tableHead(cluster !== null));
      }
      state.cluster = cluster;
      failures = 0;
      delay = RETRY_MIN_MS;
      const replicas = cluster ? new Set(state.sessions.map((s) => s.replica)).size : 0;
      const missing = cluster?.unanswered.length
        ? ` · ${cluster.unanswered.map((u) => u.replica).join(', ')} did not answer: their sessions are missing` : '';
      setStatus('live', `live · ${state.sessions.length} session${state.sessions.length === 1 ? '' : 's'}` +
        `${cluster ? ` on ${replicas} replica${replicas === 1 ? '' : 's'}` : ''}${missing} · updated ${formatTime()}`);
      render();
      await sleep(POLL_MS, signal);
    } catch (err) {
      if (signal.aborted || err?.name === 'AbortError') return;
      if (err instanceof AuthError) return onAuthError();
      failures += 1;
      const why = err instanceof UnavailableError ? 'server unreachable' : `error: ${err.message}`;
      setStatus('retrying', `${why} · retrying in ${Math.round(delay / 1000)} s (attempt ${failures})`);
      await sleep(delay, signal);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
  }
}

// (Re)starts everything: asks whether a key is needed, then polls the sessions.
async function connect() {
  stopAll();
  const run = new AbortController();
  state.run = run;
  setStatus('connecting', 'connecting…');
  let delay = RETRY_MIN_MS;
  let settings = null;
  while (!run.signal.aborted && settings === null) {
    try {
      settings = await dashboardSettings();
    } catch (err) {
      setStatus('retrying', `server unreachable · retrying in ${Math.round(delay / 1000)} s`);
      await sleep(delay, run.signal);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
  }
  if (run.signal.aborted) return;
  if (settings.api_key_required && !storedKey()) {
    askForKey('This server needs an API key. Enter it to see its sessions:');
    return;
  }
  byId('key-panel').hidden = true;
  byId('main').hidden = false;
  byId('forget-key').hidden = !settings.api_key_required;
  await poll(run.signal);
}

function boot() {
  byId('sessions-head').replaceChildren(tableHead());
  byId('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const key = byId('key-input').value.trim();
    if (!key) return;
    storeKey(key);
    notice(null);
    connect();
  });
  byId('forget-key').addEventListener('click', () => {
    storeKey('');
    askForKey('Enter the API key to use:');
  });
  connect();
}

boot();
