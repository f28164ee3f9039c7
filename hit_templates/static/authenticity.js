// How text is entered in one field: keystrokes, typed, composed and pasted characters, intervals between
// keys, time spent and focus changes. Counts and timings only, never which keys or what was pasted.
// Sent with the message or answer as `signals`; the server bounds them (hitkit/worker/authenticity.py) and a
// person reviews what they suggest: nothing here, or there, rejects anyone.
window.hitkitSignals = function (field, options) {
  "use strict";
  const blockPaste = Boolean(options && options.blockPaste);
  let counts, first, last, intervals, before;

  function reset() {
    counts = { keys: 0, typed_chars: 0, composed_chars: 0, pasted_chars: 0, pastes: 0, deletes: 0, blurs: 0 };
    first = null;
    last = null;
    intervals = [];
  }
  reset();

  function keystroke(now) {
    if (last !== null && intervals.length < 5000) intervals.push(now - last);
    last = now;
    counts.keys += 1;
  }

  field.addEventListener("beforeinput", () => {
    before = field.value.length - Math.abs((field.selectionEnd || 0) - (field.selectionStart || 0));
  });

  field.addEventListener("input", (event) => {
    const now = performance.now();
    if (first === null) first = now;
    const type = event.inputType || "";
    const inserted = Math.max(0, field.value.length - (before === undefined ? field.value.length : before));
    before = undefined;
    if (type.startsWith("delete")) {
      counts.deletes += 1;
    } else if (type === "insertText" || type === "insertLineBreak") {
      keystroke(now);
      // One key types one character; more at once is a suggestion, dictation or an input method.
      if (inserted <= 1) counts.typed_chars += inserted; else counts.composed_chars += inserted;
    } else if (type === "insertCompositionText") {
      keystroke(now);  // a tap on a phone keyboard; its characters count when the composition ends
    } else if (type === "insertFromPaste" || type === "insertFromDrop" || type === "insertFromYank") {
      counts.pasted_chars += inserted;
    } else if (type.startsWith("insert")) {
      counts.composed_chars += inserted;  // autocorrect and suggestions: insertReplacementText and others
    }
  });

  field.addEventListener("compositionend", (event) => {
    counts.composed_chars += event.data ? event.data.length : 0;
  });

  function pasted(event) {
    counts.pastes += 1;
    if (first === null) first = performance.now();
    if (blockPaste) event.preventDefault();  // still counted: the attempt is what a reviewer wants to see
  }
  field.addEventListener("paste", pasted);
  field.addEventListener("drop", pasted);

  function away() { if (first !== null) counts.blurs += 1; }
  window.addEventListener("blur", away);
  document.addEventListener("visibilitychange", () => { if (document.hidden) away(); });

  function quantile(sorted, q) {
    if (!sorted.length) return 0;
    const at = (sorted.length - 1) * q;
    const low = Math.floor(at);
    return sorted[low] + (sorted[Math.min(low + 1, sorted.length - 1)] - sorted[low]) * (at - low);
  }

  function peek() {
    const sorted = intervals.slice().sort((a, b) => a - b);
    return Object.assign({}, counts, {
      iki_median_ms: Math.round(quantile(sorted, 0.5)),
      iki_iqr_ms: Math.round(quantile(sorted, 0.75) - quantile(sorted, 0.25)),
      compose_ms: first === null ? 0 : Math.round(performance.now() - first),
    });
  }

  return {
    // Whether anything was entered since the last take().
    touched: function () { return first !== null; },
    // The signals of the text entered so far, without starting afresh (a submit that is refused keeps them).
    peek: peek,
    // The signals of the text entered since the last take(), and start afresh for the next one.
    take: function () {
      const signals = peek();
      reset();
      return signals;
    },
  };
};

// The comment on the whole HIT (every protocol's submit form has one, <textarea name="feedback">): its
// signals go with the form as the JSON field `feedback_signals`, filled in when the form is submitted.
(function () {
  "use strict";
  document.querySelectorAll("form textarea[name='feedback']").forEach((box) => {
    const signals = window.hitkitSignals(box, { blockPaste: box.dataset.blockPaste === "1" });
    const field = document.createElement("input");
    field.type = "hidden";
    field.name = "feedback_signals";
    box.form.appendChild(field);
    box.form.addEventListener("submit", () => {
      field.value = signals.touched() ? JSON.stringify(signals.peek()) : "";
    });
  });
})();
