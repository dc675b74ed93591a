// kfjob ui: live updates (server-sent events), filters, confirmations, log streaming.
// The server renders every row and section; this script only puts them in place. Text from
// the cluster that the script itself shows (log lines, messages) goes in as text, never HTML.
"use strict";
document.documentElement.classList.add("js");

const csrf = document.querySelector('meta[name="csrf-token"]').content;

// ------------------------------------------------------------------------- ages
function human(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return s + "s";
  if (s < 3600) return s < 600 ? Math.floor(s / 60) + "m" + (s % 60) + "s" : Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d" + Math.floor((s % 86400) / 3600) + "h";
}
function refreshAges(root) {
  const now = Date.now();
  for (const t of (root || document).querySelectorAll("time[datetime]")) {
    const when = Date.parse(t.getAttribute("datetime"));
    if (!isNaN(when)) t.textContent = human((now - when) / 1000);
  }
}
setInterval(refreshAges, 2000);

function setStatus(el, text) {
  if (el && el.textContent !== text) el.textContent = text;
}

// ------------------------------------------------------------------------- jobs page
function jobsPage() {
  const tbody = document.querySelector("#jobs tbody");
  const live = document.getElementById("live");
  const empty = document.getElementById("no-jobs");
  const filters = {
    kind: document.getElementById("filter-kind"),
    namespace: document.getElementById("filter-namespace"),
    state: document.getElementById("filter-state"),
  };
  function matches(tr) {
    return Object.entries(filters).every(([k, sel]) => !sel.value || tr.dataset[k] === sel.value);
  }
  function ensureOption(sel, value) {
    if (!value || [...sel.options].some((o) => o.value === value)) return;
    const o = document.createElement("option");
    o.value = value;
    o.textContent = value;
    sel.appendChild(o);
  }
  function apply() {
    let shown = 0;
    for (const tr of tbody.rows) {
      tr.hidden = !matches(tr);
      if (!tr.hidden) shown++;
    }
    empty.hidden = shown > 0;
  }
  function rowFrom(html) {
    const t = document.createElement("tbody");
    t.innerHTML = html; // server-rendered, escaped markup
    return t.firstElementChild;
  }
  function created(tr) {
    const t = tr.querySelector("time[datetime]");
    return t ? t.getAttribute("datetime") : "";
  }
  function place(tr) {
    const key = tr.dataset.key;
    const old = [...tbody.rows].find((r) => r.dataset.key === key);
    if (old) {
      old.replaceWith(tr);
    } else {
      const later = [...tbody.rows].find((r) => created(r) < created(tr));
      tbody.insertBefore(tr, later || null);
    }
    ensureOption(filters.namespace, tr.dataset.namespace);
    ensureOption(filters.state, tr.dataset.state);
    refreshAges(tr);
  }
  for (const sel of Object.values(filters)) {
    sel.addEventListener("change", () => {
      apply();
      const q = new URLSearchParams();
      for (const [k, s] of Object.entries(filters)) if (s.value) q.set(k, s.value);
      history.replaceState(null, "", q.toString() ? "?" + q : location.pathname);
    });
  }
  const source = new EventSource("/events/jobs");
  source.addEventListener("open", () => setStatus(live, "Live: updates as jobs change."));
  source.addEventListener("error", () => setStatus(live, "Disconnected; reconnecting…"));
  source.addEventListener("reset", (e) => {
    const data = JSON.parse(e.data);
    tbody.replaceChildren();
    for (const row of data.rows) place(rowFrom(row.html));
    apply();
    setStatus(live, "Live: updates as jobs change.");
  });
  source.addEventListener("upsert", (e) => {
    place(rowFrom(JSON.parse(e.data).html));
    apply();
  });
  source.addEventListener("delete", (e) => {
    const key = JSON.parse(e.data).key;
    const tr = [...tbody.rows].find((r) => r.dataset.key === key);
    if (tr) tr.remove();
    apply();
  });
  apply();
}

// ------------------------------------------------------------------------- one job
function jobPage(root) {
  const live = document.getElementById("live");
  const result = document.getElementById("action-result");
  const source = new EventSource(root.dataset.stream);
  source.addEventListener("open", () => setStatus(live, "Live: the page follows the job."));
  source.addEventListener("error", () => {
    if (source.readyState !== EventSource.CLOSED) setStatus(live, "Disconnected; reconnecting…");
  });
  // What the server last sent for each section, as the browser serialises it: an update with
  // the same markup (the first one repeats the page) leaves the section, and focus, alone.
  const seen = {};
  const normal = document.createElement("template");
  for (const el of document.querySelectorAll("[id^=sec-]")) seen[el.id] = el.innerHTML;
  source.addEventListener("sections", (e) => {
    const sections = JSON.parse(e.data);
    let podsNew = false;
    for (const [id, html] of Object.entries(sections)) {
      const el = document.getElementById("sec-" + id);
      if (!el) continue;
      normal.innerHTML = html;
      if (seen[el.id] === normal.innerHTML) continue;
      seen[el.id] = normal.innerHTML;
      if (id === "pods") podsNew = true;
      const focused = document.activeElement && el.contains(document.activeElement)
        ? document.activeElement.getAttribute("data-pod") || document.activeElement.tagName : null;
      el.innerHTML = html; // server-rendered, escaped markup
      refreshAges(el);
      if (focused) {
        const again = el.querySelector(`[data-pod="${CSS.escape(focused)}"]`) || el.querySelector("button");
        if (again) again.focus();
      }
    }
    if (podsNew) podsChanged();
    setStatus(live, "Live: the page follows the job.");
  });
  source.addEventListener("refused", (e) => {
    const message = JSON.parse(e.data).message;
    setStatus(live, message ? "The API server refused to show " + message : "Live: the page follows the job.");
  });
  source.addEventListener("gone", (e) => {
    setStatus(live, JSON.parse(e.data).message);
    source.close();
  });

  // Actions: confirm in a dialog, then POST with the page's token; show what the API said.
  const dialog = document.getElementById("confirm");
  document.addEventListener("submit", (e) => {
    const form = e.target;
    if (!form.dataset || !form.dataset.action) return;
    e.preventDefault();
    document.getElementById("confirm-text").textContent = form.dataset.confirm;
    const ok = document.getElementById("confirm-ok");
    ok.textContent = form.querySelector("button").textContent;
    dialog.returnValue = "";
    dialog.onclose = () => {
      if (dialog.returnValue === "ok") act(form);
      else form.querySelector("button").focus();
    };
    dialog.showModal();
    document.getElementById("confirm-cancel").focus();
  });
  async function act(form) {
    result.className = "";
    result.textContent = "Sending…";
    let message;
    let ok = false;
    try {
      const resp = await fetch(form.action, {
        method: "POST",
        headers: {
          "X-CSRF-Token": csrf,
          Accept: "application/json",
          "Content-Type": "application/x-www-form-urlencoded",
        },
        body: new URLSearchParams(new FormData(form)),
      });
      const data = await resp.json();
      ok = data.ok;
      message = data.message;
    } catch (err) {
      message = "kfjob ui did not answer: " + err;
    }
    result.className = "alert " + (ok ? "alert-ok" : "alert-error");
    result.textContent = message;
    if (ok && form.dataset.action === "delete") {
      const back = document.createElement("a");
      back.href = "/";
      back.textContent = " Back to the jobs.";
      result.appendChild(back);
    }
  }

  // Logs.
  const podSel = document.getElementById("log-pod");
  const contSel = document.getElementById("log-container");
  const follow = document.getElementById("log-follow");
  const previous = document.getElementById("log-previous");
  const out = document.getElementById("log-output");
  const status = document.getElementById("log-status");
  const stopBtn = document.getElementById("log-stop");
  let logs = null;
  const MAX_LINES = 10000;

  function pods() {
    return [...document.querySelectorAll("#pods-table tr[data-pod]")].map((tr) => ({
      name: tr.dataset.pod,
      containers: (tr.dataset.containers || "").split(" ").filter(Boolean),
    }));
  }
  function fillContainers() {
    const pod = pods().find((p) => p.name === podSel.value);
    const keep = contSel.value;
    contSel.replaceChildren(...(pod ? pod.containers : []).map((c) => new Option(c, c)));
    if ([...contSel.options].some((o) => o.value === keep)) contSel.value = keep;
  }
  function podsChanged() {
    const keep = podSel.value;
    podSel.replaceChildren(...pods().map((p) => new Option(p.name, p.name)));
    if ([...podSel.options].some((o) => o.value === keep)) podSel.value = keep;
    fillContainers();
  }
  podSel.addEventListener("change", fillContainers);
  function stop(text) {
    if (logs) logs.close();
    logs = null;
    stopBtn.disabled = true;
    if (text) setStatus(status, text);
  }
  function start() {
    stop();
    out.textContent = "";
    if (!podSel.value) {
      setStatus(status, "No pod to show.");
      return;
    }
    const q = new URLSearchParams({ container: contSel.value });
    if (follow.checked) q.set("follow", "1");
    if (previous.checked) q.set("previous", "1");
    const what = `${podSel.value}${contSel.value ? " (" + contSel.value + ")" : ""}`;
    const url = `/logs/${encodeURIComponent(root.dataset.namespace)}/${encodeURIComponent(podSel.value)}?${q}`;
    logs = new EventSource(url);
    stopBtn.disabled = false;
    setStatus(status, `Log of ${what}${follow.checked ? ", following" : ""}.`);
    logs.addEventListener("lines", (e) => {
      const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 8;
      out.appendChild(document.createTextNode(JSON.parse(e.data).join("\n") + "\n"));
      while (out.childNodes.length > MAX_LINES / 10) out.removeChild(out.firstChild);
      if (atEnd) out.scrollTop = out.scrollHeight;
    });
    logs.addEventListener("end", () => stop(`Log of ${what}: the end (the container stopped).`));
    logs.addEventListener("failed", (e) => stop(`No log of ${what}: ${JSON.parse(e.data).message}`));
    logs.addEventListener("error", () => {
      if (logs && logs.readyState === EventSource.CLOSED) stop(`Log of ${what}: stream closed.`);
    });
  }
  document.getElementById("log-form").addEventListener("submit", (e) => {
    e.preventDefault();
    start();
  });
  stopBtn.addEventListener("click", () => stop("Stopped."));
  document.addEventListener("click", (e) => {
    const btn = e.target.closest && e.target.closest("button.show-logs");
    if (!btn) return;
    podsChanged();
    podSel.value = btn.dataset.pod;
    fillContainers();
    start();
    document.getElementById("h-logs").scrollIntoView();
    out.focus();
  });
  podsChanged();
}

// ------------------------------------------------------------------------- start
document.addEventListener("DOMContentLoaded", () => {
  const job = document.getElementById("job");
  if (job) jobPage(job); // first: it keeps the sections as the server sent them
  refreshAges();
  if (document.getElementById("jobs")) jobsPage();
  const errors = document.getElementById("render-errors");
  if (errors) errors.focus();
});
