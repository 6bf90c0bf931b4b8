// Keys for gates, in the inbox and on run and gate pages: j / k select the next or previous
// gate ([data-gate-item], rendered by the server), a accepts it, f moves to its feedback,
// Enter opens it (inbox), ? shows the keys. Whether a gate can be accepted with one key
// comes from the page (data-plain-approve-accepts, see Gate.plain_approve_accepts and
// console-gate.js); this file only reads it. No key fires while typing in a field.
(function () {
  "use strict";
  var KEY = "loop-console:selected-gate";

  function typing(target) {
    if (!target || !target.closest) return false;
    return !!target.closest("input, textarea, select, [contenteditable=''], [contenteditable='true']");
  }
  function items() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-gate-item]"));
  }
  var fading = null;
  // What a key did, shown at the bottom of the window and read by screen readers. It stays
  // while a second `a` is awaited; anything else fades after a few seconds.
  function say(text, keep) {
    var status = document.getElementById("keys-status");
    if (!status) return;
    window.clearTimeout(fading);
    status.textContent = "";
    // A fresh text node, so the same words twice are still announced.
    window.setTimeout(function () { status.textContent = text; }, 30);
    if (!keep && text) fading = window.setTimeout(function () { status.textContent = ""; }, 6000);
  }
  function selected() {
    return document.querySelector("[data-gate-item].selected");
  }
  var armed = null; // the inbox row whose first `a` was pressed

  function select(item, quiet) {
    items().forEach(function (el) {
      el.classList.remove("selected");
      el.removeAttribute("aria-current");
    });
    if (armed) say("");  // a first `a` no longer stands once another gate is chosen
    armed = null;
    if (!item) return;
    item.classList.add("selected");
    item.setAttribute("aria-current", "true");
    try { window.sessionStorage.setItem(KEY, item.dataset.gateId || ""); } catch (e) { /* private mode */ }
    if (!quiet) {
      item.focus({ preventScroll: true });
      item.scrollIntoView({ block: "nearest" });
    }
  }
  function move(step) {
    var all = items();
    if (!all.length) { say("No gate is waiting."); return; }
    var index = all.indexOf(selected());
    var next = index < 0 ? (step > 0 ? 0 : all.length - 1) : Math.min(all.length - 1, Math.max(0, index + step));
    select(all[next]);
  }
  function current() {
    var item = selected();
    if (!item) {
      var all = items();
      if (all.length === 1) { select(all[0], true); item = all[0]; }
    }
    return item;
  }

  function accept() {
    var item = current();
    if (!item) { say("Select a gate first: press j."); return; }
    var form = item.matches("form") ? item : item.querySelector("form[data-gate-accept-form]");
    if (!form) {
      say("This gate needs a choice or feedback: open it and decide there.");
      return;
    }
    if (!window.LoopGate.acceptsNow(form)) {
      var box = window.LoopGate.feedbackOf(form);
      say(box && box.value.trim()
        ? "Feedback is written, so this would ask for another iteration: press the button to send it, or clear it to accept."
        : "Accepting this gate needs a choice or feedback: decide with the buttons.");
      return;
    }
    if (item.dataset.gatePage && armed !== item) {
      armed = item;
      say("Press a again to accept " + (item.getAttribute("aria-label") || "this gate") + ".", true);
      return;
    }
    armed = null;
    var button = form.querySelector("[data-gate-primary]");
    say("Accepting…");
    if (form.requestSubmit) { form.requestSubmit(button || undefined); } else { form.submit(); }
  }

  function feedback() {
    var item = current();
    if (!item) { say("Select a gate first: press j."); return; }
    var box = item.querySelector("[data-gate-feedback], [data-gate-comment]");
    if (box) { box.focus(); return; }
    if (item.dataset.gatePage) { window.location.assign(item.dataset.gatePage + "#feedback"); }
  }

  function open() {
    var item = current();
    if (item && item.dataset.gatePage) window.location.assign(item.dataset.gatePage);
  }

  function help() {
    var dialog = document.getElementById("keys-help");
    if (dialog && !dialog.open) dialog.showModal();
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target)) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    var dialog = document.getElementById("keys-help");
    if (dialog && dialog.open) return;
    var actions = { j: function () { move(1); }, k: function () { move(-1); }, a: accept, f: feedback, "?": help };
    var chosen = selected();
    if (event.key === "Enter" && chosen && event.target === chosen && chosen.dataset.gatePage) {
      event.preventDefault();
      open();
      return;
    }
    var action = actions[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("[data-keys-open]")) help();
  });

  // Keep the selection across a live refresh of the inbox or the gate panel.
  function restore(quiet) {
    var wanted;
    try { wanted = window.sessionStorage.getItem(KEY); } catch (e) { wanted = null; }
    var all = items();
    var found = all.filter(function (el) { return el.dataset.gateId === wanted; })[0];
    if (found) select(found, quiet);
  }
  document.addEventListener("htmx:afterSwap", function () { restore(true); });
  document.addEventListener("DOMContentLoaded", function () {
    if (window.location.hash === "#feedback") {
      var box = document.querySelector("[data-gate-item] [data-gate-feedback], [data-gate-item] [data-gate-comment]");
      if (box) { box.focus(); return; }
    }
    restore(true);
  });
})();
