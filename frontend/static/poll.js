// A queued or running submission: ask the API for its status, reload when it is done.
(function () {
  const status = document.getElementById("status");
  if (!status) return;
  const id = status.dataset.id;
  const words = { queued: "Waiting in the queue…", running: "Being graded…" };
  async function poll() {
    try {
      const response = await fetch(`/api/submissions/${id}`, { credentials: "same-origin" });
      if (response.ok) {
        const body = await response.json();
        if (body.status === "graded" || body.status === "error") { location.reload(); return; }
        status.textContent = words[body.status] || body.status;
      }
    } catch (e) { /* the network blinked: try again */ }
    setTimeout(poll, 1000);
  }
  setTimeout(poll, 1000);
})();
