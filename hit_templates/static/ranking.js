// The ranking HIT: one ordered list of replies per message, best first. A reply moves by drag and drop,
// by its Move up / Move down buttons, or by the arrow keys while it has focus; each move is announced
// (aria-live) and saved as the whole order ("C>A=D>B": ">" between places, "=" between replies the worker
// ticked as level). "This order is right" saves an order left as shown. Submit waits for every list.
(function () {
  "use strict";
  const form = document.getElementById("task");
  if (!form || !form.dataset.base) return;
  const api = window.hitkitApi(form.dataset.base);
  const shownAt = Date.now();
  const units = Array.from(form.querySelectorAll("fieldset.unit"));
  const announce = (text) => { document.getElementById("announce").textContent = text; };
  const itemsOf = (unit) => Array.from(unit.querySelectorAll("li.rank-item"));
  const tied = (li) => { const box = li.querySelector("input.tie"); return !!box && box.checked; };

  function order(unit) {
    return itemsOf(unit).map((li, i) => (i && tied(li) ? "=" : i ? ">" : "") + li.dataset.label).join("");
  }

  function placeOf(unit, li) {
    let place = 0;
    itemsOf(unit).forEach((other, i) => { if (!(i && tied(other))) place = i + 1; if (other === li) li.dataset.place = place; });
    return Number(li.dataset.place);
  }

  function refresh(unit) {
    const items = itemsOf(unit);
    items.forEach((li, i) => {
      const box = li.querySelector("input.tie");
      if (box && i === 0) box.checked = false;
      const place = placeOf(unit, li);
      li.querySelector(".place").textContent = place;
      li.setAttribute("aria-label", `Reply ${li.dataset.label}, place ${place} of ${items.length}`);
    });
    document.getElementById("ranked").textContent = units.filter((u) => u.dataset.done === "1").length;
  }

  // One save at a time per list, the latest order last: moves made while a save is on its way are sent
  // after it, so a slower earlier request can never overwrite a later order.
  async function save(unit) {
    refresh(unit);
    const status = unit.querySelector(".saved");
    status.textContent = "saving…";
    if (unit.dataset.saving === "1") { unit.dataset.again = "1"; return; }
    unit.dataset.saving = "1";
    let reply;
    do {
      unit.dataset.again = "";
      reply = await api("answer", { unit_id: unit.dataset.unit, question: "order", value: order(unit),
                                    elapsed_s: (Date.now() - shownAt) / 1000 });
    } while (unit.dataset.again === "1");
    unit.dataset.saving = "";
    if (reply.ok) unit.dataset.done = "1";
    status.textContent = reply.ok ? "saved" : (reply.body.error || "not saved — please try again");
    refresh(unit);
  }

  function move(li, step) {
    const unit = li.closest("fieldset.unit");
    const list = li.parentElement;
    const other = step < 0 ? li.previousElementSibling : li.nextElementSibling;
    if (!other) { announce(`Reply ${li.dataset.label} is already ${step < 0 ? "first" : "last"}.`); return; }
    // The neighbour moves, not the reply itself, so that the reply (or its button) keeps the focus.
    if (step < 0) list.insertBefore(other, li.nextElementSibling); else list.insertBefore(other, li);
    refresh(unit);
    announce(`Reply ${li.dataset.label} moved to place ${placeOf(unit, li)} of ${itemsOf(unit).length}.`);
    save(unit);
  }

  units.forEach((unit) => {
    const given = unit.dataset.given;
    if (given) {
      const list = unit.querySelector("ol.ranking");
      const byLabel = Object.fromEntries(itemsOf(unit).map((li) => [li.dataset.label, li]));
      given.split(">").forEach((group) => group.split("=").forEach((label, i) => {
        const li = byLabel[label];
        if (!li) return;
        list.appendChild(li);
        const box = li.querySelector("input.tie");
        if (box) box.checked = i > 0;
      }));
      unit.dataset.done = "1";
      unit.querySelector(".saved").textContent = "saved";
    }
    refresh(unit);
    unit.addEventListener("click", (event) => {
      const button = event.target.closest("button");
      if (!button) return;
      if (button.classList.contains("move")) move(button.closest("li"), Number(button.dataset.step));
      if (button.classList.contains("confirm")) save(unit);
    });
    unit.addEventListener("change", (event) => { if (event.target.classList.contains("tie")) save(unit); });
    unit.addEventListener("keydown", (event) => {
      if (!event.target.matches("li.rank-item") || !["ArrowUp", "ArrowDown"].includes(event.key)) return;
      event.preventDefault();
      move(event.target, event.key === "ArrowUp" ? -1 : 1);
    });
    let dragged = null;
    unit.addEventListener("dragstart", (event) => { dragged = event.target.closest("li.rank-item"); });
    unit.addEventListener("dragover", (event) => { if (dragged && event.target.closest("li.rank-item")) event.preventDefault(); });
    unit.addEventListener("drop", (event) => {
      const target = event.target.closest("li.rank-item");
      if (!dragged || !target || target === dragged || target.parentElement !== dragged.parentElement) return;
      event.preventDefault();
      const box = target.getBoundingClientRect();
      target.parentElement.insertBefore(dragged, event.clientY > box.top + box.height / 2 ? target.nextElementSibling : target);
      announce(`Reply ${dragged.dataset.label} moved to place ${placeOf(unit, dragged)} of ${itemsOf(unit).length}.`);
      dragged = null;
      save(unit);
    });
  });

  form.addEventListener("submit", (event) => {
    const open = units.find((u) => u.dataset.done !== "1");
    if (!open) return;
    event.preventDefault();
    document.getElementById("submit-status").textContent =
      "Please put every message's replies in order (press “This order is right” where the shown order is right).";
    open.scrollIntoView();
  });
})();
