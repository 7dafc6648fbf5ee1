// Proctor console: our own script, loaded from /console/static (the policy forbids inline
// script). Four behaviours, all opt-in by data attributes:
//   data-live="URL"       live figures over Server-Sent Events: each message is a JSON object
//                         whose keys name [data-field] elements inside; event "end" closes.
//   data-confirm="TEXT"   a form asks before it is sent.
//   data-busy="TEXT"      a form's submit button shows TEXT and is disabled while it is sent.
//   data-refresh="S"      the page is read again after S seconds (a list of live runs).
"use strict";

function followLive(root) {
  const source = new EventSource(root.dataset.live);
  const status = root.querySelector("[data-live-status]");
  const show = (text) => { if (status) status.textContent = text; };
  source.onopen = () => show("live");
  source.onmessage = (event) => {
    const figures = JSON.parse(event.data);
    for (const [name, value] of Object.entries(figures)) {
      for (const target of root.querySelectorAll(`[data-field="${name}"]`)) {
        if (target.tagName === "PROGRESS") target.value = Number(value);
        else target.textContent = String(value);
      }
    }
  };
  source.addEventListener("end", () => { show("finished"); source.close(); });
  source.onerror = () => show("reconnecting…");
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach(followLive);
  const refresh = document.querySelector("[data-refresh]");
  if (refresh) {
    const seconds = Math.max(1, Number(refresh.dataset.refresh) || 5);
    setTimeout(() => window.location.reload(), seconds * 1000);
  }
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  });
  document.querySelectorAll("form[data-busy]").forEach((form) => {
    form.addEventListener("submit", () => {
      const button = form.querySelector("button[type=submit], button:not([type])");
      if (button) { button.disabled = true; button.textContent = form.dataset.busy; }
    });
  });
});
