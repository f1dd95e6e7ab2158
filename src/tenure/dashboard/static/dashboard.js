/* tenure dashboard. Vanilla JS, no dependencies, no network beyond this app.
 *
 * Safety rule: data from the store (payloads, errors, names, ids) only ever reaches the page
 * through textContent / createTextNode / setAttribute on app-built URLs. Never innerHTML.
 * Every page polls its JSON endpoint every data-poll ms (default 2000) while visible.
 */
(function () {
  "use strict";

  var root = document.documentElement;
  var BASE = root.dataset.root || "";
  var PAGE = root.dataset.page || "overview";
  var ARG = root.dataset.arg || "";
  var POLL = parseInt(root.dataset.poll || "2000", 10);
  var CAN_ACT = root.dataset.actions === "1";
  var CSRF = (document.querySelector('meta[name="tenure-csrf"]') || {}).content || "";
  var STATES = ["pending", "leased", "done", "failed", "dead", "cancelled"];
  var app = document.getElementById("app");
  var live = document.getElementById("live");
  var flashBox = document.getElementById("flash");
  var timer = null;

  // -- DOM helpers (text only) ------------------------------------------------------------------
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === "text") node.textContent = String(v);
        else if (k === "onclick") node.addEventListener("click", v);
        else if (k === "onchange") node.addEventListener("change", v);
        else if (k === "onsubmit") node.addEventListener("submit", v);
        else node.setAttribute(k, v === true ? "" : String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }
  function add(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(node, c); }); return; }
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function fill(node, children) { clear(node); children.forEach(function (c) { add(node, c); }); }
  // A click is a press and a release on one element. A poll that rebuilt a table between the two
  // would drop the click (the release lands on a new button, the press on a detached one), so
  // while a pointer is pressed a rebuild waits, the newest per container, and is applied just
  // after the release (after its click). A press held longer than HOLD_MS no longer holds
  // anything back (a release outside the window may never be seen).
  var HOLD_MS = 2000, pressedAt = null, held = [];
  function pressed() { return pressedAt !== null && Date.now() - pressedAt < HOLD_MS; }
  function flushHeld() {
    var todo = held;
    held = [];
    document.body.removeAttribute("data-held-renders");
    todo.forEach(function (h) { fill(h.node, h.children); });
  }
  function released() {
    if (pressedAt === null) return;
    pressedAt = null;
    setTimeout(flushHeld, 0);
  }
  document.addEventListener("pointerdown", function () { pressedAt = Date.now(); }, true);
  document.addEventListener("pointerup", released, true);
  document.addEventListener("pointercancel", released, true);
  window.addEventListener("blur", released);
  function replace(node) {
    var children = Array.prototype.slice.call(arguments, 1);
    if (!pressed()) {
      if (held.length) flushHeld();
      fill(node, children);
      return;
    }
    held = held.filter(function (h) { return h.node !== node; });
    held.push({ node: node, children: children });
    document.body.setAttribute("data-held-renders", String(held.length));
  }
  function url(path, params) {
    var u = BASE + path;
    if (params) {
      var q = Object.keys(params).filter(function (k) { return params[k] !== null && params[k] !== undefined && params[k] !== ""; })
        .map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(params[k]); });
      if (q.length) u += "?" + q.join("&");
    }
    return u;
  }
  function jobHref(id) { return BASE + "/jobs/" + encodeURIComponent(id); }
  function badge(state) { return el("span", { "class": "badge " + state, text: state }); }
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function fmtTime(ms) {
    if (ms === null || ms === undefined) return "";
    var d = new Date(ms);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + "Z";
  }
  function ago(ms, now) {
    if (ms === null || ms === undefined) return "";
    var s = Math.round((now - ms) / 1000), fut = s < 0;
    s = Math.abs(s);
    var t = s < 120 ? s + "s" : s < 7200 ? Math.round(s / 60) + "m" : s < 172800 ? Math.round(s / 3600) + "h" : Math.round(s / 86400) + "d";
    return fut ? "in " + t : t + " ago";
  }
  function pretty(v) { return v === null || v === undefined ? "null" : JSON.stringify(v, null, 2); }
  // A message stays 6 s: a new one restarts the count (the timer of the one it replaced would
  // otherwise clear it early, after as little as no time at all).
  var flashTimer = null;
  function flash(message, bad) {
    replace(flashBox, el("div", { "class": "msg" + (bad ? " bad" : ""), text: message }));
    if (flashTimer !== null) clearTimeout(flashTimer);
    flashTimer = setTimeout(function () { flashTimer = null; clear(flashBox); }, 6000);
  }
  function setLive(ok, text) {
    live.className = "live " + (ok ? "ok" : "err");
    live.textContent = text;
  }

  // -- HTTP -------------------------------------------------------------------------------------
  function getJSON(path, params) {
    return fetch(url(path, params), { headers: { "Accept": "application/json" }, credentials: "same-origin" })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (body) {
          if (!r.ok) { var e = new Error(body.message || ("HTTP " + r.status)); e.status = r.status; throw e; }
          return body;
        });
      });
  }
  function post(path, params) {
    return fetch(url(path, params), { method: "POST", credentials: "same-origin",
      headers: { "X-Tenure-CSRF": CSRF, "Accept": "application/json" } })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (body) {
          if (!r.ok) throw new Error(body.message || ("HTTP " + r.status));
          return body;
        });
      });
  }
  function action(path, button, after) {
    if (button) button.disabled = true;
    return post(path).then(function (body) {
      flash(body.message || "done", false);
      return refresh().then(after || function () {});
    }, function (err) {
      flash(err.message, true);
    }).then(function () { if (button) button.disabled = false; });
  }

  // -- polling ------------------------------------------------------------------------------------
  var render = null;  // () -> Promise
  function refresh() {
    if (!render) return Promise.resolve();
    return render().then(function () {
      setLive(true, "live · " + new Date().toLocaleTimeString());
    }, function (err) {
      if (err.status === 404 && (PAGE === "job" || PAGE === "run")) { notFound(err.message); return; }
      setLive(false, err.status === 401 ? "unauthorized" : "offline: " + err.message);
    });
  }
  // An unknown job or run id is an answer, not an outage: say so, and stop asking.
  function notFound(message) {
    render = null;
    replace(app, el("h1", { text: "Not found" }),
      el("div", { "class": "panel", id: "not-found" },
        el("p", { text: message }),
        el("p", {}, el("a", { href: BASE + "/jobs", text: "« All jobs" }))));
    setLive(true, "live · not found");
  }
  function loop() {
    clearTimeout(timer);
    var go = document.hidden ? Promise.resolve() : refresh();
    go.then(function () { timer = setTimeout(loop, POLL); });
  }
  document.addEventListener("visibilitychange", function () { if (!document.hidden) loop(); });

  // -- overview -----------------------------------------------------------------------------------
  function niceMax(v) {
    if (v <= 4) return Math.max(1, Math.ceil(v));
    var p = Math.pow(10, Math.floor(Math.log(v) / Math.LN10)), m = v / p;
    return (m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function chart(tp, width) {
    var NS = "http://www.w3.org/2000/svg";
    var W = Math.max(480, Math.round(width || 720)), H = 180, padL = 40, padB = 18, n = tp.buckets.length;
    var max = 0;
    tp.buckets.forEach(function (b) { max = Math.max(max, b.done + b.failed + b.dead); });
    max = niceMax(max);
    var svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("width", String(W));
    svg.setAttribute("height", String(H));
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "settlements per minute, last hour");
    function s(tag, attrs, text) {
      var node = document.createElementNS(NS, tag);
      Object.keys(attrs).forEach(function (k) { node.setAttribute(k, String(attrs[k])); });
      if (text !== undefined) node.textContent = text;
      svg.appendChild(node);
      return node;
    }
    var plotW = W - padL - 4, plotH = H - padB - 6, bw = plotW / n;
    (max >= 2 ? [0, 0.5, 1] : [0, 1]).forEach(function (f) {
      var y = 6 + plotH * (1 - f);
      s("line", { x1: padL, x2: W - 4, y1: y, y2: y, stroke: "#e2e5eb" });
      s("text", { x: padL - 6, y: y + 4, "text-anchor": "end", "font-size": 10, fill: "#6b7385" }, String(max * f));
    });
    tp.buckets.forEach(function (b, i) {
      var x = padL + i * bw + 1, bad = b.failed + b.dead;
      var hOk = plotH * b.done / max, hBad = plotH * bad / max;
      var g = document.createElementNS(NS, "g");
      var title = document.createElementNS(NS, "title");
      title.textContent = fmtTime(b.t) + ": " + b.done + " done, " + b.failed + " failed, " + b.dead + " dead";
      g.appendChild(title);
      var r1 = document.createElementNS(NS, "rect");
      [["x", x], ["y", 6 + plotH - hOk], ["width", Math.max(bw - 2, 1)], ["height", hOk], ["fill", "#1f9d55"]]
        .forEach(function (a) { r1.setAttribute(a[0], String(a[1])); });
      var r2 = document.createElementNS(NS, "rect");
      [["x", x], ["y", 6 + plotH - hOk - hBad], ["width", Math.max(bw - 2, 1)], ["height", hBad], ["fill", "#d33c3c"]]
        .forEach(function (a) { r2.setAttribute(a[0], String(a[1])); });
      g.appendChild(r1); g.appendChild(r2);
      svg.appendChild(g);
    });
    s("text", { x: padL, y: H - 4, "font-size": 10, fill: "#6b7385" }, "-60 min");
    s("text", { x: padL + plotW / 2, y: H - 4, "font-size": 10, fill: "#6b7385", "text-anchor": "middle" }, "-30 min");
    s("text", { x: W - 4, y: H - 4, "font-size": 10, fill: "#6b7385", "text-anchor": "end" }, "now");
    return svg;
  }

  function queueActions(q, isDLQ) {
    if (!CAN_ACT) return "";
    var buttons = [];
    if (q.paused) buttons.push(el("button", { "data-action": "resume", text: "Resume",
      onclick: function (e) { action("/api/queues/" + encodeURIComponent(q.name) + "/resume", e.target); } }));
    else buttons.push(el("button", { "data-action": "pause", text: "Pause",
      onclick: function (e) { action("/api/queues/" + encodeURIComponent(q.name) + "/pause", e.target); } }));
    if (isDLQ) {
      buttons.push(el("button", { "data-action": "redrive", title: "move dead-lettered jobs in this queue back to their origin queue",
        text: "Redrive", onclick: function (e) { action("/api/queues/" + encodeURIComponent(q.name) + "/redrive", e.target); } }));
    }
    return el("span", { "class": "row-actions" }, buttons);
  }

  // Queued jobs no live worker will run (tenure.kinds): a warning panel when some live worker
  // claims from the queue but none handles the kind; a quiet line per queue no live worker serves.
  function kindsPanel(d) {
    var out = [];
    var unhandled = d.unhandled_kinds || [], unserved = d.unserved_queues || [];
    if (unhandled.length) {
      out.push(el("div", { "class": "panel warn", id: "unhandled-kinds" },
        el("strong", { text: d.unhandled_jobs + " queued job(s) of a kind no live worker handles" }),
        el("p", { "class": "muted", text: "They wait until a worker with a handler for the kind runs: a task " +
          "defined in a script run directly is enqueued as __main__.<name>, and a module the worker never " +
          "imported registers nothing." }),
        el("table", {},
          el("thead", {}, el("tr", {}, ["queue", "kind", "queued", "oldest", "did you mean"].map(function (h) {
            return el("th", { text: h }); }))),
          el("tbody", {}, unhandled.map(function (u) {
            return el("tr", { "data-queue": u.queue, "data-kind": u.kind },
              el("td", { text: u.queue }),
              el("td", { "class": "mono", text: u.kind }),
              el("td", { "class": "num" }, el("a", { href: url("/jobs", { queue: u.queue, kind: u.kind }), text: u.count })),
              el("td", { text: ago(u.oldest_created_at, d.now) }),
              el("td", { "class": "mono", text: u.near.join(", ") }));
          })))));
    }
    if (unserved.length) {
      out.push(el("p", { "class": "muted", id: "unserved-queues" }, "No live worker claims from " +
        unserved.map(function (u) { return u.queue + " (" + u.count + " queued)"; }).join(", ") + "."));
    }
    return out;
  }

  function overviewPage() {
    var cards = el("div", { "class": "cards", id: "cards" });
    var chartBox = el("div", { "class": "panel chart", id: "chart" });
    var rate = el("p", { "class": "muted", id: "rate" });
    var queues = el("div", { id: "queues" });
    var kinds = el("div", { id: "unhandled" });
    replace(app, el("h1", { text: "Overview" }), kinds, cards,
      el("h2", { text: "Settlements per minute, last hour" }), chartBox, rate,
      el("h2", { text: "Queues" }), queues);
    render = function () {
      return getJSON("/api/overview").then(function (d) {
        CAN_ACT = d.actions;
        replace(cards, STATES.map(function (st) {
          return el("a", { "class": "card", href: url("/jobs", { state: st }), "data-state": st },
            el("div", { "class": "n", text: d.counts[st] || 0 }), el("div", { "class": "l", text: st }));
        }));
        replace(chartBox, chart(d.throughput, chartBox.clientWidth - 34), el("div", { "class": "legend" },
          el("span", {}, el("span", { "class": "sw done" }), "done"),
          el("span", {}, el("span", { "class": "sw failed" }), "failed + dead")));
        var t = d.throughput.totals, settled = t.done + t.failed + t.dead;
        rate.textContent = "Last hour: " + t.done + " done, " + t.failed + " failed (retrying), " + t.dead + " dead, " +
          t.cancelled + " cancelled — failure rate " + (settled ? (100 * (t.failed + t.dead) / settled).toFixed(1) : "0.0") +
          "%. Workers alive: " + d.workers_alive + " of " + d.workers_total + "." +
          (d.age_ms > 3000 ? " Counts as of " + Math.round(d.age_ms / 1000) + " s ago (a pass over the jobs table took " +
            d.computed_ms + " ms; refreshed in the background)." : "");
        replace(kinds, kindsPanel(d));
        var dlqs = {};
        d.queues.forEach(function (q) { if (q.dead_letter) dlqs[q.dead_letter] = true; });
        var rows = d.queues.map(function (q) {
          return el("tr", { "data-queue": q.name },
            el("td", {}, el("a", { href: url("/jobs", { queue: q.name }), text: q.name }), " ",
              q.paused ? badge("paused") : ""),
            STATES.map(function (st) {
              var n = q.counts[st] || 0;
              return el("td", { "class": "num" }, n ? el("a", { href: url("/jobs", { queue: q.name, state: st }), text: n }) : "0");
            }),
            el("td", { "class": "limits", text: limitsText(q) }),
            el("td", { text: q.dead_letter || "" }),
            el("td", {}, queueActions(q, !!dlqs[q.name])));
        });
        replace(queues, rows.length ? el("table", { id: "queue-table" },
          el("thead", {}, el("tr", {}, el("th", { text: "queue" }), STATES.map(function (st) { return el("th", { text: st }); }),
            el("th", { text: "limits" }), el("th", { text: "dead letter" }), el("th", { text: "" }))),
          el("tbody", {}, rows)) : el("p", { "class": "muted", text: "No queues yet: enqueue a job." }));
      });
    };
  }

  // A queue's limits and, for a rate limit, its current window (docs/queues.md, "Rate limits").
  function limitsText(q) {
    var parts = [];
    if (q.concurrency_limit !== null) parts.push(q.concurrency_limit + " at once");
    if (q.group_limit !== null) parts.push(q.group_limit + " at once per group");
    (q.windows || []).forEach(function (w) {
      if (w.limit === null) return;
      var opens = w.blocked_until ? ", opens " + new Date(w.blocked_until).toISOString().slice(11, 23) : "";
      parts.push((w.group_key === null ? "window" : "group " + w.group_key) + ": " + w.in_window + " of " + w.limit + opens);
    });
    if (q.group_rate_limit) parts.unshift("rate " + q.group_rate_limit + " per group");
    if (q.rate_limit) parts.unshift("rate " + q.rate_limit);
    if (q.rate_deferred) parts.push(q.rate_deferred + " due, held by the rate limit");
    if (q.fairness) parts.push(q.fairness.replace("_", " "));
    if (q.policy && q.policy !== "standard") parts.push(q.policy);
    return parts.join("; ");
  }

  // -- jobs list ----------------------------------------------------------------------------------
  function jobsPage() {
    var params = new URLSearchParams(location.search);
    var filt = { state: params.get("state") || "", queue: params.get("queue") || "", kind: params.get("kind") || "",
                 tag: params.get("tag") || "", after: params.get("after") || "" };
    function at(after) { return { state: filt.state, queue: filt.queue, kind: filt.kind, tag: filt.tag, after: after }; }
    var stateSel = el("select", { name: "state", id: "f-state" }, el("option", { value: "", text: "any state" }),
      STATES.map(function (s) { return el("option", { value: s, text: s }); }));
    stateSel.value = filt.state;
    var queueIn = el("input", { type: "text", name: "queue", id: "f-queue", placeholder: "any queue", list: "queue-names" });
    queueIn.value = filt.queue;
    var kindIn = el("input", { type: "text", name: "kind", id: "f-kind", placeholder: "any kind" });
    kindIn.value = filt.kind;
    var tagIn = el("input", { type: "text", name: "tag", id: "f-tag", placeholder: "any tag" });
    tagIn.value = filt.tag;
    var names = el("datalist", { id: "queue-names" });
    var form = el("form", { "class": "filters", id: "filters", onsubmit: function (e) {
      e.preventDefault();
      go({ state: stateSel.value, queue: queueIn.value.trim(), kind: kindIn.value.trim(), tag: tagIn.value.trim(), after: "" });
    } }, el("label", {}, "state", stateSel), el("label", {}, "queue", queueIn, names), el("label", {}, "kind", kindIn),
      el("label", {}, "tag", tagIn),
      el("button", { type: "submit", id: "apply", text: "Filter" }),
      el("a", { href: url("/jobs"), text: "clear" }));
    stateSel.addEventListener("change", function () { form.requestSubmit(); });
    var table = el("div", { id: "jobs" });
    var pager = el("div", { "class": "pager", id: "pager" });
    var bulk = el("div", { "class": "actions", id: "bulk" });
    replace(app, el("h1", { text: "Jobs" }), form, bulk, table, pager);
    // Bulk actions on every job the filters match: a dry run counts them, a dialog asks, then the
    // same call acts (store.jobs.<op>_where; never without a filter).
    function bulkAsk(op) {
      var q = at(""); delete q.after;
      post("/api/jobs/bulk/" + op, Object.assign({ dry_run: 1 }, q)).then(function (d) {
        var dialog = el("dialog", { id: "bulk-dialog" });
        var yes = el("button", { "class": "danger", id: "bulk-confirm", text: op + " " + d.count + " job(s)" });
        var no = el("button", { id: "bulk-keep", text: "Keep them" });
        add(dialog, [el("p", { id: "bulk-question", text: op + " " + d.count + " job(s) matching " + d.filter + "?" }),
          el("div", { "class": "actions" }, yes, no)]);
        document.body.appendChild(dialog);
        function close() { dialog.close(); dialog.remove(); }
        no.onclick = close;
        yes.onclick = function () {
          yes.disabled = true;
          post("/api/jobs/bulk/" + op, q).then(function (r) { close(); flash(r.message, false); refresh(); },
            function (err) { close(); flash(err.message, true); });
        };
        if (d.count === 0) yes.disabled = true;
        dialog.showModal();
      }, function (err) { flash(err.message, true); });
    }
    if (CAN_ACT && (filt.state || filt.queue || filt.kind || filt.tag)) {
      ["cancel", "requeue", "delete"].forEach(function (op) {
        add(bulk, el("button", { id: "bulk-" + op, "class": op === "requeue" ? "" : "danger",
          text: op.charAt(0).toUpperCase() + op.slice(1) + " all matching…", onclick: function () { bulkAsk(op); } }));
      });
    }
    getJSON("/api/overview").then(function (d) {
      replace(names, d.queues.map(function (q) { return el("option", { value: q.name }); }));
    }, function () {});

    function go(f) {
      filt = f;
      history.pushState(null, "", url("/jobs", f));
      refresh();
    }
    window.addEventListener("popstate", function () { location.reload(); });

    render = function () {
      var q = at(filt.after); q.limit = 50;
      return getJSON("/api/jobs", q)
        .then(function (d) {
          var rows = d.items.map(function (j) {
            return el("tr", { "data-job": j.id, "data-state": j.state },
              el("td", { "class": "mono" }, el("a", { href: jobHref(j.id), text: j.id })),
              el("td", { text: j.kind }), el("td", { text: j.queue }), el("td", {}, badge(j.state)),
              el("td", { "class": "tags", text: (j.tags || []).join(", ") }),
              el("td", { "class": "num", text: j.attempts + "/" + j.max_attempts }),
              el("td", { "class": "mono", text: fmtTime(j.run_at) }),
              el("td", { title: fmtTime(j.updated_at), text: ago(j.updated_at, d.now) }),
              el("td", { "class": "err" }, j.last_error ? el("div", { "class": "clamp", title: j.last_error, text: j.last_error }) : ""));
          });
          replace(table, rows.length ? el("table", { id: "job-table" },
            el("thead", {}, el("tr", {}, ["id", "kind", "queue", "state", "tags", "attempts", "run at", "updated", "last error"]
              .map(function (h) { return el("th", { text: h }); }))), el("tbody", {}, rows))
            : el("p", { "class": "muted", id: "no-jobs", text: "No jobs match." }));
          replace(pager,
            filt.after ? el("button", { id: "first", text: "« First page", onclick: function () {
              go(at("")); } }) : "",
            d.next_after ? el("button", { id: "next", text: "Next page »", onclick: function () {
              go(at(d.next_after)); } }) : "",
            el("span", { "class": "muted", text: d.items.length + " shown" + (filt.after ? " (after " + filt.after + ")" : "") }));
        });
    };
  }

  // -- one job --------------------------------------------------------------------------------------
  function jobPage() {
    var head = el("h1", {}, "Job ", el("span", { "class": "mono", text: ARG }));
    var body = el("div", { id: "job" });
    replace(app, head, body);
    render = function () {
      return getJSON("/api/jobs/" + encodeURIComponent(ARG)).then(function (j) {
        CAN_ACT = j.actions;
        var acts = el("div", { "class": "actions", id: "job-actions" });
        if (CAN_ACT) {
          if (j.state === "pending" || j.state === "failed" || j.state === "leased") {
            add(acts, el("button", { "class": "danger", id: "cancel",
              text: j.state === "leased" && j.lease_until > j.now ? (j.cancel_requested_at ? "Cancel requested" : "Cancel (ask its worker)") : "Cancel",
              onclick: function (e) { action("/api/jobs/" + encodeURIComponent(j.id) + "/cancel", e.target); } }));
          }
          if (j.state === "failed" || j.state === "dead" || j.state === "cancelled" || (j.state === "leased" && j.lease_until <= j.now)) {
            add(acts, el("button", { id: "requeue", text: "Requeue",
              onclick: function (e) { action("/api/jobs/" + encodeURIComponent(j.id) + "/requeue", e.target); } }));
          }
        }
        add(acts, el("a", { href: BASE + "/runs/" + encodeURIComponent(j.id), text: "workflow view" }));
        var kv = [["state", badge(j.state)], ["kind", j.kind], ["queue", j.queue], ["priority", j.priority],
          ["attempts", j.attempts + " of " + j.max_attempts], ["lease generation", j.lease_generation],
          ["lease owner", j.lease_owner || ""], ["lease until", fmtTime(j.lease_until)],
          ["run at", fmtTime(j.run_at)], ["created", fmtTime(j.created_at)], ["updated", fmtTime(j.updated_at) + " (" + ago(j.updated_at, j.now) + ")"],
          ["timeout", j.timeout_ms ? j.timeout_ms + " ms" : ""], ["singleton key", j.singleton_key || ""],
          ["group key", j.group_key || ""], ["dead letter of", j.origin_id ? el("a", { href: jobHref(j.origin_id), text: j.origin_id }) : ""],
          ["cancel requested", j.cancel_requested_at ? fmtTime(j.cancel_requested_at) : ""],
          ["tags", Array.isArray(j.tags) ? j.tags.join(", ") : ""],
          ["meta", j.meta && Object.keys(j.meta).length ? el("code", { text: JSON.stringify(j.meta) }) : ""],
          ["progress", j.progress ? el("span", { id: "job-progress" },
            el("progress", { max: "1", value: String(j.progress.fraction) }),
            el("span", { id: "job-progress-text", text: " " + Math.round(j.progress.fraction * 100) + "%" +
              (j.progress.note ? " · " + j.progress.note : "") + " (attempt " + j.progress.attempt + ")" })) : ""]];
        var attempts = (j.attempt_rows || []).map(function (a) {
          return el("tr", { "data-attempt": a.attempt, "data-outcome": a.outcome },
            el("td", { "class": "num", text: a.attempt }),
            el("td", { "class": "mono", text: a.at ? fmtTime(a.at) : "" }),
            el("td", { "class": "mono", text: a.owner || "" }),
            el("td", { "class": "num", text: a.duration_ms === null || a.duration_ms === undefined ? "" : a.duration_ms + " ms" }),
            el("td", {}, el("span", { "class": "badge " + ({ completed: "done", running: "leased" }[a.outcome] || a.outcome),
              text: a.outcome })),
            el("td", { "class": "err" }, a.error || "",
              a.traceback ? el("details", {}, el("summary", { text: "traceback" }), el("pre", { "class": "error", text: a.traceback })) : ""));
        });
        var left = el("div", {},
          el("table", { "class": "kv", id: "job-fields" }, el("tbody", {}, kv.map(function (r) {
            return el("tr", { "data-field": r[0] }, el("th", { text: r[0] }), el("td", {}, r[1]));
          }))),
          el("h2", { text: "Attempts" }),
          attempts.length ? el("table", { id: "attempts" },
            el("thead", {}, el("tr", {}, ["#", "when", "who", "how long", "outcome", "error"]
              .map(function (h) { return el("th", { text: h }); }))), el("tbody", {}, attempts))
            : el("p", { "class": "muted", id: "no-attempts", text: "No attempt yet." }),
          el("h2", { text: "Timeline" }),
          el("ul", { "class": "timeline" }, j.timeline.map(function (t) {
            return el("li", {}, el("span", { "class": "when", text: fmtTime(t.at) }), t.what);
          })),
          composition(j));
        var right = el("div", {},
          el("h2", { text: "Payload" }), el("pre", { id: "payload", text: pretty(j.payload) }),
          j.last_error ? [el("h2", { text: "Last error" }), el("pre", { "class": "error", id: "last-error", text: j.last_error })] : "",
          j.result !== null && j.result !== undefined ? [el("h2", { text: "Result" }), el("pre", { id: "result", text: pretty(j.result) })] : "");
        replace(body, acts, el("div", { "class": "grid2" }, left, right));
      });
    };
  }

  // The job's composition (depends_on, chains, groups, chords): every step, parents first, with its
  // state and what it waits for; buttons act on the whole of it (docs/composition.md).
  function composition(j) {
    var steps = j.composition || [];
    if (!steps.length) { return ""; }
    var index = {};
    steps.forEach(function (s, i) { index[s.id] = i + 1; });
    var counts = {};
    steps.forEach(function (s) { counts[s.state] = (counts[s.state] || 0) + 1; });
    var acts = el("div", { "class": "actions", id: "composition-actions" });
    if (CAN_ACT) {
      add(acts, el("button", { "class": "danger", id: "cancel-composition", text: "Cancel composition",
        onclick: function (e) { action("/api/jobs/" + encodeURIComponent(j.id) + "/composition/cancel", e.target); } }));
      add(acts, el("button", { id: "requeue-composition", text: "Requeue composition",
        onclick: function (e) { action("/api/jobs/" + encodeURIComponent(j.id) + "/composition/requeue", e.target); } }));
    }
    return [el("h2", { text: "Composition (" + steps.length + " steps: " +
        Object.keys(counts).map(function (k) { return counts[k] + " " + k; }).join(", ") + ")" }),
      acts,
      el("table", { id: "composition" },
        el("thead", {}, el("tr", {}, ["#", "step", "kind", "state", "after", "waiting on"].map(function (h) { return el("th", { text: h }); }))),
        el("tbody", {}, steps.map(function (s) {
          return el("tr", { "data-step": s.id, "class": s.id === j.id ? "current" : "" },
            el("td", { "class": "num", text: index[s.id] }),
            el("td", { "class": "mono" }, s.id === j.id ? el("b", { text: s.id }) : el("a", { href: jobHref(s.id), text: s.id })),
            el("td", { text: s.kind }),
            el("td", { title: s.last_error || "" }, badge(s.state)),
            el("td", { text: s.parents.map(function (p) { return index[p] ? "#" + index[p] : p; }).join(", ") }),
            el("td", { "class": "num", text: s.waiting_on && s.state === "pending" ? s.waiting_on + " parent(s)" : "" }));
        })))];
  }

  // -- workflow run -----------------------------------------------------------------------------------
  function runPage() {
    var body = el("div", { id: "run" });
    replace(app, el("h1", {}, "Workflow run ", el("a", { "class": "mono", href: jobHref(ARG), text: ARG })), body);
    render = function () {
      return getJSON("/api/runs/" + encodeURIComponent(ARG)).then(function (r) {
        var nodes = r.nodes || [];
        var counts = {};
        nodes.forEach(function (n) { counts[n.status] = (counts[n.status] || 0) + 1; });
        replace(body,
          el("p", {}, "job ", badge(r.state), " · kind ", el("b", { text: r.kind }), " · attempt ", String(r.attempts),
            " · generation ", String(r.generation),
            " · nodes: " + Object.keys(counts).map(function (k) { return counts[k] + " " + k; }).join(", ")),
          r.identity ? el("p", { "class": "muted", text: "flow " + (r.identity.flow || "") + " revision " +
            (r.identity.revision === undefined ? "" : r.identity.revision) }) : "",
          nodes.length ? el("table", { id: "node-table" },
            el("thead", {}, el("tr", {}, ["node", "task", "needs", "status", "generation", "value"].map(function (h) { return el("th", { text: h }); }))),
            el("tbody", {}, nodes.map(function (n) {
              return el("tr", { "data-node": n.id },
                el("td", { "class": "mono", text: n.id }), el("td", { text: n.task || "" }),
                el("td", { text: (n.needs || []).join(", ") }), el("td", {}, badge(n.status)),
                el("td", { "class": "num", text: n.generation === null || n.generation === undefined ? "" : n.generation }),
                el("td", {}, n.value === null || n.value === undefined ? "" : el("pre", { text: pretty(n.value) })));
            })))
            : el("p", { "class": "muted", text: "No workflow nodes recorded for this job (not a workflow run, or completed and pruned)." }),
          r.last_error ? [el("h2", { text: "Last error" }), el("pre", { "class": "error", text: r.last_error })] : "",
          r.result !== null && r.result !== undefined ? [el("h2", { text: "Result" }), el("pre", { text: pretty(r.result) })] : "");
      });
    };
  }

  // -- schedules -------------------------------------------------------------------------------------
  function schedulesPage() {
    var body = el("div", { id: "schedules" });
    replace(app, el("h1", { text: "Schedules" }), body);
    render = function () {
      return getJSON("/api/schedules").then(function (d) {
        if (!d.available) { replace(body, el("p", { "class": "muted", text: "This tenure has no schedules." })); return; }
        if (!d.items.length) { replace(body, el("p", { "class": "muted", text: "No schedules. Add one with: tenure schedules add NAME CRON KIND" })); return; }
        function path(s, verb) {
          return "/api/schedules/" + encodeURIComponent(s.name) + "/" + verb + (s.key ? "?key=" + encodeURIComponent(s.key) : "");
        }
        function actions(s) {
          if (!d.actions) return el("td", {});
          return el("td", {}, el("span", { "class": "row-actions" },
            el("button", { "class": "run-now", text: "Run now", title: "enqueue its job now; the schedule keeps its rhythm",
              onclick: function (e) { action(path(s, "run"), e.target); } }),
            s.paused_at === null || s.paused_at === undefined
              ? el("button", { "class": "pause", text: "Pause", title: "fire nothing until resumed",
                  onclick: function (e) { action(path(s, "pause"), e.target); } })
              : el("button", { "class": "resume", text: "Resume", title: "plan the next fire from now; boundaries missed while paused are skipped",
                  onclick: function (e) { action(path(s, "resume"), e.target); } }),
            el("button", { "class": "danger remove", text: "Remove", onclick: function (e) {
              if (window.confirm("Remove schedule " + s.name + (s.key ? " #" + s.key : "") + "? The jobs it enqueued stay.")) {
                action(path(s, "remove"), e.target);
              } } })));
        }
        replace(body, el("table", { id: "schedule-table" },
          el("thead", {}, el("tr", {}, ["name", "cron", "tz", "kind", "queue", "next fire", "last fire", "state", ""].map(function (h) { return el("th", { text: h }); }))),
          el("tbody", {}, d.items.map(function (s) {
            return el("tr", { "data-schedule": s.name + (s.key ? "#" + s.key : "") },
              el("td", { text: s.name + (s.key ? " #" + s.key : "") }), el("td", { "class": "mono", text: s.cron }),
              el("td", { text: s.tz }), el("td", { text: s.kind }), el("td", { text: s.queue || "default" }),
              el("td", { title: fmtTime(s.next_fire_at), text: s.next_fire_at ? fmtTime(s.next_fire_at) + " (" + ago(s.next_fire_at, d.now) + ")" : "never" }),
              el("td", { text: fmtTime(s.last_fire_at) }),
              el("td", { "class": "state" }, s.paused_at === null || s.paused_at === undefined ? badge("active") : badge("paused")), actions(s));
          }))));
      });
    };
  }

  // -- workers ----------------------------------------------------------------------------------------
  function workersPage() {
    var body = el("div", { id: "workers" });
    replace(app, el("h1", { text: "Workers" }), body);
    render = function () {
      return getJSON("/api/workers").then(function (d) {
        if (!d.items.length) { replace(body, el("p", { "class": "muted", text: "No worker has registered (workers heartbeat while they run)." })); return; }
        replace(body, el("table", { id: "worker-table" },
          el("thead", {}, el("tr", {}, ["worker", "", "host", "pid", "queues", "kinds", "concurrency", "in flight", "completions", "failures", "started", "last seen"]
            .map(function (h) { return el("th", { text: h }); }))),
          el("tbody", {}, d.items.map(function (w) {
            var st = w.stats || {};
            return el("tr", { "data-worker": w.id },
              el("td", { "class": "mono", text: w.id }), el("td", {}, badge(w.alive ? "alive" : "gone")),
              el("td", { text: w.host || "" }), el("td", { "class": "num", text: w.pid === null ? "" : w.pid }),
              el("td", { text: Array.isArray(w.queues) ? w.queues.join(", ") : (w.queues || "all") }),
              el("td", { text: Array.isArray(w.kinds) ? w.kinds.join(", ") : (w.kinds || "") }),
              el("td", { "class": "num", text: w.concurrency === null ? "" : w.concurrency }),
              el("td", { "class": "num", text: w.in_flight }),
              el("td", { "class": "num", text: st.completions === undefined ? "" : st.completions }),
              el("td", { "class": "num", text: st.failures === undefined ? "" : st.failures }),
              el("td", { text: ago(w.started_at, d.now) }), el("td", { text: ago(w.heartbeat_at, d.now) }));
          }))));
      });
    };
  }

  var pages = { overview: overviewPage, jobs: jobsPage, job: jobPage, run: runPage, schedules: schedulesPage, workers: workersPage };
  (pages[PAGE] || overviewPage)();
  loop();
})();
