// Choosing another number for a convergence chart: the choice is kept in #chart-choice,
// outside the chart fragment that live refreshes replace, and the chart is redrawn through
// the page's one refresher (#chart-refresh), which the live stream also triggers. Its
// requests run one after another and read the kept choice, so a refresh that was already
// on its way with the old choice cannot undo the new one; the address keeps it as well, so
// a reload shows the same chart. Without JavaScript the chart's own form submits the choice
// with the page.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var select = event.target;
    if (!select.matches || !select.matches("[data-chart-metric]")) return;
    var kept = document.getElementById("chart-choice");
    var refresher = document.getElementById("chart-refresh");
    if (!kept || !refresher || !window.htmx) return;
    var input = kept.querySelector('input[name="' + CSS.escape(select.name) + '"]');
    if (!input) {
      input = document.createElement("input");
      input.type = "hidden";
      input.name = select.name;
      kept.appendChild(input);
    }
    input.value = select.value;
    // The choice is in the address too: a reload, a bookmark or a shared link keeps it.
    var address = new URL(window.location.href);
    address.searchParams.set(select.name, select.value);
    window.history.replaceState(window.history.state, "", address.toString());
    window.htmx.trigger(refresher, "chart-metric");
  });
})();
