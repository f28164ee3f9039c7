// The rating HIT: one fieldset per response, one 0–100 slider per statement. Each slider's value is
// saved the moment it is let go (with the seconds since the page appeared); Submit waits until every
// slider has been moved at least once, so an untouched 50 is never taken for an answer.
(function () {
  "use strict";
  const form = document.getElementById("task");
  if (!form || !form.dataset.base) return;
  const api = window.hitkitApi(form.dataset.base);
  const t = window.hitkitT;
  const shownAt = Date.now();
  const units = Array.from(form.querySelectorAll("fieldset.unit"));
  const untouched = (unit) => unit.querySelectorAll(".slider.untouched").length;

  function refreshCount() {
    document.getElementById("rated").textContent = units.filter((u) => !untouched(u)).length;
  }

  form.addEventListener("input", (event) => {
    const slider = event.target.closest(".slider");
    if (slider) slider.classList.remove("untouched");
  });

  form.addEventListener("change", async (event) => {
    const match = /^answer-([0-9a-f]+)-(.+)$/.exec(event.target.name || "");
    if (!match) return;
    event.target.closest(".slider").classList.remove("untouched");
    refreshCount();
    const status = event.target.closest("fieldset").querySelector(".saved");
    status.textContent = t("saving");
    const reply = await api("answer", { unit_id: match[1], question: match[2], value: event.target.value,
                                        elapsed_s: (Date.now() - shownAt) / 1000 });
    status.textContent = reply.ok ? t("saved") : (reply.body.error || t("not_saved_later"));
  });

  form.addEventListener("submit", (event) => {
    const open = units.find((u) => untouched(u));
    if (!open) return;
    event.preventDefault();
    document.getElementById("submit-status").textContent =
      t("move_sliders");
    open.scrollIntoView();
  });
  refreshCount();
})();
