// The activity chart, in plain SVG: ingestion rate (record tokens per second, bars) above question latency
// (milliseconds, dots: flash answers and questions asked here) over the last minutes.
const SVG = 'http://www.w3.org/2000/svg';
const LEFT = 64;
const RIGHT = 8;
const PANELS = {
  ingest: { top: 18, height: 82 },
  latency: { top: 140, height: 82 },
};
const HEIGHT = 250;

function node(name, attrs, text) {
  const n = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
  if (text !== undefined) n.textContent = text;
  return n;
}

// The smallest "round" number (1, 2 or 5 times a power of ten) at or above v.
function niceCeiling(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function panel(svg, width, { top, height }, title, max, unit) {
  svg.append(node('text', { x: LEFT, y: top - 6, class: 'chart-title' }, title));
  svg.append(node('line', { x1: LEFT, x2: width - RIGHT, y1: top + height, y2: top + height, class: 'axis' }));
  svg.append(node('line', { x1: LEFT, x2: width - RIGHT, y1: top, y2: top, class: 'grid' }));
  svg.append(node('line', { x1: LEFT, x2: width - RIGHT, y1: top + height / 2, y2: top + height / 2, class: 'grid' }));
  svg.append(node('text', { x: LEFT - 6, y: top + 4, class: 'tick', 'text-anchor': 'end' }, `${max} ${unit}`));
  svg.append(node('text', { x: LEFT - 6, y: top + height + 4, class: 'tick', 'text-anchor': 'end' }, '0'));
}

// series: { ingest: [{t, tokens}], latency: [{t, ms, kind: 'flash'|'asked'}] }, t in ms (Date.now()).
export function drawChart(svg, series, { now = Date.now(), windowMs = 120_000, binMs = 2_000 } = {}) {
  // Drawn at the element's own width in pixels, so that text keeps its size whatever the window's.
  const width = Math.max(320, Math.round(svg.getBoundingClientRect().width) || 640);
  svg.replaceChildren();
  svg.setAttribute('viewBox', `0 0 ${width} ${HEIGHT}`);
  svg.setAttribute('height', String(HEIGHT));
  const start = now - windowMs;
  const x = (t) => LEFT + ((t - start) / windowMs) * (width - LEFT - RIGHT);

  // Ingestion: tokens per second in fixed bins aligned to the clock, so that bars do not jump between frames.
  const nBins = Math.ceil(windowMs / binMs) + 1;
  const firstBin = Math.floor(start / binMs);
  const bins = new Array(nBins).fill(0);
  for (const p of series.ingest) {
    const i = Math.floor(p.t / binMs) - firstBin;
    if (i >= 0 && i < nBins) bins[i] += p.tokens;
  }
  const rates = bins.map((tokens) => tokens / (binMs / 1000));
  const ingestMax = niceCeiling(Math.max(...rates));
  const ip = PANELS.ingest;
  panel(svg, width, ip, 'ingestion, record tokens/s', ingestMax, 'tok/s');
  rates.forEach((rate, i) => {
    if (rate <= 0) return;
    const t0 = Math.max(start, (firstBin + i) * binMs);
    const t1 = Math.min(now, (firstBin + i + 1) * binMs);
    if (t1 <= t0) return;
    const h = (rate / ingestMax) * ip.height;
    svg.append(node('rect', {
      x: x(t0), y: ip.top + ip.height - h, width: Math.max(1, x(t1) - x(t0) - 1), height: h, class: 'bar',
    }));
  });

  // Latency: every flash answer and every question asked on this page.
  const visible = series.latency.filter((p) => p.t >= start);
  const latencyMax = niceCeiling(Math.max(1, ...visible.map((p) => p.ms)));
  const lp = PANELS.latency;
  panel(svg, width, lp, 'question latency, ms', latencyMax, 'ms');
  const y = (ms) => lp.top + lp.height - (Math.min(ms, latencyMax) / latencyMax) * lp.height;
  const flash = visible.filter((p) => p.kind === 'flash');
  if (flash.length > 1) {
    svg.append(node('polyline', {
      points: flash.map((p) => `${x(p.t).toFixed(1)},${y(p.ms).toFixed(1)}`).join(' '), class: 'flash-line',
    }));
  }
  for (const p of visible) {
    svg.append(node('circle', { cx: x(p.t), cy: y(p.ms), r: p.kind === 'asked' ? 4 : 2.5, class: `dot-${p.kind}` }));
  }

  // Time axis, shared.
  for (const secondsAgo of [120, 90, 60, 30, 0]) {
    const t = now - secondsAgo * 1000;
    if (t < start) continue;
    svg.append(node('text', { x: x(t), y: HEIGHT - 6, class: 'tick', 'text-anchor': 'middle' },
      secondsAgo === 0 ? 'now' : `-${secondsAgo} s`));
  }
}

// A small line of recent values (a flash question's logit gap over its latest answers).
export function drawSparkline(svg, values, { width = 120, height = 28 } = {}) {
  svg.replaceChildren();
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  if (values.length === 0) return;
  const max = Math.max(...values, 0);
  const min = Math.min(...values, 0);
  const span = max - min || 1;
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - ((v - min) / span) * (height - 4)).toFixed(1)}`);
  if (values.length > 1) svg.append(node('polyline', { points: pts.join(' '), class: 'spark' }));
  const [lx, ly] = pts[pts.length - 1].split(',');
  svg.append(node('circle', { cx: lx, cy: ly, r: 2.5, class: 'spark-dot' }));
}
