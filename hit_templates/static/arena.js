// The arena HIT: for each battle, a message sent to both anonymous assistants, their replies streamed side
// by side, then a vote (A / B / tie / both bad). The vote buttons stay disabled until both replies are
// complete (the server refuses an early vote too). Everything is saved on the server as it happens, so on
// load the page resumes where the worker was. Text is only ever inserted with textContent, never as HTML.
(function () {
  "use strict";
  const root = document.getElementById("arena");
  if (!root) return;
  const base = root.dataset.base;
  const $ = (id) => document.getElementById(id);
  const SIDES = ["a", "b"];
  const api = window.hitkitApi(base);
  const stream = window.hitkitStream(base);
  const watch = (id) => window.hitkitSignals($(id), { blockPaste: root.dataset.blockPaste === "1" });
  const typing = { message: watch("arena-message"), reason: watch("arena-reason") };
  let units = [];
  let answers = {};
  let current = null;
  let states = { a: null, b: null };
  // The longest part of an unfinished reply shown on each side, kept until the whole reply is stored: a
  // retried bot stream starts again from a shorter text, and a broken connection ends the stream early;
  // the page keeps showing what the worker already read instead of going back (85 → 47 → 101 characters).
  let held = { a: "", b: "" };
  let busy = false;
  const t = window.hitkitT;

  const given = (unit, question) => (answers[unit.unit_id] || {})[question];
  // A judged study's battle not drawn for a vote ends with "Next battle" alone (its vote_done answer).
  const closing = (unit) => (unit.voted === false ? "vote_done" : "vote");
  const side = (name) => root.querySelector(`.arena-side[data-side="${name}"]`);
  const list = (name) => side(name).querySelector(".arena-messages");
  const chat = (name) => "chat/" + current.unit_id + "-" + name;

  function show(step) {
    ["step-battle", "step-submit"].forEach((s) => { $(s).hidden = s !== step; });
  }

  function render(name) {
    const box = list(name);
    box.replaceChildren();
    (states[name] ? states[name].turns : []).forEach((turn) => {
      const item = document.createElement("li");
      item.className = turn.speaker;
      item.textContent = turn.text;
      box.appendChild(item);
    });
    if (held[name] && owes(name)) typingItem(name).textContent = held[name];
    box.scrollTop = box.scrollHeight;
  }

  function typingItem(name) {
    let item = list(name).querySelector("li.bot-typing");
    if (item === null) {
      item = document.createElement("li");
      item.className = "bot-typing";
      list(name).appendChild(item);
    }
    return item;
  }

  // What the worker sees of a reply only grows: a shorter text than the one shown waits until it catches up.
  function grow(name, soFar) {
    if (soFar.length < held[name].length) return;
    held[name] = soFar;
    typingItem(name).textContent = soFar;
    list(name).scrollTop = list(name).scrollHeight;
  }

  // The record of the vote cast (and the reason sent with it), in words the worker chose.
  function record() {
    const vote = given(current, "vote");
    root.querySelectorAll("button.vote").forEach((b) => { b.setAttribute("aria-pressed", String(b.dataset.vote === vote)); });
    const reason = given(current, "reason");
    $("arena-voted").textContent = vote === undefined ? "" : t("vote_recorded", { vote: t("vote_" + vote) }) + (reason ? " " + t("your_reason", { reason: reason }) : "");
    $("arena-voted").hidden = vote === undefined;
  }

  function inputs(name) { return states[name] ? states[name].inputs : 0; }
  function owes(name) { return Boolean(states[name] && states[name].bot_owes_reply); }

  // Both replies are complete: the same number of messages on each side, at least the minimum, none owed.
  function complete() {
    return SIDES.every((s) => !owes(s)) && inputs("a") === inputs("b") && inputs("a") >= current.min_turns;
  }

  function controls() {
    const voted = given(current, closing(current)) !== undefined;
    root.querySelectorAll("button.vote").forEach((b) => { b.disabled = busy || voted || !complete(); });
    $("arena-vote").hidden = current.voted === false;
    if (current.voted === false) { $("arena-next").hidden = false; $("arena-next").disabled = busy || !complete(); }
    $("arena-send").disabled = busy || voted || Math.max(inputs("a"), inputs("b")) >= current.max_turns;
    $("reason-box").hidden = !current.optional.includes("reason") || voted;
    record();
  }

  async function load(name) {
    const reply = await api(chat(name));
    if (reply.ok) { states[name] = reply.body; render(name); }
  }

  // One step on the sides that need it: a new message (text) or the owed replies (text null), streamed.
  async function step(text) {
    busy = true;
    controls();
    $("arena-retry").hidden = true;
    $("arena-status").textContent = t("assistants_writing");
    const turn = Math.min(inputs("a"), inputs("b"));
    const todo = text === null ? SIDES.filter(owes) : SIDES.filter((s) => inputs(s) === turn);
    const signals = text === null ? null : typing.message.take();
    const results = await Promise.all(todo.map(async (name) => {
      if (text !== null) {
        const mine = document.createElement("li");
        mine.className = "worker";
        mine.textContent = text;
        list(name).appendChild(mine);
      }
      const body = text === null ? {} : { text: text, signals: signals };
      const reply = await stream(chat(name) + "/stream", body, (soFar) => grow(name, soFar));
      return [name, reply];
    }));
    let failed = false, refused = false;
    for (const [name, reply] of results) {
      if (reply.ok) { held[name] = ""; states[name] = reply.body; render(name); } else { failed = true; refused = refused || reply.status === 429; await load(name); }
    }
    busy = false;
    // 429: too many replies of this HIT being written at once (the server's bound); nothing was lost.
    $("arena-status").textContent = !failed ? "" : refused
      ? t("too_many_retry")
      : t("assistant_slow");
    $("arena-retry").hidden = !failed;
    controls();
  }

  // What the battle still owes: the replies owed, or (back after a reload mid-send, or a side refused
  // as too busy) the worker's last message sent to the side behind.
  async function resume() {
    if (SIDES.some(owes)) await step(null);
    else if (inputs("a") !== inputs("b")) {
      const ahead = inputs("a") > inputs("b") ? "a" : "b";
      const sent = states[ahead].turns.filter((t) => t.speaker === "worker");
      await step(sent[Math.min(inputs("a"), inputs("b"))].text);
    }
  }

  async function showBattle() {
    $("progress").textContent = t("progress", { label: current.label, total: units.length });
    root.querySelector(".battle-label").textContent = current.label;
    root.querySelectorAll(".identity").forEach((el) => { el.hidden = true; el.textContent = ""; });
    $("arena-next").hidden = true;
    $("arena-reason").value = "";
    states = { a: null, b: null };
    held = { a: "", b: "" };
    SIDES.forEach(render);
    show("step-battle");
    await Promise.all(SIDES.map(load));
    $("arena-message").value = inputs("a") === 0 && inputs("b") === 0 && current.prompt ? current.prompt : "";
    controls();
    await resume();
    $("arena-message").focus();
  }

  function next() {
    current = units.find((u) => given(u, closing(u)) === undefined) || null;
    if (current === null) { $("progress").textContent = ""; show("step-submit"); return; }
    showBattle();
  }

  $("arena-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $("arena-message").value.trim();
    if (!text || busy) return;
    $("arena-message").value = "";
    await step(text);
    $("arena-message").focus();
  });

  $("arena-message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("arena-form").requestSubmit(); }
  });

  $("arena-retry").addEventListener("click", resume);

  root.querySelectorAll("button.vote").forEach((button) => {
    button.addEventListener("click", async () => {
      if (busy || !complete()) return;
      busy = true;
      controls();
      const reply = await api("answer", { unit_id: current.unit_id, question: "vote", value: button.dataset.vote });
      if (!reply.ok) {
        // A 409 may mean the vote was stored already (a resend): the saved answers say which vote stands.
        const saved = reply.status === 409 ? await api("state") : null;
        if (saved && saved.ok) answers = saved.body.answers;
        if (given(current, "vote") === undefined) {
          busy = false;
          $("arena-status").textContent = reply.body.error || t("not_saved");
          controls();
          return;
        }
      } else {
        answers[current.unit_id] = Object.assign(answers[current.unit_id] || {}, { vote: button.dataset.vote });
      }
      const reason = $("arena-reason").value.trim();
      if (reason && current.optional.includes("reason")) {
        const sent = await api("answer", { unit_id: current.unit_id, question: "reason", value: reason, signals: typing.reason.take() });
        if (sent.ok) answers[current.unit_id].reason = reason;
      }
      busy = false;
      controls();
      // The record stays on screen until the worker moves on, so they see the vote they cast.
      if (current.reveal) {
        const names = await api("reveal/" + current.unit_id);
        if (names.ok && names.body.revealed) {
          SIDES.forEach((s) => {
            const el = side(s).querySelector(".identity");
            el.textContent = "— " + names.body.revealed[s];
            el.hidden = false;
          });
        }
      }
      $("arena-next").hidden = false;
      $("arena-next").focus();
    });
  });

  $("arena-next").addEventListener("click", async () => {
    if (current.voted === false && given(current, "vote_done") === undefined) {
      if (busy || !complete()) return;
      const reply = await api("answer", { unit_id: current.unit_id, question: "vote_done", value: "yes" });
      if (!reply.ok) { $("arena-status").textContent = reply.body.error || t("not_saved"); return; }
      answers[current.unit_id] = Object.assign(answers[current.unit_id] || {}, { vote_done: "yes" });
    }
    next();
  });

  (async function start() {
    const reply = await api("state");
    if (!reply.ok) { $("progress").textContent = reply.body.error || t("no_task"); return; }
    units = reply.body.units.slice().sort((a, b) => a.position - b.position);
    answers = reply.body.answers;
    next();
  })();
})();
