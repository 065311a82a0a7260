// The submission editor: line numbers, and Tab that indents (Esc, then Tab, leaves it).
(function () {
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
})();
