// The sentences this page's scripts show, in the page's language: the server writes them into
// <script type="application/json" id="hitkit-words"> (server/i18n.py, hitkit/i18n/script_words.py).
// hitkitT(key, values) fills in %(name)s; numbers are written for the page's language (<html lang>).
window.hitkitT = (function () {
  "use strict";
  const node = document.getElementById("hitkit-words");
  const table = node ? JSON.parse(node.textContent) : {};
  let numbers;
  try {
    // Western digits, as Babel writes them on the server's side of the page.
    numbers = new Intl.NumberFormat(document.documentElement.lang || "en", { numberingSystem: "latn" });
  } catch (err) {
    numbers = new Intl.NumberFormat("en");
  }
  return function t(key, values) {
    const text = table[key] === undefined ? key : table[key];
    return text.replace(/%\((\w+)\)s/g, (whole, name) => {
      const value = (values || {})[name];
      return typeof value === "number" ? numbers.format(value) : String(value);
    });
  };
})();
