// The gate's primary button says what pressing it will do: with the iteration's
// completion signalled and no feedback it accepts ("Accept & complete"); once feedback is
// typed it runs another iteration ("Continue"). The server applies the same rule.
(function () {
  "use strict";
  function relabel(textarea) {
    var form = textarea.closest("form[data-completion]");
    if (!form) return;
    var button = form.querySelector("[data-gate-primary]");
    if (!button) return;
    var completes = form.dataset.completion === "true" && textarea.value.trim() === "";
    button.textContent = completes ? "Accept & complete" : "Continue";
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
})();
