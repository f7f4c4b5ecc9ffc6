// The selected session, live: its version and counters, flash questions with their answers and logit gaps,
// latest records, an activity chart and a box to ask a question. Events come from its SSE stream (read
// through fetch, with the key); records from GET /v1/sessions/{id}/records; counters from the session list.
import {
  AuthError, NotFoundError, UnavailableError, askStreaming, followEvents, getJson,
} from './api.js';
import { drawChart, drawSparkline } from './chart.js';
import {
  answerText, byId, el, formatBytes, formatInt, formatMs, formatTime, plural, sleep, sourceState,
} from './dom.js';

const RECORDS_SHOWN = 12;
const RECORDS_MIN_INTERVAL_MS = 1000; // the records list follows the data at most this often
const GAPS_KEPT = 40; // logit gaps per flash question in its sparkline
const EVENTS_SHOWN = 8;
const HISTORY_MS = 10 * 60_000; // chart points kept
const RETRY_MAX_MS = 10_000;

export class SessionView {
  // hooks: onAuthError(), onGone(id, why) — the session was deleted or is no longer there.
  constructor(id, hooks) {
    this.id = id;
    this.hooks = hooks;
    this.abort = new AbortController();
    this.version = 0;
    this.lastEventId = null;
    this.flash = new Map(); // fid -> { question, answer, gap, version, evalMs, gaps: [] }
    this.series = { ingest: [], latency: [] };
    this.events = [];
    this.records = { inFlight: false, again: false, last: 0, timer: null };
    this.asking = null;
    this.stopped = false;
  }

  start(session) {
    byId('detail-id').textContent = this.id;
    byId('flash-list').replaceChildren();
    byId('records').replaceChildren();
    byId('event-log').replaceChildren();
    byId('answer').textContent = '';
    byId('answer').dataset.state = 'idle';
    byId('answer-meta').textContent = '';
    byId('detail').hidden = false;
    this.onAsk = (e) => {
      e.preventDefault();
      this.ask();
    };
    byId('ask-form').addEventListener('submit', this.onAsk);
    this.update(session);
    this.refreshRecords();
    this.follow();
    this.chartTimer = setInterval(() => this.drawChart(), 1000);
    this.drawChart();
  }

  stop() {
    this.stopped = true;
    this.abort.abort();
    this.asking?.abort();
    clearInterval(this.chartTimer);
    clearTimeout(this.records.timer);
    byId('ask-form').removeEventListener('submit', this.onAsk);
    byId('ask-button').disabled = false;
    byId('detail').hidden = true;
  }

  // The session's entry from the latest list: counters, and the flash questions registered now.
  update(session) {
    this.setVersion(session.data_version);
    byId('detail-residency').textContent = (session.residency ?? '').replace('_', ' ');
    byId('detail-residency').dataset.residency = session.residency ?? '';
    const r = session.regions ?? {};
    byId('detail-counters').textContent =
      `${plural(r.records, 'record')}, ${formatInt(r.data_tokens)} tokens in the window · ` +
      `${formatInt(session.records?.pushed)} pushed, ${formatInt(session.pending)} pending, ` +
      `${formatInt(session.records?.dropped)} dropped · KV ${formatInt(session.kv?.cells_used)} cells ` +
      `(${formatBytes(session.kv?.bytes)})`;
    const source = session.source;
    byId('detail-source').hidden = !source;
    if (source) {
      byId('detail-source').dataset.state = source.connected ? 'connected' : 'disconnected';
      byId('detail-source').textContent =
        `Source ${source.url}: ${sourceState(source)} · at ${source.position || 'its start'} · ` +
        `${formatInt(source.messages)} read, ${formatInt(source.rejected)} rejected, ` +
        `${formatInt(source.reconnects)} reconnects${source.error ? ` · ${source.error}` : ''}`;
    }
    const listed = new Set();
    for (const f of session.flash ?? []) {
      listed.add(f.fid);
      const known = this.flash.get(f.fid);
      // The list can lag the event stream: an answer already shown from an event is not replaced by an older one.
      if (!known || (f.version ?? 0) > (known.version ?? 0)) {
        this.setFlash(f.fid, {
          question: f.question, answer: f.answer, gap: f.logit_gap, version: f.version, evalMs: f.eval_ms,
        });
      }
    }
    for (const fid of this.flash.keys()) {
      if (!listed.has(fid)) {
        this.flash.delete(fid);
        byId('flash-list').querySelector(`li[data-fid="${CSS.escape(fid)}"]`)?.remove();
      }
    }
    byId('flash-empty').hidden = this.flash.size > 0;
  }

  setVersion(version) {
    if (!Number.isFinite(version) || version < this.version) return;
    this.version = version;
    byId('detail-version').textContent = formatInt(version);
    byId('detail-version').dataset.version = String(version);
  }

  // ---- the event stream ----------------------------------------------------------------------------

  async follow() {
    let delay = 1000;
    while (!this.stopped) {
      try {
        this.setStream('connecting');
        await followEvents(this.id, {
          lastEventId: this.lastEventId,
          signal: this.abort.signal,
          onOpen: () => {
            this.setStream('live');
            delay = 1000;
          },
          onEvent: (ev) => this.onEvent(ev),
        });
      } catch (err) {
        if (this.stopped || err?.name === 'AbortError') return;
        if (err instanceof AuthError) return this.hooks.onAuthError();
        if (err instanceof NotFoundError) return this.hooks.onGone(this.id, 'deleted');
        if (!(err instanceof UnavailableError)) this.log('error', err.message);
      }
      if (this.stopped) return;
      // The stream ended (the server stopped or restarted) or broke: resume after the last event seen.
      this.setStream('retrying', delay);
      await sleep(delay, this.abort.signal);
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
  }

  setStream(state, delay) {
    const badge = byId('detail-stream');
    badge.dataset.state = state;
    badge.textContent = state === 'live' ? 'events live'
      : state === 'retrying' ? `events reconnecting in ${Math.round(delay / 1000)} s` : 'events connecting…';
  }

  onEvent(ev) {
    if (ev.id) this.lastEventId = ev.id;
    const d = ev.data ?? {};
    const now = Date.now();
    switch (ev.event) {
      case 'data_updated':
        this.setVersion(d.version);
        this.series.ingest.push({ t: now, tokens: d.tokens_added ?? 0 });
        this.log('data', `v${d.version}: +${plural(d.records_added, 'record')} (+${d.tokens_added} tokens) in ` +
          `${formatMs(d.ingest_ms)}${d.records_evicted ? `, ${d.records_evicted} evicted` : ''}` +
          `${d.dropped ? `, ${d.dropped} dropped` : ''}`);
        this.refreshRecords();
        break;
      case 'flash_ready': {
        const known = this.flash.get(d.id);
        this.setFlash(d.id, {
          question: d.question ?? known?.question, answer: d.answer, gap: d.logit_gap, version: d.version,
          evalMs: d.eval_ms,
        });
        byId('flash-empty').hidden = true;
        this.series.latency.push({ t: now, ms: d.eval_ms ?? 0, kind: 'flash' });
        break;
      }
      case 'warning':
        this.log('warning', d.message ?? 'warning');
        break;
      case 'error':
        this.log('error', d.message ?? d.error?.message ?? 'error');
        break;
      case 'session_deleted':
        this.hooks.onGone(this.id, 'deleted');
        return;
      case 'session_moved':
        // Another replica of the cluster holds it now: the stream ends, and the next one resumes there.
        this.log('data', 'moved to another replica; following it there');
        break;
      default:
        break;
    }
    this.prune(now);
    this.drawChart();
  }

  log(kind, text) {
    this.events.unshift({ t: Date.now(), kind, text });
    this.events.length = Math.min(this.events.length, EVENTS_SHOWN);
    byId('event-log').replaceChildren(...this.events.map((e) => el('li', { class: e.kind },
      el('span', { class: 'time' }, formatTime(e.t)), ' ', e.text)));
  }

  prune(now) {
    const keep = (p) => p.t >= now - HISTORY_MS;
    this.series.ingest = this.series.ingest.filter(keep);
    this.series.latency = this.series.latency.filter(keep);
  }

  drawChart() {
    drawChart(byId('chart'), this.series);
  }

  // ---- flash questions ----------------------------------------------------------------------------

  setFlash(fid, f) {
    const known = this.flash.get(fid);
    const gaps = known?.gaps ?? [];
    const isNewAnswer = f.version !== null && f.version !== undefined && f.version !== known?.version;
    if (isNewAnswer && Number.isFinite(f.gap)) {
      gaps.push(f.gap);
      if (gaps.length > GAPS_KEPT) gaps.shift();
    }
    this.flash.set(fid, { ...f, gaps });

    const list = byId('flash-list');
    let li = list.querySelector(`li[data-fid="${CSS.escape(fid)}"]`);
    if (!li) {
      li = el('li', { class: 'flash', data: { fid } },
        el('p', { class: 'question' }), el('p', { class: 'answer' }), el('div', { class: 'flash-meta' }));
      const spark = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
      spark.setAttribute('class', 'spark');
      spark.setAttribute('aria-label', 'logit gap over the latest answers');
      li.append(spark);
      list.append(li);
    }
    li.querySelector('.question').textContent = f.question ?? fid;
    const evaluated = f.version !== null && f.version !== undefined;
    li.dataset.version = evaluated ? String(f.version) : '';
    li.querySelector('.answer').textContent = evaluated ? answerText(f.answer ?? '') : 'waiting for the first round…';
    li.querySelector('.answer').classList.toggle('pending', !evaluated);
    li.querySelector('.flash-meta').textContent = evaluated
      ? `version ${formatInt(f.version)} · logit gap ${Number.isFinite(f.gap) ? f.gap.toFixed(2) : '–'} · ` +
        `${formatMs(f.evalMs)}`
      : '';
    if (isNewAnswer) {
      li.classList.remove('fresh');
      // Restarts the highlight: reading offsetWidth makes the browser apply the removal first.
      void li.offsetWidth;
      li.classList.add('fresh');
    }
    drawSparkline(li.querySelector('svg.spark'), gaps);
  }

  // ---- latest records -----------------------------------------------------------------------------

  // Fetches the newest records now, or once the last fetch is old enough; never two at once.
  refreshRecords() {
    const r = this.records;
    if (this.stopped) return;
    if (r.inFlight) {
      r.again = true;
      return;
    }
    const wait = r.last + RECORDS_MIN_INTERVAL_MS - Date.now();
    if (wait > 0) {
      if (!r.timer) {
        r.timer = setTimeout(() => {
          r.timer = null;
          this.refreshRecords();
        }, wait);
      }
      return;
    }
    r.inFlight = true;
    r.last = Date.now();
    getJson(`v1/sessions/${encodeURIComponent(this.id)}/records?last=${RECORDS_SHOWN}`, { signal: this.abort.signal })
      .then((body) => this.showRecords(body))
      .catch((err) => {
        if (this.stopped || err?.name === 'AbortError') return;
        if (err instanceof AuthError) this.hooks.onAuthError();
        else if (err instanceof NotFoundError) this.hooks.onGone(this.id, 'deleted');
        // Unavailable: the event stream's retry brings a fresh list when the server is back.
      })
      .finally(() => {
        r.inFlight = false;
        if (r.again && !this.stopped) {
          r.again = false;
          this.refreshRecords();
        }
      });
  }

  showRecords(body) {
    const list = byId('records');
    const records = [...(body.records ?? [])].reverse(); // newest first
    if (records.length === 0) {
      const why = body.residency && body.residency !== 'resident'
        ? `The session is ${body.residency.replace('_', ' ')}: its records show once it is back in the cache.`
        : 'No records yet.';
      list.replaceChildren(el('li', { class: 'empty' }, why));
      return;
    }
    list.replaceChildren(...records.map((r) => el('li', { data: { seq: r.seq }, title: `${r.tokens} tokens` },
      el('span', { class: 'seq' }, `#${r.seq}`), el('code', {}, r.text))));
  }

  // ---- asking -------------------------------------------------------------------------------------

  async ask() {
    const question = byId('question').value.trim();
    const maxTokens = Number(byId('max-tokens').value) || 32;
    if (!question || this.asking) return;
    const answer = byId('answer');
    const meta = byId('answer-meta');
    const button = byId('ask-button');
    this.asking = new AbortController();
    const stopWith = () => this.asking?.abort();
    this.abort.signal.addEventListener('abort', stopWith, { once: true });
    button.disabled = true;
    answer.textContent = '';
    answer.dataset.state = 'streaming';
    meta.textContent = 'asking…';
    const t0 = performance.now();
    let text = '';
    try {
      const done = await askStreaming(this.id, question, maxTokens, {
        signal: this.asking.signal,
        onText: (piece) => {
          text += piece;
          answer.textContent = text;
        },
      });
      answer.textContent = answerText(done.answer);
      answer.dataset.state = 'done';
      const total = done.timings?.total_ms ?? performance.now() - t0;
      const queued = done.timings?.queue_ms;
      meta.textContent = `path ${done.path} · version ${formatInt(done.data_version)} · ` +
        `${formatInt(done.tokens?.answer)} tokens · ${formatMs(total)}` +
        `${queued >= 1 ? ` (${formatMs(queued)} waiting for the model)` : ''}`;
      meta.dataset.version = String(done.data_version);
      this.series.latency.push({ t: Date.now(), ms: total, kind: 'asked' });
      this.drawChart();
    } catch (err) {
      if (err?.name === 'AbortError' || this.stopped) return;
      answer.dataset.state = 'error';
      if (err instanceof AuthError) {
        this.hooks.onAuthError();
        return;
      }
      if (err instanceof NotFoundError) {
        this.hooks.onGone(this.id, 'deleted');
        return;
      }
      meta.textContent = `failed: ${err.message}`;
    } finally {
      this.abort.signal.removeEventListener('abort', stopWith);
      this.asking = null;
      button.disabled = false;
    }
  }
}
