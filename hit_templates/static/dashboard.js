// The coordinator dashboard refreshes itself: every few seconds it asks /dashboard/api/progress for
// the figures and rewrites each [data-live] element in place (the page is rendered server-side first).
(function () {
  "use strict";
  const body = document.body;
  const status = document.getElementById("live-status");

  function setText(el, value) {
    const text = value === null || value === undefined ? "–" : String(value);
    if (el.textContent !== text) {
      el.textContent = text;
      el.classList.remove("changed");
      void el.offsetWidth; // restart the highlight animation
      el.classList.add("changed");
    }
  }

  function fill(scope, data, display, skipRows) {
    scope.querySelectorAll("[data-live]").forEach(function (el) {
      if (skipRows && el.closest("[data-system]")) { return; }
      const key = el.dataset.live;
      if (display && key in display) { setText(el, display[key]); }
      else if (key in data) { setText(el, data[key]); }
      if (key === "status") { el.className = "status status-" + data.status; }
    });
    scope.querySelectorAll("progress[data-live-value]").forEach(function (el) {
      if (skipRows && el.closest("[data-system]")) { return; }
      const value = Number(data[el.dataset.liveValue]);
      const max = Number(data[el.dataset.liveMax]);
      if (!Number.isNaN(max) && max > 0) { el.max = max; }
      if (!Number.isNaN(value)) { el.value = value; }
    });
  }

  function cell(row, text, className) {
    const td = row.insertCell();
    if (className) { td.className = className; }
    td.textContent = text;
    return td;
  }

  // The study page's latest events, rebuilt from text only (never HTML: event data holds worker input).
  function applyEvents(events) {
    const body = document.querySelector("tbody[data-live-events]");
    if (!body || !events) { return; }
    const first = body.rows.length ? body.rows[0].dataset.key : null;
    const key = events.length ? events[0].time + events[0].kind : "";
    if (first === key) { return; }
    body.replaceChildren();
    events.forEach(function (e, i) {
      const row = body.insertRow();
      if (i === 0) { row.dataset.key = key; row.classList.add("changed"); }
      cell(row, e.time, "nowrap");
      cell(row, e.label || e.kind).title = e.kind;
      cell(row, e.actor);
      const data = cell(row, "", "data");
      Object.keys(e.data).forEach(function (k) {
        const span = document.createElement("span");
        span.className = "kv";
        const b = document.createElement("b");
        b.textContent = k;
        span.append(b, " " + e.data[k]);
        data.appendChild(span);
      });
    });
  }

  function apply(payload) {
    applyEvents(payload.events);
    payload.studies.forEach(function (study) {
      document.querySelectorAll('[data-study="' + CSS.escape(study.name) + '"]').forEach(function (scope) {
        fill(scope, study, study.display, true);
        study.systems.forEach(function (row) {
          scope.querySelectorAll('[data-system="' + CSS.escape(row.name) + '"]').forEach(function (tr) {
            fill(tr, row, null, false);
          });
        });
      });
    });
  }

  async function refresh() {
    try {
      const reply = await fetch(body.dataset.refresh, { headers: { "Accept": "application/json" },
                                                         credentials: "same-origin", cache: "no-store" });
      if (reply.status === 401) {
        status.textContent = "session ended — log in again";
        status.className = "live stale";
        return false;
      }
      if (!reply.ok) { throw new Error("HTTP " + reply.status); }
      apply(await reply.json());
      status.textContent = "live · updated " + new Date().toISOString().slice(11, 19) + " UTC";
      status.className = "live";
    } catch (err) {
      status.textContent = "cannot reach the server; retrying";
      status.className = "live stale";
    }
    return true;
  }

  if (body.dataset.refresh && status) {
    const every = Number(body.dataset.refreshMs) || 3000;
    status.textContent = "live";
    (async function loop() {
      if (await refresh()) { setTimeout(loop, every); }
    })();
  }

  // A form marked data-once sends once: a second click while it is on its way does nothing.
  document.querySelectorAll("form[data-once]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (form.dataset.sent) { event.preventDefault(); return; }
      form.dataset.sent = "1";
    });
  });
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.dataset.confirm)) { event.preventDefault(); }
    });
  });
})();
