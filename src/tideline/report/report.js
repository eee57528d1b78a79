/* Tideline report: small interactivity on top of the inline SVG charts (no network). */
(function () {
  "use strict";
  var body = document.body;
  var charts = document.querySelectorAll("svg.chart");

  // Table of contents from the sections.
  var nav = document.createElement("nav");
  nav.className = "toc";
  document.querySelectorAll("section[id]").forEach(function (s) {
    var a = document.createElement("a");
    a.href = "#" + s.id;
    a.textContent = s.querySelector("h2").textContent;
    nav.appendChild(a);
  });
  var dataNode = document.getElementById("report-data");
  var data = JSON.parse(dataNode.textContent);
  var btn = document.createElement("button");
  btn.className = "json";
  btn.textContent = "download JSON";
  btn.addEventListener("click", function () {
    var blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = "tideline-report.json";
    link.click();
  });
  nav.appendChild(btn);
  var header = document.querySelector("header");
  header.parentNode.insertBefore(nav, header.nextSibling);

  // Legend: click toggles a series, hover highlights it.
  charts.forEach(function (svg) {
    svg.querySelectorAll(".legend-item").forEach(function (item) {
      var name = item.getAttribute("data-series");
      var members = svg.querySelectorAll('[data-series="' + CSS.escape(name) + '"]:not(.legend-item)');
      item.addEventListener("click", function () {
        var off = item.classList.toggle("off");
        members.forEach(function (m) { m.style.display = off ? "none" : ""; });
      });
      item.addEventListener("mouseenter", function () {
        svg.querySelectorAll(".series, .point").forEach(function (m) { m.classList.add("dim"); });
        members.forEach(function (m) { m.classList.remove("dim"); });
      });
      item.addEventListener("mouseleave", function () {
        svg.querySelectorAll(".dim").forEach(function (m) { m.classList.remove("dim"); });
      });
    });
  });

  // Sortable tables.
  document.querySelectorAll("table").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, col) {
      th.addEventListener("click", function () {
        var rows = Array.prototype.slice.call(table.tBodies[0].rows);
        var asc = th.dataset.sort !== "asc";
        rows.sort(function (a, b) {
          var x = a.cells[col].textContent, y = b.cells[col].textContent;
          var nx = parseFloat(x.replace(/^#/, "")), ny = parseFloat(y.replace(/^#/, ""));
          var r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
          return asc ? r : -r;
        });
        th.dataset.sort = asc ? "asc" : "desc";
        rows.forEach(function (r) { table.tBodies[0].appendChild(r); });
      });
    });
  });

  body.setAttribute("data-charts", String(charts.length));
  body.setAttribute("data-memories", String(data.totals.memories));
  body.setAttribute("data-rendered", "yes");
})();
