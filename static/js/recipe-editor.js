// A line-numbered editor for the recipe source: the textarea stays the real form field;
// a gutter beside it shows line numbers (lines with validation errors are marked), Tab
// indents with two spaces. Loaded as a file because the CSP forbids inline scripts.
(function () {
  "use strict";

  function lineCount(text) {
    return text.split("\n").length;
  }

  function enhance(textarea) {
    if (textarea.dataset.editorReady) return;
    textarea.dataset.editorReady = "1";
    var errorLines = (textarea.dataset.errorLines || "")
      .split(",")
      .filter(Boolean)
      .map(Number);

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
        fragment.appendChild(line);
      }
      gutter.replaceChildren(fragment);
      shown = count;
    }

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
  }

  function goToLine(textarea, number) {
    var lines = textarea.value.split("\n");
    var offset = 0;
    for (var i = 0; i < number - 1 && i < lines.length; i++) offset += lines[i].length + 1;
    var lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 18;
    textarea.scrollTop = Math.max(0, (number - 3) * lineHeight);
    textarea.setSelectionRange(offset, offset);
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
