// longhaul testbed UI: a single page over the public /api/v1 endpoints, no framework, no build step.
// Times travel as UTC RFC 3339; they are shown and typed in one IANA zone (the browser's, or the one
// chosen at the top), with the zone named and UTC on hover. The booking form asks the server for a
// dry run (GET /api/v1/preview) as the slot changes, so conflicts (including a parent or child
// partition), policy refusals and DST warnings show before anything is booked. The DOM is built with
// createElement/textContent only: booking notes, error messages and console lines can never become
// markup. The host pane reads and changes a host's power (POST /api/v1/power) and shows its console
// live, polling GET /api/v1/console with after= each second.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const MIN = 60_000;
  const HOUR = 60 * MIN;
  const DAY = 24 * HOUR;
  const LIVE = new Set(["held", "upcoming", "active"]);
  const SHOWN = new Set(["held", "upcoming", "active", "ended", "released", "preempted"]);

  const state = {
    token: null,
    user: null,
    role: null,
    resources: [],
    byId: new Map(),
    collapsed: new Set(),
    zone: null,
    anchor: null, // first day shown, as {y, m, d} in the display zone
    days: 7, // days shown
    bookings: [],
    selectedBooking: null,
    preview: null,
    previewSeq: 0,
    previewTimer: null,
  };

  // ---- DOM ---------------------------------------------------------------------------------------

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k === "data") for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = dv;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c !== null && c !== undefined && c !== false) e.append(c);
    }
    return e;
  }

  function show(id, message) {
    const e = $(id);
    e.textContent = message || "";
    e.hidden = !message;
  }

  // ---- API ---------------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, body) {
      super(describeError(status, body));
      this.status = status;
      this.body = body;
    }
  }

  /** The API's error, as it sent it: status, code, message and every reason. */
  function describeError(status, body) {
    if (body && typeof body === "object" && body.message) {
      const lines = [`${status} ${body.code}: ${body.message}`];
      for (const r of body.reasons || []) lines.push(`  [${r.code}] ${r.message}`);
      return lines.join("\n");
    }
    return `${status}: ${typeof body === "string" && body ? body : "request failed"}`;
  }

  async function api(method, path, body, extraHeaders) {
    const headers = { Accept: "application/json", Authorization: `Bearer ${state.token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    Object.assign(headers, extraHeaders || {});
    let resp;
    try {
      resp = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (e) {
      throw new ApiError(0, `cannot reach the service (${e.message})`);
    }
    const text = await resp.text();
    let data = text;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (_) {
      // not JSON: keep the text
    }
    if (!resp.ok) throw new ApiError(resp.status, data);
    return data;
  }

  const query = (params) => new URLSearchParams(params).toString();

  // ---- Time --------------------------------------------------------------------------------------

  const formatters = new Map();
  function formatter(zone) {
    let f = formatters.get(zone);
    if (!f) {
      f = new Intl.DateTimeFormat("en-US", {
        timeZone: zone,
        hourCycle: "h23",
        year: "numeric",
        month: "2-digit",
        day: "2-digit",
        hour: "2-digit",
        minute: "2-digit",
        second: "2-digit",
      });
      formatters.set(zone, f);
    }
    return f;
  }

  function validZone(zone) {
    try {
      formatter(zone);
      return true;
    } catch (_) {
      return false;
    }
  }

  /** Wall-clock fields of instant `ms` in `zone`. */
  function wall(ms, zone) {
    const p = {};
    for (const x of formatter(zone).formatToParts(new Date(ms))) p[x.type] = x.value;
    return { y: +p.year, m: +p.month, d: +p.day, h: +p.hour % 24, mi: +p.minute, s: +p.second };
  }

  /** UTC offset of `zone` at `ms`, in ms. */
  function offsetAt(ms, zone) {
    const w = wall(ms, zone);
    return Date.UTC(w.y, w.m - 1, w.d, w.h, w.mi, w.s) - Math.floor(ms / 1000) * 1000;
  }

  /** The instant a wall-clock time in `zone` names; `gap` when that time does not exist there. */
  function fromWall(y, m, d, h, mi, s, zone) {
    const w = Date.UTC(y, m - 1, d, h, mi, s);
    let t = w - offsetAt(w, zone);
    const o = offsetAt(t, zone);
    if (w - o !== t) t = w - o;
    const back = wall(t, zone);
    const gap = Date.UTC(back.y, back.m - 1, back.d, back.h, back.mi, back.s) !== w;
    return { ms: t, gap };
  }

  const pad = (n) => String(n).padStart(2, "0");

  function offsetText(ms, zone) {
    const o = Math.round(offsetAt(ms, zone) / MIN);
    const a = Math.abs(o);
    return `${o < 0 ? "-" : "+"}${pad(Math.floor(a / 60))}:${pad(a % 60)}`;
  }

  /** `2026-11-23 14:00` (seconds only when not zero) in `zone`. */
  function fmtLocal(ms, zone, withSeconds) {
    const w = wall(ms, zone);
    const s = withSeconds || w.s ? `:${pad(w.s)}` : "";
    return `${w.y}-${pad(w.m)}-${pad(w.d)} ${pad(w.h)}:${pad(w.mi)}${s}`;
  }

  function fmtTime(ms, zone) {
    const w = wall(ms, zone);
    return `${pad(w.h)}:${pad(w.mi)}`;
  }

  const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  const weekday = (w) => new Date(Date.UTC(w.y, w.m - 1, w.d)).getUTCDay();

  function fmtDay(ms, zone) {
    const w = wall(ms, zone);
    return `${DAYS[weekday(w)]} ${w.d} ${MONTHS[w.m - 1]}`;
  }

  /** `Mon 23 Nov 14:00 – 16:00 (+01:00)`, or with both dates when the days differ. */
  function fmtRange(a, b, zone) {
    const sameDay = fmtDay(a, zone) === fmtDay(b - 1, zone);
    const end = sameDay ? fmtTime(b, zone) : `${fmtDay(b, zone)} ${fmtTime(b, zone)}`;
    const oa = offsetText(a, zone);
    const ob = offsetText(b, zone);
    const off = oa === ob ? `(${oa})` : `(${oa} → ${ob})`;
    return `${fmtDay(a, zone)} ${fmtTime(a, zone)} – ${end} ${off}`;
  }

  /** `10:42 (in 9 min)`: when a hold runs out. */
  function holdLeft(until) {
    const t = Date.parse(until);
    const mins = Math.max(0, Math.round((t - Date.now()) / MIN));
    return `${fmtTime(t, state.zone)} (in ${mins} min)`;
  }

  const iso = (ms) => new Date(ms).toISOString().replace(".000Z", "Z");
  const utcRange = (a, b) => `${iso(a)} – ${iso(b)}`;

  function fmtLength(ms) {
    const mins = Math.round(ms / MIN);
    const d = Math.floor(mins / 1440);
    const h = Math.floor((mins % 1440) / 60);
    const m = mins % 60;
    const out = [];
    if (d) out.push(`${d}d`);
    if (h) out.push(`${h}h`);
    if (m || !out.length) out.push(`${m}m`);
    return out.join(" ");
  }

  /** `4h`, `90m`, `1h30m`, `1d 2h`, `1:30`, `PT4H`, or a number of hours. */
  function parseLength(text) {
    const t = text.trim().toLowerCase();
    if (!t) return null;
    let m = /^pt(?:(\d+(?:\.\d+)?)h)?(?:(\d+)m)?$/.exec(t);
    if (m && (m[1] || m[2])) return (+(m[1] || 0)) * HOUR + (+(m[2] || 0)) * MIN;
    m = /^(\d+):([0-5]\d)$/.exec(t);
    if (m) return +m[1] * HOUR + +m[2] * MIN;
    m = /^(\d+(?:\.\d+)?)$/.exec(t);
    if (m) return +m[1] * HOUR;
    m = /^(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+)\s*m(?:in)?)?$/.exec(t);
    if (m && (m[1] || m[2] || m[3])) {
      return Math.round((+(m[1] || 0)) * DAY + (+(m[2] || 0)) * HOUR + (+(m[3] || 0)) * MIN);
    }
    return null;
  }

  /**
   * A time typed in the display zone (`YYYY-MM-DD HH:MM[:SS]`) or a full RFC 3339 time with an
   * offset. Returns {ms, gap} or null.
   */
  function parseWhen(text, zone) {
    const t = text.trim();
    if (/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})$/.test(t)) {
      const ms = Date.parse(t.replace(" ", "T"));
      return Number.isNaN(ms) ? null : { ms, gap: false };
    }
    const m = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{1,2}):(\d{2})(?::(\d{2}))?$/.exec(t);
    if (!m) return null;
    const [y, mo, d, h, mi, s] = m.slice(1).map((x) => +(x || 0));
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59) return null;
    return fromWall(y, mo, d, h, mi, s, zone);
  }

  // ---- Resources ---------------------------------------------------------------------------------

  const depth = (id) => id.split("/").length - 1;
  const ancestors = (id) => {
    const parts = id.split("/");
    const out = [];
    for (let i = 1; i < parts.length; i++) out.push(parts.slice(0, i).join("/"));
    return out;
  };
  const conflicts = (a, b) => a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);
  const hasChildren = (id) => state.resources.some((r) => r.parent === id);

  function compareIds(a, b) {
    const x = a.split("/");
    const y = b.split("/");
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
    }
    return x.length - y.length;
  }

  /** The zone of the nearest site above (or at) `id`, if any. */
  function siteZone(id) {
    for (const a of [id, ...ancestors(id).reverse()]) {
      const r = state.byId.get(a);
      if (r && r.zone) return r.zone;
    }
    return null;
  }

  function fmtRate(bps) {
    if (!bps) return "";
    for (const [u, v] of [["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]]) {
      if (bps >= v) return `${+(bps / v).toFixed(2)} ${u}bit/s`;
    }
    return `${bps} bit/s`;
  }

  function label(r) {
    const last = r.id.split("/").pop();
    return r.name && r.name !== r.id ? r.name : last;
  }

  function resourceTitle(r) {
    const lines = [`${r.id} (${r.kind})`];
    if (r.name && r.name !== r.id) lines.push(r.name);
    if (r.capacity_bps) lines.push(`capacity ${fmtRate(r.capacity_bps)}`);
    if (r.zone) lines.push(`zone ${r.zone}`);
    if (r.hops && r.hops.length) lines.push(`hops: ${r.hops.join(" → ")}`);
    if (r.state !== "available") lines.push(`${r.state}: ${r.reason || ""}`);
    return lines.join("\n");
  }

  function visible(r) {
    return !ancestors(r.id).some((a) => state.collapsed.has(a));
  }

  // ---- The view ----------------------------------------------------------------------------------

  function viewDays() {
    const days = [];
    for (let i = 0; i <= state.days; i++) {
      const a = state.anchor;
      days.push(fromWall(a.y, a.m, a.d + i, 0, 0, 0, state.zone).ms);
    }
    return days;
  }

  function viewRange() {
    const days = viewDays();
    return [days[0], days[days.length - 1]];
  }

  function setAnchorTo(ms) {
    const w = wall(ms, state.zone);
    state.anchor = { y: w.y, m: w.m, d: w.d };
  }

  function shiftAnchor(days) {
    const a = state.anchor;
    const t = new Date(Date.UTC(a.y, a.m - 1, a.d + days));
    state.anchor = { y: t.getUTCFullYear(), m: t.getUTCMonth() + 1, d: t.getUTCDate() };
  }

  function bookingClass(b) {
    const cls = ["bar", b.owner === state.user ? "mine" : "others"];
    if (b.status === "held") cls.push("held");
    if (!LIVE.has(b.status)) cls.push("past");
    if (state.selectedBooking === b.id) cls.push("selected");
    return cls.join(" ");
  }

  function bookingTitle(b) {
    const a = Date.parse(b.start);
    const e = Date.parse(b.end);
    const lines = [
      `Booking #${b.id} on ${b.resource} by ${b.owner}: ${b.status}`,
      `${state.zone}: ${fmtRange(a, e, state.zone)}`,
      `UTC: ${utcRange(a, e)}`,
    ];
    const sz = siteZone(b.resource);
    if (sz && sz !== state.zone) lines.push(`site (${sz}): ${fmtRange(a, e, sz)}`);
    if (b.hold_until) lines.push(`hold expires ${holdLeft(b.hold_until)}`);
    if (b.note) lines.push(`note: ${b.note}`);
    return lines.join("\n");
  }

  function renderGantt() {
    const [from, to] = viewRange();
    const span = to - from;
    const pct = (ms) => `${(((Math.min(Math.max(ms, from), to) - from) / span) * 100).toFixed(4)}%`;
    const width = (a, b) =>
      `${(((Math.min(b, to) - Math.max(a, from)) / span) * 100).toFixed(4)}%`;
    const days = viewDays();
    const now = Date.now();
    const today = fmtDay(now, state.zone);

    const n = state.days;
    const last = days[n] - 1;
    $("range").replaceChildren(
      n === 1
        ? `${fmtDay(days[0], state.zone)} ${wall(last, state.zone).y} `
        : `${fmtDay(days[0], state.zone)} – ${fmtDay(last, state.zone)} ${wall(last, state.zone).y} `,
      el("span", { class: "muted", text: state.zone }),
    );
    const ticks = { 1: [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22], 3: [3, 6, 9, 12, 15, 18, 21] }[n] || [6, 12, 18];

    const axis = el("div", { class: "g-axis" });
    const dayShades = [];
    for (let i = 0; i < n; i++) {
      const w = wall(days[i], state.zone);
      const weekend = [0, 6].includes(weekday(w));
      const dayEl = el(
        "div",
        {
          class: `g-day${weekend ? " weekend" : ""}${fmtDay(days[i], state.zone) === today ? " today" : ""}`,
          title: `${fmtDay(days[i], state.zone)}: starts ${iso(days[i])} UTC (${offsetText(days[i], state.zone)})`,
        },
        el("span", { class: "date", text: fmtDay(days[i], state.zone) }),
      );
      dayEl.style.left = pct(days[i]);
      dayEl.style.width = width(days[i], days[i + 1]);
      axis.append(dayEl);
      if (weekend) dayShades.push([days[i], days[i + 1]]);
      for (const h of ticks) {
        const t = fromWall(w.y, w.m, w.d, h, 0, 0, state.zone).ms;
        const tick = el("span", { class: "g-tick", text: pad(h) });
        tick.style.left = pct(t);
        axis.append(tick);
      }
    }
    const head = el("div", { class: "g-head" }, el("div", { class: "corner", text: "Resource" }), axis);

    const pv = state.preview;
    const form = readForm();
    const rows = [];
    for (const r of state.resources) {
      if (!visible(r)) continue;
      const track = el("div", {
        class: "g-track",
        data: { resource: r.id },
        onclick: (ev) => {
          if (ev.target !== track) return;
          const rect = track.getBoundingClientRect();
          const t = from + ((ev.clientX - rect.left) / rect.width) * span;
          pickSlot(r.id, Math.floor(t / HOUR) * HOUR);
        },
      });
      for (const [a, b] of dayShades) {
        const s = el("div", { class: "weekend" });
        s.style.left = pct(a);
        s.style.width = width(a, b);
        track.append(s);
      }
      for (let i = 1; i < n; i++) {
        const v = el("div", { class: "vline day" });
        v.style.left = pct(days[i]);
        track.append(v);
      }
      // Bookings of an ancestor or a descendant block this resource too: shown faintly.
      for (const b of state.bookings) {
        if (b.resource === r.id || !LIVE.has(b.status) || !conflicts(b.resource, r.id)) continue;
        const a = Date.parse(b.start);
        const e = Date.parse(b.end);
        if (e <= from || a >= to) continue;
        const bar = el("div", {
          class: `${bookingClass(b)} inherited`,
          title: `busy: ${b.resource} is booked (#${b.id}, ${b.owner})\n${bookingTitle(b)}`,
          "aria-hidden": "true",
        });
        bar.style.left = pct(a);
        bar.style.width = width(a, e);
        track.append(bar);
      }
      for (const b of state.bookings) {
        if (b.resource !== r.id || !SHOWN.has(b.status)) continue;
        const a = Date.parse(b.start);
        const e = Date.parse(b.end);
        if (e <= from || a >= to) continue;
        const inConflict = pv && pv.conflicts.some((c) => c.booking === b.id);
        const bar = el("button", {
          type: "button",
          class: bookingClass(b) + (inConflict ? " selected" : ""),
          title: bookingTitle(b),
          "aria-label": `Booking ${b.id} by ${b.owner}, ${b.status}, ${fmtRange(a, e, state.zone)}`,
          data: { booking: String(b.id), owner: b.owner, status: b.status, resource: b.resource },
          text: `#${b.id} ${b.owner === state.user ? "mine" : b.owner}`,
          onclick: () => selectBooking(b.id),
        });
        bar.style.left = pct(a);
        bar.style.width = width(a, e);
        track.append(bar);
      }
      if (form.ok && form.resource === r.id && form.end > from && form.start < to) {
        let cls = "ghost";
        if (pv && pv.conflicts.length) cls += " conflict";
        else if (pv && pv.refusals.length) cls += " refused";
        const g = el("div", { class: cls, "aria-hidden": "true" });
        g.style.left = pct(form.start);
        g.style.width = width(form.start, form.end);
        track.append(g);
      }
      if (now >= from && now < to) {
        const n = el("div", { class: "now-line", title: `now: ${iso(now)}` });
        n.style.left = pct(now);
        track.append(n);
      }
      const kids = hasChildren(r.id);
      const collapsed = state.collapsed.has(r.id);
      const toggle = el("button", {
        type: "button",
        class: `toggle${kids ? "" : " leaf"}`,
        "aria-label": kids ? `${collapsed ? "Expand" : "Collapse"} ${r.id}` : null,
        "aria-expanded": kids ? String(!collapsed) : null,
        tabindex: kids ? null : "-1",
        text: kids ? (collapsed ? "▸" : "▾") : "",
        onclick: (ev) => {
          ev.stopPropagation();
          if (collapsed) state.collapsed.delete(r.id);
          else state.collapsed.add(r.id);
          renderGantt();
        },
      });
      const labelEl = el(
        "div",
        { class: "res-label", title: resourceTitle(r), onclick: () => pickResource(r.id) },
        toggle,
        el("button", {
          type: "button",
          class: "name",
          text: label(r),
          "aria-label": `${r.id} (${r.kind}${r.state !== "available" ? `, ${r.state}` : ""}): choose it in the booking form`,
          onclick: (ev) => {
            ev.stopPropagation();
            pickResource(r.id);
          },
        }),
        el("span", { class: "kind", text: r.kind }),
        r.capacity_bps ? el("span", { class: "muted small-text", text: fmtRate(r.capacity_bps) }) : null,
        r.state !== "available" ? el("span", { class: `state ${r.state}`, text: r.state }) : null,
      );
      labelEl.style.paddingLeft = `${6 + depth(r.id) * 14}px`;
      const row = el(
        "div",
        {
          class: `g-row${form.resource === r.id ? " selected" : ""}${r.state === "maintenance" ? " maintenance" : ""}`,
          data: { resource: r.id },
        },
        labelEl,
        track,
      );
      rows.push(row);
    }
    $("gantt").replaceChildren(head, ...rows);
  }

  function renderMine() {
    const mine = state.bookings
      .filter((b) => b.owner === state.user && SHOWN.has(b.status))
      .sort((a, b) => Date.parse(a.start) - Date.parse(b.start));
    const items = mine.map((b) =>
      el(
        "li",
        { data: { booking: String(b.id), status: b.status } },
        el(
          "span",
          {},
          el("button", {
            type: "button",
            class: "quiet small",
            text: `#${b.id}`,
            title: bookingTitle(b),
            onclick: () => selectBooking(b.id),
          }),
          ` ${b.resource} `,
          el("span", { class: `badge ${b.status}`, text: b.status }),
          el("br"),
          el("span", {
            class: "muted small-text",
            title: `UTC: ${utcRange(Date.parse(b.start), Date.parse(b.end))}`,
            text: fmtRange(Date.parse(b.start), Date.parse(b.end), state.zone),
          }),
          b.hold_until
            ? el("span", { class: "muted small-text", text: ` · hold runs out at ${holdLeft(b.hold_until)}` })
            : null,
        ),
        el("span", { class: "actions" }, actionButtons(b)),
      ),
    );
    if (!items.length) items.push(el("li", { class: "empty", text: "none" }));
    $("mine-list").replaceChildren(...items);
  }

  function actionButtons(b) {
    const out = [];
    const may = b.owner === state.user || state.role === "admin";
    if (!may) return out;
    const button = (action, text, cls) =>
      el("button", {
        type: "button",
        class: `small ${cls || ""}`,
        text,
        data: { action, booking: String(b.id) },
        "aria-label": `${text} booking ${b.id}`,
        onclick: () => act(b.id, action),
      });
    if (b.status === "held") out.push(button("confirm", "Confirm"), button("cancel", "Cancel", "danger"));
    if (b.status === "upcoming") out.push(button("cancel", "Cancel", "danger"));
    if (b.status === "active") out.push(button("release", "Release", "danger"));
    return out;
  }

  function selectBooking(id) {
    state.selectedBooking = id;
    renderDetails();
    renderGantt();
  }

  function renderDetails() {
    const b = state.bookings.find((x) => x.id === state.selectedBooking);
    const box = $("details");
    if (!b) {
      box.hidden = true;
      box.replaceChildren();
      return;
    }
    const a = Date.parse(b.start);
    const e = Date.parse(b.end);
    const sz = siteZone(b.resource);
    const rows = [
      ["Resource", b.resource],
      ["Owner", b.owner],
      ["Status", b.status],
      [state.zone, fmtRange(a, e, state.zone)],
      ["UTC", utcRange(a, e)],
    ];
    if (sz && sz !== state.zone) rows.push([`Site (${sz})`, fmtRange(a, e, sz)]);
    if (b.hold_until) rows.push(["Hold until", holdLeft(b.hold_until)]);
    if (b.note) rows.push(["Note", b.note]);
    box.replaceChildren(
      el("strong", { text: `Booking #${b.id}` }),
      el("dl", {}, rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })])),
      el("div", { class: "actions" }, actionButtons(b), el("button", {
        type: "button",
        class: "quiet small",
        text: "Close",
        onclick: () => selectBooking(null),
      })),
    );
    box.hidden = false;
  }

  function renderAll() {
    renderGantt();
    renderMine();
    renderDetails();
    for (const z of document.querySelectorAll(".zone-name")) z.textContent = `(${state.zone})`;
  }

  async function loadBookings() {
    const [from, to] = viewRange();
    try {
      const list = await api("GET", `/api/v1/bookings?${query({ from: iso(from), to: iso(to) })}`);
      state.bookings = list.bookings || [];
      show("action-error", "");
    } catch (e) {
      show("action-error", e.message);
    }
    renderAll();
  }

  async function act(id, action) {
    show("action-error", "");
    try {
      await api("POST", `/api/v1/bookings/${id}/${action}`);
    } catch (e) {
      show("action-error", e.message);
    }
    await loadBookings();
    schedulePreview();
  }

  // ---- The booking form and its preview ----------------------------------------------------------

  /** The form's slot: {ok, resource, start, end} or {ok: false, why}. */
  function readForm() {
    const resource = $("f-resource").value;
    const s = parseWhen($("f-start").value, state.zone);
    const e = parseWhen($("f-end").value, state.zone);
    if (!resource) return { ok: false, why: "choose a resource" };
    if (!s) return { ok: false, resource, why: "start: type YYYY-MM-DD HH:MM" };
    if (!e) return { ok: false, resource, why: "end: type YYYY-MM-DD HH:MM, or a length" };
    if (e.ms <= s.ms) return { ok: false, resource, why: "the end must be after the start" };
    return { ok: true, resource, start: s.ms, end: e.ms, gaps: [s.gap && "start", e.gap && "end"].filter(Boolean) };
  }

  function markInvalid() {
    const z = state.zone;
    $("f-start").setAttribute("aria-invalid", String(!!$("f-start").value && !parseWhen($("f-start").value, z)));
    $("f-end").setAttribute("aria-invalid", String(!!$("f-end").value && !parseWhen($("f-end").value, z)));
    $("f-length").setAttribute("aria-invalid", String(!!$("f-length").value && parseLength($("f-length").value) === null));
  }

  function onStartOrLength() {
    const s = parseWhen($("f-start").value, state.zone);
    const len = parseLength($("f-length").value);
    if (s && len) $("f-end").value = fmtLocal(s.ms + len, state.zone);
    formChanged();
  }

  function onEnd() {
    const s = parseWhen($("f-start").value, state.zone);
    const e = parseWhen($("f-end").value, state.zone);
    if (s && e && e.ms > s.ms) $("f-length").value = fmtLength(e.ms - s.ms);
    formChanged();
  }

  function formChanged() {
    markInvalid();
    show("book-result", "");
    show("book-error", "");
    renderSlotTimes();
    schedulePreview();
    renderGantt();
  }

  function renderSlotTimes() {
    const f = readForm();
    const box = $("slot-times");
    if (!f.ok) {
      box.replaceChildren(f.resource && ($("f-start").value || $("f-end").value) ? f.why : "");
      return;
    }
    const lines = [
      el("div", {}, el("b", { text: `${state.zone}: ` }), fmtRange(f.start, f.end, state.zone), ` · ${fmtLength(f.end - f.start)}`),
      el("div", {}, el("b", { text: "UTC: " }), utcRange(f.start, f.end)),
    ];
    const sz = siteZone(f.resource);
    if (sz && sz !== state.zone) {
      lines.push(el("div", {}, el("b", { text: `Site (${sz}): ` }), fmtRange(f.start, f.end, sz)));
    }
    for (const which of f.gaps) {
      lines.push(el("div", { class: "warning" }, `The ${which} time does not exist in ${state.zone} (clocks jump forward); it was moved to ${fmtLocal(which === "start" ? f.start : f.end, state.zone)}.`));
    }
    box.replaceChildren(...lines);
  }

  function schedulePreview() {
    clearTimeout(state.previewTimer);
    const f = readForm();
    if (!f.ok) {
      state.preview = null;
      state.previewSeq++;
      renderPreview(null);
      return;
    }
    const p = $("preview");
    p.dataset.state = "pending";
    p.replaceChildren(el("div", { class: "verdict", text: "Checking the slot…" }));
    state.previewTimer = setTimeout(() => runPreview(f), 200);
  }

  async function runPreview(f) {
    const seq = ++state.previewSeq;
    try {
      const pv = await api(
        "GET",
        `/api/v1/preview?${query({ resource: f.resource, start: iso(f.start), end: iso(f.end), zone: state.zone })}`,
      );
      if (seq !== state.previewSeq) return;
      state.preview = pv;
      renderPreview(pv);
    } catch (e) {
      if (seq !== state.previewSeq) return;
      state.preview = null;
      renderPreview(null, e.message);
    }
    renderGantt();
  }

  function renderPreview(pv, error) {
    const p = $("preview");
    if (error) {
      p.dataset.state = "error";
      p.replaceChildren(el("div", { class: "verdict", text: error }));
      return;
    }
    if (!pv) {
      p.dataset.state = "empty";
      p.replaceChildren();
      return;
    }
    const parts = [];
    if (pv.conflicts.length) {
      p.dataset.state = "conflict";
      parts.push(el("div", { class: "verdict", text: `Conflict: ${pv.conflicts.length === 1 ? "1 booking is" : `${pv.conflicts.length} bookings are`} in the way` }));
      parts.push(
        el("ul", { class: "conflicts" }, pv.conflicts.map((c) => {
          const a = Date.parse(c.start);
          const e = Date.parse(c.end);
          let rel = "";
          if (c.resource !== pv.resource) {
            rel = pv.resource.startsWith(`${c.resource}/`)
              ? ` (a parent of ${pv.resource})`
              : ` (a part of ${pv.resource})`;
          }
          return el("li", { data: { booking: String(c.booking) }, title: `UTC: ${utcRange(a, e)}` },
            el("strong", { text: `#${c.booking}` }),
            ` by ${c.user}${c.user === state.user ? " (yours)" : ""} on ${c.resource}${rel}, ${c.status}: ${fmtRange(a, e, state.zone)}`);
        })),
      );
    } else if (pv.refusals.length) {
      p.dataset.state = "refused";
      parts.push(el("div", { class: "verdict", text: "No conflict, but the policy would refuse it" }));
    } else {
      p.dataset.state = "ok";
      parts.push(el("div", { class: "verdict", text: `Free: no conflict, and the policy allows it (checked for ${pv.user})` }));
    }
    if (pv.refusals.length) {
      if (pv.conflicts.length) parts.push(el("div", { class: "verdict", text: "The policy would also refuse it" }));
      parts.push(el("ul", { class: "refusals" }, pv.refusals.map((r) =>
        el("li", {}, el("span", { class: "rule", text: `[${r.rule}] ` }), r.reason))));
    }
    for (const w of pv.warnings) {
      // Messages start with their code ("degraded: …"); DST ones say it in words.
      let head = `${w.code}: `;
      let body = w.message.startsWith(head) ? w.message.slice(head.length) : w.message;
      if (w.code === "dst_change") {
        head = "Daylight saving change inside this slot: ";
        body = body.replace(/^daylight saving change inside the booking: /, "");
      }
      head = head[0].toUpperCase() + head.slice(1).replace("_", " ");
      parts.push(el("div", { class: "warning", data: { code: w.code } }, el("strong", { text: head }), body));
    }
    p.replaceChildren(...parts);
  }

  function pickResource(id) {
    $("f-resource").value = id;
    $("q-resource").value = id;
    formChanged();
  }

  function pickSlot(id, start) {
    $("f-resource").value = id;
    $("q-resource").value = id;
    $("f-start").value = fmtLocal(start, state.zone);
    onStartOrLength();
    $("f-start").focus();
  }

  async function book(ev) {
    ev.preventDefault();
    show("book-error", "");
    show("book-result", "");
    const f = readForm();
    if (!f.ok) {
      show("book-error", f.why);
      return;
    }
    const body = { resource: f.resource, start: iso(f.start), end: iso(f.end), hold: true };
    const note = $("f-note").value.trim();
    if (note) body.note = note;
    $("book").disabled = true;
    try {
      const key = crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
      const b = await api("POST", "/api/v1/bookings", body, { "Idempotency-Key": key });
      const until = b.hold_until ? ` until ${holdLeft(b.hold_until)}` : "";
      const r = $("book-result");
      r.dataset.booking = String(b.id);
      show("book-result", `Held #${b.id} on ${b.resource}${until}: confirm it under Bookings.`);
      state.selectedBooking = b.id;
      await loadBookings();
      schedulePreview();
    } catch (e) {
      show("book-error", e.message);
    } finally {
      $("book").disabled = false;
    }
  }

  // ---- Free/busy ---------------------------------------------------------------------------------

  function mondayOf(ms, weeksLater) {
    const w = wall(ms, state.zone);
    const back = (weekday(w) + 6) % 7;
    return fromWall(w.y, w.m, w.d - back + 7 * weeksLater, 0, 0, 0, state.zone).ms;
  }

  async function findFree(ev) {
    ev.preventDefault();
    show("free-error", "");
    const resource = $("q-resource").value;
    const lengthText = $("q-length").value;
    const len = parseLength(lengthText);
    if (!len) {
      show("free-error", "length: type e.g. 4h, 90m or 1h30m");
      return;
    }
    const now = Date.now();
    let from;
    let to;
    switch ($("q-window").value) {
      case "shown":
        [from, to] = viewRange();
        break;
      case "this":
        from = mondayOf(now, 0);
        to = mondayOf(now, 1);
        break;
      case "next":
        from = mondayOf(now, 1);
        to = mondayOf(now, 2);
        break;
      default:
        from = Math.floor(now / MIN) * MIN;
        to = from + 14 * DAY;
    }
    const list = $("free-list");
    try {
      const fb = await api("GET", `/api/v1/freebusy?${query({ resource, from: iso(from), to: iso(to), length: `${Math.round(len / MIN)}m` })}`);
      const items = fb.free.map((s) => {
        const a = Date.parse(s.start);
        const e = Date.parse(s.end);
        return el("li", { title: `UTC: ${utcRange(a, e)}` },
          el("span", {}, fmtRange(a, e, state.zone), el("span", { class: "muted", text: ` · ${fmtLength(e - a)}` })),
          el("button", {
            type: "button",
            class: "small secondary book-this",
            text: "Book this",
            data: { start: s.start, end: s.end },
            "aria-label": `Book ${resource} from ${fmtLocal(a, state.zone)}`,
            onclick: () => fillFromFree(resource, a, e, len),
          }));
      });
      if (!items.length) {
        items.push(el("li", { class: "empty", text: `${resource} is not free for ${fmtLength(len)} between ${fmtRange(from, to, state.zone)}` }));
      } else {
        items.unshift(el("li", { class: "empty", text: `${resource}: ${fb.free.length} free ${fb.free.length === 1 ? "slot" : "slots"} of ${fmtLength(len)} or more, ${fb.busy.length} busy` }));
      }
      list.replaceChildren(...items);
    } catch (e) {
      list.replaceChildren();
      show("free-error", e.message);
    }
  }

  function fillFromFree(resource, a, e, len) {
    // A slot that starts now is moved to the next whole minute (still inside it when it can be).
    const start = a <= Date.now() ? Math.ceil((Date.now() + 1000) / MIN) * MIN : a;
    $("f-resource").value = resource;
    $("f-start").value = fmtLocal(start, state.zone);
    $("f-length").value = fmtLength(Math.min(len, Math.max(e - start, 15 * MIN)));
    onStartOrLength();
    $("book-form").scrollIntoView({ block: "nearest" });
    $("f-start").focus();
  }

  // ---- Zones, sign-in, start-up ------------------------------------------------------------------

  /** The zone choices; the display zone is the one chosen before, else the account's, else the browser's. */
  function fillZones(accountZone) {
    const browser = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    const zones = [browser, "UTC"];
    const account = accountZone && validZone(accountZone) ? accountZone : null;
    if (account && !zones.includes(account)) zones.push(account);
    for (const r of state.resources) if (r.zone && !zones.includes(r.zone)) zones.push(r.zone);
    for (const z of ["Europe/Zurich", "Europe/Amsterdam", "America/Chicago", "America/New_York", "America/Los_Angeles", "Asia/Tokyo"]) {
      if (!zones.includes(z)) zones.push(z);
    }
    const saved = localStorage.getItem("lh.zone");
    if (saved && validZone(saved) && !zones.includes(saved)) zones.push(saved);
    state.zone = saved && validZone(saved) ? saved : account || browser;
    const note = (z) => [z === browser && "this browser", z === account && "your account"].filter(Boolean).join(", ");
    $("zone").replaceChildren(...zones.map((z) =>
      el("option", { value: z, text: note(z) ? `${z} (${note(z)})` : z })));
    $("zone").value = state.zone;
  }

  function changeZone() {
    const old = state.zone;
    const s = parseWhen($("f-start").value, old);
    const e = parseWhen($("f-end").value, old);
    state.zone = $("zone").value;
    localStorage.setItem("lh.zone", state.zone);
    if (s) $("f-start").value = fmtLocal(s.ms, state.zone);
    if (e) $("f-end").value = fmtLocal(e.ms, state.zone);
    const mid = viewRange()[0];
    setAnchorTo(mid);
    renderSlotTimes();
    schedulePreview();
    loadBookings();
  }

  function fillResourceSelects() {
    const opts = () => state.resources.map((r) => el("option", {
      value: r.id,
      text: `${"\u00a0\u00a0".repeat(depth(r.id))}${r.id}${r.state !== "available" ? ` (${r.state})` : ""}`,
    }));
    $("f-resource").replaceChildren(...opts());
    $("q-resource").replaceChildren(...opts());
  }

  /** Who the token belongs to: `GET /api/v1/me` when the service has it, else the preview's echo. */
  async function whoAmI() {
    try {
      const me = await api("GET", "/api/v1/me");
      if (me && me.user) return { user: me.user, role: me.role || "user", zone: me.zone || null };
    } catch (e) {
      if (e.status === 401) throw e;
    }
    const r = state.resources[0];
    const t = Math.ceil(Date.now() / HOUR) * HOUR + DAY;
    const pv = await api("GET", `/api/v1/preview?${query({ resource: r.id, start: iso(t), end: iso(t + HOUR) })}`);
    return { user: pv.user, role: pv.role, zone: null };
  }

  // ---- Host: power and console -------------------------------------------------------------------

  const host = { id: null, after: null, timer: null, lines: 0, agentTimer: null };
  const CONSOLE_KEPT = 2000;

  function fillHosts() {
    const hosts = state.resources.filter((r) => r.kind === "host");
    $("h-host").replaceChildren(...hosts.map((r) => el("option", { value: r.id, text: r.id })));
    $("host-card").hidden = !hosts.length;
    if (hosts.length) selectHost(heldHost(hosts) || hosts[0].id);
  }

  // The first host a current booking of this user covers (the host, or its site), if any.
  function heldHost(hosts) {
    const now = Date.now();
    const held = state.bookings.filter(
      (b) => b.owner === state.user && b.status === "confirmed" && Date.parse(b.start) <= now && now < Date.parse(b.end),
    );
    const h = hosts.find((r) => held.some((b) => r.id === b.resource || r.id.startsWith(b.resource + "/")));
    return h && h.id;
  }

  // The host's agent (longhaul agent): reachable, unreachable, hung or pending, its last report, and
  // its latest events; an unreachable or hung host is announced (role=alert).
  async function pollAgent() {
    const id = host.id;
    try {
      const [list, log] = await Promise.all([
        api("GET", "/api/v1/hosts"),
        api("GET", `/api/v1/hosts/events?${query({ host: id, limit: "5" })}`),
      ]);
      if (id !== host.id) return;
      const a = (list.host || []).find((h) => h.host === id);
      const status = !a ? "none" : a.state === "pending" ? "pending" : a.reachable ? "reachable" : a.hung ? "hung" : "unreachable";
      const words = { none: "no agent reports", pending: "pending acceptance", reachable: "reachable", unreachable: "UNREACHABLE", hung: "HUNG" };
      $("h-agent").textContent = words[status];
      $("h-agent").dataset.agent = status;
      $("h-seen").textContent = a ? `last report ${fmtLocal(Date.parse(a.last_seen), state.zone, true)}` : "";
      const events = log.event || [];
      $("h-events").replaceChildren(
        ...events.map((e) =>
          el("li", { title: e.bookings.join(", ") }, el("span", { class: "ev-kind", text: e.kind }), ` ${fmtLocal(Date.parse(e.at), state.zone, true)}: ${e.detail}`),
        ),
      );
      const down = events.find((e) => e.kind === "unreachable" || e.kind === "hung");
      show("h-alert", status === "unreachable" || status === "hung"
        ? `${id} is ${status === "hung" ? "hung" : "unreachable"}${down ? ` since ${fmtLocal(Date.parse(down.at), state.zone, true)}: ${down.detail}` : ""}`
        : "");
    } catch (e) {
      if (id !== host.id) return;
      $("h-agent").textContent = "unknown";
    }
    if (id === host.id) host.agentTimer = setTimeout(pollAgent, 3000);
  }

  function hostReason() {
    const r = $("h-reason").value.trim();
    return r || undefined;
  }

  function setPower(stateName) {
    $("h-state").textContent = stateName;
    $("h-state").dataset.state = stateName;
  }

  async function power(action) {
    show("h-error", "");
    $("h-busy").hidden = false;
    for (const b of document.querySelectorAll("[data-power]")) b.disabled = true;
    try {
      const r = await api("POST", "/api/v1/power", { host: host.id, action, reason: hostReason() });
      setPower(r.state);
    } catch (e) {
      if (e.status === 404 && e.body && e.body.code === "no_power_endpoint") {
        setPower("not controlled here");
      } else {
        if (action === "status") setPower("unknown");
        show("h-error", e.message);
      }
    } finally {
      $("h-busy").hidden = true;
      for (const b of document.querySelectorAll("[data-power]")) b.disabled = false;
    }
  }

  function consoleLine(l) {
    const at = el("span", { class: "c-at", text: l.at.slice(11, 19) + " ", title: l.at });
    const text = el("span", { class: l.mark ? `c-text c-${l.mark}` : "c-text", text: l.text });
    return el("span", { class: "c-line", data: { seq: String(l.seq), boot: String(l.boot) } }, at, text, "\n");
  }

  async function pollConsole() {
    const id = host.id;
    const params = { host: id, limit: "500" };
    if (host.after !== null) params.after = String(host.after);
    const reason = hostReason();
    if (reason) params.reason = reason;
    try {
      const log = await api("GET", `/api/v1/console?${query(params)}`);
      if (id !== host.id) return;
      const pre = $("h-console");
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(...log.lines.map(consoleLine));
      host.lines += log.lines.length;
      while (host.lines > CONSOLE_KEPT && pre.firstChild) {
        pre.firstChild.remove();
        host.lines -= 1;
      }
      host.after = log.lines.length ? log.lines[log.lines.length - 1].seq : Math.max(host.after || 0, log.last_seq);
      const boots = log.boots || [];
      const last = boots[boots.length - 1];
      $("h-boots").textContent = last
        ? `(boot ${last.boot}${last.panics ? ", panicked" : ""}; ${boots.length} boots archived)`
        : "(nothing archived yet)";
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    } catch (e) {
      if (id !== host.id) return;
      $("h-boots").textContent = e.status === 404 ? "(none for this host)" : "";
      if (e.status !== 404) show("h-error", e.message);
      if (e.status === 403 || e.status === 404) return stopConsole();
    }
    if (id === host.id) host.timer = setTimeout(pollConsole, 1000);
  }

  function stopConsole() {
    clearTimeout(host.timer);
    host.timer = null;
  }

  function selectHost(id) {
    stopConsole();
    clearTimeout(host.agentTimer);
    host.id = id;
    host.after = null;
    host.lines = 0;
    $("h-host").value = id;
    $("h-console").replaceChildren();
    $("h-boots").textContent = "";
    setPower("–");
    show("h-error", "");
    power("status");
    pollConsole();
    pollAgent();
  }

  async function signIn(token) {
    state.token = token;
    const list = await api("GET", "/api/v1/resources");
    state.resources = (list.resources || []).slice().sort((a, b) => compareIds(a.id, b.id));
    state.byId = new Map(state.resources.map((r) => [r.id, r]));
    if (!state.resources.length) throw new Error("the service has no resources");
    const me = await whoAmI();
    state.user = me.user;
    state.role = me.role;
    sessionStorage.setItem("lh.token", token);
    $("who").replaceChildren(el("span", { class: "user", text: me.user }), el("span", { class: "role", text: me.role }));
    $("who").title = `signed in as ${me.user} (${me.role})`;
    $("who").hidden = false;
    $("signout").hidden = false;
    $("zone-box").hidden = false;
    $("signin-view").hidden = true;
    $("app-view").hidden = false;
    fillZones(me.zone);
    fillResourceSelects();
    setAnchorTo(Date.now());
    const start = Math.ceil(Date.now() / HOUR) * HOUR + HOUR;
    $("f-start").value = fmtLocal(start, state.zone);
    onStartOrLength();
    await loadBookings();
    fillHosts();
  }

  function signOut() {
    sessionStorage.removeItem("lh.token");
    state.token = null;
    location.reload();
  }

  function wire() {
    $("signin-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      show("signin-error", "");
      const token = $("token").value.trim();
      if (!token) {
        show("signin-error", "paste an API token");
        return;
      }
      $("signin").disabled = true;
      try {
        await signIn(token);
      } catch (e) {
        state.token = null;
        show("signin-error", e.message);
      } finally {
        $("signin").disabled = false;
      }
    });
    $("signout").addEventListener("click", signOut);
    $("zone").addEventListener("change", changeZone);
    $("prev-week").addEventListener("click", () => { shiftAnchor(-7); loadBookings(); });
    $("next-week").addEventListener("click", () => { shiftAnchor(7); loadBookings(); });
    $("prev-day").addEventListener("click", () => { shiftAnchor(-1); loadBookings(); });
    $("next-day").addEventListener("click", () => { shiftAnchor(1); loadBookings(); });
    $("today").addEventListener("click", () => { setAnchorTo(Date.now()); loadBookings(); });
    $("refresh").addEventListener("click", loadBookings);
    $("span").addEventListener("change", () => {
      state.days = +$("span").value;
      loadBookings();
    });
    $("f-resource").addEventListener("change", () => { $("q-resource").value = $("f-resource").value; formChanged(); });
    $("f-start").addEventListener("input", onStartOrLength);
    $("f-length").addEventListener("input", onStartOrLength);
    $("f-end").addEventListener("input", onEnd);
    $("f-now").addEventListener("click", () => {
      $("f-start").value = fmtLocal(Math.floor(Date.now() / 1000) * 1000, state.zone, true);
      onStartOrLength();
    });
    $("book-form").addEventListener("submit", book);
    $("h-host").addEventListener("change", () => selectHost($("h-host").value));
    $("h-reason").addEventListener("change", () => selectHost(host.id));
    for (const b of document.querySelectorAll("[data-power]")) {
      b.addEventListener("click", () => power(b.dataset.power));
    }
    $("free-form").addEventListener("submit", findFree);
    // Holds expire and bookings start and end: keep the view current.
    setInterval(() => {
      if (state.token && !document.hidden) loadBookings();
    }, 30_000);
  }

  async function start() {
    wire();
    const saved = sessionStorage.getItem("lh.token");
    if (saved) {
      try {
        await signIn(saved);
        return;
      } catch (e) {
        sessionStorage.removeItem("lh.token");
        show("signin-error", e.message);
      }
    }
    $("signin-view").hidden = false;
    $("token").focus();
  }

  start();
})();
