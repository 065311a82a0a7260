// The submission editor: line numbers, and Tab that indents once the student has typed
// in it (until then Tab moves on, as everywhere; after, Esc then Tab leaves it).
(function () {
  // A refused submission comes back with its reason: it takes the focus, which scrolls it
  // into view (on a phone the form is thousands of pixels down) and has it read out.
  const refused = document.getElementById("submit-error");
  if (refused) refused.focus();

  // A chosen file is sent instead of the editor's code: say so, and offer the way back.
  const file = document.getElementById("file");
  const chosen = document.getElementById("file-chosen");
  if (file && chosen) {
    const said = chosen.querySelector("span");
    const show = () => {
      const name = file.files && file.files.length ? file.files[0].name : "";
      chosen.hidden = !name;
      said.textContent = name ? `Submit sends the file ${name}, not the code in the editor.` : "";
    };
    file.addEventListener("change", show);
    document.getElementById("file-clear").addEventListener("click", () => {
      file.value = "";
      show();
      file.focus();
    });
    show();  // a file kept by the browser's back button
  }

  const area = document.getElementById("source");
  if (!area) return;
  const gutter = area.parentElement.querySelector(".gutter");
  let escaped = false;
  let typed = false;  // Tab moves on until the student has edited the code here
  area.addEventListener("input", () => { typed = true; });
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
    if (event.key === "Tab" && typed && !escaped && !event.shiftKey) {
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
