// The sessions table: one row per session the key can list, refreshed from GET /v1/sessions; in cluster mode
// (the list names each session's replica) with the replica holding it.
import { el, formatBytes, formatInt, sourceState } from './dom.js';

const COLUMNS = [
  { head: 'session', cell: (s) => s.id, cls: 'id' },
  {
    head: 'replica', cell: (s) => s.replica ?? '–', cls: 'replica', cluster: true,
    title: (s) => (s.epoch != null ? `holds it by lease epoch ${s.epoch}` : undefined),
  },
  { head: 'residency', cell: (s) => (s.residency ?? '–').replace('_', ' '), cls: (s) => `residency ${s.residency ?? ''}` },
  { head: 'version', cell: (s) => formatInt(s.data_version), cls: 'num', key: 'version' },
  {
    head: 'records', cell: (s) => formatInt(s.regions?.records), cls: 'num',
    title: (s) => `in the window; ${formatInt(s.records?.pushed)} pushed, ${formatInt(s.records?.evicted)} evicted`,
  },
  {
    head: 'tokens', cell: (s) => `${formatInt(s.regions?.data_tokens)} / ${formatInt(s.retention?.max_tokens)}`,
    cls: 'num', title: (s) => `record tokens in the window / its limit; ${formatInt(s.tokens_ingested)} ingested`,
  },
  {
    head: 'KV cells', cell: (s) => `${formatInt(s.kv?.cells_used)} / ${formatInt(s.kv?.cells_reserved)}`,
    cls: 'num', title: (s) => `used / reserved; ${formatBytes(s.kv?.bytes)}`,
  },
  { head: 'pending', cell: (s) => formatInt(s.pending), cls: 'num' },
  {
    head: 'dropped', cell: (s) => formatInt(s.records?.dropped), cls: (s) => (s.records?.dropped > 0 ? 'num warn' : 'num'),
    title: (s) => `${formatInt(s.records?.rejected)} rejected`,
  },
  {
    head: 'source', cell: (s) => (s.source ? sourceState(s.source) : '–'),
    cls: (s) => `source ${s.source ? (s.source.connected ? 'connected' : 'disconnected') : ''}`,
    title: (s) => (s.source ? `${s.source.url} at ${s.source.position || 'its start'}; ` +
      `${formatInt(s.source.messages)} read, ${formatInt(s.source.rejected)} rejected, ` +
      `${formatInt(s.source.reconnects)} reconnects${s.source.error ? `; ${s.source.error}` : ''}` : undefined),
  },
  { head: 'queries', cell: (s) => formatInt(s.queries), cls: 'num' },
  { head: 'flash', cell: (s) => formatInt(s.flash?.length ?? 0), cls: 'num' },
];

const columns = (cluster) => COLUMNS.filter((c) => cluster || !c.cluster);

export function tableHead(cluster = false) {
  return el('tr', {}, ...columns(cluster).map((c) => el('th', { scope: 'col' }, c.head)));
}

function row(session, selected, onSelect, cluster) {
  const tr = el('tr', { data: { id: session.id }, tabindex: 0, class: selected ? 'selected' : undefined });
  for (const c of columns(cluster)) {
    const cls = typeof c.cls === 'function' ? c.cls(session) : c.cls;
    tr.append(el('td', { class: cls, title: c.title?.(session), data: c.key ? { key: c.key } : undefined },
      c.cell(session)));
  }
  tr.addEventListener('click', () => onSelect(session.id));
  tr.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      onSelect(session.id);
    }
  });
  return tr;
}

export function renderSessions(tbody, sessions, selectedId, onSelect, cluster = false) {
  const focused = document.activeElement?.closest?.('tr')?.dataset.id;
  tbody.replaceChildren(...sessions.map((s) => row(s, s.id === selectedId, onSelect, cluster)));
  if (focused) tbody.querySelector(`tr[data-id="${CSS.escape(focused)}"]`)?.focus();
}
