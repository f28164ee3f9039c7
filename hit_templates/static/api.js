// The one way task pages talk to the server: JSON in and out, relative to the assignment's base URL.
// A network failure comes back as {ok: false, status: 0} so a page can say "try again", never throw.
window.hitkitApi = function (base) {
  "use strict";
  return async function api(path, body) {
    const options = { headers: { "Accept": "application/json" } };
    if (body !== undefined) {
      options.method = "POST";
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    try {
      const reply = await fetch(base + path, options);
      let data = {};
      try { data = await reply.json(); } catch (e) { data = {}; }
      return { ok: reply.ok, status: reply.status, body: data };
    } catch (err) {
      return { ok: false, status: 0, body: { error: window.hitkitT("connection") } };
    }
  };
};

// A chat step whose reply streams: POST JSON to base + path, read the server-sent events as they come.
// onText(text so far) is called each time the reply grows; the promise resolves like api()'s:
// {ok, status, body} with the slot's state (ok), or the error the server sent ({error, waiting}:
// status 502, the message is saved and the reply still owed). A broken connection is status 0.
window.hitkitStream = function (base) {
  "use strict";
  return async function stream(path, body, onText) {
    let reply;
    try {
      reply = await fetch(base + path, {
        method: "POST", body: JSON.stringify(body || {}),
        headers: { "Accept": "text/event-stream", "Content-Type": "application/json" },
      });
    } catch (err) {
      return { ok: false, status: 0, body: { error: window.hitkitT("connection") } };
    }
    if (!(reply.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
      let data = {};
      try { data = await reply.json(); } catch (e) { data = {}; }
      return { ok: reply.ok, status: reply.status, body: data };
    }
    const reader = reply.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let kind = "message", data = "";
          block.split("\n").forEach((line) => {
            if (line.startsWith("event:")) kind = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).trim();
          });
          if (!data) continue;
          const parsed = JSON.parse(data);
          if (kind === "text") onText(parsed.text);
          else if (kind === "state") return { ok: true, status: 200, body: parsed };
          else if (kind === "error") return { ok: false, status: parsed.waiting ? 502 : (parsed.status || 400), body: parsed };
        }
      }
    } catch (err) { /* the connection broke mid-reply: the reply is still owed */ }
    return { ok: false, status: 0, body: { error: window.hitkitT("connection_broke") } };
  };
};
