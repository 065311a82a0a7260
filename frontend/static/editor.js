// The submission editor: line numbers, and Tab that indents (Esc, then Tab, leaves it).
(function () {
  // A refused submission comes back with its reason, at #submit-error (the form's action
  // names it, so the browser scrolls there and focuses it); reached any other way, the
  // reason still takes the focus, so that on a phone it is on screen and read out.
  const refused = document.getElementById("submit-error");
  if (refused && location.hash !== "#submit-error") refused.focus();

  const area = document.getElementById("source");
  if (!area) return;
  const gutter = area.parentElement.querySelector(".gutter");
  let escaped = false;
  function numbers() {
    const n = area.value.split("\n").length;
    let text = "";
    for (let i = 1; i <= n; i++) text += i + "\n";
    gutter.textContent = text;
    gutter.scrollTop = area.scrollTop;
  }
  area.addEventListener("input", numbers);
  area.addEventListener("scroll", () => { gutter.scrollTop = area.scrollTop; });
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { escaped = true; return; }
    if (event.key === "Tab" && !escaped && !event.shiftKey) {
      event.preventDefault();
      const start = area.selectionStart, end = area.selectionEnd;
      area.setRangeText("    ", start, end, "end");
      numbers();
    }
    if (event.key !== "Shift") escaped = false;
  });
  numbers();

  // Switching language swaps in that language's skeleton, unless the code was edited.
  const language = document.getElementById("language");
  const data = document.getElementById("skeletons");
  if (language && data) {
    const skeletons = JSON.parse(data.textContent);
    const source = (lang) => (skeletons[lang] || {}).source || "";
    let current = language.value;
    language.addEventListener("change", () => {
      const untouched = area.value.trim() === "" || area.value === source(current);
      if (untouched && source(language.value)) {
        area.value = source(language.value);
        numbers();
      }
      current = language.value;
    });
  }
})();
