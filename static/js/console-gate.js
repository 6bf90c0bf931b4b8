// The gate's primary button says what pressing it will do. Both labels are the server's
// (Gate.approve_label_for, rendered as data attributes): the script only picks the one for
// "no feedback written" or "feedback written", it never decides what a decision means.
(function () {
  "use strict";
  function feedbackOf(form) {
    return form.querySelector("[data-gate-feedback], [data-gate-comment]");
  }
  // Whether submitting `form` as it stands accepts the gate. The server renders both
  // answers (Gate.plain_approve_accepts, Gate.commented_approve_accepts); this only picks
  // the one for what is in the box.
  function acceptsNow(form) {
    if (!form) return false;
    var box = feedbackOf(form);
    var empty = !box || box.value.trim() === "";
    var answer = empty ? form.dataset.plainApproveAccepts : form.dataset.commentedApproveAccepts;
    return answer === "true";
  }
  function relabel(textarea) {
    var form = textarea.closest("form");
    var button = form && form.querySelector("[data-gate-primary]");
    if (!button) return;
    var written = textarea.value.trim() !== "";
    button.textContent = written ? button.dataset.labelWithFeedback : button.dataset.labelEmpty;
  }
  // A box with a limit (data-limit, the server's) counts what is typed, as the server counts
  // it (characters, a line break as one). Over the limit it says so; the text is never cut:
  // sent as it is, the server refuses it with its message and gives it back. The counter is
  // the one of the box's descriptions (aria-describedby) marked data-limit-counter.
  function counterOf(textarea) {
    var ids = (textarea.getAttribute("aria-describedby") || "").split(/\s+/);
    for (var i = 0; i < ids.length; i++) {
      var found = ids[i] && document.getElementById(ids[i]);
      if (found && found.hasAttribute("data-limit-counter")) return found;
    }
    return null;
  }
  function count(textarea) {
    var counter = counterOf(textarea);
    var limit = parseInt(textarea.dataset.limit, 10);
    // What happens to a text over the limit, in the box's own words (data-limit-refusal).
    var refusal = textarea.dataset.limitRefusal || "the gate refuses it";
    if (!counter || !limit) return;
    var length = Array.from(textarea.value).length;
    var over = length - limit;
    var say = function (n) { return n.toLocaleString("en-US"); };
    if (!length) {
      counter.textContent = "Up to " + say(limit) + " characters.";
    } else if (over > 0) {
      counter.textContent = say(length) + " of " + say(limit) + " characters: " + say(over) +
        " too many. Shorten it; as it is, " + refusal + ".";
    } else {
      counter.textContent = say(length) + " of " + say(limit) + " characters.";
    }
    counter.classList.toggle("over-limit", over > 0);
    textarea.classList.toggle("over-limit", over > 0);
  }
  document.addEventListener("input", function (event) {
    var target = event.target;
    if (!target.matches) return;
    if (target.matches("[data-gate-feedback]")) relabel(target);
    if (target.matches("textarea[data-limit]")) count(target);
  });
  function refresh(scope) {
    scope.querySelectorAll("[data-gate-feedback]").forEach(relabel);
    scope.querySelectorAll("textarea[data-limit]").forEach(count);
  }
  // A browser may restore typed text after a back/forward navigation; a refused decision
  // comes back with its text in the box.
  document.addEventListener("DOMContentLoaded", function () { refresh(document); });
  // After the settle: htmx then puts back the classes the server rendered.
  document.addEventListener("htmx:afterSettle", function () { refresh(document); });
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
  window.LoopGate = { acceptsNow: acceptsNow, feedbackOf: feedbackOf };
})();
