// The process-hub dashboard. Served as its own asset because the page's Content-Security-Policy
// allows no inline script. It reads the node's admin API with same-origin requests (paths are
// relative, so the page also works when the admin router is nested under a prefix), renders
// with textContent only (no HTML is ever built from data), and stays live by the event stream:
// EventSource without a token, a streamed fetch with `Authorization: Bearer` with one (an
// EventSource cannot send headers), polling `/v1/events/recent` while neither is connected.
"use strict";

(function () {
  const REFRESH_MS = 2000;
  const EVENTS_SHOWN = 50;
  const EVENTS_KEPT = 200;
  const PALETTE = ["#2f6fdf", "#1f8a4c", "#d9822b", "#8e44ad", "#c0392b", "#16a085", "#b7950b", "#5d6d7e"];

  const state = {
    token: null,
    live: false,
    liveMode: "connecting",
    events: new Map(), // seq -> event
    rounds: 0,
    lastRound: null,
    recoveryNormal: false,
    cursor: null, // `after` of the children page shown
    nextCursor: null,
    stream: null, // { close() }
    refreshTimer: null,
    pending: null,
    started: false,
    updatedAt: null, // time of the last successful refresh
    clusterBusy: false,
    clusterAt: 0, // when the cluster view was last asked for
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function headers() {
    const h = { Accept: "application/json" };
    if (state.token) h.Authorization = "Bearer " + state.token;
    return h;
  }

  /** GET `path` (relative to the page): { status, body } with body parsed when JSON. */
  async function api(path) {
    const response = await fetch(path, { headers: headers(), cache: "no-store" });
    const type = response.headers.get("content-type") || "";
    const body = type.startsWith("application/json") ? await response.json() : await response.text();
    if (response.status === 401) needToken(body && body.message);
    return { status: response.status, body: body, headers: response.headers };
  }

  // ---- token --------------------------------------------------------------------------------

  function needToken(message) {
    stopStream();
    state.live = false;
    const shown = !$("token-form").hidden;
    $("token-form").hidden = false;
    $("token-error").textContent = state.token ? (message || "invalid admin token") : "";
    setPill($("health-status"), "token needed", "warn");
    if (!shown) $("token-input").focus();
  }

  $("token-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    state.token = $("token-input").value.trim() || null;
    const probe = await api("v1/health").catch(() => null);
    if (probe && probe.status !== 401) {
      $("token-form").hidden = true;
      $("token-input").value = "";
      start();
    }
  });

  // ---- rendering ----------------------------------------------------------------------------

  function setPill(node, text, kind) {
    node.textContent = text;
    node.className = "pill " + (kind || "muted");
  }

  function time(ms) {
    const d = new Date(ms);
    return d.toLocaleTimeString([], { hour12: false });
  }

  function bars(list, entries) {
    clear(list);
    const max = entries.reduce((m, [, n]) => Math.max(m, n), 0) || 1;
    for (const [name, n] of entries) {
      const li = el("li");
      li.dataset.name = name;
      li.appendChild(el("span", "name", name)).title = name;
      const bar = li.appendChild(el("span", "bar"));
      bar.appendChild(el("span")).style.width = Math.round((100 * n) / max) + "%";
      li.appendChild(el("span", "mono", n)).dataset.testid = "count";
      list.appendChild(li);
    }
    if (entries.length === 0) list.appendChild(el("li", "hint", "none"));
  }

  function renderHealth(h) {
    $("hub-name").textContent = h.hub;
    $("node-name").textContent = h.node;
    const kind = h.status === "ok" ? "ok" : h.status === "degraded" ? "warn" : "bad";
    setPill($("health-status"), h.status, kind);
    $("recovery-state").textContent = h.recovery_state + (h.parked ? " (parked)" : "");
    $("problems").textContent = h.problems && h.problems.length ? h.problems.join("; ") : "none";
  }

  function renderMembers(m) {
    $("member-count").textContent = m.members.length;
    $("leader").textContent = m.leader || "none";
    const body = $("members-body");
    clear(body);
    for (const member of m.members) {
      const tr = el("tr");
      tr.dataset.node = member.node;
      tr.dataset.testid = "member-row";
      const name = tr.appendChild(el("td", null, member.node + (member.local ? " (this node)" : "")));
      if (member.node === m.leader) name.appendChild(el("span", "hint", " · leader"));
      tr.appendChild(el("td", "state-" + member.state, member.state)).dataset.testid = "member-state";
      tr.appendChild(el("td", "num", member.children));
      body.appendChild(tr);
    }
    renderRing(m.members.filter((x) => x.state !== "down"));
  }

  function renderRing(members) {
    const total = members.reduce((sum, x) => sum + x.children, 0);
    const legend = $("ring-legend");
    clear(legend);
    const stops = [];
    let at = 0;
    members.forEach((member, i) => {
      const color = PALETTE[i % PALETTE.length];
      const share = total ? member.children / total : 1 / members.length;
      stops.push(color + " " + (at * 360).toFixed(1) + "deg " + ((at + share) * 360).toFixed(1) + "deg");
      at += share;
      const li = el("li");
      li.dataset.node = member.node;
      li.appendChild(el("span", "swatch")).style.background = color;
      li.appendChild(el("span", "mono", member.node));
      li.appendChild(el("span", "hint", Math.round(share * 100) + "% · " + member.children));
      legend.appendChild(li);
    });
    // CSSOM writes are allowed under the page's CSP (style attributes in markup are not).
    $("ring").style.background = stops.length ? "conic-gradient(" + stops.join(", ") + ")" : "";
  }

  function renderSummary(s) {
    $("child-count").textContent = s.rows;
    $("child-placed").textContent = s.placed;
    $("child-unbound").textContent = s.unbound;
    bars($("per-node"), Object.entries(s.per_node || {}));
    bars($("per-kind"), Object.entries(s.per_kind || {}));
  }

  function renderDeclared(result) {
    if (result.status === 404) {
      $("declared-state").textContent = "off";
      for (const id of ["declared-version", "declared-count", "declared-parked"]) $(id).textContent = "–";
      return;
    }
    if (result.status !== 200) return;
    const d = result.body;
    $("declared-state").textContent = "on";
    $("declared-version").textContent = d.version;
    $("declared-count").textContent = d.children.length;
    $("declared-parked").textContent = d.parked ? "yes: an operator must restore or clear it" : "no";
  }

  function renderChildren(result) {
    const body = $("children-body");
    clear(body);
    if (result.status !== 200) return;
    for (const child of result.body) {
      const tr = el("tr");
      tr.dataset.id = child.id;
      tr.appendChild(el("td", null, child.id));
      tr.appendChild(el("td", null, child.kind));
      tr.appendChild(el("td", null, child.nodes.map((n) => n.node).join(", ") || "unbound"));
      const durable = child.durable === true ? "yes" : child.durable === false ? "no" : "–";
      tr.appendChild(el("td", "durable-" + durable, durable)).dataset.testid = "child-durable";
      const tag = (child.metadata && child.metadata.tag) || "";
      tr.appendChild(el("td", "tag", tag || "–")).dataset.testid = "child-tag";
      body.appendChild(tr);
    }
    const next = result.headers.get("x-next-after");
    state.nextCursor = next ? decodeURIComponent(next) : null;
    $("children-next").disabled = !state.nextCursor;
  }

  function describe(event) {
    const f = event.event || {};
    if (event.kind === "reconcile_round_completed" && f.stats) {
      const s = f.stats;
      return (f.parked ? "parked; " : "") + "started " + s.started + ", duplicates " + s.duplicates +
        ", stopped " + s.stopped_undeclared + ", removed " + s.removed_stale + " in " + s.elapsed_ms + " ms";
    }
    return Object.entries(f)
      .map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v))
      .join(" ");
  }

  function renderEvents() {
    const list = $("events");
    clear(list);
    const seqs = Array.from(state.events.keys()).sort((a, b) => b - a).slice(0, EVENTS_SHOWN);
    for (const seq of seqs) {
      const e = state.events.get(seq);
      const li = el("li");
      li.dataset.kind = e.kind;
      li.dataset.testid = "event";
      li.appendChild(el("span", "time", time(e.at_ms)));
      li.appendChild(el("span", "kind", e.kind));
      li.appendChild(el("span", "fields", describe(e)));
      list.appendChild(li);
    }
    if (seqs.length === 0) list.appendChild(el("li", "hint", "no events yet"));
    $("rounds").textContent = state.rounds;
    $("last-round").textContent = state.lastRound ? time(state.lastRound.at_ms) + ": " + describe(state.lastRound) : "–";
  }

  // ---- events -------------------------------------------------------------------------------

  /** Adds events (from the stream or a poll); the round counters count each seq once. */
  function addEvents(list) {
    let fresh = false;
    for (const e of list) {
      if (!e || typeof e.seq !== "number" || state.events.has(e.seq)) continue;
      state.events.set(e.seq, e);
      fresh = true;
      if (e.kind === "reconcile_round_completed") {
        state.rounds += 1;
        if (!state.lastRound || e.seq > state.lastRound.seq) state.lastRound = e;
      }
    }
    if (!fresh) return;
    const seqs = Array.from(state.events.keys()).sort((a, b) => a - b);
    for (const seq of seqs.slice(0, Math.max(0, seqs.length - EVENTS_KEPT))) state.events.delete(seq);
    renderEvents();
    scheduleRefresh();
  }

  function setLive(live, mode) {
    state.live = live;
    setPill($("live-mode"), mode, live ? "ok" : "muted");
  }

  function stopStream() {
    if (state.stream) state.stream.close();
    state.stream = null;
  }

  function openStream() {
    stopStream();
    if (state.token) {
      openFetchStream();
      return;
    }
    if (typeof EventSource !== "function") {
      setLive(false, "polling");
      return;
    }
    const source = new EventSource("v1/events");
    source.onopen = () => setLive(true, "live (SSE)");
    source.onerror = () => setLive(false, "polling");
    source.onmessage = (m) => handleData(m.data);
    // Named events (`event: <kind>`) do not reach onmessage: listen for every kind seen.
    const listen = (kind) => source.addEventListener(kind, (m) => handleData(m.data));
    for (const kind of KINDS) listen(kind);
    state.stream = { close: () => source.close() };
  }

  function handleData(data) {
    try {
      const parsed = JSON.parse(data);
      if (typeof parsed.seq === "number") addEvents([parsed]);
      else pollEvents(); // `lagged`: the stream lost events; the ring has them
    } catch (_) {
      pollEvents();
    }
  }

  /** `fetch` streaming of the SSE body, because an EventSource cannot send the token. */
  function openFetchStream() {
    const abort = new AbortController();
    state.stream = { close: () => abort.abort() };
    (async () => {
      try {
        const response = await fetch("v1/events", { headers: headers(), signal: abort.signal, cache: "no-store" });
        if (response.status === 401) return needToken();
        if (!response.ok || !response.body) throw new Error("stream answered " + response.status);
        setLive(true, "live (stream)");
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart());
            if (data.length) handleData(data.join("\n"));
          }
        }
      } catch (_) {
        // Aborted, or the node went away: polling takes over until the retry.
      }
      if (state.stream && !abort.signal.aborted) {
        setLive(false, "polling");
        setTimeout(() => state.token && !abort.signal.aborted && openFetchStream(), 10 * REFRESH_MS);
      }
    })();
  }

  async function pollEvents() {
    const r = await api("v1/events/recent?limit=100").catch(() => null);
    if (r && r.status === 200 && Array.isArray(r.body)) addEvents(r.body);
  }

  // ---- cluster ------------------------------------------------------------------------------

  const SVG = "http://www.w3.org/2000/svg";
  const RATES = [
    ["starts", "Starts"],
    ["stops", "Stops"],
    ["restarts", "Restarts"],
    ["failovers", "Failovers"],
  ];

  function healthKind(health) {
    if (health === "ok") return "ok";
    if (health === "degraded" || health === "recovering") return "warn";
    return "bad";
  }

  /** A sparkline of `values` (counts per bucket, oldest first) as inline SVG: no library. */
  function sparkline(values, label) {
    const width = 120;
    const height = 26;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(height));
    svg.setAttribute("class", "spark");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", label);
    const max = values.reduce((m, v) => Math.max(m, v), 0);
    const step = values.length > 1 ? width / (values.length - 1) : width;
    const y = (v) => (height - 2 - (max ? (v / max) * (height - 4) : 0)).toFixed(1);
    const points = values.map((v, i) => (i * step).toFixed(1) + "," + y(v));
    const area = document.createElementNS(SVG, "polygon");
    area.setAttribute("points", "0," + height + " " + points.join(" ") + " " + width + "," + height);
    area.setAttribute("class", "spark-area");
    svg.appendChild(area);
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", points.join(" "));
    line.setAttribute("class", "spark-line");
    svg.appendChild(line);
    return svg;
  }

  function clusterCard(member, bucketMs) {
    const card = el("article", "member-card");
    card.dataset.testid = "cluster-member";
    card.dataset.node = member.node;
    card.dataset.health = member.health;
    const head = card.appendChild(el("header", "member-head"));
    const name = head.appendChild(el("span", "member-name", member.node));
    name.title = member.node;
    name.dataset.testid = "cluster-node";
    const pill = head.appendChild(el("span", null));
    setPill(pill, member.health, healthKind(member.health));
    pill.dataset.testid = "cluster-health";
    const sub = card.appendChild(el("p", "hint"));
    sub.textContent = member.membership + (member.local ? " · this node" : "");
    const s = member.summary;
    if (!s) {
      const why = member.health === "down"
        ? "down" + (member.down_since_ms ? " since " + time(member.down_since_ms) : "")
        : member.error || "no answer";
      card.appendChild(el("p", "member-missing", why)).dataset.testid = "cluster-missing";
      return card;
    }
    const dl = card.appendChild(el("dl", "facts"));
    fact(dl, "Children", s.children, "cluster-children");
    fact(dl, "Registry rows", s.registry_rows + (s.unbound_rows ? " (" + s.unbound_rows + " unbound)" : ""));
    fact(dl, "Declared", s.declared === null || s.declared === undefined ? "off" : s.declared);
    fact(dl, "Recovery", s.recovery_state + (s.parked ? " (parked)" : ""));
    fact(dl, "Members seen", s.members);
    if (s.pending_work) fact(dl, "Pending work", s.pending_work);
    if (s.refused_peer_input) fact(dl, "Refused input", s.refused_peer_input);
    const minutes = Math.round(((bucketMs || 10000) * (s.history.starts || []).length) / 60000);
    const rates = card.appendChild(el("ul", "rates"));
    for (const [key, title] of RATES) {
      const values = (s.history && s.history[key]) || [];
      const recent = values.reduce((sum, v) => sum + v, 0);
      const li = rates.appendChild(el("li"));
      li.dataset.rate = key;
      li.appendChild(el("span", "rate-name", title));
      li.appendChild(sparkline(values, title + ": " + recent + " in the last " + minutes + " min"));
      const n = li.appendChild(el("span", "mono rate-count", recent + " / " + (s.totals ? s.totals[key] : 0)));
      n.title = recent + " in the last " + minutes + " min, " + (s.totals ? s.totals[key] : 0) + " since the node started";
    }
    return card;
  }

  function renderCluster(r) {
    const box = $("cluster");
    if (r.status === 404) {
      clear(box);
      box.appendChild(el("p", "hint", "This node does not gather the cluster's figures."));
      return;
    }
    if (r.status !== 200) return;
    const c = r.body;
    $("cluster-count").textContent = c.members.length;
    $("cluster-down").textContent = c.members.filter((m) => m.health === "down").length;
    clear(box);
    for (const member of c.members) box.appendChild(clusterCard(member, c.bucket_ms));
  }

  /** The cluster view asks every member over the wire (a slow member answers late): it
   * refreshes on its own, never holding up the rest of the page. */
  async function refreshCluster() {
    // Each refresh asks every member: at most one in flight, and not more often than the
    // periodic refresh however many events arrive.
    if (state.clusterBusy || Date.now() - state.clusterAt < REFRESH_MS - 250) return;
    state.clusterBusy = true;
    state.clusterAt = Date.now();
    try {
      renderCluster(await api("v1/cluster"));
    } catch (_) {
      // The node did not answer: the footer says the page is stale.
    } finally {
      state.clusterBusy = false;
    }
  }

  // ---- refresh ------------------------------------------------------------------------------

  async function loadChildren() {
    const after = state.cursor ? "&after=" + encodeURIComponent(state.cursor) : "";
    const r = await api("v1/children?limit=25" + after);
    renderChildren(r);
  }

  /** The footer: when the page last got its data, or since when it has not. */
  function setUpdated(ok) {
    const footer = $("updated");
    if (ok) {
      state.updatedAt = Date.now();
      footer.textContent = time(state.updatedAt);
      footer.className = "";
    } else {
      footer.textContent = state.updatedAt
        ? "stale since " + time(state.updatedAt) + " (the node does not answer)"
        : "never (the node does not answer)";
      footer.className = "stale";
    }
  }

  async function refresh() {
    if (!$("token-form").hidden) return;
    refreshCluster();
    try {
      const [health, members, summary, declared] = await Promise.all([
        api("v1/health"), api("v1/members"), api("v1/registry/summary"), api("v1/declared"),
      ]);
      if (health.status === 401) return;
      if (health.status === 200) renderHealth(health.body);
      else setPill($("health-status"), (health.body && health.body.error) || "error " + health.status, "bad");
      if (members.status === 200) renderMembers(members.body);
      if (summary.status === 200) renderSummary(summary.body);
      renderDeclared(declared);
      setUpdated(true);
    } catch (e) {
      setPill($("health-status"), "unreachable", "bad");
      setUpdated(false);
      return;
    }
    // The children page and the events are the slower half: the footer does not wait on them.
    try {
      await loadChildren();
      if (!state.live) await pollEvents();
    } catch (_) {
      setUpdated(false);
    }
  }

  /** One refresh soon after a burst of events, rather than one per event. */
  function scheduleRefresh() {
    if (state.pending) return;
    state.pending = setTimeout(() => {
      state.pending = null;
      refresh();
    }, 250);
  }

  // ---- search -------------------------------------------------------------------------------

  function fact(dl, term, value, testid) {
    dl.appendChild(el("dt", null, term));
    const dd = dl.appendChild(el("dd", null, value));
    if (testid) dd.dataset.testid = testid;
  }

  async function explain(id) {
    const out = $("search-result");
    clear(out);
    if (!id) return;
    const r = await api("v1/children/" + encodeURIComponent(id) + "/explain").catch(() => null);
    const box = out.appendChild(el("div", "search-out"));
    if (!r) {
      box.appendChild(el("p", "error", "the node did not answer"));
      return;
    }
    if (r.status !== 200) {
      const p = box.appendChild(el("p", "error", (r.body && r.body.message) || "error " + r.status));
      p.dataset.testid = "search-error";
      return;
    }
    const x = r.body;
    const why = box.appendChild(el("p", "why"));
    why.appendChild(el("strong", null, x.id));
    why.appendChild(document.createTextNode(" — " + x.detail));
    const dl = box.appendChild(el("dl", "facts"));
    const where = x.nodes.map((n) => n.node + (n.role ? " (" + n.role + ")" : "")).join(", ");
    fact(dl, "Runs on", where || "nowhere", "search-nodes");
    fact(dl, "Why", x.why, "search-why");
    fact(dl, "Kind", x.kind || "–", "search-kind");
    fact(dl, "Ring owners", x.owners.join(", ") || "–", "search-owners");
    fact(dl, "Belongs on", x.belongs_on.join(", ") || "–");
    fact(dl, "Placement", x.placement);
    fact(dl, "Declared", x.declared ? "yes" : "no");
    fact(dl, "Durable", x.durable ? "yes" : "no");
    if (x.recent_events.length) {
      box.appendChild(el("h3", null, "Its recent events here"));
      const ol = box.appendChild(el("ol", "events"));
      for (const e of x.recent_events.slice().reverse()) {
        const li = ol.appendChild(el("li"));
        li.appendChild(el("span", "time", time(e.at_ms)));
        li.appendChild(el("span", "kind", e.kind));
        li.appendChild(el("span", "fields", describe(e)));
      }
    }
  }

  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    explain($("search-input").value.trim());
  });

  $("children-first").addEventListener("click", () => {
    state.cursor = null;
    loadChildren();
  });
  $("children-next").addEventListener("click", () => {
    if (!state.nextCursor) return;
    state.cursor = state.nextCursor;
    loadChildren();
  });

  // Every event kind the hub publishes (docs/operations.md, "Events"), plus `lagged`.
  const KINDS = [
    "child_started", "child_start_failed", "child_exited", "child_restarted", "child_stopped",
    "registry_inserted", "registry_removed", "restart_intensity_exceeded", "hub_actor_restarted",
    "hub_stopping", "node_up", "node_down", "node_left", "partition_mode_entered",
    "partition_mode_left", "cluster_settled", "child_moved", "child_replaced",
    "reconcile_round_completed", "recovery_normal", "declared_parked", "declared_unparked",
    "declared_version_changed", "child_handover", "lagged",
  ];

  // ---- start --------------------------------------------------------------------------------

  async function start() {
    setLive(false, "polling");
    await pollEvents();
    await refresh();
    openStream();
    if (!state.started) {
      state.started = true;
      state.refreshTimer = setInterval(refresh, REFRESH_MS);
    }
  }

  async function boot() {
    renderEvents();
    const probe = await api("v1/health").catch(() => null);
    if (!probe) {
      setPill($("health-status"), "unreachable", "bad");
      setUpdated(false);
      setTimeout(boot, REFRESH_MS);
      return;
    }
    if (probe.status === 401) return; // needToken has shown the form
    start();
  }

  boot();
})();
