// Tideline UI: a little behaviour on top of server-rendered pages. No stored text is
// ever put into the page from here (no innerHTML): the server renders it, escaped.
"use strict";
document.documentElement.classList.add("js");
document.addEventListener("DOMContentLoaded", function () {
  // "/" focuses the search box, as on many sites; Escape leaves it.
  document.addEventListener("keydown", function (ev) {
    var q = document.getElementById("q");
    var typing = ev.target instanceof HTMLInputElement || ev.target instanceof HTMLTextAreaElement ||
      ev.target instanceof HTMLSelectElement;
    if (ev.key === "/" && q && !typing) { ev.preventDefault(); q.focus(); q.select(); }
    if (ev.key === "Escape" && ev.target === q) { q.blur(); }
  });
  // The project switcher: choosing a project reloads the page for it.
  var sw = document.getElementById("scope-switch");
  if (sw) { sw.addEventListener("change", function () { sw.form.submit(); }); }
  // Approve or reject every item of a DREAM plan at once.
  document.querySelectorAll("button[data-check]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var on = btn.getAttribute("data-check") === "all";
      document.querySelectorAll("#apply-form input[name=item]").forEach(function (box) { box.checked = on; });
    });
  });
  // A linked turn opened from a memory gets the focus, so the reader lands on it.
  var mark = document.querySelector("[data-mark]");
  if (mark) { mark.focus(); }
  // The forget confirmation takes the focus (keyboard users answer it at once).
  var confirm = document.getElementById("forget-confirm");
  if (confirm) { confirm.focus(); }
  document.body.setAttribute("data-ready", "1");
});
