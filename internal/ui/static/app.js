// Tether live demo page: no build step, no external assets. The race runs in the server's
// process (package internal/ui); this page starts it, reads its events over SSE (fetch, so
// that the API key can go in the Authorization header) and polls the live view.
'use strict';

const $ = (s, el = document) => el.querySelector(s);
const COLORS = { 'http': '#d62728', 'http-prev': '#ff7f0e', 'ws': '#1f77b4', 'append': '#2ca02c' };
const keyInput = $('#key');
keyInput.value = sessionStorage.getItem('tether-key') || '';
keyInput.addEventListener('input', () => sessionStorage.setItem('tether-key', keyInput.value));

function headers(extra) {
  const h = Object.assign({}, extra);
  if (keyInput.value) h['Authorization'] = 'Bearer ' + keyInput.value;
  return h;
}

async function api(method, path, body) {
  const r = await fetch(path, {
    method, headers: headers(body ? { 'Content-Type': 'application/json' } : {}),
    body: body ? JSON.stringify(body) : undefined,
  });
  let data = null;
  try { data = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok) {
    const e = new Error(data && data.error ? data.error.message : r.status + ' ' + r.statusText);
    e.status = r.status;
    throw e;
  }
  return data;
}

// stream reads Server-Sent Events from path and calls onEvent(type, data) for each.
async function stream(path, onEvent, signal) {
  const r = await fetch(path, { headers: headers({ Accept: 'text/event-stream' }), signal });
  if (!r.ok) {
    let msg = r.status + ' ' + r.statusText;
    try { msg = (await r.json()).error.message; } catch (_) { /* keep the status */ }
    throw new Error(msg);
  }
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let type = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) type = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length) onEvent(type, JSON.parse(data.join('\n')));
    }
  }
}

// Number formats. Every shown number also sits unformatted in its element's data-value.
function fmtMS(v) {
  if (v < 0) return '−' + fmtMS(-v); // the sim's timer woke early
  if (v < 1) return (v * 1000).toFixed(0) + ' µs';
  if (v < 10) return v.toFixed(2) + ' ms';
  if (v < 100) return v.toFixed(1) + ' ms';
  if (v < 1000) return v.toFixed(0) + ' ms';
  return (v / 1000).toFixed(2) + ' s';
}
const fmtS = (s) => s.toFixed(2) + ' s';
const fmtRatio = (v) => (v <= 0 ? '–' : v < 0.1 ? v.toFixed(3) + '×' : v.toFixed(2) + '×');
function fmtBytes(v) {
  if (v >= 1 << 20) return (v / (1 << 20)).toFixed(1) + ' MiB';
  if (v >= 1 << 10) return (v / (1 << 10)).toFixed(1) + ' KiB';
  return v.toFixed(0) + ' B';
}
function setNum(el, v, fmt) {
  el.dataset.value = String(v);
  el.textContent = fmt(v);
}
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') el.className = v; else if (k.startsWith('data-')) el.setAttribute(k, v); else el[k] = v;
  }
  for (const k of kids) el.append(k);
  return el;
}

// ---- tabs ----
function show(view) {
  for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t.dataset.view === view);
  $('#view-race').hidden = view !== 'race';
  $('#view-live').hidden = view !== 'live';
  if (view === 'live') pollLive(); else stopLive();
}
for (const t of document.querySelectorAll('.tab')) {
  t.addEventListener('click', () => { location.hash = t.dataset.view; });
}
window.addEventListener('hashchange', () => show(location.hash === '#live' ? 'live' : 'race'));

// ---- race ----
let race = null;
let streamAbort = null;

function setStatus(text, cls) {
  const s = $('#race-status');
  s.textContent = text;
  s.className = 'status ' + (cls || '');
}

function newRace(st) {
  const cfg = st.config;
  race = { id: st.id, cfg, turns: cfg.calls + 1, lanes: {}, order: [] };
  document.body.dataset.raceId = st.id;
  document.body.dataset.raceStatus = 'running';
  const lanes = $('#lanes');
  lanes.replaceChildren();
  for (const t of cfg.transports) {
    const el = h('div', { class: 'lane', 'data-transport': t },
      h('div', { class: 'name' }, h('span', { class: 'dot', style: '' }), t),
      h('div', { class: 'bar' }, h('div', { class: 'fill' }), h('div', { class: 'label' }, 'waiting')),
      h('div', { class: 'metric' }, h('small', {}, 'first item, last turn'), h('span', { class: 'last' }, '–')),
      h('div', { class: 'metric' }, h('small', {}, 'of which server + transport'), h('span', { class: 'server' }, '–')),
      h('div', { class: 'metric' }, h('small', {}, 'rollout time'), h('span', { class: 'rollout' }, '–')),
      h('span', { class: 'badge' }, 'waiting'));
    $('.dot', el).style.background = COLORS[t];
    $('.fill', el).style.background = COLORS[t] + '55';
    lanes.append(el);
    race.lanes[t] = { el, measured: 0, sumMS: 0, best: new Array(race.turns).fill(NaN) };
  }
  $('#results tbody').replaceChildren();
  $('#results-note').hidden = false;
  drawChart();
  $('#start').disabled = true;
  setStatus(`Race ${st.id}: ${cfg.calls} tool calls × ${cfg.rollouts} rollout(s) at ${cfg.speed} tokens/s…`);
}

function onTurn(ev) {
  const lane = race && race.lanes[ev.transport];
  if (!lane) return;
  const badge = $('.badge', lane.el);
  if (ev.rollout === 0) {
    badge.textContent = 'warm-up';
    badge.className = 'badge running';
    $('.label', lane.el).textContent = `warm-up turn ${ev.turn} / ${ev.turns}`;
    return;
  }
  badge.textContent = 'running';
  badge.className = 'badge running';
  lane.measured++;
  lane.sumMS += ev.turn_ms;
  const all = race.turns * race.cfg.rollouts;
  $('.fill', lane.el).style.width = (100 * lane.measured / all).toFixed(1) + '%';
  const of = race.cfg.rollouts > 1 ? ` (rollout ${ev.rollout})` : '';
  $('.label', lane.el).textContent = `turn ${ev.turn} / ${race.turns}${of}`;
  setNum($('.last', lane.el), ev.overhead_ms, fmtMS);
  setNum($('.server', lane.el), ev.server_ms, fmtMS);
  setNum($('.rollout', lane.el), lane.sumMS / 1000 / race.cfg.rollouts, fmtS);
  const i = ev.turn - 1;
  lane.best[i] = isNaN(lane.best[i]) ? ev.overhead_ms : Math.min(lane.best[i], ev.overhead_ms);
  scheduleChart();
}

function onLane(ev) {
  const lane = race && race.lanes[ev.transport];
  if (!lane) return;
  const badge = $('.badge', lane.el);
  badge.className = 'badge ' + ev.status;
  badge.textContent = ev.status === 'done' ? 'finished' : 'failed';
  if (ev.status === 'done') {
    race.order.push(ev.transport);
    badge.textContent = ['1st', '2nd', '3rd', '4th'][race.order.length - 1] + ' to finish';
    $('.fill', lane.el).style.width = '100%';
  }
}

function onDone(st) {
  race.finished = true; // the bench's chart replaces the page's
  const rep = st.report;
  const speed = Object.keys(rep.transports[0].e2e)[0];
  const tbody = $('#results tbody');
  tbody.replaceChildren();
  let best = Infinity;
  for (const tr of rep.transports) best = Math.min(best, tr.e2e[speed].rollout_s);
  for (const tr of rep.transports) {
    const e = tr.e2e[speed];
    const cell = (key, v, fmt) => {
      const td = h('td', { 'data-transport': tr.name, 'data-key': key });
      setNum(td, v, fmt);
      return td;
    };
    const row = h('tr', { 'data-transport': tr.name },
      h('td', {}, h('span', { class: 'dot' }), ' ', tr.name),
      cell('rollout_s', e.rollout_s, fmtS),
      cell('ratio_vs_http', e.ratio_vs_http, fmtRatio),
      cell('overhead_p50_ms', tr.overhead_ms.p50, fmtMS),
      cell('overhead_p90_ms', tr.overhead_ms.p90, fmtMS),
      cell('bytes_per_turn', tr.bytes_per_turn, fmtBytes));
    $('.dot', row).style.background = COLORS[tr.name];
    if (e.rollout_s === best) row.children[1].classList.add('best');
    tbody.append(row);
    // The lane's rollout time becomes the report's.
    const lane = race.lanes[tr.name];
    if (lane) setNum($('.rollout', lane.el), e.rollout_s, fmtS);
  }
  $('#results-note').hidden = true;
  if (st.svg) {
    $('#chart-svg').innerHTML = st.svg; // the bench's own chart of this race (escaped by the server)
    $('#chart figcaption').textContent = 'The bench\'s chart of this race';
  }
  document.body.dataset.raceStatus = 'done';
  $('#start').disabled = false;
  setStatus(`Race ${st.id} finished in ${fmtS(rep.elapsed_s)}.`);
}

function onError(ev) {
  document.body.dataset.raceStatus = 'failed';
  $('#start').disabled = false;
  setStatus('The race failed: ' + ev.message, 'failed');
}

async function watch() {
  if (streamAbort) streamAbort.abort();
  const ctl = new AbortController();
  streamAbort = ctl;
  try {
    await stream('api/race/events', (type, data) => {
      if (ctl.signal.aborted) return;
      if (type === 'race') newRace(data);
      else if (type === 'turn') onTurn(data);
      else if (type === 'lane') onLane(data);
      else if (type === 'done') onDone(data);
      else if (type === 'error') onError(data);
    }, ctl.signal);
  } catch (e) {
    if (!ctl.signal.aborted) { $('#start').disabled = false; setStatus(e.message, 'failed'); }
  }
}

$('#race-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const body = { speed: $('#speed').value, calls: parseInt($('#calls').value, 10) || 0 };
  try {
    await api('POST', 'api/race', body);
  } catch (e) {
    setStatus(e.message, 'failed');
    if (e.status !== 409) return; // 409: a race is running: watch it
  }
  watch();
});

// ---- the live chart (drawn by the page while the race runs; replaced by the bench's) ----
let chartPending = false;
function scheduleChart() {
  if (chartPending) return;
  chartPending = true;
  requestAnimationFrame(() => { chartPending = false; if (race && !race.finished) drawChart(); });
}

function drawChart() {
  $('#chart figcaption').textContent = 'First output item per turn (fastest of the rollouts), as it happens';
  const W = 640, H = 330, L = 62, R = 14, T = 14, B = 40;
  const lanes = race ? Object.entries(race.lanes) : [];
  let lo = Infinity, hi = -Infinity;
  for (const [, l] of lanes) for (const v of l.best) if (v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!isFinite(lo)) { lo = 10; hi = 1000; }
  const ylo = Math.pow(10, Math.floor(Math.log10(lo)));
  let yhi = Math.pow(10, Math.ceil(Math.log10(hi)));
  if (yhi <= ylo) yhi = ylo * 10;
  const n = race ? race.turns : 21;
  const x = (t) => L + (W - L - R) * (n <= 1 ? 0 : (t - 1) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - (Math.log10(v) - Math.log10(ylo)) / (Math.log10(yhi) - Math.log10(ylo)));
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" font-size="11" font-family="Helvetica, Arial, sans-serif">`];
  for (let d = ylo; d <= yhi * 1.001; d *= 10) {
    for (const m of [1, 2, 5]) {
      const v = d * m;
      if (v > yhi * 1.001) break;
      out.push(`<line x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}" stroke="${m === 1 ? '#d0d4dc' : '#eceef2'}"/>`);
      out.push(`<text x="${L - 6}" y="${y(v) + 4}" text-anchor="end" fill="#5b6475">${fmtMS(v).replace(/\.0+ /, ' ')}</text>`);
    }
  }
  const step = n <= 11 ? 1 : n <= 26 ? 5 : n <= 51 ? 10 : 20;
  for (let t = 1; t <= n; t = t === 1 && step > 1 ? step : t + step) {
    out.push(`<text x="${x(t)}" y="${H - B + 16}" text-anchor="middle" fill="#5b6475">${t}</text>`);
  }
  out.push(`<text x="${L + (W - L - R) / 2}" y="${H - 6}" text-anchor="middle" fill="#5b6475">turn of the rollout</text>`);
  out.push(`<rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="none" stroke="#9aa1ae"/>`);
  for (const [name, l] of lanes) {
    const pts = [];
    l.best.forEach((v, i) => { if (v > 0) pts.push(`${x(i + 1).toFixed(1)},${y(v).toFixed(1)}`); });
    if (pts.length) {
      out.push(`<polyline fill="none" stroke="${COLORS[name]}" stroke-width="2" stroke-linejoin="round" points="${pts.join(' ')}"/>`);
      const last = pts[pts.length - 1].split(',');
      out.push(`<circle cx="${last[0]}" cy="${last[1]}" r="3.5" fill="${COLORS[name]}"/>`);
    }
  }
  lanes.forEach(([name], i) => {
    const lx = L + 12 + i * 92;
    out.push(`<line x1="${lx}" x2="${lx + 18}" y1="${T + 14}" y2="${T + 14}" stroke="${COLORS[name]}" stroke-width="3"/>`);
    out.push(`<text x="${lx + 23}" y="${T + 18}" fill="#1d2330">${name}</text>`);
  });
  out.push('</svg>');
  $('#chart-svg').innerHTML = out.join('');
}

// ---- live connections ----
let liveTimer = null;
function stopLive() { clearTimeout(liveTimer); liveTimer = null; }

function age(s) {
  if (s < 60) return s.toFixed(1) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.floor(s % 60) + ' s';
  return (s / 3600).toFixed(1) + ' h';
}

async function pollLive() {
  stopLive();
  try {
    renderLive(await api('GET', 'api/live'));
    $('#live-error').hidden = true;
  } catch (e) {
    $('#live-error').textContent = e.message;
    $('#live-error').hidden = false;
  }
  if (!$('#view-live').hidden) liveTimer = setTimeout(pollLive, 1000);
}

function renderLive(l) {
  const t = l.totals;
  $('#live-totals').innerHTML = '';
  for (const [label, v] of [['connections', t.connections], ['sampling', t.sampling], ['suspended', t.suspended], ['queued', t.queued]]) {
    $('#live-totals').append(h('span', { 'data-total': label }, h('b', {}, String(v)), ' ' + label));
  }
  const tbody = $('#live tbody');
  tbody.replaceChildren();
  if (!l.connections.length) {
    tbody.append(h('tr', {}, h('td', { colSpan: 9, class: 'muted' }, 'No connection is open.')));
  }
  for (const c of l.connections) {
    const rows = c.rollouts.length ? c.rollouts : [null];
    rows.forEach((r, i) => {
      const tr = h('tr', { 'data-conn': c.id });
      if (i === 0) {
        const span = rows.length;
        tr.append(h('td', { rowSpan: span, class: 'mono', title: c.remote || '' }, c.id.slice(0, 13) + '…'),
          h('td', { rowSpan: span }, c.shape + (c.draining ? ' (draining)' : '')),
          h('td', { rowSpan: span }, age(c.age_s)));
      }
      if (!r) {
        tr.append(h('td', { colSpan: 6, class: 'muted' }, c.ended_rollouts ? `no live rollout (${c.ended_rollouts} ended, kept)` : 'no live rollout'));
      } else {
        tr.dataset.rollout = r.id;
        tr.append(h('td', { class: 'mono', title: r.id }, r.id.slice(0, 13) + '…'),
          h('td', {}, h('span', { class: 'state ' + r.state, 'data-state': r.state }, r.state)),
          h('td', { 'data-key': 'turns' }, String(r.turns)),
          h('td', { 'data-key': 'context_tokens' }, r.context_tokens.toLocaleString('en-US')),
          h('td', {}, `${r.input_tokens.toLocaleString('en-US')} / ${r.cached_tokens.toLocaleString('en-US')} / ${r.output_tokens.toLocaleString('en-US')}`),
          h('td', {}, age(r.turn_age_s) + ' ago'));
      }
      tbody.append(tr);
    });
  }
}

// ---- start ----
show(location.hash === '#live' ? 'live' : 'race');
drawChart();
api('GET', 'api/race').then((st) => { if (st) watch(); }).catch(() => { /* no race yet, or no key yet */ });
