// wf ui: load the counts fragment and keep the open page live, by short polling.
// No inline script anywhere (the Content-Security-Policy forbids it), no framework.
(function () {
  "use strict";

  function same(url) {
    return fetch(url, { credentials: "same-origin", headers: { "X-WF-Live": "1" } });
  }

  async function fill(element) {
    try {
      const response = await same(element.dataset.src);
      if (!response.ok) return;
      const html = await response.text();
      if (element.innerHTML !== html) element.innerHTML = html;
    } catch (error) {
      // the server is away for a moment: keep what is shown
    }
  }

  async function refresh() {
    if (document.hidden) return;
    const live = document.getElementById("live");
    if (live && !live.contains(document.activeElement)) {
      try {
        const response = await same(window.location.href);
        if (response.ok || response.status === 400) {
          const page = new DOMParser().parseFromString(await response.text(), "text/html");
          const fresh = page.getElementById("live");
          if (fresh && fresh.innerHTML !== live.innerHTML) live.innerHTML = fresh.innerHTML;
        }
      } catch (error) {
        // keep what is shown
      }
    }
    document.querySelectorAll("[data-src]").forEach(fill);
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-src]").forEach(fill);
    const every = Number(document.body.dataset.liveMs || "0");
    if (every > 0) window.setInterval(refresh, every);
  });
})();
