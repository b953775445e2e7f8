// Runtime dashboard: lease countdowns. Loaded from /ui/static (the CSP
// allows no inline script).
"use strict";
(function () {
  function fmt(s) {
    if (s <= 0) return "ended";
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h " + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }
  function tick() {
    var now = Math.floor(Date.now() / 1000);
    document.querySelectorAll("[data-deadline]").forEach(function (el) {
      var end = parseInt(el.getAttribute("data-deadline"), 10);
      if (!isNaN(end)) el.textContent = fmt(end - now);
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("DOMContentLoaded", tick);
})();
