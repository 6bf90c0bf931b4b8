// Pages show live state (gates waiting, a run's status), so a page the browser brings back
// from its back/forward cache is out of date: load it again. The server also marks its
// pages `Cache-Control: no-store` (console/middleware.py), so a Back that is not served
// from that cache asks the server too.
//
// A form marked data-submit-once (a merge) sends once: its buttons are disabled as soon as
// it is submitted, so a double-click cannot send it twice.
//
// A live refresh redraws a whole part (the run's header, on every event of a running run):
// a confirmation a person has opened in it (Cancel run…, Resume…) stays open across the
// redraw, and keeps the focus it had, when the new part still offers it.
(function () {
  "use strict";
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) window.location.reload();
  });
  var openConfirms = {};  // part id -> [{name, focus}] while its redraw is on the way
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || !target.id || !target.querySelectorAll) return;
    var focused = document.activeElement;
    var open = [];
    target.querySelectorAll("details[data-confirm][open]").forEach(function (box) {
      var inside = box.contains(focused) && focused.matches("button, summary");
      open.push({name: box.dataset.confirm, focus: inside ? focused.tagName.toLowerCase() : ""});
    });
    if (open.length) openConfirms[target.id] = open; else delete openConfirms[target.id];
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var part = event.detail.elt;
    var open = part && part.id ? openConfirms[part.id] : null;
    if (!open) return;
    delete openConfirms[part.id];
    open.forEach(function (was) {
      var box = part.querySelector('details[data-confirm="' + was.name + '"]');
      if (!box) return;  // no longer offered (the run ended): nothing to keep open
      box.open = true;
      var again = was.focus ? box.querySelector(was.focus) : null;
      if (again) again.focus();
    });
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
