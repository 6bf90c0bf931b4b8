// The gate's primary button says what pressing it will do. Both labels are the server's
// (Gate.approve_label_for, rendered as data attributes): the script only picks the one for
// "no feedback written" or "feedback written", it never decides what a decision means.
(function () {
  "use strict";
  function relabel(textarea) {
    var form = textarea.closest("form");
    var button = form && form.querySelector("[data-gate-primary]");
    if (!button) return;
    var written = textarea.value.trim() !== "";
    button.textContent = written ? button.dataset.labelWithFeedback : button.dataset.labelEmpty;
  }
  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("[data-gate-feedback]")) {
      relabel(event.target);
    }
  });
  // A browser may restore typed text after a back/forward navigation.
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-gate-feedback]").forEach(relabel);
  });
  // A live refresh that brings the same gate in the same state changes nothing a reviewer
  // could want, and would wipe what they typed and close an open "Reject…": keep the panel.
  // A form's own answer (a POST: a notice, an error) always replaces it.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "gate-panel") return;
    if ((event.detail.requestConfig || {}).verb !== "get") return;
    var incoming = /data-gate-state="([^"]*)"/.exec(event.detail.serverResponse || "");
    if (incoming && incoming[1] === target.dataset.gateState) {
      event.detail.shouldSwap = false;
    }
  });
})();
