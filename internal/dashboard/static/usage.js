// Runtime dashboard: usage charts with uPlot, from the JSON the page embeds
// (#usage-data). Series labels are set as text by uPlot, never as HTML.
"use strict";
(function () {
  var colors = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
  function money(v) {
    if (v === 0) return "$0";
    if (Math.abs(v) < 0.01) return "$" + v.toExponential(1);
    return "$" + v.toFixed(2);
  }
  function plain(v) {
    if (v === 0) return "0";
    if (Math.abs(v) < 0.01) return v.toExponential(1);
    return String(+v.toFixed(2));
  }
  function draw() {
    var el = document.getElementById("usage-data");
    if (!el || typeof uPlot === "undefined") return;
    var data = JSON.parse(el.textContent);
    document.querySelectorAll(".chart").forEach(function (box) {
      var c = data[box.getAttribute("data-chart")];
      var metric = box.getAttribute("data-metric");
      if (!c) return;
      var series = [{}];
      var values = [c.x];
      (c.series || []).forEach(function (s, i) {
        series.push({ label: s.label, stroke: colors[i % colors.length], fill: colors[i % colors.length] + "33",
          paths: uPlot.paths.bars({ size: [0.8, 40] }), points: { show: false } });
        values.push(s[metric]);
      });
      if (series.length === 1) {
        var p = document.createElement("p");
        p.className = "empty";
        p.textContent = box.getAttribute("data-title") + ": no usage in this period.";
        box.appendChild(p);
        return;
      }
      var step = c.x.length > 1 ? c.x[1] - c.x[0] : 3600;
      var yfmt = metric === "cost" ? money : plain;
      new uPlot({ title: box.getAttribute("data-title"), width: Math.max(box.clientWidth - 16, 300), height: 220,
        series: series,
        axes: [{}, { size: 80, values: function (u, vals) { return vals.map(yfmt); } }],
        scales: { x: { time: true, range: function (u, min, max) { return [min - step / 2, max + step / 2]; } } } },
        values, box);
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw);
  else draw();
})();
