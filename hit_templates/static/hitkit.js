// Saves every answer the moment it is given, so a reload or a dropped connection loses nothing.
(function () {
  const form = document.getElementById("task");
  if (!form || !form.dataset.answerUrl) return;
  const shownAt = Date.now();
  const t = window.hitkitT;
  const counter = document.getElementById("answered");

  function refreshCount() {
    const units = form.querySelectorAll("fieldset.unit");
    let done = 0;
    units.forEach((u) => { if (u.querySelector(".note") || u.querySelector("input:checked")) done += 1; });
    counter.textContent = done;
  }

  form.addEventListener("change", async (event) => {
    const input = event.target;
    const match = /^answer-([0-9a-f]+)-(.+)$/.exec(input.name || "");
    if (!match) return;
    const status = input.closest("fieldset").querySelector(".saved");
    status.textContent = t("saving");
    try {
      const reply = await fetch(form.dataset.answerUrl, {
        method: "POST",
        headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify({ unit_id: match[1], question: match[2], value: input.value,
                               elapsed_s: (Date.now() - shownAt) / 1000 }),
      });
      const body = await reply.json();
      status.textContent = reply.ok ? t("saved") : (body.error || t("not_saved"));
    } catch (err) {
      status.textContent = t("not_saved_offline");
    }
    refreshCount();
  });
  refreshCount();
})();
