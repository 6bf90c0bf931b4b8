// A running run's duration keeps counting between server refreshes: every element with
// data-running-since (an ISO time) shows the time since then, in the same words the
// server uses (850 ms, 4.2 s, 3 min 5 s, 1 h 2 min).
(function () {
  "use strict";
  function words(ms) {
    if (ms < 1000) return Math.max(0, Math.floor(ms)) + " ms";
    var seconds = ms / 1000;
    if (seconds < 60) return seconds.toFixed(1) + " s";
    var whole = Math.floor(seconds);
    var minutes = Math.floor(whole / 60);
    if (minutes < 60) return minutes + " min " + (whole % 60) + " s";
    return Math.floor(minutes / 60) + " h " + (minutes % 60) + " min";
  }
  function tick() {
    document.querySelectorAll("[data-running-since]").forEach(function (el) {
      var since = Date.parse(el.dataset.runningSince);
      if (!isNaN(since)) el.textContent = words(Date.now() - since);
    });
  }
  setInterval(tick, 1000);
})();
