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
      return { ok: false, status: 0, body: { error: "connection problem — please try again" } };
    }
  };
};
