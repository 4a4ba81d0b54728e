// The live page: fetch the run's snapshot every two seconds and redraw when it changed (no reload); a click on
// a point or a program shows its change. The token, when the server asks for one, travels in a cookie.
"use strict";
(function () {
  let shown = null;
  function pick(id) {
    fetch("api/change?id=" + encodeURIComponent(id), {cache: "no-store"})
      .then(r => r.ok ? r.json() : null)
      .then(found => { MstarViews.change(document.getElementById("change"), found);
                       document.getElementById("change").scrollIntoView({block: "nearest"}); });
  }
  function poll() {
    fetch("api/run" + (shown === null ? "" : "?since=" + encodeURIComponent(shown)), {cache: "no-store"})
      .then(r => r.json())
      .then(snap => {
        const status = document.getElementById("status");
        if (snap.error) { status.textContent = snap.error; return; }
        status.textContent = "updated " + new Date().toLocaleTimeString();
        if (!snap.unchanged && snap.version !== shown) { shown = snap.version; MstarViews.render(snap, pick); }
      })
      .catch(error => { document.getElementById("status").textContent = "cannot reach the server: " + error; })
      .finally(() => setTimeout(poll, 2000));
  }
  poll();
})();
