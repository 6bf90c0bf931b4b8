// A line-numbered editor for the recipe source: the textarea stays the real form field;
// a gutter beside it shows line numbers (lines with validation errors are marked), Tab
// indents with two spaces. Loaded as a file because the CSP forbids inline scripts.
(function () {
  "use strict";

  function lineCount(text) {
    return text.split("\n").length;
  }

  function numbers(list) {
    return (list || "").split(",").filter(Boolean).map(Number);
  }

  function enhance(textarea) {
    if (textarea.dataset.editorReady) return;
    textarea.dataset.editorReady = "1";
    var errorLines = numbers(textarea.dataset.errorLines);
    var warningLines = numbers(textarea.dataset.warningLines);

    var wrapper = document.createElement("div");
    wrapper.className = "recipe-editor";
    var gutter = document.createElement("div");
    gutter.className = "recipe-editor-gutter";
    gutter.setAttribute("aria-hidden", "true");
    textarea.parentNode.insertBefore(wrapper, textarea);
    wrapper.appendChild(gutter);
    wrapper.appendChild(textarea);

    var shown = 0;
    function renderNumbers() {
      var count = lineCount(textarea.value);
      if (count === shown) return;
      var fragment = document.createDocumentFragment();
      for (var n = 1; n <= count; n++) {
        var line = document.createElement("div");
        line.textContent = String(n);
        if (errorLines.indexOf(n) !== -1) line.className = "has-error";
        else if (warningLines.indexOf(n) !== -1) line.className = "has-warning";
        fragment.appendChild(line);
      }
      gutter.replaceChildren(fragment);
      shown = count;
    }

    // The gutter is as tall as the textarea (see the CSS) and scrolls with it, so line n's
    // number stays level with line n however far the text is scrolled.
    function syncScroll() {
      gutter.scrollTop = textarea.scrollTop;
    }

    textarea.addEventListener("input", renderNumbers);
    textarea.addEventListener("scroll", syncScroll);
    textarea.addEventListener("keydown", function (event) {
      if (event.key !== "Tab" || event.shiftKey || event.ctrlKey || event.altKey) return;
      event.preventDefault();
      var start = textarea.selectionStart;
      var end = textarea.selectionEnd;
      textarea.setRangeText("  ", start, end, "end");
      renderNumbers();
    });
    renderNumbers();
    if (errorLines.length) goToLine(textarea, errorLines[0]);
    syncScroll();
  }

  function goToLine(textarea, number) {
    var lines = textarea.value.split("\n");
    var offset = 0;
    for (var i = 0; i < number - 1 && i < lines.length; i++) offset += lines[i].length + 1;
    var lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 18;
    textarea.setSelectionRange(offset, offset);
    textarea.scrollTop = Math.max(0, (number - 3) * lineHeight);
  }

  function init() {
    document.querySelectorAll("textarea.recipe-source").forEach(enhance);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
