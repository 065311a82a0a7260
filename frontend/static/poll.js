// A queued or running submission: its place in the queue, how long it has waited, each
// check as it ends; when it is graded, the result replaces the waiting part of the page
// (no reload), the verdict is announced to screen readers and takes the focus.
// The server streams each change (server-sent events, /api/submissions/{id}/events); the
// page counts the seconds itself. Without EventSource, or when the stream fails, it asks
// once a second as before.
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
    clock = { seconds: running ? p.running_s : p.waiting_s, at: Date.now() };
    tick();
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

  let clock = { seconds: null, at: 0 };
  function tick() {
    const seconds = clock.seconds == null ? null : clock.seconds + (Date.now() - clock.at) / 1000;
    // a no-break space: the number never ends a line without its unit
    $("status-time").textContent = seconds == null ? "" : ` for ${Math.round(seconds)}\u00a0s`;
  }
  const ticking = setInterval(tick, 1000);

  async function finish(body) {
    clearInterval(ticking);
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

  let failures = 0;  // streams that ended without a word, in a row
  function stream() {
    const events = new EventSource(`/api/submissions/${id}/events`);
    let done = false;
    events.onmessage = async (message) => {
      failures = 0;
      const body = JSON.parse(message.data);
      if (body.status === "graded" || body.status === "error") {
        done = true;
        events.close();
        await finish(body);
      } else {
        show(body);
      }
    };
    events.onerror = () => {
      // the stream ended after its time, or the server is away (a restart): open a new
      // one; after three failures in a row, ask once a second instead
      if (done) return;
      events.close();
      failures += 1;
      setTimeout(failures < 3 ? stream : poll, 1000);
    };
  }
  if (window.EventSource) stream(); else setTimeout(poll, 1000);
})();
