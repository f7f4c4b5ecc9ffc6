// Small DOM and formatting helpers. Text from the server is only ever set as text, never parsed as HTML.

export const byId = (id) => document.getElementById(id);

// el('td', {class: 'num', title: '...', data: {id: 'x'}}, 'text', childNode, ...)
export function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === 'class') n.className = v;
    else if (k === 'data') Object.assign(n.dataset, v);
    else n.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

export function formatInt(n) {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '–';
}

// "1 record", "3 records".
export function plural(n, noun) {
  return `${formatInt(n)} ${noun}${n === 1 ? '' : 's'}`;
}

// A source session's consumer in a few words: "connected", "connected · 120 behind", "disconnected".
export function sourceState(source) {
  if (!source) return '';
  if (!source.connected) return 'disconnected';
  if (source.waiting_for_room) return 'connected · waiting for room';
  if (source.lag_records > 0) return `connected · ${formatInt(source.lag_records)} behind`;
  if (source.lag_seconds > 0) return `connected · ${source.lag_seconds.toFixed(1)} s behind`;
  return 'connected';
}

export function formatBytes(n) {
  if (!Number.isFinite(n)) return '–';
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

export function formatMs(ms) {
  if (!Number.isFinite(ms)) return '–';
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
}

export function formatTime(t = Date.now()) {
  return new Date(t).toLocaleTimeString('en-GB', { hour12: false });
}

// An answer as shown: the model's text, or a note when it is empty (a random model may stop at once).
export function answerText(text) {
  return text === '' ? '(empty answer)' : text;
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
