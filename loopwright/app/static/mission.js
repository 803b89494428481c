// The mission page: reads /missions/{id}/events (SSE) and renders every event once.
// Event fields are untrusted text: they only ever reach the page through textContent.
(function () {
  "use strict";
  var root = document.getElementById("mission");
  if (!root) return;
  var missionId = root.dataset.id;
  var tiers = (root.dataset.tiers || "").split(",").filter(Boolean);
  var stages = {};
  document.querySelectorAll("#pipeline .stage").forEach(function (li) { stages[li.dataset.stage] = li; });
  var timeline = document.getElementById("timeline");
  var toolItems = {};
  var usage = {};
  var lastSeq = 0;
  var received = 0;
  var duplicates = 0;
  var firstTs = null;
  var source = null;
  var ended = false;
  // Guidance reaches the model only while its pair-mode loop runs; the server says when.
  var takesGuidance = root.dataset.takesGuidance === "true";
  var live = document.getElementById("live");

  var FAILED = { error: 1, failed: 1, unverified: 1, budget_exceeded: 1 };
  var SKIPPED = { skipped: 1, nothing_to_fix: 1, flaky: 1, cancelled: 1 };
  var HEAD_LINES = 12, TAIL_LINES = 40, MAX_CHARS = 6000;
  var QUEUE_POLL_MS = Number(root.dataset.queuePollMs) || 3000;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function money(v) { return "$" + Number(v || 0).toFixed(4); }
  function num(v) { return Number(v || 0).toLocaleString("en-US"); }
  function clock(ts) {
    if (firstTs === null) firstTs = ts;
    var s = Math.max(0, ts - firstTs);
    var m = Math.floor(s / 60);
    return "+" + (m ? m + "m" : "") + (s - m * 60).toFixed(m ? 0 : 1) + "s";
  }

  // -- ANSI SGR to spans -------------------------------------------------------------
  var SGR = /\x1b\[([0-9;]*)m/g;
  var OTHER_ESCAPES = /\x1b\[[0-9;?]*[A-La-ln-z]|\x1b\][^\x07]*\x07|\r(?!\n)/g;
  function ansi(text, into) {
    var state = { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, rgb: null };
    text = String(text).replace(OTHER_ESCAPES, "");
    var at = 0, match;
    SGR.lastIndex = 0;
    while ((match = SGR.exec(text)) !== null) {
      span(text.slice(at, match.index), state, into);
      apply(match[1], state);
      at = SGR.lastIndex;
    }
    span(text.slice(at), state, into);
  }
  function apply(params, s) {
    var codes = params === "" ? [0] : params.split(";").map(Number);
    for (var i = 0; i < codes.length; i++) {
      var c = codes[i];
      if (c === 0) { s.fg = s.bg = s.rgb = null; s.bold = s.dim = s.italic = s.underline = false; }
      else if (c === 1) s.bold = true;
      else if (c === 2) s.dim = true;
      else if (c === 3) s.italic = true;
      else if (c === 4) s.underline = true;
      else if (c === 22) s.bold = s.dim = false;
      else if (c === 23) s.italic = false;
      else if (c === 24) s.underline = false;
      else if (c >= 30 && c <= 37) { s.fg = c - 30; s.rgb = null; }
      else if (c >= 90 && c <= 97) { s.fg = c - 90 + 8; s.rgb = null; }
      else if (c === 39) { s.fg = null; s.rgb = null; }
      else if (c >= 40 && c <= 47) s.bg = c - 40;
      else if (c === 49) s.bg = null;
      else if (c === 38 && codes[i + 1] === 5) { var n = codes[i + 2]; s.fg = n < 16 ? n : null; s.rgb = n >= 16 ? xterm(n) : null; i += 2; }
      else if (c === 38 && codes[i + 1] === 2) { s.rgb = "rgb(" + (codes[i + 2] | 0) + "," + (codes[i + 3] | 0) + "," + (codes[i + 4] | 0) + ")"; s.fg = null; i += 4; }
      else if (c === 48 && (codes[i + 1] === 5 || codes[i + 1] === 2)) { i += codes[i + 1] === 5 ? 2 : 4; }
    }
  }
  function xterm(n) {
    if (n >= 232) { var g = 8 + (n - 232) * 10; return "rgb(" + g + "," + g + "," + g + ")"; }
    n -= 16;
    var steps = [0, 95, 135, 175, 215, 255];
    return "rgb(" + steps[Math.floor(n / 36) % 6] + "," + steps[Math.floor(n / 6) % 6] + "," + steps[n % 6] + ")";
  }
  function span(text, s, into) {
    if (!text) return;
    var plain = s.fg === null && s.bg === null && !s.rgb && !s.bold && !s.dim && !s.italic && !s.underline;
    if (plain) { into.appendChild(document.createTextNode(text)); return; }
    var node = el("span", "", text);
    if (s.fg !== null) node.classList.add("ansi-fg-" + s.fg);
    if (s.bg !== null) node.classList.add("ansi-bg-" + s.bg);
    if (s.bold) node.classList.add("ansi-bold");
    if (s.dim) node.classList.add("ansi-dim");
    if (s.italic) node.classList.add("ansi-italic");
    if (s.underline) node.classList.add("ansi-underline");
    if (s.rgb) node.style.color = s.rgb; // CSSOM, allowed by the CSP (no style attribute)
    into.appendChild(node);
  }

  // Long output: the head and the tail, and a button for the rest.
  function output(text) {
    var wrap = el("div", "output");
    var pre = el("pre", "out");
    wrap.appendChild(pre);
    text = String(text || "");
    var lines = text.split("\n");
    if (lines.length <= HEAD_LINES + TAIL_LINES + 5 && text.length <= MAX_CHARS) {
      ansi(text, pre);
      return wrap;
    }
    var hidden = lines.length - HEAD_LINES - TAIL_LINES;
    ansi(lines.slice(0, HEAD_LINES).join("\n"), pre);
    pre.appendChild(el("span", "gap", "\u2026 " + hidden + " more lines \u2026"));
    ansi(lines.slice(lines.length - TAIL_LINES).join("\n"), pre);
    var button = el("button", "show-all", "show all " + lines.length + " lines");
    button.type = "button";
    button.addEventListener("click", function () {
      pre.textContent = "";
      ansi(text, pre);
      button.remove();
    });
    wrap.appendChild(button);
    return wrap;
  }

  function item(event, cls, what, meta) {
    var li = el("li", "ev " + cls);
    li.dataset.seq = event.seq;
    li.dataset.type = event.type;
    var line = el("div", "line");
    line.appendChild(el("span", "what", what));
    line.appendChild(el("span", "meta", meta || ""));
    line.appendChild(el("span", "time", clock(event.ts)));
    li.appendChild(line);
    timeline.appendChild(li);
    return li;
  }

  // -- per event type ------------------------------------------------------------------
  function onStage(e) {
    refreshGuidance();
    var li = stages[e.stage];
    var status = e.status || "";
    if (status === "started") {
      Object.keys(stages).forEach(function (name) {
        var other = stages[name];
        if (other !== li && other.classList.contains("active")) setStage(other, "done");
      });
      if (li) { setStage(li, "active"); note(li, ""); }
      item(e, "stage-ev", e.stage + " started", e.source ? String(e.source) : "");
      return;
    }
    if (status === "detected") {
      if (li) note(li, e.test_command || "");
      var d = item(e, "stage-ev", "test command", "");
      d.appendChild(el("code", "cmd", e.test_command || "?"));
      if (e.reason) d.appendChild(el("div", "meta", e.reason));
      var found = e.instructions;
      if (found && found.path) {
        d.appendChild(el("div", "meta instructions",
          "Repository instructions: " + found.path + " (" + instructionSize(found) + ")"));
      }
      return;
    }
    if (li) {
      setStage(li, FAILED[status] ? "failed" : SKIPPED[status] ? "skipped" : "done");
      note(li, stageNote(e));
    }
    var ev = item(e, "stage-ev", e.stage + " " + status.replace(/_/g, " "), stageNote(e));
    if (e.reason) ev.appendChild(el("div", "meta", e.reason));
  }
  // The same words as the terminal's line (loopwright/instructions.py `describe`).
  function instructionSize(found) {
    var n = Number(found.bytes || 0);
    var size = n >= 1024 ? (n / 1024).toFixed(1) + " kB" : n + " B";
    return found.truncated ? size + ", cut to the first 8 kB" : size;
  }
  function stageNote(e) {
    if (e.failing && e.failing.length) return e.failing.length + " failing";
    if (e.tests && e.tests.length) return e.tests.length + " tests";
    return String(e.status || "").replace(/_/g, " ");
  }
  function setStage(li, state) {
    li.classList.remove("pending", "active", "done", "failed", "skipped");
    li.classList.add(state);
  }
  function note(li, text) { li.querySelector(".note").textContent = text; }

  function onPlan(e) {
    var list = document.getElementById("plan");
    list.textContent = "";
    var items = e.items || [];
    var done = 0;
    var marks = { done: "\u2713", in_progress: "\u25B8", pending: "\u25CB" };
    items.forEach(function (it) {
      var li = el("li", it.status || "pending");
      li.appendChild(el("span", "mark", marks[it.status] || "\u25CB"));
      li.appendChild(el("span", "step", it.step));
      list.appendChild(li);
      if (it.status === "done") done++;
    });
    item(e, "plan-ev", "plan updated", done + "/" + items.length + " done");
  }

  function onModelCall(e) {
    var li = item(e, "model", "step " + e.step + " \u00B7 " + e.tier,
      num(e.prompt_tokens) + " + " + num(e.completion_tokens) + " tokens \u00B7 " + money(e.cost_usd) +
      " \u00B7 " + Number(e.duration_s || 0).toFixed(1) + "s");
    var tools = (e.tool_calls || []).join(", ");
    if (!tools) li.querySelector(".line").appendChild(el("span", "badge failed", "no tool call"));
    if (e.content) li.appendChild(el("p", "thought", e.content));
    var u = usage[e.tier] || (usage[e.tier] = { calls: 0, tokens: 0, cost: 0 });
    u.calls += 1;
    u.tokens += (e.prompt_tokens || 0) + (e.completion_tokens || 0);
    u.cost += Number(e.cost_usd || 0);
    renderUsage();
    document.getElementById("cost").textContent = money(e.total_cost_usd);
    document.getElementById("tier").textContent = e.tier;
  }
  function renderUsage() {
    var body = document.querySelector("#usage tbody");
    body.textContent = "";
    var names = tiers.filter(function (t) { return usage[t]; })
      .concat(Object.keys(usage).filter(function (t) { return tiers.indexOf(t) < 0; }));
    names.forEach(function (t) {
      var tr = el("tr");
      tr.appendChild(el("td", "", t));
      tr.appendChild(el("td", "num", num(usage[t].calls)));
      tr.appendChild(el("td", "num", num(usage[t].tokens)));
      tr.appendChild(el("td", "num", money(usage[t].cost)));
      body.appendChild(tr);
    });
  }

  // The decoded arguments: `args` from the event, or the raw `arguments` text parsed here
  // (older logs); pretty-printed once, never escaped twice.
  function argumentsOf(e) {
    if (e.args_error && typeof e.arguments === "string") return e.arguments;
    if (e.args && typeof e.args === "object") return e.args;
    if (typeof e.arguments === "string") {
      try { return JSON.parse(e.arguments); } catch (err) { return e.arguments; }
    }
    return e.arguments || {};
  }
  function onToolCall(e) {
    var li = item(e, "tool running", e.summary || e.tool, "");
    li.dataset.tool = e.tool;
    var badge = el("span", "badge running", "running");
    li.querySelector(".line").insertBefore(badge, li.querySelector(".time"));
    var decoded = argumentsOf(e);
    var args = el("details", "args");
    args.appendChild(el("summary", "", e.tool + " arguments"));
    args.appendChild(el("pre", "args", typeof decoded === "string" ? decoded : JSON.stringify(decoded, null, 2)));
    if (e.args_error) args.appendChild(el("div", "meta", "not valid JSON: " + e.args_error));
    li.appendChild(args);
    toolItems[e.id] = { li: li, badge: badge };
  }
  function onToolResult(e) {
    var entry = toolItems[e.id];
    if (!entry) {
      onToolCall({ seq: 0, ts: e.ts, id: e.id, tool: e.tool, args: {} });
      entry = toolItems[e.id];
      delete entry.li.dataset.seq;
    }
    var li = entry.li;
    var status = e.status || "ok";
    li.classList.remove("running");
    li.classList.add(status);
    entry.badge.className = "badge " + status;
    entry.badge.textContent = status + (e.exit_code !== null && e.exit_code !== undefined ? " \u00B7 exit " + e.exit_code : "") +
      (e.timed_out ? " \u00B7 timed out" : "");
    li.querySelector(".meta").textContent = Number(e.duration_s || 0).toFixed(2) + "s";
    var result = el("details", "result");
    result.dataset.seq = e.seq;
    result.dataset.type = e.type;
    var lines = String(e.output || "").split("\n").length;
    result.appendChild(el("summary", "", "output \u00B7 " + lines + (lines === 1 ? " line" : " lines")));
    result.appendChild(output(e.output));
    if (status !== "ok" || e.tool === "run_command") result.open = status !== "ok" || lines <= 30;
    li.appendChild(result);
  }

  function onEscalation(e) {
    var li = item(e, "escalation", "\u21E7 escalated " + e.from_tier + " \u2192 " + e.to_tier, "");
    li.appendChild(el("div", "meta", e.reason));
  }

  function onAttempt(e) {
    var head = "attempt " + e.attempt + "/" + e.attempts + " on " + e.tier;
    if (e.status === "started") {
      item(e, "escalation", "\u25B6 " + head, "seed " + e.seed);
      return;
    }
    var li = item(e, "escalation", (e.status === "passed" ? "\u2713 " : "\u2717 ") + head,
      e.steps + " steps");
    if (e.reason) li.appendChild(el("div", "meta", e.reason));
  }

  function onModelRetry(e) {
    var li = item(e, "escalation", "\u21BB model call failed (attempt " + e.attempt + " of " +
      e.attempts + "), retrying in " + Number(e.wait_s || 0).toFixed(1) + "s", "");
    li.appendChild(el("div", "meta", e.reason));
  }

  function onVerification(e) {
    var card = document.getElementById("verification-card");
    var box = document.getElementById("verification");
    box.textContent = "";
    card.hidden = false;
    box.appendChild(el("p", "verdict-line " + (e.verified ? "good" : "bad"),
      e.verified ? "\u2713 Verified in a fresh sandbox" : "\u2717 Not verified"));
    var rows = e.rows || [];
    if (rows.length) {
      var table = el("table", "verify");
      var head = el("tr");
      ["test", "before", "after", ""].forEach(function (h) { head.appendChild(el("th", "", h)); });
      var thead = el("thead"); thead.appendChild(head); table.appendChild(thead);
      var body = el("tbody");
      rows.forEach(function (r) {
        var tr = el("tr", "row-" + r.status);
        tr.appendChild(el("td", "test", r.id));
        tr.appendChild(el("td", "outcome-" + (r.before || "missing"), r.before || "\u2013"));
        tr.appendChild(el("td", "outcome-" + (r.after || "missing"), r.after || "\u2013"));
        tr.appendChild(el("td", "", String(r.status || "").replace(/_/g, " ")));
        body.appendChild(tr);
      });
      table.appendChild(body);
      box.appendChild(table);
    }
    if ((e.tamper || []).length) {
      box.appendChild(el("p", "verdict-line bad", "Tamper findings"));
      var ul = el("ul", "findings");
      e.tamper.forEach(function (f) { ul.appendChild(el("li", "", f.path + ": " + f.detail)); });
      box.appendChild(ul);
    }
    if (!e.verified && (e.reasons || []).length) {
      var why = el("ul", "findings reasons");
      e.reasons.forEach(function (r) { why.appendChild(el("li", "", r)); });
      box.appendChild(why);
    }
    var cmds = el("ul", "commands");
    (e.commands || []).forEach(function (c) {
      cmds.appendChild(el("li", "", c.phase + ": " + c.command + " \u2192 exit " + c.exit_code));
    });
    box.appendChild(cmds);
    if (e.after_output) {
      var det = el("details");
      det.appendChild(el("summary", "", "test output after the fix"));
      det.appendChild(output(e.after_output));
      box.appendChild(det);
    }
    item(e, "verify-ev", e.verified ? "verification passed" : "verification failed",
      rows.length + " tests compared");
  }

  function onScreenshot(e) {
    var card = document.getElementById("screenshot-card");
    var noteEl = document.getElementById("screenshot-note");
    card.hidden = false;
    var img = document.getElementById("screenshot");
    if (e.path) {
      img.src = "/missions/" + encodeURIComponent(missionId) + "/screenshot.png?seq=" + e.seq;
      img.hidden = false;
    } else {
      img.hidden = true;
    }
    noteEl.textContent = (e.url_path || "/") + " \u00B7 HTTP " + (e.http_status === null || e.http_status === undefined ? "\u2013" : e.http_status) +
      ((e.console_errors || []).length ? " \u00B7 " + e.console_errors.length + " console errors" : "") +
      (e.reason ? " \u00B7 " + e.reason : "");
    item(e, "shot", e.path ? "screenshot taken" : "no screenshot", "HTTP " + (e.http_status || "\u2013"));
  }

  function link(id, text, url) {
    if (!url || !/^https?:\/\//.test(url)) return;
    var a = document.getElementById(id);
    if (!a) {
      a = el("a");
      a.id = id;
      a.rel = "noopener noreferrer";
      document.getElementById("links").appendChild(a);
    }
    a.textContent = text;
    a.href = url;
  }

  function onDelivery(e) {
    var p = document.getElementById("delivery");
    p.textContent = "";
    if (e.url) {
      p.appendChild(document.createTextNode(String(e.kind || "delivered").replace(/_/g, " ") + ": "));
      var a = el("a", "", e.url);
      if (/^https?:\/\//.test(e.url)) a.href = e.url;
      a.rel = "noopener noreferrer";
      p.appendChild(a);
      link("pr-link", "pull request", e.url);
    } else {
      p.textContent = "not delivered: " + (e.reason || e.kind || "");
    }
    document.getElementById("outcome").hidden = false;
    item(e, "delivery-ev", "delivery", String(e.kind || "").replace(/_/g, " "));
  }

  function onDone(e) {
    var box = document.getElementById("outcome");
    box.hidden = false;
    var verdict = document.getElementById("verdict");
    var status = String(e.status || "");
    verdict.textContent = status === "verified" ? "\u2713 Fix verified" : status.replace(/_/g, " ");
    verdict.className = "verdict " + (status === "verified" ? "good" : status === "error" ? "error" : "bad");
    document.getElementById("outcome-message").textContent = e.message || "";
    document.getElementById("outcome-summary").textContent = e.summary || "";
    var dl = document.getElementById("outcome-numbers");
    dl.textContent = "";
    [["steps", e.steps], ["cost", money(e.cost_usd)], ["time", Number(e.elapsed_s || 0).toFixed(1) + "s"],
     ["final tier", e.final_tier || "\u2013"]].forEach(function (pair) {
      var div = el("div");
      div.appendChild(el("dt", "", pair[0]));
      div.appendChild(el("dd", "", pair[1]));
      dl.appendChild(div);
    });
    Object.keys(stages).forEach(function (name) {
      if (stages[name].classList.contains("active")) setStage(stages[name], status === "verified" ? "done" : "failed");
    });
    setStatus(status);
    var cancel = document.getElementById("cancel");
    if (cancel) cancel.hidden = true;
    document.getElementById("cost").textContent = money(e.cost_usd);
    document.getElementById("elapsed").textContent = Number(e.elapsed_s || 0).toFixed(1) + "s";
    item(e, "done-ev", "done \u00B7 " + status.replace(/_/g, " "), e.steps + " steps");
    loadChanges();
  }

  // -- the Changes panel: the mission's patch, per file, coloured on the server ---------
  var changesLoaded = false;
  function loadChanges() {
    if (changesLoaded) return;
    fetch("/api/missions/" + encodeURIComponent(missionId) + "/changes", { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data || !data.ready) return;
        changesLoaded = true;
        renderChanges(data);
      })
      .catch(function (err) { console.error("changes", err); });
  }
  function renderChanges(data) {
    var card = document.getElementById("changes-card");
    var box = document.getElementById("changes");
    box.textContent = "";
    card.hidden = false;
    var files = data.files || [];
    var stat = data.stat || { files: 0, added: 0, removed: 0 };
    document.getElementById("changes-stat").textContent = files.length
      ? stat.files + (stat.files === 1 ? " file" : " files") + " \u00B7 +" + stat.added + " \u2212" + stat.removed
      : "no changes";
    files.forEach(function (f) {
      var det = el("details", "diff-file");
      det.open = true;
      det.dataset.path = f.path;
      var head = el("summary", "diff-head");
      head.appendChild(el("span", "diff-path", f.path));
      if (f.old_path && f.old_path !== f.path) head.appendChild(el("span", "meta", "from " + f.old_path));
      head.appendChild(el("span", "diff-status " + f.status, f.status));
      head.appendChild(el("span", "diff-count", "+" + f.added + " \u2212" + f.removed));
      det.appendChild(head);
      if (f.binary) det.appendChild(el("p", "meta", "binary file"));
      var table = el("table", "diff");
      var body = el("tbody");
      (f.hunks || []).forEach(function (h) {
        var hr = el("tr", "hunk");
        var hc = el("td", "", h.header);
        hc.colSpan = 3;
        hr.appendChild(hc);
        body.appendChild(hr);
        h.lines.forEach(function (line) {
          var cls = line.op === "+" ? "add" : line.op === "-" ? "del" : "ctx";
          var tr = el("tr", cls);
          tr.appendChild(el("td", "ln", line.old === null ? "" : line.old));
          tr.appendChild(el("td", "ln", line.new === null ? "" : line.new));
          var code = el("td", "code");
          code.appendChild(el("span", "op", line.op));
          (line.tokens || []).forEach(function (t) {
            if (t[0]) code.appendChild(el("span", t[0], t[1]));
            else code.appendChild(document.createTextNode(t[1]));
          });
          tr.appendChild(code);
          body.appendChild(tr);
        });
      });
      table.appendChild(body);
      det.appendChild(table);
      if (f.truncated) det.appendChild(el("p", "meta", "cut here; the whole patch is linked above"));
      box.appendChild(det);
    });
  }

  function onPhase(e) {
    item(e, "phase-ev", String(e.name || "phase").replace(/_/g, " "), Number(e.duration_s || 0).toFixed(2) + "s");
  }

  function onError(e) {
    var li = item(e, "err", "error", e.kind || "");
    li.appendChild(el("div", "meta", e.message));
  }

  function setStatus(status) {
    var badge = document.getElementById("status");
    badge.textContent = status;
    badge.className = "status status-" + status;
    if (status !== "queued") setQueuePosition(null);
    updateGuidance(status);
  }

  function setQueuePosition(position) {
    var box = document.getElementById("queue-position");
    if (!box) return;
    box.hidden = !position;
    document.getElementById("queue-position-n").textContent = position ? String(position) : "";
  }

  // A queued mission sends no events until it starts; its place in the queue is read from
  // the API until then.
  function followQueue() {
    if (document.getElementById("status").textContent !== "queued") return;
    var timer = setInterval(function () {
      if (received > 0 || ended) { clearInterval(timer); return; }
      fetch("/api/missions/" + encodeURIComponent(missionId), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (m) {
          if (!m || received > 0) return;
          if (m.status !== "queued") { clearInterval(timer); setStatus(m.status); return; }
          setQueuePosition(m.queue_position);
        })
        .catch(function () { /* the next tick tries again */ });
    }, QUEUE_POLL_MS);
  }

  // -- pair mode: a request waits for a person's decision; guidance at any time ---------
  // Who may decide is who may cancel: the page carries the CSRF value only for them, and
  // the controls are only on their page.
  var pairBox = document.getElementById("pair");
  var approvalBox = document.getElementById("approval");
  var guidanceForm = document.getElementById("guidance");
  var csrf = (document.getElementById("cancel") || { dataset: {} }).dataset.csrf || "";
  var pending = null;      // the request on show: {id, what, why, command, diff, network, expiresAt}
  var decidedIds = {};     // requests known to be decided: never shown again
  var deciding = false;    // a POST of ours is on its way
  var expiryTimer = null;
  var DECIDED = { approve: "approved", reject: "rejected", redirect: "redirected", guidance: "guidance" };
  var RUNNING = { running: 1, waiting: 1 };

  function pairNote(id, text, isError) {
    var p = document.getElementById(id);
    if (!p) return;
    p.textContent = text || "";
    p.classList.toggle("error", !!isError);
    updatePairBox();
  }
  function updatePairBox() {
    var note = document.getElementById("pair-note");
    pairBox.hidden = approvalBox.hidden && (!guidanceForm || guidanceForm.hidden) && !note.textContent;
  }
  // A stage starting or ending is when the loop may have started or ended: ask the server
  // whether the mission takes guidance now.
  function refreshGuidance() {
    if (!guidanceForm || ended) return;
    fetch("/api/missions/" + encodeURIComponent(missionId), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (m) {
        if (!m) return;
        takesGuidance = m.takes_guidance === true;
        updateGuidance(document.getElementById("status").textContent);
      })
      .catch(function () { /* the next stage asks again */ });
  }
  function updateGuidance(status) {
    if (guidanceForm) guidanceForm.hidden = !(RUNNING[status] && !ended && takesGuidance);
    if (!RUNNING[status] && status !== "queued") closeRequest();
    updatePairBox();
  }

  function showRequest(r) {
    if (!r || !r.id || decidedIds[r.id]) return;
    if (pending && pending.id === r.id) {
      if (r.expiresAt) pending.expiresAt = r.expiresAt; // the store's time is the one that counts
      tickExpiry();
      return;
    }
    pending = r;
    document.getElementById("approval-id").textContent = "request " + r.id;
    document.getElementById("approval-what").textContent = r.what || r.tool || "";
    document.getElementById("approval-why").textContent = r.why || "";
    var action = document.getElementById("approval-action");
    action.textContent = "";
    if (r.command) {
      action.appendChild(document.createTextNode(r.command));
    } else if (r.diff) {
      String(r.diff).split("\n").forEach(function (line, n) {
        if (n) action.appendChild(document.createTextNode("\n"));
        var c = line.charAt(0);
        var cls = line.slice(0, 3) === "+++" || line.slice(0, 3) === "---" ? "" : c === "+" ? "add" : c === "-" ? "del" : "";
        if (cls) action.appendChild(el("span", cls, line));
        else action.appendChild(document.createTextNode(line));
      });
    }
    action.hidden = !r.command && !r.diff;
    document.getElementById("approval-network").textContent = r.network
      ? "Approving attaches the network, for this command only."
      : "Approving does not attach the network.";
    ["reject-reason", "redirect-text"].forEach(function (id) {
      var input = document.getElementById(id);
      if (input) input.value = "";
    });
    setDeciding(false);
    pairNote("approval-note", "");
    approvalBox.hidden = false;
    tickExpiry();
    if (expiryTimer === null) expiryTimer = setInterval(tickExpiry, 1000);
    updatePairBox();
  }
  function closeRequest(message, isError) {
    if (pending) decidedIds[pending.id] = true;
    pending = null;
    approvalBox.hidden = true;
    if (expiryTimer !== null) { clearInterval(expiryTimer); expiryTimer = null; }
    if (message) pairNote("pair-note", message, isError);
    updatePairBox();
  }
  function tickExpiry() {
    var out = document.getElementById("approval-expires");
    if (!pending || !pending.expiresAt) { out.textContent = ""; return; }
    var left = Math.round((pending.expiresAt - Date.now()) / 1000);
    var at = new Date(pending.expiresAt).toLocaleTimeString();
    if (left <= 0) { out.textContent = "expired at " + at + ": the mission takes it as a reject"; return; }
    var m = Math.floor(left / 60);
    out.textContent = "expires at " + at + " (in " + (m ? m + "m " : "") + (left - m * 60) + "s); unanswered, it is rejected";
  }
  function setDeciding(on) {
    ["approve", "reject", "redirect"].forEach(function (id) {
      var b = document.getElementById(id);
      if (b) b.disabled = on;
    });
  }

  function postDecision(body) {
    return fetch("/api/missions/" + encodeURIComponent(missionId) + "/decisions", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Loopwright-CSRF": csrf },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (data) {
        return { status: r.status, body: data || {} };
      });
    });
  }
  function decide(kind, text) {
    if (!pending || deciding) return;
    var id = pending.id;
    deciding = true;
    setDeciding(true);
    pairNote("approval-note", "sending\u2026");
    postDecision({ decision: kind, text: text, request: id }).then(function (answer) {
      deciding = false;
      if (answer.status === 202) {
        decidedIds[id] = true;
        if (pending && pending.id === id) closeRequest();
        pairNote("pair-note", "You " + DECIDED[kind] + " request " + id + ".");
      } else if (answer.status === 409) {
        // Decided by someone else (a comment, another browser), expired, or the mission ended.
        decidedIds[id] = true;
        if (pending && pending.id === id) closeRequest();
        pairNote("pair-note", "Not taken: " + (answer.body.detail || "the request is no longer pending"), true);
      } else {
        setDeciding(false);
        pairNote("approval-note", answer.body.detail || (kind + " failed: HTTP " + answer.status), true);
      }
    }).catch(function () {
      deciding = false;
      setDeciding(false);
      pairNote("approval-note", kind + " failed: the server did not answer", true);
    });
  }

  function setupPair() {
    var approve = document.getElementById("approve");
    if (approve) {
      approve.addEventListener("click", function () { decide("approve", ""); });
      document.getElementById("reject").addEventListener("click", function () {
        decide("reject", document.getElementById("reject-reason").value.trim());
      });
      document.getElementById("redirect").addEventListener("click", function () {
        var input = document.getElementById("redirect-text");
        var text = input.value.trim();
        if (!text) {
          pairNote("approval-note", "A redirect needs guidance: write what the model should do instead.", true);
          input.focus();
          return;
        }
        decide("redirect", text);
      });
    }
    if (guidanceForm) {
      guidanceForm.addEventListener("submit", function (ev) {
        ev.preventDefault();
        var input = document.getElementById("guidance-text");
        var button = document.getElementById("send-guidance");
        var text = input.value.trim();
        if (!text) { pairNote("pair-note", "Write the guidance first.", true); return; }
        button.disabled = true;
        deciding = true;
        postDecision({ decision: "redirect", text: text }).then(function (answer) {
          deciding = false;
          button.disabled = false;
          if (answer.status === 202) {
            input.value = "";
            // While a request waits, guidance is its redirect (the server says which).
            if (answer.body.request) {
              decidedIds[answer.body.request] = true;
              if (pending && pending.id === answer.body.request) closeRequest();
              pairNote("pair-note", "Guidance sent: request " + answer.body.request + " is refused and the model reads your guidance.");
            } else {
              pairNote("pair-note", "Guidance sent: the model reads it before its next step.");
            }
          } else {
            pairNote("pair-note", answer.body.detail || ("guidance failed: HTTP " + answer.status), true);
          }
        }).catch(function () {
          deciding = false;
          button.disabled = false;
          pairNote("pair-note", "guidance failed: the server did not answer", true);
        });
      });
    }
    var status = document.getElementById("status").textContent;
    updateGuidance(status);
    // A page opened while the mission waits reads the pending request from the API too
    // (its expiry as the store keeps it).
    if (status === "waiting") {
      fetch("/api/missions/" + encodeURIComponent(missionId), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (m) {
          var r = m && m.status === "waiting" ? m.pending_request : null;
          if (r) showRequest(requestOf(r, Date.parse(r.expires_at)));
        })
        .catch(function (err) { console.error("pending request", err); });
    }
  }
  function requestOf(r, expiresAt) {
    return {
      id: String(r.id), tool: r.tool, what: r.what, why: r.why, command: r.command, diff: r.diff,
      network: !!r.network, expiresAt: isFinite(expiresAt) ? expiresAt : null
    };
  }

  function onApprovalRequested(e) {
    setStatus("waiting");
    var li = item(e, "approval", "waiting for approval \u00B7 " + (e.what || e.tool),
      e.rule ? String(e.rule).replace(/_/g, " ") : "");
    if (e.why) li.appendChild(el("div", "meta", e.why));
    if (e.command) li.appendChild(el("code", "cmd", e.command));
    if (e.diff) li.appendChild(el("pre", "args", e.diff));
    li.appendChild(el("div", "meta", (e.network ? "approving attaches the network for this command" : "no network") +
      (e.expires_s ? " \u00B7 rejected if unanswered in " + Math.round(Number(e.expires_s)) + "s" : "")));
    var expires = e.expires_s ? (Number(e.ts) + Number(e.expires_s)) * 1000 : NaN;
    showRequest(requestOf(e, expires));
  }

  function onDecision(e) {
    if (document.getElementById("status").textContent === "waiting") setStatus("running");
    var kind = String(e.decision || "");
    var what = kind === "guidance"
      ? "guidance" + (e.by ? " from " + e.by : "")
      : (DECIDED[kind] || kind) + (e.by ? " by " + e.by : "");
    var li = item(e, "decision " + kind, what, e.id ? "request " + e.id : "");
    if (e.text) li.appendChild(el("p", "decision-text", e.text));
    if (e.id && pending && pending.id === String(e.id)) {
      // Decided elsewhere (a comment, another browser, expiry); our own answer says itself.
      closeRequest(deciding ? null : "Request " + e.id + " was " + what + ".");
    }
    if (e.id) decidedIds[String(e.id)] = true;
  }

  var handlers = {
    approval_requested: onApprovalRequested, decision: onDecision,
    stage: onStage, plan: onPlan, model_call: onModelCall, tool_call: onToolCall,
    tool_result: onToolResult, escalation: onEscalation, model_retry: onModelRetry,
    attempt: onAttempt,
    verification: onVerification, screenshot: onScreenshot, delivery: onDelivery, done: onDone, error: onError, phase: onPhase
  };

  function handle(e) {
    var seq = Number(e.seq);
    if (seq <= lastSeq) { duplicates++; root.dataset.duplicates = duplicates; return; }
    lastSeq = seq;
    received++;
    // Events mean the mission left the queue.
    if (document.getElementById("status").textContent === "queued") setStatus("running");
    root.dataset.received = received;
    root.dataset.lastSeq = lastSeq;
    var fn = handlers[e.type];
    if (fn) fn(e);
    else item(e, "", e.type, "");
    document.getElementById("timeline-count").textContent = received + " events";
  }

  function connect() {
    // The browser resends the last `id:` as Last-Event-ID on its own reconnects; `after`
    // covers the first connection and reconnects this script makes.
    source = new EventSource("/missions/" + encodeURIComponent(missionId) + "/events?after=" + lastSeq);
    root.dataset.connections = Number(root.dataset.connections) + 1;
    source.addEventListener("open", function () { live.hidden = false; live.classList.remove("off"); });
    source.addEventListener("event", function (m) {
      var event;
      try { event = JSON.parse(m.data); } catch (err) { console.error("not an event", m.data); return; }
      handle(event);
    });
    source.addEventListener("end", function (m) {
      ended = true;
      root.dataset.ended = "true";
      updateGuidance("");
      loadChanges();
      source.close();
      live.hidden = true;
      var summary = {};
      try { summary = JSON.parse(m.data); } catch (err) { summary = {}; }
      if (summary.status) setStatus(summary.status);
      if (summary.tier_reached) document.getElementById("tier").textContent = summary.tier_reached;
      if (summary.cost_usd !== undefined) document.getElementById("cost").textContent = money(summary.cost_usd);
      if (summary.pr_url) link("pr-link", "pull request", summary.pr_url);
      if (summary.message && !document.getElementById("outcome-message").textContent) {
        document.getElementById("outcome").hidden = false;
        document.getElementById("outcome-message").textContent = summary.message;
      }
    });
    source.addEventListener("error", function () {
      if (ended) return;
      live.classList.add("off");
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (e.g. a 401 or the server restarted): try again ourselves.
        setTimeout(connect, 3000);
      } else {
        root.dataset.connections = Number(root.dataset.connections) + 1;
      }
    });
  }

  function setupCancel() {
    var button = document.getElementById("cancel");
    if (!button) return;
    var note = document.getElementById("cancel-note");
    button.addEventListener("click", function () {
      button.disabled = true;
      note.textContent = "cancelling\u2026";
      fetch("/api/missions/" + encodeURIComponent(missionId) + "/cancel", {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-Loopwright-CSRF": button.dataset.csrf || "" }
      }).then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (body) {
          if (r.ok) {
            note.textContent = body.status === "cancelled" ? "cancelled before it started" : "cancel requested";
            if (body.status === "cancelled") setStatus("cancelled");
          } else {
            button.disabled = false;
            note.textContent = body.detail || ("cancel failed: HTTP " + r.status);
          }
        });
      }).catch(function () {
        button.disabled = false;
        note.textContent = "cancel failed: the server did not answer";
      });
    });
  }
  setupCancel();
  setupPair();
  connect();
  followQueue();
})();
