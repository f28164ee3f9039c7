// The live-chat HIT: for each chatbot in the worker's order — topic, chat, ratings — then submit.
// A chat the worker is not asked to rate (a study with an LLM judge: unit.rated false) ends with
// "Next chatbot" alone, which saves its chat_done answer.
// Everything is saved on the server as it happens, so on load the page resumes where the worker was.
// Worker and bot text is only ever inserted with textContent, never as HTML.
(function () {
  "use strict";
  const root = document.getElementById("livechat");
  if (!root) return;
  const base = root.dataset.base;
  const $ = (id) => document.getElementById(id);
  const steps = ["step-topic", "step-chat", "step-rate", "step-submit"];
  let units = [];
  let answers = {};
  let current = null;
  let waiting = false;

  const api = window.hitkitApi(base);
  const t = window.hitkitT;
  const stream = window.hitkitStream(base);
  // How the worker's own text is entered (counts and timings only): sent with each message and free-text answer.
  const watch = (id) => window.hitkitSignals($(id), { blockPaste: root.dataset.blockPaste === "1" });
  const typing = { message: watch("message"), topic: watch("topic-input"), feedback: watch("feedback") };

  function show(step) {
    steps.forEach((s) => { $(s).hidden = s !== step; });
  }

  function given(unit, question) {
    return (answers[unit.unit_id] || {})[question];
  }

  async function save(unit, question, value, signals) {
    const body = { unit_id: unit.unit_id, question: question, value: String(value) };
    if (signals) body.signals = signals;
    const reply = await api("answer", body);
    if (reply.ok) {
      answers[unit.unit_id] = Object.assign(answers[unit.unit_id] || {}, { [question]: String(value) });
    }
    return reply;
  }

  function topicOf(unit) {
    return unit.topic || given(unit, "topic") || "";
  }

  function labels(unit) {
    document.querySelectorAll(".slot-label").forEach((el) => { el.textContent = unit.label; });
    document.querySelectorAll(".topic-text").forEach((el) => { el.textContent = topicOf(unit); });
    $("progress").textContent = t("progress", { label: unit.label, total: units.length });
  }

  function next() {
    current = units.find((u) => !u.questions.every((q) => given(u, q.name) !== undefined)) || null;
    if (current === null) {
      $("progress").textContent = "";
      show("step-submit");
      return;
    }
    labels(current);
    const hasTopic = current.topic || given(current, "topic") !== undefined;
    if (!hasTopic || given(current, "topic_sentiment") === undefined) {
      showTopic();
    } else if (current.questions.some((q) => (q.name.startsWith("score_") || q.name === "chat_done")
                                             && given(current, q.name) === undefined)) {
      showChat();
    }
  }

  // Step 1: topic ------------------------------------------------------------------------------
  function showTopic() {
    $("topic-free").hidden = Boolean(current.topic);
    $("topic-given").hidden = !current.topic;
    $("topic-input").value = given(current, "topic") || "";
    document.querySelectorAll("input[name=sentiment]").forEach((r) => { r.checked = false; });
    show("step-topic");
  }

  $("start-chat").addEventListener("click", async () => {
    const sentiment = document.querySelector("input[name=sentiment]:checked");
    if (!current.topic) {
      const topic = $("topic-input").value.trim();
      if (!topic) { $("topic-input").focus(); return; }
      // A topic restored from an earlier visit was not typed now: its saved signals stand.
      const saved = await save(current, "topic", topic, typing.topic.touched() ? typing.topic.take() : null);
      if (!saved.ok) { alert(saved.body.error); return; }
    }
    if (!sentiment) { alert(t("say_feeling")); return; }
    const saved = await save(current, "topic_sentiment", sentiment.value);
    if (!saved.ok) { alert(saved.body.error); return; }
    labels(current);
    showChat();
  });

  // Step 2: chat -------------------------------------------------------------------------------
  function render(state) {
    const list = $("messages");
    list.replaceChildren();
    state.turns.forEach((turn) => {
      const item = document.createElement("li");
      item.className = turn.speaker;
      item.textContent = turn.text;
      list.appendChild(item);
    });
    list.scrollTop = list.scrollHeight;
    $("inputs").textContent = state.inputs;
    $("next-bot").disabled = !state.can_rate || waiting;
    $("send").disabled = waiting || state.bot_owes_reply;
  }

  function botFailed(reply) {
    waiting = false;
    $("bot-status").textContent = t("bot_slow");
    $("retry").hidden = false;
    $("send").disabled = true;
    if (reply && reply.body && reply.body.error) $("bot-status").title = reply.body.error;
  }

  async function chatStep(path, body) {
    waiting = true;
    $("send").disabled = true;
    $("next-bot").disabled = true;
    $("retry").hidden = true;
    $("bot-status").textContent = t("bot_typing");
    // The reply appears as the chatbot writes it; it is stored only once it is complete.
    let partial = null;
    const reply = await stream("chat/" + current.unit_id + path, body, (text) => {
      if (partial === null) {
        partial = document.createElement("li");
        partial.className = "bot-typing";
        $("messages").appendChild(partial);
      }
      partial.textContent = text;
      $("messages").scrollTop = $("messages").scrollHeight;
    });
    if (partial !== null) partial.remove();
    if (reply.status === 502 || reply.status === 0) { botFailed(reply); await refresh(false); return reply; }
    waiting = false;
    // 429: too many replies being written at once for this HIT (the server's bound); the message was not stored,
    // so the worker keeps it in the box (put back before the sentence that says so appears).
    if (reply.status === 429 && body.text) $("message").value = body.text;
    if (reply.ok) render(reply.body); else await refresh(false);
    // The sentence last: when it appears, the box and the messages already show what was (not) stored.
    $("bot-status").textContent = reply.ok ? "" : reply.status === 429
      ? t("too_many_send")
      : (reply.body.error || t("something_wrong"));
    return reply;
  }

  async function refresh(resumeOwedReply) {
    const reply = await api("chat/" + current.unit_id);
    if (!reply.ok) return;
    render(reply.body);
    if (resumeOwedReply && reply.body.bot_owes_reply) await chatStep("/stream", {});
  }

  async function showChat() {
    $("messages").replaceChildren();
    $("inputs").textContent = "0";
    $("next-bot").disabled = true;  // until this slot's own state says it may be rated
    $("send").disabled = true;
    $("bot-status").textContent = "";
    $("retry").hidden = true;
    $("topic-dialog").hidden = true;
    show("step-chat");
    await refresh(true);
    $("message").focus();
  }

  $("send-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if (!text || waiting) return;
    const item = document.createElement("li");
    item.className = "worker";
    item.textContent = text;
    $("messages").appendChild(item);
    $("message").value = "";
    const reply = await chatStep("/stream", { text: text, signals: typing.message.take() });
    $("message").focus();
  });

  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("send-form").requestSubmit();
    }
  });

  $("retry").addEventListener("click", () => chatStep("/stream", {}));

  $("topic-button").addEventListener("click", () => { $("topic-dialog").hidden = !$("topic-dialog").hidden; });
  document.querySelectorAll(".topic-by").forEach((button) => {
    button.addEventListener("click", async () => {
      const topic = $("new-topic").value.trim();
      const reply = await api("chat/" + current.unit_id + "/topic", { by: button.dataset.by, topic: topic || null });
      if (reply.ok) {
        if (topic) document.querySelectorAll(".topic-text").forEach((el) => { el.textContent = topic; });
        $("new-topic").value = "";
        $("topic-dialog").hidden = true;
      }
    });
  });

  $("next-bot").addEventListener("click", async () => {
    if (current.rated !== false) { showRate(); return; }
    $("next-bot").disabled = true;
    const reply = await save(current, "chat_done", "yes");
    if (!reply.ok) { $("bot-status").textContent = reply.body.error || t("not_saved"); $("next-bot").disabled = false; return; }
    next();
  });

  // Step 3: ratings ----------------------------------------------------------------------------
  function showRate() {
    const box = $("sliders");
    box.replaceChildren();
    current.criteria.forEach((criterion) => {
      const node = $("slider-template").content.firstElementChild.cloneNode(true);
      node.classList.add("untouched");
      node.dataset.question = criterion.question;
      node.querySelector(".statement").textContent = criterion.statement;
      const input = node.querySelector("input");
      input.setAttribute("aria-label", criterion.statement);
      input.addEventListener("input", () => node.classList.remove("untouched"));
      input.addEventListener("change", () => node.classList.remove("untouched"));
      box.appendChild(node);
    });
    $("feedback-box").hidden = !current.optional.includes("feedback");
    $("feedback").value = "";
    typing.feedback.take();  // a new slot's comment starts afresh
    $("rate-status").textContent = "";
    show("step-rate");
  }

  $("save-ratings").addEventListener("click", async () => {
    const sliders = Array.from(document.querySelectorAll("#sliders .slider"));
    if (sliders.some((s) => s.classList.contains("untouched"))) {
      $("rate-status").textContent = t("move_sliders");
      return;
    }
    for (const slider of sliders) {
      const reply = await save(current, slider.dataset.question, slider.querySelector("input").value);
      if (!reply.ok) { $("rate-status").textContent = reply.body.error || t("not_saved"); return; }
    }
    const comment = $("feedback").value.trim();
    if (comment && current.optional.includes("feedback")) await save(current, "feedback", comment, typing.feedback.take());
    next();
  });

  (async function load() {
    const reply = await api("state");
    if (!reply.ok) { $("progress").textContent = reply.body.error || t("no_task"); return; }
    units = reply.body.units.slice().sort((a, b) => a.position - b.position);
    answers = reply.body.answers;
    next();
  })();
})();
