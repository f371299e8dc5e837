// ZorkGPT viewer: polls the JSON API and draws the episode. Plain DOM and hand-written SVG;
// every piece of game text goes in through textContent, never as HTML.
"use strict";

const POLL_LIVE_MS = 1500;
const POLL_IDLE_MS = 5000;
const SVG_NS = "http://www.w3.org/2000/svg";
// Events shown inside a turn besides the turn itself and its tool calls.
const NOTE_EVENTS = new Set([
  "memory_added", "objective_added", "objective_completed", "objective_dropped",
  "knowledge_updated", "command_refused", "mcp_batch_aborted",
]);

const view = {
  id: null,        // the episode shown
  next: 0,         // events received so far (the API's ?since=)
  turns: new Map(),  // turn number -> {turn, tools: [], notes: []}
  finished: false,
  timer: null,
  pinned: decodeURIComponent(location.hash.slice(1)) || null,  // chosen by the user; else follow the newest
  listedAt: 0,
  userOpen: new Map(),  // "turn:section" -> open, for sections the user opened or closed
  revisions: new Map(),  // MCP server -> the protocol revision it agreed on, when the log says
  // The engine's room numbers mean nothing to a reader: hidden unless asked for (kept in the URL).
  showRoomIds: new URLSearchParams(location.search).get("room_ids") === "shown",
  map: null,  // the last map drawn, redrawn when the room ids are shown or hidden
};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text != null) node.textContent = text;
  return node;
}

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

function fmt(n) {
  return n == null ? "–" : Number(n).toLocaleString("en-US");
}

// Unknown prices stay unknown, never $0: a lower bound when only some calls had one.
function costText(e) {
  if (e.cost != null) return `$${e.cost.toFixed(4)}`;
  return e.priced_cost > 0 ? `≥ $${e.priced_cost.toFixed(4)}` : "unknown";
}

function showError(message) {
  const box = document.getElementById("error");
  box.hidden = !message;
  box.textContent = message || "";
}

// An engine room number, shown only while "room ids" is ticked (see setRoomIds).
function roomId(id) {
  return el("span", { class: "room-id", text: ` #${id}` });
}

// The model as the endpoint named it in its replies; the configured name too when they differ
// (a local server answers with whatever it loaded, whatever name the settings give).
function modelText(configured, served) {
  if (served && configured && served !== configured) return `configured ${configured}, served ${served}`;
  return served || configured || "?";
}

// The game the episode played; the API reads an episode logged before games were recorded as Zork I.
function gameText(e) {
  return e.game_title || e.game || "?";
}

// ------------------------------------------------------------------ episode list
function episodeLabel(e) {
  const when = e.started_at ? e.started_at.replace("T", " ").slice(0, 16) : e.id;
  const end = e.end_reason ? e.end_reason : "running";
  return `${when} · ${gameText(e)} · ${modelText(e.model, e.served_model)} · ${e.score}/${e.max_score ?? "?"} · ${e.turns} turns · ${end}`;
}

async function refreshList() {
  const data = await getJSON("/api/episodes");
  document.getElementById("workdir").textContent = data.workdir;
  const select = document.getElementById("episode-select");
  view.listedAt = Date.now();
  select.replaceChildren(...data.episodes.map((e) => el("option", { value: e.id, text: episodeLabel(e) })));
  const unreadable = data.unreadable || [];
  const notice = document.getElementById("unreadable");
  notice.hidden = !unreadable.length;
  notice.textContent = unreadable.length
    ? `Not shown, cannot be read: ${unreadable.map((u) => `${u.id} (${u.error})`).join(", ")}.`
    : "";
  if (!data.episodes.length) {
    document.getElementById("status").textContent = "no episodes yet";
    return;
  }
  const wanted = view.pinned && data.episodes.some((e) => e.id === view.pinned) ? view.pinned : null;
  const chosen = wanted || data.episodes[0].id;
  select.value = chosen;
  if (chosen !== view.id) choose(chosen);
}

function choose(id) {
  view.id = id;
  view.next = 0;
  view.turns = new Map();
  view.finished = false;
  view.userOpen = new Map();
  view.revisions = new Map();
  view.mapCentredOn = null;
  view.mapKey = null;
  view.mapBox = null;
  document.getElementById("transcript").replaceChildren();
}

function pin(id) {
  view.pinned = id;
  history.replaceState(null, "", `#${encodeURIComponent(id)}`);
  choose(id);
  clearTimeout(view.timer);
  poll();
}

// ------------------------------------------------------------------ polling
async function poll() {
  try {
    if (!view.id || view.finished || Date.now() - view.listedAt > POLL_IDLE_MS) await refreshList();
    if (view.id) {
      const id = view.id;
      const data = await getJSON(`/api/episodes/${encodeURIComponent(id)}?since=${view.next}`);
      if (id === view.id) {
        if (data.next < view.next) choose(id); // the log was replaced: start over next time
        else render(data);
      }
    }
    showError("");
  } catch (err) {
    showError(`Cannot reach the viewer's API: ${err.message}`);
  }
  view.timer = setTimeout(poll, view.finished ? POLL_IDLE_MS : POLL_LIVE_MS);
}

function render(data) {
  const e = data.episode;
  view.next = data.next;
  view.finished = e.finished;
  const option = [...document.getElementById("episode-select").options].find((o) => o.value === e.id);
  if (option) option.textContent = episodeLabel(e);
  const status = document.getElementById("status");
  status.textContent = e.finished ? `finished: ${e.end_reason}` : "live";
  status.className = `badge ${e.finished ? "done" : "live"}`;
  const maxScore = e.max_score ?? data.state?.max_score;
  document.getElementById("score").textContent = `${e.score}${maxScore ? ` / ${maxScore}` : ""}`;
  document.getElementById("turn").textContent = `${e.turns}${e.max_turns ? ` / ${e.max_turns}` : ""}`;
  const roomName = e.room_name ?? data.state?.current_room_name;
  const room = document.getElementById("room");
  if (roomName) room.replaceChildren(roomName, roomId(e.room_id ?? data.state?.current_room_id));
  else room.textContent = "–";
  document.getElementById("model").textContent = modelText(e.model, e.served_model);
  document.getElementById("deaths").textContent = fmt(e.deaths);
  document.getElementById("llm-calls").textContent = fmt(e.llm_calls);
  document.getElementById("tokens").textContent = fmt(e.prompt_tokens + e.completion_tokens);
  document.getElementById("cost").textContent = costText(e);
  document.getElementById("mcp-calls").textContent = fmt(e.mcp_calls);
  document.getElementById("mcp-errors").textContent = fmt(e.mcp_errors);
  const mcp = e.mcp;
  document.getElementById("tool-turns").textContent = mcp.enabled ? `${fmt(mcp.tool_turns)} / ${fmt(mcp.turns)}` : "MCP off";
  document.getElementById("game").textContent = gameText(e);
  document.getElementById("game-seed").textContent = e.game_seed ?? "?";
  document.getElementById("wall-time").textContent = e.wall_seconds == null ? "–" : `${e.wall_seconds.toFixed(1)} s`;
  const notConfigured = document.getElementById("not-configured");
  notConfigured.hidden = mcp.settings_held;
  notConfigured.textContent = mcp.settings_held ? "" : `Not as configured: ${mcp.description}`;
  document.getElementById("rejections").textContent = fmt(e.critic.rejected);
  document.getElementById("latest-command").textContent = e.last_action ? `> ${e.last_action}` : "–";
  document.getElementById("end-reason").textContent = e.finished
    ? `(episode ended: ${e.end_reason}${e.victory ? ", victory" : ""})` : "";
  addEvents(data.events);
  drawChart(data.episode, maxScore);
  drawMap(data.map);
  drawFigures(e);
  drawLearning(data.learning);
}

// ------------------------------------------------------------------ transcript
const TOOL_OUTCOMES = new Set(["mcp_tool_result", "mcp_tool_error", "mcp_tool_timeout"]);
// Who refused a proposal: the free check against the game's object tree, or the optional critic model.
const CAUSES = { object_tree: "the engine check", llm: "the critic model" };

// A JSON escape (\n, \", \u00e9) as the character it stands for.
function unescapeJSON(text) {
  return text.replace(/\\(["\\/bfnrt]|u[0-9a-fA-F]{4})/g, (m) => {
    try { return JSON.parse(`"${m}"`); } catch { return m; }
  });
}

// What a tool answered, as text a person reads: strings as they are, structures indented.
function readable(value) {
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((c) => c && typeof c === "object" && typeof c.text === "string")) {
    return value.map((c) => c.text).join("\n");
  }
  return JSON.stringify(value, null, 2);
}

function toolOutcome(r) {
  if (!r) return { text: "waiting for result…", error: false, label: "running" };
  if (r.event_type === "mcp_tool_timeout") {
    return { text: r.message || "timed out", error: true, label: `timed out after ${r.timeout_seconds ?? "?"} s` };
  }
  if (r.event_type === "mcp_tool_error") return { text: String(r.error ?? r.message ?? ""), error: true, label: "failed" };
  if (r.result == null) {
    return { text: `${r.result_length ?? "?"} characters (not kept in the log)`, error: Boolean(r.is_error), label: r.is_error ? "refused" : "ok" };
  }
  let text;
  try {
    const parsed = JSON.parse(String(r.result));
    text = parsed && typeof parsed === "object" && "error" in parsed
      ? [readable(parsed.error), parsed.content != null ? readable(parsed.content) : null].filter(Boolean).join("\n\n")
      : readable(parsed && typeof parsed === "object" && "content" in parsed ? parsed.content : parsed);
  } catch {
    // Shortened in the log, so no longer JSON: the answer's text with its escapes read as text.
    text = unescapeJSON(String(r.result).replace(/^\{"(content|error)": "/, ""));
  }
  return { text, error: Boolean(r.is_error), label: r.is_error ? "refused" : "ok" };
}

function turnEntry(n) {
  if (!view.turns.has(n)) view.turns.set(n, { turn: null, steps: [], notes: [], node: null });
  return view.turns.get(n);
}

function openTool(entry, ev) {
  return entry.steps.find((s) => s.kind === "tool" && s.call && !s.result && s.call.tool_name === ev.tool_name);
}

function addEvents(events) {
  const touched = new Set();
  const latestBefore = view.turns.size ? Math.max(...view.turns.keys()) : null;
  for (const ev of events) {
    if (ev.event_type === "mcp_session_connect" && ev.server_name) {
      const revision = ev.protocol_version;
      if (revision) view.revisions.set(ev.server_name, String(revision));
    }
    const n = ev.turn;
    if (typeof n !== "number") {
      if (ev.event_type === "episode_start" || ev.event_type === "episode_end") addBanner(ev);
      continue;
    }
    const entry = turnEntry(n);
    const kind = ev.event_type;
    if (kind === "turn") entry.turn = ev;
    else if (kind === "mcp_tool_call") {
      entry.steps.push({ kind: "tool", call: ev, result: null, progress: [], revision: view.revisions.get(ev.server_name) });
    } else if (TOOL_OUTCOMES.has(kind)) {
      const open = openTool(entry, ev);
      if (open) open.result = ev;
      else entry.steps.push({ kind: "tool", call: null, result: ev, progress: [] }); // failed before it went out
    } else if (kind === "mcp_tool_progress") {
      const open = openTool(entry, ev) || [...entry.steps].reverse().find((s) => s.kind === "tool");
      if (open) open.progress.push(ev);
    } else if (kind === "critic_rejection" || kind === "critic_override") {
      entry.steps.push({ kind: "critic", event: ev });
    } else if (NOTE_EVENTS.has(kind) || ev.level === "WARNING" || ev.level === "ERROR") {
      entry.notes.push(ev);
    } else continue;
    touched.add(n);
  }
  // The turn that was latest loses its open-by-default sections when a newer one arrives.
  if (latestBefore != null && view.turns.size && Math.max(...view.turns.keys()) !== latestBefore) touched.add(latestBefore);
  for (const n of [...touched].sort((a, b) => a - b)) renderTurn(n);
}

function addBanner(ev) {
  const box = document.getElementById("transcript");
  const text = ev.event_type === "episode_start"
    ? `Episode started · configured model ${ev.agent_model} · MCP ${ev.mcp_enabled ? "on" : "off"} · up to ${ev.max_turns} turns`
    : `Episode ended: ${ev.end_reason} · score ${ev.score}/${ev.max_score} · ${ev.turns} turns · ${ev.deaths} deaths`;
  const banner = el("div", { class: "banner", text });
  if (ev.event_type === "episode_start") box.append(banner);
  else box.prepend(banner);
}

function details(summary, body, open = false, key = "") {
  const node = el("details", { "data-key": key }, typeof summary === "string" ? el("summary", { text: summary }) : summary, body);
  node.open = open;
  return node;
}

function progressText(p) {
  const amount = p.progress != null ? `${p.progress}${p.total != null ? ` / ${p.total}` : ""}` : "";
  return [amount, p.progress_message].filter(Boolean).join(" · ");
}

function toolStep(step, i, n, keepOpen) {
  const call = step.call || step.result;
  const outcome = toolOutcome(step.call ? step.result : step.result);
  const server = call.server_name;
  const duration = step.result && step.result.duration_ms != null ? ` · ${step.result.duration_ms} ms` : "";
  const head = el("summary", {},
    el("span", { class: "tool-name", text: call.tool_name }),
    el("span", { class: "muted", text: ` · ${server ? `server ${server}` : "no such tool"}${duration} · ` }),
    el("span", { class: `outcome ${outcome.error ? "error" : "ok"}`, text: outcome.label }));
  const meta = [];
  if (step.revision) meta.push(`MCP revision ${step.revision}`);
  if (call.iteration != null) meta.push(`round ${call.iteration}`);
  const body = el("div", {},
    meta.length ? el("div", { class: "muted", text: meta.join(" · ") }) : null,
    el("h4", { text: "Arguments" }),
    el("pre", { text: step.call ? JSON.stringify(step.call.arguments, null, 2) : "(the arguments could not be read)" }),
    step.progress.length ? el("h4", { text: "Progress" }) : null,
    step.progress.length ? el("ul", { class: "progress" }, ...step.progress.map((p) => el("li", { text: progressText(p) }))) : null,
    el("h4", { text: outcome.error ? "Error" : "Result" }),
    el("pre", { class: outcome.error ? "error" : "", text: outcome.text }));
  return details(head, body, keepOpen(`tool-${i}`, false), `tool-${i}`);
}

function criticStep(ev) {
  const by = CAUSES[ev.source] || ev.source;
  const verb = ev.event_type === "critic_override" ? "refused, played anyway after the last round" : "refused";
  return el("div", { class: "rejection" },
    el("span", { class: "proposal", text: `> ${ev.action}` }),
    el("span", { class: "by", text: ` ${verb} by ${by}: ` }),
    el("span", { class: "why", text: ev.justification || "" }));
}

function renderTurn(n) {
  const entry = view.turns.get(n);
  const box = document.getElementById("transcript");
  const previous = entry.node;
  const isLatest = n === Math.max(...view.turns.keys());
  const keepOpen = (key, fallback) => view.userOpen.get(`${n}:${key}`) ?? fallback;

  const t = entry.turn;
  const tools = entry.steps.filter((s) => s.kind === "tool");
  const flags = [
    tools.length ? "has-tools" : "",
    entry.steps.some((s) => s.kind === "critic") ? "has-rejections" : "",
    t && t.score_delta ? "has-score" : "",
    t && t.died ? "died" : "",
  ].filter(Boolean);
  const node = el("article", { class: ["turn", ...flags].join(" "), "data-turn": String(n) });
  const delta = t && t.score_delta ? ` (${t.score_delta > 0 ? "+" : ""}${t.score_delta})` : "";
  node.append(el("header", {},
    el("span", { class: "turn-no", text: `Turn ${n}` }),
    t ? el("span", { class: "turn-room" }, t.room_name, roomId(t.room_id)) : el("span", { class: "turn-room", text: "playing…" }),
    el("span", { class: "turn-score", text: t ? `score ${t.score}${delta}` : "" })));
  // As it happened: tool calls and refused proposals in order, then the command played and the reply.
  if (entry.steps.length) {
    const steps = el("div", { class: "steps" });
    entry.steps.forEach((step, i) => steps.append(step.kind === "tool" ? toolStep(step, i, n, keepOpen) : criticStep(step.event)));
    node.append(steps);
  }
  if (t) {
    node.append(el("div", { class: "command", text: `> ${t.action}` }));
    node.append(el("pre", { class: "reply", text: t.response || "" }));
  }
  if (t && t.reasoning) {
    node.append(details("Reasoning", el("pre", { class: "reasoning", text: t.reasoning }), keepOpen("reasoning", isLatest), "reasoning"));
  }
  for (const note of entry.notes) node.append(el("div", { class: `note ${note.level?.toLowerCase() || ""}`, text: String(note.message) }));
  node.hidden = !matchesFilter(node);

  if (previous) previous.replaceWith(node);
  else {
    // Newest first: insert before the first turn with a smaller number.
    const later = [...box.querySelectorAll("article.turn")].find((a) => Number(a.dataset.turn) < n);
    if (later) box.insertBefore(node, later);
    else {
      const start = box.querySelector(".banner:last-child");
      if (start && start.textContent.startsWith("Episode started")) box.insertBefore(node, start);
      else box.append(node);
    }
  }
  entry.node = node;
}

// Filters: with none ticked every turn shows; else the turns with any ticked kind.
function matchesFilter(article) {
  const wanted = [...document.querySelectorAll("#filters input:checked")].map((box) => box.value);
  return !wanted.length || wanted.some((flag) => article.classList.contains(flag));
}

function applyFilters() {
  for (const article of document.querySelectorAll("#transcript article.turn")) article.hidden = !matchesFilter(article);
}

// ------------------------------------------------------------------ score chart
function niceMax(value) {
  if (value <= 10) return 10;
  const step = 10 ** Math.floor(Math.log10(value));
  return Math.ceil(value / step) * step;
}

function drawChart(e, maxScore) {
  const box = document.getElementById("chart");
  const points = scorePoints();
  const W = 640, H = 230, L = 44, R = 16, T = 12, B = 40;
  const maxTurn = Math.max(10, e.turns, ...points.map((p) => p[0]));
  const maxY = niceMax(Math.max(10, ...points.map((p) => p[1])));
  // A death costs 10 points, so a score can go below zero.
  const lowest = Math.min(0, ...points.map((p) => p[1]));
  const minY = lowest < 0 ? -niceMax(-lowest) : 0;
  const x = (turn) => L + (turn / maxTurn) * (W - L - R);
  const y = (score) => T + (1 - (score - minY) / (maxY - minY)) * (H - T - B);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "Score over turns" });
  for (let i = 0; i <= 4; i++) {
    const value = minY + ((maxY - minY) / 4) * i;
    chart.append(svg("line", { x1: L, x2: W - R, y1: y(value), y2: y(value), class: "grid" }));
    chart.append(svg("text", { x: L - 6, y: y(value) + 4, class: "tick", "text-anchor": "end" }, fmt(value)));
  }
  const tickStep = Math.max(1, Math.ceil(maxTurn / 5));
  for (let turn = 0; turn <= maxTurn; turn += tickStep) {
    chart.append(svg("text", { x: x(turn), y: H - B + 16, class: "tick", "text-anchor": "middle" }, String(turn)));
  }
  chart.append(svg("text", { x: (L + W - R) / 2, y: H - 4, class: "axis-label", "text-anchor": "middle" }, "turn"));
  if (points.length) {
    let d = `M${x(points[0][0])},${y(points[0][1])}`;
    for (let i = 1; i < points.length; i++) d += ` H${x(points[i][0])} V${y(points[i][1])}`;
    chart.append(svg("path", { d, class: "score-line" }));
    for (const [turn, score, died] of points) {
      if (died) chart.append(svg("circle", { cx: x(turn), cy: y(score), r: 4, class: "death" }, null));
    }
    const [lastTurn, lastScore] = points[points.length - 1];
    chart.append(svg("circle", { cx: x(lastTurn), cy: y(lastScore), r: 3.5, class: "score-dot" }));
    chart.append(svg("text", { x: Math.min(x(lastTurn) + 6, W - R - 30), y: y(lastScore) - 6, class: "score-label" }, String(lastScore)));
  }
  if (maxScore) chart.append(svg("title", {}, `score out of ${maxScore}; red dots are deaths`));
  box.replaceChildren(chart);
}

function scorePoints() {
  const points = [[0, 0, false]];
  for (const n of [...view.turns.keys()].sort((a, b) => a - b)) {
    const t = view.turns.get(n).turn;
    if (t) points.push([t.turn, t.score, Boolean(t.died)]);
  }
  return points;
}

// ------------------------------------------------------------------ map
// One grid cell of the layout, in SVG units; a room's box sits in its middle.
const CW = 170, CH = 84, BW = 128, BH = 42, PAD = 40;
const SHORT = { north: "N", south: "S", east: "E", west: "W", northeast: "NE", northwest: "NW", southeast: "SE", southwest: "SW" };
const NAMED_STUB = { up: [BW / 2 - 14, -6, "↑ up"], down: [BW / 2 - 14, BH + 13, "↓ down"], in: [-30, BH / 2 + 4, "in"], out: [BW + 6, BH / 2 + 4, "out"] };

function drawMap(map) {
  const box = document.getElementById("map");
  const notes = document.getElementById("map-misfits");
  if (map.error || !map.rooms.length) {
    view.mapKey = null;
    box.replaceChildren(el("p", { class: map.error ? "error" : "muted", text: map.error || "No rooms mapped yet." }));
    notes.replaceChildren();
    return;
  }
  view.map = map;
  const key = JSON.stringify(map) + view.showRoomIds;
  if (key === view.mapKey) return; // unchanged: keep where the reader panned and zoomed
  view.mapKey = key;
  const cols = Math.max(...map.rooms.map((r) => r.x)) + 1;
  const rows = Math.max(...map.rooms.map((r) => r.y)) + 1;
  const W = cols * CW + 2 * PAD, H = rows * CH + 2 * PAD;
  view.mapSize = { W, H };
  const cx = (r) => PAD + r.x * CW + CW / 2;
  const cy = (r) => PAD + r.y * CH + CH / 2;
  const byId = new Map(map.rooms.map((r) => [r.id, r]));
  const root = svg("svg", { role: "img", "aria-label": "Map", preserveAspectRatio: "xMidYMid meet" });
  for (const edge of map.edges) {
    const a = byId.get(edge.from), b = byId.get(edge.to);
    const cls = ["edge", edge.misfit ? "misfit" : "", edge.probable ? "probable" : "", edge.two_way || edge.probable ? "" : "one-way"];
    let path;
    if (edge.misfit) {
      // Bowed aside, so it is not read as a straight compass line.
      const mx = (cx(a) + cx(b)) / 2, my = (cy(a) + cy(b)) / 2;
      const dx = cx(b) - cx(a), dy = cy(b) - cy(a), len = Math.hypot(dx, dy) || 1;
      path = svg("path", { d: `M${cx(a)},${cy(a)} Q${mx - (dy / len) * 40},${my + (dx / len) * 40} ${cx(b)},${cy(b)}`, class: cls.join(" ") });
    } else {
      path = svg("line", { x1: cx(a), y1: cy(a), x2: cx(b), y2: cy(b), class: cls.join(" ") });
    }
    const why = edge.misfit ? "\nZork's map contradicts itself here: drawn elsewhere than its direction says" : "";
    path.append(svg("title", {}, edge.labels.join("\n") + why));
    root.append(path);
    if (edge.names.length) {
      const text = edge.names.join(" / ");
      const label = svg("g", { class: "way-name", transform: `translate(${(cx(a) + cx(b)) / 2},${(cy(a) + cy(b)) / 2})` });
      label.append(svg("rect", { x: -(text.length * 3.4 + 6), y: -9, width: text.length * 6.8 + 12, height: 17, rx: 8 }));
      label.append(svg("text", { "text-anchor": "middle", y: 4 }, text));
      root.append(label);
    }
  }
  let current = null;
  for (const room of map.rooms) {
    const state = room.current ? "current" : room.visited ? "visited" : "unvisited";
    const g = svg("g", { class: `room ${state}`, "data-room-id": room.id, transform: `translate(${cx(room) - BW / 2},${cy(room) - BH / 2})` });
    for (const exit of room.unexplored) {
      // An exit the engine confirms and nobody took: a short open arrow, never touching another room's.
      if (exit.compass) {
        const len = Math.hypot(exit.dx, exit.dy) || 1, ux = exit.dx / len, uy = exit.dy / len;
        const x1 = BW / 2 + ux * (BW / 2 + 3), y1 = BH / 2 + uy * (BH / 2 + 3);
        const stub = svg("g", { class: "stub", "data-direction": exit.direction });
        stub.append(svg("line", { x1, y1, x2: x1 + ux * 12, y2: y1 + uy * 12 }));
        stub.append(svg("text", { x: x1 + ux * 20, y: y1 + uy * 20 + 3, "text-anchor": "middle" }, SHORT[exit.direction]));
        stub.append(svg("title", {}, `${room.name}: ${exit.direction} not taken yet`));
        g.append(stub);
      } else {
        const [x, y, text] = NAMED_STUB[exit.direction] || [BW + 6, -4, exit.direction];
        const stub = svg("g", { class: "stub named", "data-direction": exit.direction });
        stub.append(svg("text", { x, y }, text));
        stub.append(svg("title", {}, `${room.name}: ${exit.direction} not taken yet`));
        g.append(stub);
      }
    }
    g.append(svg("rect", { width: BW, height: BH, rx: 6 }));
    const name = room.name.length > 19 ? `${room.name.slice(0, 18)}…` : room.name;
    g.append(svg("text", { x: BW / 2, y: 18, class: "room-name", "text-anchor": "middle" }, name));
    const visits = `${room.visits} visit${room.visits === 1 ? "" : "s"}`;
    const number = view.showRoomIds ? ` #${room.id}` : "";
    g.append(svg("text", { x: BW / 2, y: 33, class: "room-visits", "text-anchor": "middle" }, number ? `${number.trim()} · ${visits}` : visits));
    g.append(svg("title", {}, `${room.name}${number}${room.unexplored.length ? `\nnot taken: ${room.unexplored.map((u) => u.direction).join(", ")}` : ""}`));
    root.append(g);
    if (room.current) current = { x: cx(room), y: cy(room), id: room.id };
  }
  box.replaceChildren(root);
  view.mapSvg = root;
  if (!view.mapBox) fitMap(current);
  if (current && current.id !== view.mapCentredOn) {
    view.mapCentredOn = current.id;
    view.mapCurrent = current;
    if (!inView(current)) centreMap(current);
  }
  setMapBox(view.mapBox);
  notes.replaceChildren(...(map.misfits.length ? [details(
    `${map.misfits.length} way${map.misfits.length === 1 ? "" : "s"} the compass cannot show (Zork's map contradicts itself; drawn bowed)`,
    el("ul", {}, ...map.misfits.map((text) => el("li", { text }))), false, "misfits")] : []));
}

function setMapBox(b) {
  view.mapBox = b;
  if (view.mapSvg) view.mapSvg.setAttribute("viewBox", `${b.x} ${b.y} ${b.w} ${b.h}`);
}

// The panel's size in SVG units at a zoom of `scale` screen pixels per unit.
function mapViewport(scale) {
  const box = document.getElementById("map");
  return { w: Math.max(200, box.clientWidth) / scale, h: Math.max(200, box.clientHeight) / scale };
}

function fitMap(current) {
  const { W, H } = view.mapSize;
  const panel = mapViewport(1);
  // Readable first: shrink to fit only down to 60 %; a bigger map is panned and zoomed.
  const scale = Math.max(0.6, Math.min(1, panel.w / W, panel.h / H));
  const { w, h } = mapViewport(scale);
  const centre = current && scale < Math.min(panel.w / W, panel.h / H) + 1e-9 ? null : current;
  const x = centre ? centre.x - w / 2 : W / 2 - w / 2;
  const y = centre ? centre.y - h / 2 : H / 2 - h / 2;
  setMapBox({ x, y, w, h });
}

function inView(p) {
  const b = view.mapBox;
  const mx = Math.min(BW, b.w / 4), my = Math.min(BH * 2, b.h / 4);
  return p.x > b.x + mx && p.x < b.x + b.w - mx && p.y > b.y + my && p.y < b.y + b.h - my;
}

function centreMap(p) {
  const b = view.mapBox;
  setMapBox({ ...b, x: p.x - b.w / 2, y: p.y - b.h / 2 });
}

function zoomMap(factor, at) {
  const b = view.mapBox;
  if (!b) return;
  const w = Math.min(Math.max(b.w * factor, 150), Math.max(view.mapSize.W, view.mapSize.H) * 3);
  const h = (b.h * w) / b.w;
  const px = at ? at.x : b.x + b.w / 2, py = at ? at.y : b.y + b.h / 2;
  setMapBox({ x: px - ((px - b.x) * w) / b.w, y: py - ((py - b.y) * h) / b.h, w, h });
}

function mapPoint(event) {
  const rect = view.mapSvg.getBoundingClientRect(), b = view.mapBox;
  return { x: b.x + ((event.clientX - rect.left) / rect.width) * b.w, y: b.y + ((event.clientY - rect.top) / rect.height) * b.h };
}

function setUpMapControls() {
  const box = document.getElementById("map");
  box.addEventListener("wheel", (event) => {
    if (!view.mapSvg) return;
    event.preventDefault();
    zoomMap(event.deltaY > 0 ? 1.15 : 1 / 1.15, mapPoint(event));
  }, { passive: false });
  let drag = null;
  box.addEventListener("pointerdown", (event) => {
    if (!view.mapSvg) return;
    drag = { x: event.clientX, y: event.clientY, box: view.mapBox };
    box.setPointerCapture(event.pointerId);
  });
  box.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const rect = view.mapSvg.getBoundingClientRect();
    const dx = ((event.clientX - drag.x) / rect.width) * drag.box.w, dy = ((event.clientY - drag.y) / rect.height) * drag.box.h;
    setMapBox({ ...drag.box, x: drag.box.x - dx, y: drag.box.y - dy });
  });
  const stop = () => { drag = null; };
  box.addEventListener("pointerup", stop);
  box.addEventListener("pointercancel", stop);
  document.getElementById("map-zoom-in").addEventListener("click", () => zoomMap(1 / 1.3));
  document.getElementById("map-zoom-out").addEventListener("click", () => zoomMap(1.3));
  document.getElementById("map-whole").addEventListener("click", () => {
    const { W, H } = view.mapSize || {};
    if (!W) return;
    const panel = mapViewport(1), scale = Math.min(panel.w / W, panel.h / H);
    const { w, h } = mapViewport(scale);
    setMapBox({ x: W / 2 - w / 2, y: H / 2 - h / 2, w, h });
  });
  document.getElementById("map-current").addEventListener("click", () => view.mapCurrent && centreMap(view.mapCurrent));
}

// ------------------------------------------------------------------ figures and learning
function drawFigures(e) {
  const perTurn = (v) => (e.turns ? (v / e.turns).toFixed(2) : "–");
  // Each role's model on a line of its own under it: a phone's width has no room for a column of names.
  const rows = Object.entries(e.usage_by_role).flatMap(([name, u]) => [
    el("tr", { class: "role" }, el("td", { text: name }), el("td", { text: fmt(u.calls) }), el("td", { text: perTurn(u.calls) }),
      el("td", { text: fmt(u.prompt_tokens) }), el("td", { text: fmt(u.completion_tokens) })),
    el("tr", { class: "role-model", "data-role": name }, el("td", { colspan: "5", text: roleModels(e, name) })),
  ]);
  rows.push(el("tr", { class: "total" }, el("td", { text: "All" }), el("td", { text: fmt(e.llm_calls) }),
    el("td", { text: perTurn(e.llm_calls) }), el("td", { text: fmt(e.prompt_tokens) }), el("td", { text: fmt(e.completion_tokens) })));
  const head = el("tr", {}, ...["LLM role and model", "Calls", "Per turn", "Prompt tokens", "Completion tokens"].map((h) => el("th", { text: h })));
  document.getElementById("figures").replaceChildren(
    el("table", { class: "usage-table" }, el("thead", {}, head), el("tbody", {}, ...rows)),
    el("h3", { text: "Tool calls" }), toolTable(e),
    el("h3", { text: "Engine check and critic model" }), criticFigures(e.critic),
    el("p", { class: "muted", text: `Cost: ${costText(e)}${e.unpriced_calls ? ` (${e.unpriced_calls} call(s) without a known price)` : ""}` }));
}

// Who answered a role's calls: "configured X, served Y" where the endpoint named another model.
function roleModels(e, role) {
  const texts = (e.models || []).filter((m) => m.role === role).map((m) =>
    m.served || !m.configured ? modelText(m.configured, m.served) : `${m.configured} (the replies named no model)`);
  return [...new Set(texts)].join("; ") || "–";
}

function toolTable(e) {
  const tools = e.tool_calls;
  if (!tools.calls) return el("p", { class: "muted", text: e.mcp_enabled ? "MCP on, no tool calls yet." : "MCP off for this episode." });
  const row = (server, tool, t, cls = "") => el("tr", { class: cls },
    el("td", { text: server }), el("td", { text: tool }), el("td", { text: fmt(t.calls) }),
    el("td", { class: t.failed ? "error" : "", text: fmt(t.failed) }), el("td", { text: t.duration_ms ? fmt(Math.round(t.duration_ms)) : "–" }));
  const rows = [];
  for (const [server, entry] of Object.entries(tools.by_server)) {
    for (const [tool, t] of Object.entries(entry.tools)) rows.push(row(server, tool, t));
  }
  for (const [tool, t] of Object.entries(tools.unknown_tools.tools)) rows.push(row("(no such tool)", tool, t, "unknown-tool"));
  rows.push(row("All", "", tools, "total"));
  const head = el("tr", {}, ...["Server", "Tool", "Calls", "Failed", "Time (ms)"].map((h) => el("th", { text: h })));
  return el("table", { class: "tool-table" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

function criticFigures(c) {
  const causes = Object.entries(c.rejections_by_cause).map(([cause, n]) => `${fmt(n)} by ${CAUSES[cause] || cause}`);
  return el("p", { class: "critic-figures", text:
    `${fmt(c.proposals)} proposal${c.proposals === 1 ? "" : "s"} judged · ${fmt(c.rejected)} refused` +
    `${causes.length ? ` (${causes.join(", ")})` : ""}${c.overrides ? ` · ${fmt(c.overrides)} played anyway` : ""}` });
}

// An episode as a short label: "11-24 19:04" for a dated id, "this episode" for the one shown.
function episodeTag(id) {
  if (!id) return "episode ?";
  if (id === view.id) return "this episode";
  const dated = id.match(/^\d{4}-(\d\d-\d\d)T(\d\d)-(\d\d)/);
  if (dated) return `${dated[1]} ${dated[2]}:${dated[3]}`;
  return id.length > 14 ? `${id.slice(0, 13)}…` : id;
}

function tag(text, cls = "", title = "") {
  const node = el("span", { class: `tag ${cls}`, text });
  if (title) node.title = title;
  return node;
}

function fillOnce(id, data, build) {
  const node = document.getElementById(id);
  const key = JSON.stringify(data ?? null) + view.id;
  if (node.dataset.key === key) return; // unchanged: keep the reader's scroll position
  node.dataset.key = key;
  node.replaceChildren(...build());
}

function drawLearning(learning) {
  fillOnce("objectives", learning.objectives, () => {
    const objectives = learning.objectives || [];
    if (!objectives.length) return [el("p", { class: "muted", text: "No objectives for this episode yet." })];
    return [el("ul", { class: "items" }, ...objectives.map((o) => el("li", { class: `objective ${o.status}` },
      el("span", { class: `badge status ${o.status}`, text: o.status }), " ",
      el("span", { class: "text", text: o.text }), " ",
      o.priority ? tag(o.priority, `priority ${o.priority}`) : null,
      o.created_turn != null ? tag(`turn ${o.created_turn}`) : null,
      o.completed_turn != null ? tag(`done turn ${o.completed_turn}`) : null)))];
  });
  fillOnce("memories", learning.memories, () => {
    const memories = learning.memories;
    if (!memories) return [el("p", { class: "muted", text: "No memories file yet." })];
    if (!memories.rooms.length) return [el("p", { class: "muted", text: "No memories yet." })];
    const out = [];
    for (const room of memories.rooms) {
      out.push(el("h3", { class: "room-heading" }, room.name, roomId(room.id)));
      out.push(el("ul", { class: "items" }, ...room.memories.map((m) => el("li", { class: `memory ${m.status}` },
        el("span", { class: `badge status ${m.status}`, text: m.status }), " ",
        el("span", { class: "text", text: m.text }), " ",
        tag(m.category, "category"),
        tag(`${episodeTag(m.episode_id)} · turn ${m.turn}`, "when", m.episode_id),
        m.superseded_by != null ? tag(`replaced by #${m.superseded_by}`) : null))));
    }
    if (memories.unreadable_lines) out.push(el("p", { class: "error", text: `${memories.unreadable_lines} line(s) of the file could not be read.` }));
    return out;
  });
  fillOnce("knowledge", learning.knowledge, () => {
    const knowledge = learning.knowledge;
    if (!knowledge) return [el("p", { class: "muted", text: "No knowledge base yet." })];
    if (!knowledge.sections.length) return [el("p", { class: "muted", text: "Nothing learned yet." })];
    return knowledge.sections.flatMap((section) => [
      el("h3", { text: section.heading }),
      el("ul", { class: "points" }, ...section.points.map((point) => el("li", { text: point }))),
    ]);
  });
}

// ------------------------------------------------------------------ room ids
function setRoomIds(show) {
  view.showRoomIds = show;
  document.body.classList.toggle("show-room-ids", show);
  document.getElementById("show-room-ids").checked = show;
  const url = new URL(location.href);
  if (show) url.searchParams.set("room_ids", "shown");
  else url.searchParams.delete("room_ids");
  history.replaceState(null, "", url);
  if (view.map) drawMap(view.map);
}

// ------------------------------------------------------------------ start
setRoomIds(view.showRoomIds);
document.getElementById("show-room-ids").addEventListener("change", (event) => setRoomIds(event.target.checked));
document.getElementById("episode-select").addEventListener("change", (event) => pin(event.target.value));
document.getElementById("filters").addEventListener("change", applyFilters);
setUpMapControls();
window.addEventListener("hashchange", () => {
  const id = decodeURIComponent(location.hash.slice(1));
  if (id && id !== view.id) pin(id);
});
// Remember what the user opened or closed, so re-drawing a turn keeps it that way.
document.getElementById("transcript").addEventListener("click", (event) => {
  const summary = event.target.closest("summary");
  const article = summary && summary.closest("article.turn");
  if (!article) return;
  const section = summary.parentElement;
  view.userOpen.set(`${article.dataset.turn}:${section.dataset.key}`, !section.open);
});
poll();
