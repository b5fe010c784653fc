// capsem ui: what the pages cannot do without script. Everything else is
// the server's HTML; this adds filtering the session list as one types,
// applying the timeline's filters on change, the host summary, reading on
// through a long session as the reader scrolls, and following a live one.
"use strict";
(function () {
  const body = document.body;
  const base = body.dataset.base;

  const sessionFilter = document.getElementById("session-filter");
  if (sessionFilter) {
    const rows = Array.from(document.querySelectorAll("#sessions tr.session"));
    const count = document.getElementById("session-count");
    sessionFilter.addEventListener("input", function () {
      const q = sessionFilter.value.trim().toLowerCase();
      let shown = 0;
      for (const r of rows) {
        r.hidden = q !== "" && !r.dataset.text.includes(q);
        if (!r.hidden) shown++;
      }
      count.textContent = shown + " of " + rows.length + " sessions";
    });
  }

  const session = body.dataset.session;
  if (!session) return;

  const filters = document.getElementById("filters");
  for (const el of filters.querySelectorAll("input[type=checkbox], select")) {
    el.addEventListener("change", function () { filters.requestSubmit(); });
  }
  // Empty fields stay out of the address: ?kind=http, not ?kind=http&host=&q=.
  filters.addEventListener("submit", function () {
    for (const el of filters.querySelectorAll("input[type=text], input[type=search], select")) {
      if (el.value === "") el.disabled = true;
    }
  });
  window.addEventListener("pageshow", function () {
    for (const el of filters.querySelectorAll(":disabled")) el.disabled = false;
  });

  const hosts = document.getElementById("hosts");
  fetch(hosts.dataset.src)
    .then(function (r) { return r.ok ? r.text() : r.text().then(function (t) { throw new Error(t); }); })
    .then(function (html) { hosts.innerHTML = html; })
    .catch(function (e) { hosts.querySelector("p").textContent = "the host summary failed: " + e.message; });

  const tbody = document.getElementById("rows");
  const more = document.getElementById("more");
  const query = body.dataset.query;
  const live = body.dataset.live === "1";
  let next = body.dataset.next;
  let done = body.dataset.done === "1";
  let busy = false;

  function visible(el) {
    const r = el.getBoundingClientRect();
    return r.top < window.innerHeight && r.bottom >= 0;
  }

  async function load() {
    if (busy) return;
    busy = true;
    try {
      const url = base + "s/" + encodeURIComponent(session) + "/rows?" + (query ? query + "&" : "") + "after=" + next;
      const r = await fetch(url);
      const text = await r.text();
      if (!r.ok) throw new Error(text);
      tbody.insertAdjacentHTML("beforeend", text);
      next = r.headers.get("X-Capsem-Next") || next;
      done = r.headers.get("X-Capsem-Done") === "1";
      more.textContent = done ? (live ? "following the session…" : "end of the session") : "more…";
    } catch (e) {
      more.textContent = "loading failed: " + e.message;
      done = true;
      return;
    } finally {
      busy = false;
    }
    // A filter that matched little may leave the end in view: read on.
    if (!done && visible(more)) load();
  }

  new IntersectionObserver(function (entries) {
    if (!done && entries.some(function (e) { return e.isIntersecting; })) load();
  }).observe(more);
  if (live) {
    setInterval(function () { if (done) load(); }, 2000);
  }
})();
