// The Spot The Bot HIT: for each conversation excerpt in the worker's order — step 1, label both
// speakers; step 2, the three preference questions — then submit. Each answer is saved the moment
// it is given, with the seconds since the excerpt appeared, so a reload resumes where the worker was.
// Keys 1/2/3 answer the highlighted question, Enter continues. Conversation text is only ever
// inserted with textContent, never as HTML.
(function () {
  "use strict";
  const root = document.getElementById("stb");
  if (!root) return;
  const base = root.dataset.base;
  const $ = (id) => document.getElementById(id);
  const LABELS = ["label_0", "label_1"];
  let units = [];
  let answers = {};
  let current = null;
  let step = null;
  let shownAt = Date.now();
  const pending = new Set();  // saves under way: Continue waits for them

  const api = window.hitkitApi(base);
  const t = window.hitkitT;

  const given = (unit, question) => (answers[unit.unit_id] || {})[question];
  const complete = (unit) => unit.questions.every((q) => given(unit, q.name) !== undefined);
  const stepQuestions = () => (step === "labels" ? LABELS : current.features.map((f) => f.question));
  const fieldsets = () => Array.from(document.querySelectorAll(
    step === "labels" ? "#stb-step-labels .stb-question" : "#stb-step-preferences .stb-question"));

  function status(text) { $("stb-status").textContent = text; }

  function showProgress() {
    const done = units.filter(complete).length;
    $("stb-done").textContent = String(done);
    $("stb-progress").value = done;
    $("stb-number").textContent = current ? String(units.indexOf(current) + 1) : String(units.length);
  }

  function highlight() {
    // The first unanswered question of the step takes the 1/2/3 keys.
    let active = null;
    fieldsets().forEach((fs) => {
      fs.classList.remove("active");
      if (active === null && !fs.querySelector("input:checked")) active = fs;
    });
    if (active) active.classList.add("active");
    return active;
  }

  function render() {
    current = units.find((u) => !complete(u)) || null;
    showProgress();
    if (current === null) {
      $("stb-segment").hidden = true;
      $("stb-finished").hidden = false;
      $("submit").focus();
      return;
    }
    const list = $("stb-turns");
    list.replaceChildren();
    current.turns.forEach((turn) => {
      const item = document.createElement("li");
      item.className = "entity-" + turn.entity;
      const who = document.createElement("span");
      who.className = "who";
      who.textContent = t(turn.entity === 0 ? "speaker_a" : "speaker_b");
      item.appendChild(who);
      item.appendChild(document.createTextNode(turn.text));
      list.appendChild(item);
    });
    const labelled = LABELS.every((q) => given(current, q) !== undefined);
    step = labelled ? "preferences" : "labels";
    $("stb-step-labels").hidden = step !== "labels";
    $("stb-step-preferences").hidden = step !== "preferences";
    document.querySelectorAll("#stb-segment input[type=radio]").forEach((input) => {
      input.checked = given(current, input.name) === input.value;
    });
    $("stb-segment").hidden = false;
    $("stb-finished").hidden = true;
    status("");
    highlight();
    window.scrollTo(0, 0);
  }

  async function answer(input) {
    const unit = current;
    status(t("saving"));
    const saving = api("answer", { unit_id: unit.unit_id, question: input.name, value: input.value,
                                   elapsed_s: (Date.now() - shownAt) / 1000 });
    pending.add(saving);
    const reply = await saving;
    pending.delete(saving);
    if (!reply.ok) {
      status(reply.body.error || t("not_saved"));
      return;
    }
    answers[unit.unit_id] = Object.assign(answers[unit.unit_id] || {}, { [input.name]: input.value });
    status(t("saved"));
    highlight();
  }

  async function onward() {
    if (pending.size) await Promise.all(Array.from(pending));
    const missing = stepQuestions().filter((q) => given(current, q) === undefined);
    if (missing.length) {
      status(t("answer_all"));
      highlight();
      return;
    }
    if (step === "labels") {
      step = "preferences";
      $("stb-step-labels").hidden = true;
      $("stb-step-preferences").hidden = false;
      status("");
      highlight();
      return;
    }
    shownAt = Date.now();
    render();
  }

  root.addEventListener("change", (event) => {
    const input = event.target;
    if (input.type === "radio" && current !== null) answer(input);
  });
  $("stb-continue").addEventListener("click", onward);
  $("stb-next").addEventListener("click", onward);
  document.addEventListener("keydown", (event) => {
    if (current === null || event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "Enter") {
      if (event.target.tagName === "BUTTON") return;  // a focused button answers Enter itself
      event.preventDefault();
      onward();
    } else if (["1", "2", "3"].includes(event.key)) {
      const active = highlight();
      if (!active) return;
      const input = active.querySelectorAll("input[type=radio]")[Number(event.key) - 1];
      if (input && !input.checked) {
        input.checked = true;
        input.dispatchEvent(new Event("change", { bubbles: true }));
      }
    }
  });

  (async function start() {
    const reply = await api("state");
    if (!reply.ok) {
      status(reply.body.error || t("no_task"));
      return;
    }
    units = reply.body.units.slice().sort((a, b) => a.position - b.position);
    answers = reply.body.answers || {};
    shownAt = Date.now();
    render();
  })();
})();
