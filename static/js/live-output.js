// Live agent output on the run page: every character the agent wrote, in order.
//
// The stream sends `output` events {target, offset, text}; offsets count characters (code
// points) from the start of the iteration's output. A card drawn by the server carries the
// length of the text it was drawn with (data-live-length, from the database, which lags
// the agent by up to half a second), so text is kept here per target and whatever a card
// lacks is appended to it — whether the card existed when the text arrived, was drawn
// later, or was redrawn with older text.
(function () {
  "use strict";
  const MAX_TARGETS = 50;
  const logs = new Map(); // target -> {base, text, length}

  const hasSurrogates = (s) => /[\uD800-\uDFFF]/.test(s);
  const codePoints = (s) => (hasSurrogates(s) ? Array.from(s).length : s.length);
  const tail = (s, from) => (hasSurrogates(s) ? Array.from(s).slice(from).join("") : s.slice(from));

  function remember(target, offset, text) {
    const length = codePoints(text);
    let log = logs.get(target);
    if (log && offset <= log.base && offset + length >= log.base + log.length) {
      log = null; // covers all that is kept (the snapshot after a reconnect): take it whole
    }
    if (!log || offset > log.base + log.length) {
      log = { base: offset, text: "", length: 0 }; // the first text, or after a gap
    }
    const known = log.base + log.length;
    if (offset < log.base || offset + length <= known) return; // nothing new
    const fresh = tail(text, known - offset);
    log.text += fresh;
    log.length += codePoints(fresh);
    logs.delete(target);
    logs.set(target, log); // most recent last
    while (logs.size > MAX_TARGETS) logs.delete(logs.keys().next().value);
  }

  function show(pre) {
    const log = logs.get(pre.dataset.liveOutput);
    if (!log) return;
    const shown = Number(pre.dataset.liveLength || 0);
    const known = log.base + log.length;
    if (known <= shown || log.base > shown) return;
    pre.append(document.createTextNode(tail(log.text, shown - log.base)));
    pre.dataset.liveLength = String(known);
  }

  function showAll(root) {
    const scope = root && root.querySelectorAll ? root : document;
    for (const pre of scope.querySelectorAll("pre[data-live-output]")) show(pre);
  }

  function onOutput(event) {
    let message;
    try {
      message = JSON.parse(event.data);
    } catch (err) {
      return;
    }
    if (typeof message.target !== "string" || typeof message.text !== "string") return;
    remember(message.target, Number(message.offset) || 0, message.text);
    const selector = 'pre[data-live-output="' + CSS.escape(message.target) + '"]';
    for (const pre of document.querySelectorAll(selector)) show(pre);
  }

  document.addEventListener("htmx:sseOpen", function (event) {
    const source = event.detail && event.detail.source;
    if (source && !source.liveOutputListening) {
      source.liveOutputListening = true;
      source.addEventListener("output", onOutput);
    }
  });
  // A card drawn or redrawn by htmx gets what it lacks at once.
  document.addEventListener("htmx:afterSettle", (event) => showAll(event.target));
  document.addEventListener("htmx:load", (event) => showAll(event.target));
})();
