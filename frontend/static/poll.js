// A queued or running submission: its place in the queue, how long it has waited, each
// check as it ends; when it is graded, the result replaces the waiting part of the page
// (no reload), the verdict is announced to screen readers and takes the focus.
(function () {
  const status = document.getElementById("status");
  if (!status) return;
  const id = status.dataset.id;
  const $ = (sel) => document.getElementById(sel);
  function ordinalLine(p) { return p ? `: number ${p} in line` : ""; }

  function show(body) {
    const p = body.progress || {};
    $("status-what").textContent = body.status === "queued" ? "Waiting in the queue" : "Being graded";
    $("status-where").textContent = body.status === "queued" ? ordinalLine(p.queue_position) : "";
    const running = body.status === "running";
    $("status-count").textContent = running && p.checks_total
      ? `, ${(p.checks || []).length} of ${p.checks_total} checks done` : "";
    const seconds = running ? p.running_s : p.waiting_s;
    // a no-break space: the number never ends a line without its unit
    $("status-time").textContent = seconds == null ? "" : ` for ${Math.round(seconds)}\u00a0s`;
    const list = $("status-checks");
    const checks = p.checks || [];
    // only new checks are added, so the live region reads each once
    for (let i = list.children.length; i < checks.length; i++) {
      const li = document.createElement("li");
      li.className = checks[i].passed ? "ok" : "bad";
      li.textContent = `${checks[i].passed ? "✓" : "✗"} ${checks[i].name}`;
      list.appendChild(li);
    }
  }

  async function finish(body) {
    try {
      const page = await fetch(location.href, { credentials: "same-origin" });
      const doc = new DOMParser().parseFromString(await page.text(), "text/html");
      const fresh = doc.getElementById("submission-body");
      if (!page.ok || !fresh) throw new Error("no page");
      $("submission-body").replaceWith(fresh);
      document.querySelectorAll('meta[http-equiv="refresh"]').forEach((m) => m.remove());
    } catch (e) { location.reload(); return; }
    const verdict = (body.result && body.result.verdict) || body.status;
    // a verdict that gives no score (HIP only compiled) has a null score: not "0 points"
    const score = body.score != null ? `, ${body.score} points`
      : (verdict === "compiled" ? ", not scored here" : "");
    $("announce").textContent = `Graded: ${verdict}${score}.`;
    const heading = $("verdict-h");
    if (heading) heading.focus();
  }

  async function poll() {
    try {
      const response = await fetch(`/api/submissions/${id}`, { credentials: "same-origin" });
      if (response.ok) {
        const body = await response.json();
        if (body.status === "graded" || body.status === "error") { await finish(body); return; }
        show(body);
      }
    } catch (e) { /* the network blinked: try again */ }
    setTimeout(poll, 1000);
  }
  setTimeout(poll, 1000);
})();
