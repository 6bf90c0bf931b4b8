// Pages show live state (gates waiting, a run's status), so a page the browser brings back
// from its back/forward cache is out of date: load it again. The server also marks its
// pages `Cache-Control: no-store` (console/middleware.py), so a Back that is not served
// from that cache asks the server too.
//
// A form marked data-submit-once (a merge) sends once: its buttons are disabled as soon as
// it is submitted, so a double-click cannot send it twice.
(function () {
  "use strict";
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) window.location.reload();
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("form[data-submit-once]")) return;
    if (form.dataset.submitted) { event.preventDefault(); return; }
    form.dataset.submitted = "true";
    // After the browser has read the form: a disabled button's value would not be sent.
    window.setTimeout(function () {
      form.querySelectorAll("button[type=submit], button:not([type])").forEach(function (button) {
        button.disabled = true;
      });
    }, 0);
  });
})();
