'use strict';
// mqlite web console. Every server value reaches the page as text nodes or plain attributes.
(() => {
  const TOKEN_KEY = 'mqlite.token', HIST_KEY = 'mqlite.history';
  const STATES = ['active', 'locked', 'scheduled', 'deferred', 'dead_lettered'];
  const LABELS = { active: 'Active', locked: 'Locked', scheduled: 'Scheduled', deferred: 'Deferred', dead_lettered: 'Dead-lettered', total: 'Total' };
  const TICK_MS = 2000, KEEP = 150, WINDOW_MS = KEEP * TICK_MS;
  const SVGNS = 'http://www.w3.org/2000/svg';
  const $ = (id) => document.getElementById(id);

  let token = null, perms = new Set(), gen = 0, timer = 0, page = null, tickErr = false;
  let hist = loadHist();
  let main;

  // ---- DOM helpers ----

  // Creates an element; strings among the children become text nodes, functions listeners.
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    add(el, kids);
    return el;
  }

  function setAttrs(el, attrs) {
    if (!attrs) return;
    for (const k of Object.keys(attrs)) {
      const v = attrs[k];
      if (v == null || v === false) continue;
      if (typeof v === 'function') el.addEventListener(k.replace(/^on/, ''), v);
      else if (k === 'checked' || k === 'disabled' || k === 'hidden') el[k] = !!v;
      else if (!/^(on|style$)/i.test(k)) el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function add(el, kids) {
    for (const c of kids.flat(Infinity)) {
      if (c == null || c === false) continue;
      el.append(c instanceof Node ? c : String(c));
    }
  }

  function svg(tag, attrs) {
    const el = document.createElementNS(SVGNS, tag);
    for (const k of Object.keys(attrs || {})) el.setAttribute(k, String(attrs[k]));
    return el;
  }

  // ---- formatting ----

  const iso = (ms) => (ms ? new Date(ms).toISOString() : '–');
  const plural = (n, w) => `${n} ${w}${n === 1 ? '' : 's'}`;
  const qhref = (name) => '#/queue/' + encodeURIComponent(name);
  const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

  function fmtDur(ms) {
    ms = Number(ms) || 0;
    if (ms < 1000) return `${ms} ms`;
    const s = ms / 1000;
    if (s < 60) return `${+s.toFixed(1)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  function fmtBytes(n) {
    n = Number(n) || 0;
    const u = ['B', 'KB', 'MB', 'GB', 'TB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return `${i ? n.toFixed(1) : n} ${u[i]}`;
  }

  function clampInt(v, lo, hi, dflt) {
    const n = parseInt(v, 10);
    return Number.isFinite(n) ? Math.min(hi, Math.max(lo, n)) : dflt;
  }

  // ---- bodies ----

  function b64enc(text) {
    const b = new TextEncoder().encode(text);
    let bin = '';
    for (let i = 0; i < b.length; i += 0x8000) bin += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
    return btoa(bin);
  }

  function b64bytes(s) {
    try {
      const bin = atob(s || '');
      const u = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
      return u;
    } catch { return null; }
  }

  // The body as display text: UTF-8 (optionally pretty JSON) or a hex preview.
  function bodyText(b64, pretty) {
    const bytes = b64bytes(b64);
    if (!bytes) return '(body is not valid base64)';
    let text;
    try { text = new TextDecoder('utf-8', { fatal: true }).decode(bytes); } catch {
      const hex = [];
      const head = bytes.subarray(0, 64);
      for (let i = 0; i < head.length; i += 16) {
        hex.push(Array.from(head.subarray(i, i + 16), (x) => x.toString(16).padStart(2, '0')).join(' '));
      }
      return `binary, ${bytes.length} bytes\n${hex.join('\n')}${bytes.length > 64 ? '\n…' : ''}`;
    }
    if (pretty && text.trim()) {
      try { return JSON.stringify(JSON.parse(text), null, 2); } catch { /* not JSON */ }
    }
    return text;
  }

  function parseProps(text) {
    const out = {};
    for (const line of text.split(/\n/)) {
      const i = line.indexOf('=');
      if (i > 0) out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    }
    return out;
  }

  // ---- API ----

  class ApiError extends Error {
    constructor(code, message, status) { super(message); this.code = code; this.status = status; }
  }

  // Calls one RPC; a 401 signs the session out.
  async function api(service, method, req) {
    const used = token;
    const headers = { 'Content-Type': 'application/json' };
    if (used) headers.Authorization = 'Bearer ' + used;
    let res;
    try {
      res = await fetch(`/mqlite.v1.${service}/${method}`, { method: 'POST', headers, body: JSON.stringify(req || {}), cache: 'no-store' });
    } catch (e) {
      throw new ApiError('unavailable', 'the broker did not answer (' + e.message + ')', 0);
    }
    let data = null;
    try { data = await res.json(); } catch { /* empty or not JSON */ }
    if (res.ok) return data || {};
    const err = new ApiError((data && data.code) || 'http_' + res.status, (data && data.message) || res.statusText || 'request failed', res.status);
    if (res.status === 401 || err.code === 'unauthenticated') {
      err.auth = true;
      if (used === token) signOut(err.message);
    }
    throw err;
  }

  const can = (p) => perms.has('manage') || perms.has(p);

  // ---- errors and notices ----

  function showError(e, fromTick) {
    if (!e || e.auth) return;
    const el = $('error');
    el.textContent = e.code === 'permission_denied' ? e.message : `${e.code || 'error'}: ${e.message || e}`;
    el.hidden = false;
    tickErr = !!fromTick;
  }

  function clearError() {
    const el = $('error');
    el.textContent = '';
    el.hidden = true;
    tickErr = false;
  }

  function notice(text) {
    const el = $('notice');
    el.textContent = text || '';
    el.hidden = !text;
  }

  // Runs a user action: the button is disabled meanwhile, failures land in #error.
  async function act(btn, fn) {
    const g = gen;
    if (btn) btn.disabled = true;
    notice('');
    try {
      await fn();
      if (g === gen && !$('error').hidden) clearError();
    } catch (e) {
      if (g === gen) showError(e);
    } finally {
      if (btn) btn.disabled = false;
    }
  }

  // ---- history and sparklines ----

  function loadHist() {
    try { return JSON.parse(sessionStorage.getItem(HIST_KEY)) || {}; } catch { return {}; }
  }

  function saveHist() {
    try { sessionStorage.setItem(HIST_KEY, JSON.stringify(hist)); } catch { /* full: keep in memory */ }
  }

  function record(name, st) {
    const a = hist[name] || (hist[name] = []);
    const now = Date.now();
    const row = [now, st.active, st.locked, st.scheduled, st.deferred, st.dead_lettered, st.total];
    if (a.length && now - a[a.length - 1][0] < 1000) a[a.length - 1] = row;
    else a.push(row);
    if (a.length > KEEP) a.splice(0, a.length - KEEP);
  }

  function lastStats(name) {
    const a = hist[name];
    if (!a || !a.length) return null;
    const r = a[a.length - 1];
    return { active: r[1], locked: r[2], scheduled: r[3], deferred: r[4], dead_lettered: r[5], total: r[6] };
  }

  function sparkSvg(w, ht, big) {
    return svg('svg', { class: big ? 'sparkline big' : 'sparkline', viewBox: `0 0 ${w} ${ht}`, width: w, height: ht, preserveAspectRatio: 'none', role: 'img' });
  }

  // Draws the last five minutes of a queue's total, active and dead-lettered counts.
  function drawSpark(el, name) {
    const [, , w, ht] = el.getAttribute('viewBox').split(' ').map(Number);
    const now = Date.now();
    const pts = (hist[name] || []).filter((r) => now - r[0] <= WINDOW_MS);
    const max = Math.max(1, ...pts.map((r) => Math.max(r[1], r[5], r[6])));
    const kids = [svg('line', { class: 'base', x1: 0, y1: ht - 0.5, x2: w, y2: ht - 0.5 })];
    for (const [cls, idx] of [['total', 6], ['active', 1], ['dead_lettered', 5]]) {
      let seg = [], prev = 0;
      const flush = () => {
        if (seg.length === 1) seg.unshift([seg[0][0] - 2, seg[0][1]]);
        if (seg.length) kids.push(svg('polyline', { class: 'l-' + cls, points: seg.map((p) => p.join(',')).join(' ') }));
        seg = [];
      };
      for (const r of pts) {
        if (prev && r[0] - prev > 3.5 * TICK_MS) flush();
        prev = r[0];
        const x = w - ((now - r[0]) / WINDOW_MS) * w;
        const y = ht - 1 - (r[idx] / max) * (ht - 3);
        seg.push([x.toFixed(1), y.toFixed(1)]);
      }
      flush();
    }
    const t = svg('title');
    const l = pts[pts.length - 1];
    t.textContent = l ? `${name}: total ${l[6]}, active ${l[1]}, dead-lettered ${l[5]} (peak ${max}, last 5 min)` : `${name}: no samples yet`;
    kids.push(t);
    if (el.classList.contains('big')) {
      const label = svg('text', { class: 'max', x: 4, y: 11 });
      label.textContent = String(max);
      kids.push(label);
    }
    el.replaceChildren(...kids);
  }

  function legend() {
    return h('div', { class: 'legend' }, ['total', 'active', 'dead_lettered'].map((k) => h('span', { class: 'k-' + k }, LABELS[k].toLowerCase())), ' · last 5 minutes');
  }

  // Fetches Stats for each queue, a few at a time, recording history.
  async function statsFor(names, each, alive) {
    let i = 0, first = null;
    const worker = async () => {
      while (i < names.length) {
        const name = names[i++];
        try {
          const st = await api('QueueService', 'Stats', { queue: name });
          if (!alive()) return;
          record(name, st);
          each(name, st);
        } catch (e) { first = first || e; }
      }
    };
    await Promise.all(Array.from({ length: Math.min(6, names.length) }, worker));
    saveHist();
    if (first) throw first;
  }

  // Count cells with the count-<state> classes (plus total and oldest age).
  function countCells(name) {
    const c = {};
    for (const k of [...STATES, 'total']) c[k] = h('td', { class: 'num count-' + k }, '–');
    c.oldest = h('td', { class: 'num oldest' }, '–');
    const last = name && lastStats(name);
    if (last) setCounts(c, last);
    return c;
  }

  function setCounts(c, st) {
    for (const k of [...STATES, 'total']) if (c[k]) c[k].textContent = String(st[k] || 0);
    c.dead_lettered.classList.toggle('hot', (st.dead_lettered || 0) > 0);
    if (c.oldest && 'oldest_message_age_ms' in st) c.oldest.textContent = st.total ? fmtDur(st.oldest_message_age_ms) : '–';
  }

  const countHeads = () => [...STATES, 'total'].map((k) => h('th', { class: 'num' }, LABELS[k]));

  // ---- pages ----

  function queuesPage(alive) {
    const status = h('div', { id: 'status', class: 'status' });
    const tbody = h('tbody');
    const table = h('table', { id: 'queues', class: 'grid' },
      h('thead', null, h('tr', null, h('th', null, 'Queue'), h('th', null, 'Kind'), countHeads(), h('th', { class: 'num' }, 'Oldest'), h('th', null, 'Last 5 min'))),
      tbody);
    const empty = h('p', { class: 'empty', hidden: true }, 'No queues yet.');
    const sec = h('section', null, h('h2', null, 'Queues'), can('manage') ? status : null, table, empty);
    main.append(sec);
    const rows = new Map();
    let noList = false;

    function makeRow(q) {
      const c = countCells(q.name), sp = sparkSvg(120, 24);
      drawSpark(sp, q.name);
      const tr = h('tr', { 'data-queue': q.name },
        h('td', { class: 'name' }, h('a', { href: qhref(q.name) }, q.name)),
        h('td', { class: 'kind' }, q.status && q.status !== 'active' ? `${q.kind} · ${q.status.replace('_', ' ')}` : q.kind),
        STATES.map((k) => c[k]), c.total, c.oldest,
        h('td', { class: 'spark' }, sp));
      return { tr, c, sp };
    }

    function showNoList() {
      noList = true;
      const input = h('input', { id: 'open-queue', type: 'text', placeholder: 'queue name', autocomplete: 'off', 'aria-label': 'queue name' });
      const go = () => { const v = input.value.trim(); if (v) location.hash = qhref(v); };
      input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
      const recent = Object.keys(hist).sort(byName);
      sec.replaceChildren(h('h2', null, 'Queues'), h('div', { id: 'no-list', class: 'box' },
        h('p', null, 'This access key cannot list queues: listing needs the manage permission. Open a queue by its name instead.'),
        h('div', { class: 'row' }, input, h('button', { id: 'open-queue-go', type: 'button', onclick: go }, 'Open')),
        recent.length ? h('p', { class: 'recent' }, 'Recently viewed: ', recent.map((n) => [h('a', { href: qhref(n) }, n), ' '])) : null));
      input.focus();
    }

    function setStatus(s) {
      status.textContent = `mqlite ${s.version} · ${s.backend}${s.location ? ' (' + s.location + ')' : ''} · database ${fmtBytes(s.db_size_bytes)} · `
        + `${plural(s.queues, 'queue')}, ${plural(s.topics || 0, 'topic')}, ${plural(s.subscriptions, 'subscription')} · up ${fmtDur(s.uptime_ms)}`;
    }

    async function tick() {
      if (noList) return;
      const [r, s] = await Promise.all([
        api('AdminService', 'ListQueues').catch((e) => e),
        can('manage') ? api('AdminService', 'Status').catch(() => null) : null,
      ]);
      if (!alive()) return;
      if (r instanceof Error) {
        if (r.code === 'permission_denied') { showNoList(); return; }
        throw r;
      }
      if (s) setStatus(s);
      const qs = (r.queues || []).filter((q) => q.kind !== 'topic').sort((a, b) => byName(a.name, b.name));
      const names = new Set(qs.map((q) => q.name));
      for (const n of [...rows.keys()]) if (!names.has(n)) rows.delete(n);
      const want = qs.map((q) => (rows.get(q.name) || rows.set(q.name, makeRow(q)).get(q.name)).tr);
      if (want.length !== tbody.children.length || want.some((tr, i) => tbody.children[i] !== tr)) tbody.replaceChildren(...want);
      empty.hidden = qs.length > 0;
      await statsFor([...names], (n, st) => {
        const row = rows.get(n);
        if (row) { setCounts(row.c, st); drawSpark(row.sp, n); }
      }, alive);
    }
    return { load: tick, tick };
  }

  function queuePage(name, alive) {
    const mg = can('manage'), ls = can('listen'), sd = can('send');
    const cfg = h('div', { id: 'queue-config', class: 'config' }, h('p', { class: 'hint' }, mg ? 'loading…' : 'The configuration needs the manage permission.'));
    const c = countCells(name);
    const big = sparkSvg(640, 80, true);
    drawSpark(big, name);
    const counts = h('div', { id: 'queue-counts', class: 'counts' },
      h('table', { class: 'grid' },
        h('thead', null, h('tr', null, countHeads(), h('th', { class: 'num' }, 'Oldest'))),
        h('tbody', null, h('tr', null, STATES.map((k) => c[k]), c.total, c.oldest))),
      h('div', { class: 'spark' }, big, legend()));
    const body = h('div', { class: 'sections' });
    main.append(h('section', { class: 'queue' },
      h('p', { class: 'crumb' }, h('a', { href: '#/' }, '← all queues')),
      h('h2', { id: 'queue-name' }, name), cfg, counts, body));
    let topic = false, dlq = null, latest = null;

    function showConfig(q) {
      if (!q) { cfg.textContent = 'No queue, topic or subscription has this name (yet).'; return; }
      const item = (k, v) => h('div', null, h('dt', null, k), h('dd', null, v));
      cfg.replaceChildren(h('dl', null,
        item('kind', q.kind),
        q.kind === 'topic' ? null : [
          item('lock duration', fmtDur(q.lock_duration_ms)),
          item('max delivery count', String(q.max_delivery_count)),
          item('default TTL', q.default_ttl_ms ? fmtDur(q.default_ttl_ms) : 'none'),
          item('dedup window', q.dedup_window_ms ? fmtDur(q.dedup_window_ms) : 'off'),
          item('status', statusControl(q)),
        ]));
    }

    // Pause and resume (SetQueueStatus): a subscription's receives only.
    function statusControl(q) {
      const now = q.status || 'active';
      if (!mg) return now;
      const choices = q.kind === 'subscription' ? ['active', 'receive_disabled'] : ['active', 'send_disabled', 'receive_disabled', 'disabled'];
      const sel = h('select', { id: 'status-select', 'aria-label': 'status' },
        choices.map((v) => h('option', { value: v, selected: v === now }, v.replace('_', ' '))));
      const set = h('button', { id: 'status-set', type: 'button' }, 'Set');
      set.addEventListener('click', () => act(set, async () => {
        await api('AdminService', 'SetQueueStatus', { name, status: sel.value });
        notice(`${name}: ${sel.value.replace('_', ' ')}`);
      }));
      return h('span', { class: 'row' }, sel, ' ', set);
    }

    async function refreshCounts() {
      if (!ls || topic) return;
      await statsFor([name], (n, st) => {
        latest = st;
        setCounts(c, st);
        drawSpark(big, name);
        if (dlq) dlq.live(st.dead_lettered);
      }, alive);
    }

    async function showTopic() {
      counts.replaceChildren(h('p', { class: 'hint' }, 'A topic keeps no messages of its own: each subscription is a queue with its own counts.'));
      if (!mg) return;
      const r = await api('AdminService', 'ListSubscriptions');
      if (!alive()) return;
      const subs = (r.subscriptions || []).filter((s) => s.topic === name);
      counts.append(subs.length
        ? h('ul', { class: 'subs' }, subs.map((s) => h('li', null, h('a', { href: qhref(s.name) }, s.name), ' — ', s.expr || 'every message')))
        : h('p', { class: 'empty' }, 'No subscriptions.'));
    }

    async function load() {
      if (mg) {
        try {
          const r = await api('AdminService', 'ListQueues');
          if (!alive()) return;
          const q = (r.queues || []).find((x) => x.name === name);
          topic = !!q && q.kind === 'topic';
          showConfig(q);
        } catch (e) {
          if (!alive()) return;
          cfg.textContent = 'The configuration could not be read.';
          showError(e);
        }
      }
      if (!ls && !topic) counts.replaceChildren(h('p', { class: 'hint' }, 'Counts need the listen permission.'));
      if (sd) body.append(sendSection(name, refreshCounts));
      if (topic) return showTopic();
      dlq = dlqSection(name, alive, refreshCounts, () => (latest ? latest.dead_lettered : null));
      body.append(dlq.el, peekSection(name));
      if (ls) await Promise.all([refreshCounts(), dlq.load()]);
      else dlq.note('Dead letters need the listen permission.');
    }
    return { load, tick: refreshCounts };
  }

  function sendSection(name, after) {
    const ta = h('textarea', { id: 'send-body', rows: 3, placeholder: 'message body (text or JSON)', spellcheck: 'false' });
    const subj = h('input', { id: 'send-subject', type: 'text', placeholder: 'subject (optional)' });
    const btn = h('button', { id: 'send', type: 'button' }, 'Send');
    btn.addEventListener('click', () => act(btn, async () => {
      const m = { body: b64enc(ta.value) };
      if (subj.value.trim()) m.subject = subj.value.trim();
      const r = await api('QueueService', 'Send', { queue: name, messages: [m] });
      const seq = (r.seq_numbers || [])[0];
      notice(seq ? `sent, seq ${seq}` : 'sent, seq 0 (no subscription took it, or a duplicate)');
      await after();
    }));
    return h('section', { id: 'send-box', class: 'box' }, h('h3', null, 'Send a test message'), ta, h('div', { class: 'row' }, subj, btn));
  }

  function peekSection(name) {
    const sel = h('select', { id: 'peek-state', 'aria-label': 'state' }, h('option', { value: '' }, 'all states'),
      STATES.map((k) => h('option', { value: k }, LABELS[k].toLowerCase())));
    const from = h('input', { id: 'peek-from', type: 'number', min: 1, placeholder: 'from seq', class: 'narrow', 'aria-label': 'from sequence number' });
    const max = h('input', { id: 'peek-max', type: 'number', min: 1, max: 1000, value: 32, class: 'narrow', 'aria-label': 'at most' });
    const pretty = h('input', { id: 'pretty', type: 'checkbox', checked: true });
    const results = h('div', { id: 'peek-results' }, h('p', { class: 'hint' }, 'Peek lists messages without locking them.'));
    const btn = h('button', { id: 'peek', type: 'button' }, 'Peek');
    let peeked = null, lastMax = 32;

    const run = () => act(btn, async () => {
      const req = { queue: name, max: (lastMax = clampInt(max.value, 1, 1000, 32)) };
      if (sel.value) req.state = sel.value;
      const f = parseInt(from.value, 10);
      if (f > 0) req.from_seq = f;
      const r = await api('QueueService', 'Peek', req);
      peeked = r.messages || [];
      show();
    });

    function show() {
      const more = peeked.length >= lastMax ? h('button', { type: 'button', class: 'more', onclick: () => {
        from.value = String(peeked[peeked.length - 1].seq_number + 1);
        run();
      } }, 'Next page') : null;
      results.replaceChildren(...(peeked.length ? peeked.map((m) => messageCard(m, pretty.checked)) : [h('p', { class: 'empty' }, 'No messages.')]), ...(more ? [more] : []));
    }

    btn.addEventListener('click', run);
    pretty.addEventListener('change', () => { if (peeked) show(); });
    return h('section', { id: 'peek-box' }, h('h3', null, 'Peek'),
      h('div', { class: 'row' }, sel, from, h('label', null, 'max ', max), btn, h('label', { class: 'check' }, pretty, ' pretty JSON')),
      results);
  }

  function messageCard(m, pretty) {
    const f = (k, v) => (v ? h('span', { class: 'f' }, h('span', { class: 'k' }, k), ' ', String(v)) : null);
    const props = Object.entries(m.properties || {});
    return h('div', { class: 'message', 'data-seq': m.seq_number },
      h('div', { class: 'meta' },
        h('span', { class: 'seq' }, '#' + m.seq_number),
        h('span', { class: 'state st-' + (m.state || 'unknown') }, m.state || '?'),
        f('deliveries', String(m.delivery_count || 0)),
        f('subject', m.subject),
        f('enqueued', iso(m.enqueued_at_ms))),
      h('div', { class: 'meta sub' },
        f('message id', m.message_id), f('group', m.group_id), f('correlation', m.correlation_id),
        f('content type', m.content_type), f('reply to', m.reply_to),
        m.expires_at_ms ? f('expires', iso(m.expires_at_ms)) : null,
        m.state === 'scheduled' && m.visible_at_ms ? f('visible at', iso(m.visible_at_ms)) : null,
        m.locked_until_ms ? f('locked until', iso(m.locked_until_ms)) : null,
        f('reason', m.dead_letter_reason), f('description', m.dead_letter_description)),
      props.length ? h('div', { class: 'props' }, props.map(([k, v]) => h('span', { class: 'prop' }, `${k}=${v}`))) : null,
      h('pre', { class: 'body' }, bodyText(m.body, pretty)));
  }

  function dlqSection(name, alive, after, count) {
    const mg = can('manage');
    const tbody = h('tbody');
    const pickAll = mg ? h('input', { type: 'checkbox', id: 'pick-all', 'aria-label': 'select all' }) : null;
    const table = h('table', { id: 'dead-letters', class: 'grid' },
      h('thead', null, h('tr', null, mg ? h('th', { class: 'pickcol' }, pickAll) : null,
        h('th', { class: 'num' }, 'Seq'), h('th', null, 'Reason'), h('th', null, 'Description'),
        h('th', { class: 'num' }, 'Deliveries'), h('th', null, 'Enqueued'), h('th', null, 'Body'))),
      tbody);
    const empty = h('p', { class: 'empty', hidden: true }, 'No dead letters.');
    const info = h('span', { class: 'hint' });
    const refresh = h('button', { id: 'dlq-refresh', type: 'button' }, 'Refresh');
    let listed = 0, rate, selBtn, confirm = null;
    const head = h('div', { class: 'head' }, h('h3', null, 'Dead letters'), info, refresh);

    async function load() {
      const r = await api('QueueService', 'Peek', { queue: name, state: 'dead_lettered', max: 100 });
      if (!alive()) return;
      const ms = r.messages || [];
      listed = ms.length;
      tbody.replaceChildren(...ms.map(row));
      empty.hidden = ms.length > 0;
      table.hidden = !ms.length;
      info.textContent = ms.length >= 100 ? 'showing the first 100' : '';
      if (pickAll) pickAll.checked = false;
      sync();
    }

    function row(m) {
      const text = bodyText(m.body, false);
      return h('tr', { 'data-seq': m.seq_number },
        mg ? h('td', { class: 'pickcol' }, h('input', { type: 'checkbox', class: 'pick', value: m.seq_number, 'aria-label': 'select ' + m.seq_number })) : null,
        h('td', { class: 'num seq' }, String(m.seq_number)),
        h('td', { class: 'reason' }, m.dead_letter_reason || ''),
        h('td', { class: 'description' }, m.dead_letter_description || ''),
        h('td', { class: 'num' }, String(m.delivery_count || 0)),
        h('td', { class: 'time' }, iso(m.enqueued_at_ms)),
        h('td', { class: text.length > 200 ? 'body cut' : 'body', title: text.slice(0, 2000) }, text.slice(0, 200)));
    }

    const picks = () => Array.from(tbody.querySelectorAll('input.pick:checked'), (i) => Number(i.value));
    function sync() {
      if (!selBtn) return;
      const n = picks().length;
      selBtn.disabled = n === 0;
      selBtn.textContent = n ? `Redrive selected (${n})` : 'Redrive selected';
    }

    async function done(msg) {
      notice(msg);
      await Promise.all([load(), after()]);
    }

    refresh.addEventListener('click', () => act(refresh, load).then(sync));

    if (mg) {
      rate = h('input', { id: 'redrive-rate', type: 'number', min: 0, value: 0, class: 'narrow', title: 'messages per second, 0 = unthrottled' });
      const all = h('button', { id: 'redrive-all', type: 'button' }, 'Redrive all');
      selBtn = h('button', { id: 'redrive-selected', type: 'button', disabled: true }, 'Redrive selected');
      const purge = h('button', { id: 'purge', type: 'button', class: 'danger' }, 'Purge…');
      const text = h('p');
      const yes = h('button', { id: 'confirm-yes', type: 'button', class: 'danger' }, 'Purge');
      const no = h('button', { id: 'confirm-no', type: 'button' }, 'Cancel');
      confirm = h('div', { id: 'confirm', class: 'confirm', role: 'alertdialog', 'aria-modal': 'false', hidden: true }, text, h('div', { class: 'row' }, yes, no));
      const redrive = (btn, extra) => act(btn, async () => {
        notice('redriving…');
        const r = await api('AdminService', 'Redrive', { queue: name, max: 0, older_than_ms: 0, rate_per_sec: clampInt(rate.value, 0, 1e9, 0), ...extra });
        await done(`moved ${plural(r.moved || 0, 'dead letter')}`);
      }).then(sync);

      all.addEventListener('click', () => redrive(all, {}));
      selBtn.addEventListener('click', () => {
        const seqs = picks();
        if (seqs.length) redrive(selBtn, { seq_numbers: seqs });
      });
      purge.addEventListener('click', () => {
        const n = count();
        text.textContent = `Purge ${plural(n == null ? listed : n, 'dead letter')} of “${name}”? They are deleted for good.`;
        confirm.hidden = false;
        no.focus();
      });
      no.addEventListener('click', () => { confirm.hidden = true; purge.focus(); });
      confirm.addEventListener('keydown', (e) => { if (e.key === 'Escape') no.click(); });
      yes.addEventListener('click', () => {
        confirm.hidden = true;
        act(purge, async () => {
          const r = await api('AdminService', 'Purge', { queue: name, max: 0, older_than_ms: 0 });
          await done(`purged ${plural(r.purged || 0, 'dead letter')}`);
        }).then(sync);
      });
      tbody.addEventListener('change', sync);
      pickAll.addEventListener('change', () => {
        for (const i of tbody.querySelectorAll('input.pick')) i.checked = pickAll.checked;
        sync();
      });
      head.append(h('span', { class: 'tools' }, h('label', null, 'rate/s ', rate), all, selBtn, purge));
    }

    const el = h('section', { id: 'dlq' }, head, confirm, table, empty);
    return {
      el, load,
      note: (t) => { info.textContent = t; },
      live: (n) => {
        if (listed < 100 && n !== listed) info.textContent = `${n} now: refresh to see them`;
        else if (listed < 100) info.textContent = '';
      },
    };
  }

  function topicsPage(alive) {
    if (!can('manage')) return needManage('Topics');
    const list = h('div', null, h('p', { class: 'hint' }, 'loading…'));
    const expr = h('textarea', { id: 'filter-expr', rows: 2, spellcheck: 'false', placeholder: 'subject startsWith "payment." && properties.region == "eu"' });
    const fbody = h('textarea', { id: 'filter-body', rows: 3, spellcheck: 'false', placeholder: 'sample body, e.g. {"amount": 120}' });
    const fsubj = h('input', { id: 'filter-subject', type: 'text', placeholder: 'sample subject' });
    const fprops = h('textarea', { id: 'filter-props', rows: 2, spellcheck: 'false', placeholder: 'sample properties, key=value per line' });
    const result = h('div', { id: 'filter-result', class: 'result', 'aria-live': 'polite' });
    const btn = h('button', { id: 'filter-test', type: 'button' }, 'Test filter');
    main.append(h('section', null, h('h2', null, 'Topics'), list),
      h('section', { id: 'filter-box', class: 'box' }, h('h3', null, 'Test a filter'),
        h('label', null, 'Filter', expr), h('label', null, 'Sample body', fbody),
        h('div', { class: 'row' }, h('label', null, 'Subject', fsubj), h('label', { class: 'grow' }, 'Properties', fprops)),
        h('div', { class: 'row' }, btn, result)));
    const rows = new Map();
    let sig = '';

    btn.addEventListener('click', () => act(btn, async () => {
      const message = { body: b64enc(fbody.value) };
      if (fsubj.value) message.subject = fsubj.value;
      const props = parseProps(fprops.value);
      if (Object.keys(props).length) message.properties = props;
      const r = await api('AdminService', 'TestFilter', { expr: expr.value, message });
      let t;
      if (!r.valid) t = `invalid: ${r.error || 'rejected'}`;
      else if (!r.ran) t = r.error ? `valid, not run: ${r.error}` : 'valid';
      else t = (r.matched ? 'valid, matched' : 'valid, not matched') + (r.error ? ` (${r.error})` : '');
      result.textContent = t;
      result.className = 'result ' + (!r.valid ? 'bad' : r.matched ? 'ok' : 'no');
    }));

    function subRow(s) {
      const c = countCells(s.name), sp = sparkSvg(120, 24);
      drawSpark(sp, s.name);
      const test = h('button', { type: 'button', class: 'test small', title: 'copy this filter into the tester' }, 'test');
      test.addEventListener('click', () => { expr.value = s.expr || ''; expr.focus(); });
      rows.set(s.name, { c, sp });
      return h('tr', { 'data-subscription': s.name },
        h('td', { class: 'name' }, h('a', { href: qhref(s.name) }, s.name)),
        h('td', { class: s.expr ? 'expr' : 'expr every' }, s.expr || 'every message'),
        STATES.map((k) => c[k]), c.total, h('td', { class: 'spark' }, sp), h('td', null, test));
    }

    function build(topics, subs) {
      rows.clear();
      if (!topics.length) { list.replaceChildren(h('p', { class: 'empty' }, 'There are no topics.')); return; }
      const cols = 10;
      list.replaceChildren(h('table', { id: 'subscriptions', class: 'grid' },
        h('thead', null, h('tr', null, h('th', null, 'Subscription'), h('th', null, 'Filter'), countHeads(), h('th', null, 'Last 5 min'), h('th', null, ''))),
        topics.map((t) => {
          const ss = subs.filter((s) => s.topic === t).sort((a, b) => byName(a.name, b.name));
          return h('tbody', { 'data-topic': t },
            h('tr', { class: 'topic' }, h('th', { colspan: cols }, 'topic ', h('a', { href: qhref(t) }, t), ' · ' + plural(ss.length, 'subscription'))),
            ss.length ? ss.map(subRow) : h('tr', null, h('td', { colspan: cols, class: 'empty' }, 'No subscriptions: messages sent to this topic are dropped.')));
        })));
    }

    async function tick() {
      const [q, s] = await Promise.all([api('AdminService', 'ListQueues'), api('AdminService', 'ListSubscriptions')]);
      if (!alive()) return;
      const subs = s.subscriptions || [];
      const topics = [...new Set([...(q.queues || []).filter((x) => x.kind === 'topic').map((x) => x.name), ...subs.map((x) => x.topic)])].sort(byName);
      const nsig = JSON.stringify([topics, subs]);
      if (nsig !== sig) { sig = nsig; build(topics, subs); }
      await statsFor(subs.map((x) => x.name), (n, st) => {
        const r = rows.get(n);
        if (r) { setCounts(r.c, st); drawSpark(r.sp, n); }
      }, alive);
    }
    return { load: tick, tick };
  }

  function keysPage(alive) {
    if (!can('manage')) return needManage('Access keys');
    const tbody = h('tbody');
    const empty = h('p', { class: 'empty', hidden: true }, 'No access keys yet.');
    const name = h('input', { id: 'key-name', type: 'text', placeholder: 'name, e.g. billing-worker', autocomplete: 'off' });
    const box = {};
    for (const p of ['send', 'listen', 'manage']) box[p] = h('input', { id: 'perm-' + p, type: 'checkbox', value: p });
    const create = h('button', { id: 'key-create', type: 'button' }, 'Create key');
    const newToken = h('div', { id: 'new-token', class: 'token', hidden: true });
    main.append(
      h('section', { class: 'box' }, h('h3', null, 'Create an access key'),
        h('div', { class: 'row' }, name, Object.keys(box).map((p) => h('label', { class: 'check' }, box[p], ' ' + p)), create),
        newToken),
      h('section', null, h('h2', null, 'Access keys'),
        h('table', { id: 'keys', class: 'grid' },
          h('thead', null, h('tr', null, ['Id', 'Name', 'Permissions', 'Created', 'Expires', 'Status', ''].map((t) => h('th', null, t)))),
          tbody), empty));

    create.addEventListener('click', () => act(create, async () => {
      const permissions = Object.keys(box).filter((p) => box[p].checked);
      const r = await api('AuthService', 'CreateKey', { name: name.value.trim(), permissions });
      const copy = navigator.clipboard && window.isSecureContext ? h('button', { type: 'button', class: 'small', onclick: () => {
        navigator.clipboard.writeText(r.token).then(() => notice('token copied'), () => {});
      } }, 'copy') : null;
      newToken.replaceChildren(
        h('p', null, `Key “${r.name}” (${r.id}) with ${(r.permissions || []).join(', ') || 'no permissions'}. Its token:`),
        h('div', { class: 'row' }, h('code', null, r.token), copy),
        h('p', { class: 'warn' }, 'copy it now: it is not shown again'));
      newToken.hidden = false;
      name.value = '';
      for (const p of Object.keys(box)) box[p].checked = false;
      await load();
    }));

    function keyRow(k) {
      const now = Date.now();
      const status = k.revoked_at_ms ? 'revoked' : k.expires_at_ms && k.expires_at_ms <= now ? 'expired' : 'active';
      let revoke = null;
      if (!k.revoked_at_ms) {
        revoke = h('button', { type: 'button', class: 'revoke small danger' }, 'Revoke');
        revoke.addEventListener('click', () => act(revoke, async () => {
          await api('AuthService', 'RevokeKey', { id: k.id });
          notice(`revoked key ${k.name || k.id}`);
          await load();
        }));
      }
      return h('tr', { 'data-key': k.id, class: 'k-' + status },
        h('td', { class: 'id' }, h('code', null, k.id)),
        h('td', { class: 'kname' }, k.name || ''),
        h('td', { class: 'perms' }, (k.permissions || []).join(', ')),
        h('td', { class: 'time' }, iso(k.created_at_ms)),
        h('td', { class: 'time' }, k.expires_at_ms ? iso(k.expires_at_ms) : 'never'),
        h('td', { class: 'status st-' + status, title: k.revoked_at_ms ? 'revoked ' + iso(k.revoked_at_ms) : null }, status),
        h('td', null, revoke));
    }

    async function load() {
      const keys = [];
      let after = '';
      for (let i = 0; i < 100; i++) {
        const r = await api('AuthService', 'ListKeys', after ? { after_id: after, limit: 1000 } : { limit: 1000 });
        keys.push(...(r.keys || []));
        if (!r.next_after_id || r.next_after_id === after) break;
        after = r.next_after_id;
      }
      if (!alive()) return;
      tbody.replaceChildren(...keys.map(keyRow));
      empty.hidden = keys.length > 0;
    }
    return { load };
  }

  // Recurring schedules (CreateSchedule, ListSchedules, DeleteSchedule).
  function schedulesPage(alive) {
    if (!can('manage')) return needManage('Schedules');
    const tbody = h('tbody');
    const empty = h('p', { class: 'empty', hidden: true }, 'No schedules yet.');
    const name = h('input', { id: 'sch-name', 'aria-label': 'schedule name', type: 'text', placeholder: 'name, e.g. nightly-report', autocomplete: 'off' });
    const queue = h('input', { id: 'sch-queue', 'aria-label': 'queue', type: 'text', placeholder: 'queue', autocomplete: 'off' });
    const kind = h('select', { id: 'sch-kind', 'aria-label': 'recurrence' },
      h('option', { value: 'cron' }, 'cron'), h('option', { value: 'every' }, 'every (seconds)'));
    const when = h('input', { id: 'sch-when', 'aria-label': 'cron expression or seconds', type: 'text', placeholder: '0 2 * * 1-5', autocomplete: 'off', spellcheck: 'false' });
    const tz = h('input', { id: 'sch-tz', 'aria-label': 'time zone', type: 'text', placeholder: 'time zone, e.g. Europe/Paris (UTC)', autocomplete: 'off' });
    const missed = h('select', { id: 'sch-missed', 'aria-label': 'missed ticks' },
      h('option', { value: 'fire_once' }, 'missed window: fire once'), h('option', { value: 'skip' }, 'missed window: skip'));
    const body = h('textarea', { id: 'sch-body', rows: 2, spellcheck: 'false', placeholder: 'body each tick sends' });
    const create = h('button', { id: 'sch-create', type: 'button' }, 'Create schedule');
    kind.addEventListener('change', () => {
      when.placeholder = kind.value === 'cron' ? '0 2 * * 1-5' : '300';
      tz.disabled = kind.value !== 'cron';
    });
    main.append(
      h('section', { class: 'box' }, h('h3', null, 'Create a schedule'),
        h('div', { class: 'row' }, name, queue, kind, when, tz, missed),
        h('label', null, 'Body', body),
        h('div', { class: 'row' }, create)),
      h('section', null, h('h2', null, 'Schedules'),
        h('table', { id: 'schedules', class: 'grid' },
          h('thead', null, h('tr', null, ['Name', 'Queue', 'When', 'Missed', 'Next tick', 'Fired', 'Last tick', ''].map((t) => h('th', null, t)))),
          tbody), empty));

    create.addEventListener('click', () => act(create, async () => {
      const req = { name: name.value.trim(), queue: queue.value.trim(), missed: missed.value, message: { body: b64enc(body.value) } };
      if (kind.value === 'cron') {
        req.cron = when.value.trim();
        if (tz.value.trim()) req.tz = tz.value.trim();
      } else {
        const secs = Number(when.value.trim());
        if (!Number.isFinite(secs) || secs <= 0) throw new Error('every: a number of seconds');
        req.every_ms = Math.round(secs * 1000);
      }
      const r = await api('AdminService', 'CreateSchedule', req);
      notice(`schedule ${r.name}: next tick ${iso(r.next_at_ms)}`);
      await load();
    }));

    function row(x) {
      const del = h('button', { type: 'button', class: 'delete small danger' }, 'Delete');
      del.addEventListener('click', () => act(del, async () => {
        await api('AdminService', 'DeleteSchedule', { name: x.name });
        notice(`deleted schedule ${x.name}`);
        await load();
      }));
      const what = x.cron ? `${x.cron} (${x.tz || 'UTC'})` : `every ${x.every_ms / 1000} s`;
      return h('tr', { 'data-schedule': x.name },
        h('td', { class: 'sname' }, x.name),
        h('td', null, h('a', { href: qhref(x.queue) }, x.queue)),
        h('td', { class: 'when' }, what),
        h('td', { class: 'missed' }, x.missed.replace('_', ' ')),
        h('td', { class: 'time next' }, iso(x.next_at_ms)),
        h('td', { class: 'fired' }, String(x.fired || 0)),
        h('td', { class: 'time' }, x.last_tick_ms ? iso(x.last_tick_ms) : '—'),
        h('td', null, del));
    }

    async function load() {
      const r = await api('AdminService', 'ListSchedules', {});
      if (!alive()) return;
      const list = r.schedules || [];
      tbody.replaceChildren(...list.map(row));
      empty.hidden = list.length > 0;
    }
    return { load, tick: load };
  }

  function needManage(title) {
    main.append(h('section', null, h('h2', null, title), h('p', { class: 'box' }, 'This page needs the manage permission.')));
    return {};
  }

  function missingPage() {
    main.append(h('section', null, h('h2', null, 'Not found'), h('p', null, 'No page here. ', h('a', { href: '#/' }, 'Back to the queues.'))));
    return {};
  }

  // ---- routing and the refresh loop ----

  function parseRoute() {
    const hs = location.hash.replace(/^#/, '') || '/';
    if (hs === '/') return { name: 'queues' };
    if (hs === '/topics') return { name: 'topics' };
    if (hs === '/keys') return { name: 'keys' };
    if (hs === '/schedules') return { name: 'schedules' };
    const m = hs.match(/^\/queue\/(.+)$/);
    if (m) {
      try { return { name: 'queue', queue: decodeURIComponent(m[1]) }; } catch { /* bad escape */ }
    }
    return { name: 'missing' };
  }

  function render() {
    if (token === null) return;
    const g = ++gen;
    clearTimeout(timer);
    clearError();
    notice('');
    main.replaceChildren();
    const alive = () => g === gen;
    const r = parseRoute();
    const nav = { queues: 'nav-queues', queue: 'nav-queues', topics: 'nav-topics', schedules: 'nav-schedules', keys: 'nav-keys' }[r.name];
    for (const id of ['nav-queues', 'nav-topics', 'nav-schedules', 'nav-keys']) {
      const a = $(id);
      a.classList.toggle('active', id === nav);
      if (id === nav) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    document.title = r.name === 'queue' ? `${r.queue} · mqlite` : 'mqlite';
    try {
      page = r.name === 'queues' ? queuesPage(alive)
        : r.name === 'queue' ? queuePage(r.queue, alive)
          : r.name === 'topics' ? topicsPage(alive)
            : r.name === 'schedules' ? schedulesPage(alive)
              : r.name === 'keys' ? keysPage(alive) : missingPage();
    } catch (e) { page = {}; showError(e); }
    const p = page;
    Promise.resolve().then(() => p.load && p.load())
      .catch((e) => { if (alive()) showError(e); })
      .then(() => { if (alive() && p.tick) schedule(g, p); });
  }

  function schedule(g, p) {
    timer = setTimeout(async () => {
      if (g !== gen) return;
      if (!document.hidden) {
        try {
          await p.tick();
          if (g === gen && tickErr) clearError();
        } catch (e) {
          if (g === gen) showError(e, true);
        }
      }
      if (g === gen) schedule(g, p);
    }, TICK_MS);
  }

  // ---- session ----

  function showLogin(msg) {
    $('app-view').hidden = true;
    $('login-view').hidden = false;
    $('login-error').textContent = msg || '';
    $('token').focus();
  }

  function showApp(me) {
    perms = new Set(me.permissions || []);
    const who = me.principal === 'key' ? `key ${me.name || me.id}` : (me.principal || 'unknown');
    $('whoami').textContent = `${who} · ${[...perms].join(', ') || 'no permissions'}`;
    $('whoami').setAttribute('title', me.id ? `id ${me.id}` : who);
    $('nav-topics').hidden = !perms.has('manage');
    $('nav-schedules').hidden = !perms.has('manage');
    $('nav-keys').hidden = !perms.has('manage');
    $('login-view').hidden = true;
    $('app-view').hidden = false;
    render();
  }

  function signOut(msg) {
    token = null;
    perms = new Set();
    gen++;
    clearTimeout(timer);
    sessionStorage.removeItem(TOKEN_KEY);
    if (main) main.replaceChildren();
    showLogin(msg);
  }

  async function login(e) {
    e.preventDefault();
    const input = $('token'), btn = $('login');
    const candidate = input.value.trim();
    $('login-error').textContent = '';
    btn.disabled = true;
    token = candidate;
    try {
      const me = await api('AuthService', 'WhoAmI', {});
      sessionStorage.setItem(TOKEN_KEY, candidate);
      input.value = '';
      showApp(me);
    } catch (err) {
      token = null;
      if (!err.auth) $('login-error').textContent = err.code === 'permission_denied' ? err.message : `${err.code || 'error'}: ${err.message}`;
    } finally {
      btn.disabled = false;
    }
  }

  function logout() {
    token = null;
    gen++;
    clearTimeout(timer);
    try { sessionStorage.clear(); } catch { /* ignore */ }
    hist = {};
    main.replaceChildren();
    notice('');
    clearError();
    showLogin('');
  }

  async function start() {
    main = $('main');
    $('login-form').addEventListener('submit', login);
    $('logout').addEventListener('click', logout);
    window.addEventListener('hashchange', render);
    window.addEventListener('unhandledrejection', (e) => { e.preventDefault(); showError(e.reason); });
    document.addEventListener('visibilitychange', () => { if (!document.hidden && page && page.tick && token !== null) page.tick().catch((e) => showError(e, true)); });
    const stored = sessionStorage.getItem(TOKEN_KEY);
    if (stored === null) { showLogin(''); return; }
    token = stored;
    try {
      showApp(await api('AuthService', 'WhoAmI', {}));
    } catch (err) {
      if (!err.auth) { token = null; showLogin(`${err.code}: ${err.message}`); }
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
