// The missions list: replaces the table body whenever /missions/stream sends a new list.
(function () {
  "use strict";
  var table = document.getElementById("missions");
  if (!table) return;
  var body = table.querySelector("tbody");
  var live = document.getElementById("list-live");
  var previous = {};
  table.querySelectorAll("tbody tr[data-id]").forEach(function (tr) { previous[tr.dataset.id] = tr.textContent; });

  document.querySelectorAll("#filters select").forEach(function (select) {
    select.addEventListener("change", function () { document.getElementById("filters").submit(); });
  });

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function cell(tr, label, cls, content) {
    var td = el("td", cls);
    td.dataset.label = label;
    if (content instanceof Node) td.appendChild(content); else td.textContent = content;
    tr.appendChild(td);
    return td;
  }

  function render(missions) {
    var seen = {};
    body.textContent = "";
    if (!missions.length) {
      var empty = el("tr", "empty");
      var td = el("td", "", "No missions match.");
      td.colSpan = 9;
      empty.appendChild(td);
      body.appendChild(empty);
    }
    missions.forEach(function (m) {
      var tr = el("tr");
      tr.dataset.id = m.id;
      var status = cell(tr, "Status", "", el("span", "status status-" + m.status, m.status));
      if (m.queue_position) status.appendChild(el("span", "queue-position", ", position " + m.queue_position));
      var a = el("a", "", m.id);
      a.href = "/missions/" + encodeURIComponent(m.id);
      cell(tr, "Mission", "", a);
      var repo = cell(tr, "Repository", "repo", m.repo);
      if (m.pr_number) { repo.appendChild(document.createTextNode(" ")); repo.appendChild(el("span", "muted", "#" + m.pr_number)); }
      cell(tr, "Trigger", "", m.trigger);
      cell(tr, "Stage", "", m.stage || "\u2013");
      cell(tr, "Tier", "", m.tier_reached || "\u2013");
      cell(tr, "Cost", "num", "$" + Number(m.cost_usd || 0).toFixed(4));
      cell(tr, "Duration", "num", m.duration_s + "s");
      var created = cell(tr, "Created", "muted", String(m.created_at || "").slice(0, 19).replace("T", " "));
      created.title = m.created_at || "";
      body.appendChild(tr);
      var text = tr.textContent;
      if (previous[m.id] !== undefined && previous[m.id] !== text && m.active) tr.classList.add("flash");
      if (previous[m.id] === undefined && Object.keys(previous).length) tr.classList.add("flash");
      seen[m.id] = text;
    });
    previous = seen;
    table.dataset.updates = Number(table.dataset.updates) + 1;
  }

  var params = new URLSearchParams();
  if (table.dataset.status) params.set("status", table.dataset.status);
  if (table.dataset.repo) params.set("repo", table.dataset.repo);
  var source = new EventSource("/missions/stream" + (params.toString() ? "?" + params : ""));
  source.addEventListener("missions", function (m) {
    try { render(JSON.parse(m.data)); } catch (err) { console.error("bad missions list", err); }
  });
  source.addEventListener("open", function () { live.classList.remove("off"); });
  source.addEventListener("error", function () { live.classList.add("off"); });
})();
