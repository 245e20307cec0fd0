// The monitor's dashboard: one page over the monitor's JSON API (/api/v1/mesh, results, events,
// alerts) and its live stream (/api/v1/live, server-sent events). It builds the DOM with
// createElement and textContent only: names and traceroute hops are data, never markup.
'use strict';

const SVG = 'http://www.w3.org/2000/svg';
const state = { mesh: null, results: [], events: [], alerts: [], test: null, pair: null };

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

async function get(path) {
  const r = await fetch(path);
  if (!r.ok) throw new Error(path + ': ' + r.status);
  return r.json();
}

function testSpec() {
  return state.mesh.tests.find((t) => t.name === state.test);
}

function pairResults(test, src, dst) {
  return state.results.filter((r) => r.test === test && r.src === src && r.dst === dst);
}

function median(values) {
  const s = values.slice().sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : null;
}

function firing(test, src, dst) {
  return state.alerts.some((a) => a.test === test && a.src === src && a.dst === dst);
}

// How a pair's latest result looks: ok, warn, bad, down, or none.
function status(test, src, dst) {
  const rs = pairResults(test, src, dst);
  const r = rs[rs.length - 1];
  if (!r) return { cls: 'none', r: null };
  if (r.status === 'down') return { cls: 'down', r };
  if (r.status !== 'ok' || firing(test, src, dst)) return { cls: 'bad', r };
  if (r.kind === 'throughput') {
    const base = median(rs.filter((x) => x.status === 'ok').map((x) => x.bits_per_second));
    const ratio = base ? r.bits_per_second / base : 1;
    return { cls: ratio >= 0.8 ? 'ok' : ratio >= 0.5 ? 'warn' : 'bad', r };
  }
  if (r.kind === 'latency') {
    return { cls: r.loss === 0 ? 'ok' : r.loss < 0.01 ? 'warn' : 'bad', r };
  }
  const changed = state.events.some((e) => e.kind === 'path_change' && e.test === test &&
    e.src === src && e.dst === dst && e.detail.window_ns === r.window_ns);
  return { cls: changed ? 'warn' : 'ok', r };
}

function figure(r) {
  if (!r) return 'no result';
  if (r.status !== 'ok') return r.status + (r.down_host ? ' (' + r.down_host + ')' : '') +
    (r.error ? ': ' + r.error : '');
  if (r.bits_per_second != null) return (r.bits_per_second / 1e9).toFixed(2) + ' Gbit/s';
  if (r.loss != null) return 'loss ' + (r.loss * 100).toFixed(2) + ' %, rtt ' +
    (r.rtt_ns / 1e6).toFixed(2) + ' ms';
  return r.path || '';
}

// The figure a map link carries: the rate, the RTT, or the hops.
function short(r) {
  if (r.bits_per_second != null) return (r.bits_per_second / 1e9).toFixed(2) + ' Gbit/s';
  if (r.rtt_ns != null) return (r.rtt_ns / 1e6).toFixed(2) + ' ms';
  return r.path ? r.path.split(' ').length + ' hops' : '';
}

function renderGrid() {
  const grid = document.getElementById('grid');
  clear(grid);
  const t = testSpec();
  if (!t) return;
  const names = state.mesh.hosts.map((h) => h.name)
    .filter((n) => t.pairs.some(([a, b]) => a === n || b === n));
  const head = el('tr');
  head.appendChild(el('th'));
  for (const n of names) head.appendChild(el('th', { scope: 'col' }, n));
  grid.appendChild(head);
  for (const row of names) {
    const tr = el('tr');
    tr.appendChild(el('th', { scope: 'row' }, row));
    for (const col of names) {
      if (row === col) {
        tr.appendChild(el('td', { class: 'self' }));
        continue;
      }
      const td = el('td', { class: 'cell', 'data-src': row, 'data-dst': col });
      for (const [src, dst] of [[row, col], [col, row]]) {
        const s = status(t.name, src, dst);
        const half = el('span', { class: s.cls, 'data-src': src, 'data-dst': dst });
        half.title = src + ' → ' + dst + ': ' + figure(s.r);
        td.appendChild(half);
      }
      if (state.pair && state.pair[0] === row && state.pair[1] === col) td.classList.add('selected');
      td.addEventListener('click', (ev) => {
        const half = ev.target.closest('span');
        state.pair = half ? [half.dataset.src, half.dataset.dst] : [row, col];
        render();
      });
      tr.appendChild(td);
    }
    grid.appendChild(tr);
  }
}

function positions(width, height) {
  const hosts = state.mesh.hosts;
  const placed = hosts.every((h) => h.lat != null && h.lon != null);
  const pos = {};
  if (placed && hosts.length > 1) {
    const lats = hosts.map((h) => h.lat), lons = hosts.map((h) => h.lon);
    const [a, b] = [Math.min(...lons), Math.max(...lons)];
    const [c, d] = [Math.min(...lats), Math.max(...lats)];
    const sx = (width - 120) / Math.max(b - a, 1e-6), sy = (height - 80) / Math.max(d - c, 1e-6);
    const s = Math.min(sx, sy);
    for (const h of hosts) pos[h.name] = [60 + (h.lon - a) * s, 40 + (d - h.lat) * s];
  } else {
    hosts.forEach((h, i) => {
      const angle = (2 * Math.PI * i) / hosts.length - Math.PI / 2;
      pos[h.name] = [width / 2 + 160 * Math.cos(angle), height / 2 + 150 * Math.sin(angle)];
    });
  }
  return pos;
}

function renderMap() {
  const map = document.getElementById('map');
  clear(map);
  const t = testSpec();
  if (!t) return;
  const pos = positions(800, 400);
  for (const [src, dst] of t.pairs) {
    const s = status(t.name, src, dst);
    const [x1, y1] = pos[src], [x2, y2] = pos[dst];
    // The two directions side by side: offset each across the line.
    const len = Math.hypot(x2 - x1, y2 - y1) || 1;
    const ox = (-(y2 - y1) / len) * 3, oy = ((x2 - x1) / len) * 3;
    const line = svg('line', { x1: x1 + ox, y1: y1 + oy, x2: x2 + ox, y2: y2 + oy,
      class: 'link ' + s.cls, 'data-src': src, 'data-dst': dst });
    line.appendChild(svg('title', {}, src + ' → ' + dst + ': ' + figure(s.r)));
    map.appendChild(line);
    if (s.r && s.r.status === 'ok') {
      map.appendChild(svg('text', { x: (x1 + x2) / 2 + ox * 4, y: (y1 + y2) / 2 + oy * 4,
        class: 'rate' }, short(s.r)));
    }
  }
  for (const h of state.mesh.hosts) {
    if (!t.pairs.some(([a, b]) => a === h.name || b === h.name)) continue;
    const [x, y] = pos[h.name];
    map.appendChild(svg('circle', { cx: x, cy: y, r: 7, class: 'site' }));
    map.appendChild(svg('text', { x: x + 10, y: y - 8, class: 'site-label' }, h.name));
  }
}

// The series a pair's chart shows, by the kind of its test: [label, value of a result].
function seriesOf(kind) {
  if (kind === 'throughput') {
    return [['throughput, Gbit/s', (r) => r.bits_per_second / 1e9],
      ['retransmits', (r) => r.retransmits], ['TCP RTT, ms', (r) => r.rtt_ns / 1e6]];
  }
  if (kind === 'latency') {
    return [['RTT (median), ms', (r) => r.rtt_ns / 1e6], ['loss, %', (r) => r.loss * 100],
      ['jitter, ms', (r) => r.jitter_ns / 1e6]];
  }
  return [['hops', (r) => (r.path ? r.path.split(' ').length : null)]];
}

function renderChart() {
  const section = document.getElementById('pair-section');
  const chart = document.getElementById('chart');
  clear(chart);
  if (!state.pair) {
    section.hidden = true;
    return;
  }
  section.hidden = false;
  const [src, dst] = state.pair;
  const t = testSpec();
  const rs = pairResults(state.test, src, dst);
  document.getElementById('pair-title').textContent = state.test + ': ' + src + ' → ' + dst;
  const changes = state.events.filter((e) => e.kind === 'path_change' &&
    e.src === src && e.dst === dst);
  const times = rs.map((r) => r.ended_ns).concat(changes.map((e) => e.at_ns));
  if (!times.length) return;
  const series = seriesOf(t.kind);
  const [W, L, B, PANEL] = [1200, 60, 30, 110];
  const H = series.length * PANEL + B;
  chart.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  let t0 = Math.min(...times), t1 = Math.max(...times);
  if (t1 === t0) { t0 -= 1e9; t1 += 1e9; }
  const x = (tt) => L + ((tt - t0) / (t1 - t0)) * (W - L - 10);
  const ok = rs.filter((r) => r.status === 'ok');
  series.forEach(([label, value], k) => {
    const top = k * PANEL + 8, bottom = (k + 1) * PANEL - 8;
    const vals = ok.map((r) => [r, value(r)]).filter(([, v]) => v != null && isFinite(v));
    const peak = Math.max(0, ...vals.map(([, v]) => v));
    const vmax = peak > 0 ? peak * 1.1 : 1;
    const y = (v) => bottom - (v / vmax) * (bottom - top);
    chart.appendChild(svg('line', { x1: L, y1: bottom, x2: W - 10, y2: bottom, class: 'axis' }));
    chart.appendChild(svg('line', { x1: L, y1: top, x2: L, y2: bottom, class: 'axis' }));
    chart.appendChild(svg('text', { x: L + 6, y: top + 10, class: 'tick' }, label));
    chart.appendChild(svg('text', { x: 4, y: top + 10, class: 'tick' }, vmax.toPrecision(3)));
    chart.appendChild(svg('text', { x: 4, y: bottom, class: 'tick' }, '0'));
    chart.appendChild(svg('polyline', { class: 'series', points: vals
      .map(([r, v]) => x(r.ended_ns).toFixed(1) + ',' + y(v).toFixed(1)).join(' ') }));
    for (const [r, v] of vals) {
      const p = svg('circle', { cx: x(r.ended_ns), cy: y(v), r: 3, class: 'point' });
      p.appendChild(svg('title', {}, label + ': ' + v.toPrecision(4)));
      chart.appendChild(p);
    }
    for (const r of rs.filter((r) => r.status !== 'ok')) {
      const p = svg('circle', { cx: x(r.ended_ns), cy: bottom, r: 4,
        class: 'point ' + (r.status === 'down' ? 'down' : 'failed') });
      p.appendChild(svg('title', {}, figure(r)));
      chart.appendChild(p);
    }
  });
  chart.appendChild(svg('text', { x: L, y: H - 8, class: 'tick' },
    new Date(t0 / 1e6).toISOString().slice(11, 19) + ' UTC'));
  chart.appendChild(svg('text', { x: W - 80, y: H - 8, class: 'tick' },
    new Date(t1 / 1e6).toISOString().slice(11, 19) + ' UTC'));
  changes.forEach((e) => {
    // A dashed line across every panel, and a wider transparent band around it to click.
    const m = svg('g', { class: 'change' });
    m.appendChild(svg('line', { x1: x(e.at_ns), y1: 8, x2: x(e.at_ns), y2: H - B }));
    m.appendChild(svg('rect', { x: x(e.at_ns) - 6, y: 8, width: 12, height: H - B - 8,
      class: 'hit' }));
    m.appendChild(svg('title', {}, 'path changed (' + e.test + ')'));
    m.addEventListener('click', () => showDiff(e));
    chart.appendChild(m);
  });
}

function showDiff(e) {
  const diff = document.getElementById('diff');
  diff.hidden = false;
  document.getElementById('diff-title').textContent = 'Path change ' + e.src + ' → ' + e.dst +
    ' at ' + new Date(e.at_ns / 1e6).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
  const before = (e.detail.before || '').split(' ').filter(Boolean);
  const after = (e.detail.after || '').split(' ').filter(Boolean);
  for (const [id, hops, other] of [['diff-before', before, after], ['diff-after', after, before]]) {
    const list = document.getElementById(id);
    clear(list);
    hops.forEach((h, i) => {
      const li = el('li', {}, h);
      if (h !== '*' && other[i] !== '*' && h !== other[i]) li.classList.add('changed');
      list.appendChild(li);
    });
  }
}

function renderAlerts() {
  const a = document.getElementById('alerts');
  a.textContent = state.alerts.length
    ? state.alerts.length + ' alert(s) firing: ' +
      state.alerts.map((x) => x.alert + ' ' + x.src + '→' + x.dst).join(', ')
    : '';
}

function render() {
  renderGrid();
  renderMap();
  renderChart();
  renderAlerts();
}

function live() {
  const badge = document.getElementById('live-state');
  const source = new EventSource('/api/v1/live');
  source.addEventListener('open', () => {
    badge.textContent = 'live';
    badge.classList.add('on');
  });
  source.addEventListener('error', () => {
    badge.textContent = 'reconnecting';
    badge.classList.remove('on');
  });
  source.addEventListener('result', async (msg) => {
    const r = JSON.parse(msg.data);
    state.results.push(r);
    if (r.path_change) {
      state.events.push({ at_ns: r.ended_ns, kind: 'path_change', test: r.test, src: r.src,
        dst: r.dst, detail: { before: r.path_change.before, after: r.path_change.after,
          window_ns: r.window_ns } });
    }
    if (r.alerts && r.alerts.length) state.alerts = await get('/api/v1/alerts');
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
    render();
  });
}

async function main() {
  state.mesh = await get('/api/v1/mesh');
  [state.results, state.events, state.alerts] = await Promise.all([
    get('/api/v1/results?since=86400'), get('/api/v1/events?since=86400'), get('/api/v1/alerts'),
  ]);
  document.getElementById('mesh-name').textContent = state.mesh.name;
  const select = document.getElementById('test');
  for (const t of state.mesh.tests) select.appendChild(el('option', { value: t.name }, t.name));
  state.test = state.mesh.tests[0].name;
  select.addEventListener('change', () => {
    state.test = select.value;
    state.pair = null;
    render();
  });
  render();
  live();
  document.body.dataset.ready = 'true';
}

main().catch((e) => {
  document.body.dataset.error = String(e);
});
