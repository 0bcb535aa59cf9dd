"""The timeline page's stylesheet and script (``trace._html`` draws the SVG they act on).

The script only reads the page and sets attributes, ``textContent`` and classes: it never
builds markup from text, so what the agent sent stays text. It gives the page:

- hover: the event under the pointer (the message as recorded), in a tooltip;
- ``#e57,e60`` in the address: those moments highlighted;
- zoom on the time axis: the wheel over the axis strip (or with Ctrl anywhere on the plot)
  zooms around the pointer, a drag across the plot (a brush) zooms to what it spans, a double
  click shows the whole trace again. Every element placed in time carries ``data-t`` (and
  ``data-t2`` for a span), so zooming moves it without redrawing; the axis is redrawn, in
  milliseconds once ticks are under 100 ms apart, and the updates' density binned again from
  their times (``updates`` in the page's data).
"""

from __future__ import annotations

STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; background: #fff; }
h1 { font-size: 17px; margin: 0 0 4px; }
.meta { color: #555; margin-bottom: 10px; }
.help { color: #666; font-size: 12px; margin: 4px 0 6px; }
svg#timeline { display: block; background: #fcfcfc; border: 1px solid #ddd; user-select: none; }
.lane-bg { fill: #f4f6f8; }
.lane-label { font-size: 12px; fill: #222; }
.lane-sub { font-size: 11px; fill: #666; }
.verdict { font-size: 12px; font-weight: 600; fill: #333; }
.peer-head { font-size: 12px; font-weight: 600; fill: #333; }
.axis line { stroke: #bbb; }
.axis text { font-size: 10px; fill: #666; }
.axis-strip { fill: #eef1f4; cursor: zoom-in; }
.density { fill: #7fa7d9; }
.turn-bar { opacity: 0.85; }
.mark { cursor: pointer; }
.mark:hover, .mark.hl { filter: drop-shadow(0 0 3px #f1c40f); }
.mark.hl line, .mark.hl path { stroke-width: 3; }
.due { stroke: #8e44ad; stroke-dasharray: 3 3; stroke-width: 1; }
.rung-label { font-size: 10px; fill: #6c3483; }
.exit-line { stroke: #555; stroke-dasharray: 6 3; stroke-width: 1.5; }
.bracket line, .bracket rect { stroke: #c0392b; fill: #c0392b; }
.bracket text { font-size: 10px; fill: #c0392b; font-weight: 600; }
#brush { fill: rgba(52, 152, 219, 0.15); stroke: #3498db; display: none; }
#tip { position: fixed; display: none; max-width: 640px; max-height: 60vh; overflow: auto; background: #fffef0;
       border: 1px solid #bbb; padding: 6px 8px; font: 11px/1.3 ui-monospace, monospace; white-space: pre-wrap;
       pointer-events: none; box-shadow: 0 2px 6px rgba(0,0,0,.2); unicode-bidi: plaintext; }
.verdicts { margin-top: 14px; border-collapse: collapse; }
.verdicts td, .verdicts th { border-bottom: 1px solid #eee; padding: 3px 8px; text-align: left; vertical-align: top; }
.pass { color: #27ae60; font-weight: 600; } .fail { color: #c0392b; font-weight: 600; }
.skip { color: #b7950b; font-weight: 600; } .na { color: #888; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 4px 0 8px; font-size: 12px; }
.legend span { display: inline-flex; align-items: center; gap: 4px; }
.legend svg { display: inline-block; }
"""

SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById('trace-data').textContent);
  var tip = document.getElementById('tip');
  var svg = document.getElementById('timeline');
  var X0 = +svg.dataset.x0, W = +svg.dataset.plotw, END = +svg.dataset.end, AXIS_H = +svg.dataset.axish;
  var view = [0, END];
  var points = svg.querySelectorAll('[data-t]:not([data-t2])');
  var spans = svg.querySelectorAll('[data-t2]:not(.density)');
  var NS = svg.namespaceURI;

  function show(ev, el) {
    var id = el.getAttribute('data-e');
    var text = el.getAttribute('data-note') || '';
    var shown = data.events[id];
    if (shown !== undefined) { text = (text ? text + '\\n\\n' : '') + shown; }
    tip.textContent = text;
    tip.style.display = 'block';
    move(ev);
  }
  function move(ev) {
    var x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth) { x = Math.max(0, ev.clientX - tip.offsetWidth - 14); }
    if (y + tip.offsetHeight > window.innerHeight) { y = Math.max(0, ev.clientY - tip.offsetHeight - 14); }
    tip.style.left = x + 'px'; tip.style.top = y + 'px';
  }
  document.querySelectorAll('[data-e]').forEach(function (el) {
    el.addEventListener('mouseenter', function (ev) { show(ev, el); });
    el.addEventListener('mousemove', move);
    el.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  });
  function highlight() {
    document.querySelectorAll('.hl').forEach(function (el) { el.classList.remove('hl'); });
    var ids = (location.hash || '').replace(/^#/, '').split(',');
    ids.forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.classList.add('hl'); }
    });
    var first = ids.length ? document.getElementById(ids[0]) : null;
    if (first && first.scrollIntoView) { first.scrollIntoView({block: 'center'}); }
  }
  window.addEventListener('hashchange', highlight);
  highlight();

  // ---------------------------------------------------------------- zoom
  function pxs() { return W / (view[1] - view[0]); }
  function X(t) { return X0 + (t - view[0]) * pxs(); }
  function T(x) { return view[0] + (x - X0) / pxs(); }
  function niceStep(span) {
    var raw = span / 10, base = Math.pow(10, Math.floor(Math.log10(raw)));
    var factors = [1, 2, 5, 10];
    for (var i = 0; i < factors.length; i++) { if (raw <= base * factors[i] * (1 + 1e-9)) { return base * factors[i]; } }
    return base * 10;
  }
  function label(t, step) {
    if (Math.abs(t) < 1e-12) { return '0'; }
    if (step < 0.1) {
      var digits = Math.max(0, -Math.floor(Math.log10(step * 1000)));
      return (t * 1000).toFixed(digits) + ' ms';
    }
    return (+t.toPrecision(6)) + ' s';
  }
  function axis() {
    var g = document.getElementById('axis-ticks');
    while (g.firstChild) { g.removeChild(g.firstChild); }
    var step = niceStep(view[1] - view[0]);
    var height = +svg.getAttribute('height');
    for (var t = Math.ceil(view[0] / step) * step; t <= view[1] + step * 1e-6; t += step) {
      var x = X(t);
      var line = document.createElementNS(NS, 'line');
      line.setAttribute('x1', x); line.setAttribute('x2', x);
      line.setAttribute('y1', AXIS_H - 6); line.setAttribute('y2', height);
      line.setAttribute('stroke-opacity', '0.35');
      var text = document.createElementNS(NS, 'text');
      text.setAttribute('x', x); text.setAttribute('y', AXIS_H - 10); text.setAttribute('text-anchor', 'middle');
      text.textContent = label(t, step);
      g.appendChild(line); g.appendChild(text);
    }
  }
  function layout() {
    for (var i = 0; i < points.length; i++) {
      var el = points[i];
      el.setAttribute('transform', 'translate(' + X(+el.dataset.t).toFixed(2) + ' 0)');
    }
    for (var j = 0; j < spans.length; j++) {
      var s = spans[j], a = X(+s.dataset.t), b = X(+s.dataset.t2);
      s.setAttribute('x', a.toFixed(2));
      s.setAttribute('width', Math.max(b - a, +(s.dataset.minw || 0)).toFixed(2));
    }
    svg.dataset.view0 = view[0]; svg.dataset.view1 = view[1]; svg.dataset.pxs = pxs();
    axis();
    density();
  }
  // the updates' density, binned again for the view (the page's own bins are the whole trace's)
  var lanes = svg.querySelectorAll('.density-lane'), BIN = 5;
  var whole = [].map.call(lanes, function (g) { return [].slice.call(g.childNodes); });
  function density() {
    var full = view[0] <= 0 && view[1] >= END;
    for (var i = 0; i < lanes.length; i++) {
      var g = lanes[i];
      while (g.firstChild) { g.removeChild(g.firstChild); }
      if (full) { whole[i].forEach(function (el) { g.appendChild(el); }); continue; }
      var times = data.updates[g.dataset.turn] || [], bins = {}, peak = 0;
      for (var j = 0; j < times.length; j++) {
        var x = X(times[j]);
        if (x < X0 - BIN || x > X0 + W + BIN) { continue; }
        var k = Math.floor((x - X0) / BIN);
        bins[k] = (bins[k] || 0) + 1;
        if (bins[k] > peak) { peak = bins[k]; }
      }
      var y = +g.dataset.y, h = +g.dataset.h;
      Object.keys(bins).forEach(function (k) {
        var n = bins[k], height = Math.max(1.5, h * n / peak), rect = document.createElementNS(NS, 'rect');
        rect.setAttribute('class', 'density');
        rect.setAttribute('x', X0 + k * BIN); rect.setAttribute('width', BIN - 1);
        rect.setAttribute('y', y + h - height); rect.setAttribute('height', height);
        rect.setAttribute('data-n', n);
        var step = BIN / pxs();
        rect.setAttribute('data-note', n + ' update(s) between ' + label(T(X0 + k * BIN), step) + ' and '
          + label(T(X0 + (+k + 1) * BIN), step));
        rect.addEventListener('mouseenter', function (ev) { show(ev, rect); });
        rect.addEventListener('mousemove', move);
        rect.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
        g.appendChild(rect);
      });
    }
  }
  var pending = false;
  function zoomTo(t0, t1) {
    var span = Math.max(t1 - t0, 1e-6);
    t0 = Math.max(0, t0); t1 = Math.min(END, t0 + span); t0 = Math.max(0, t1 - span);
    view = [t0, t1];
    if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; layout(); }); }
  }
  function svgX(ev) { var box = svg.getBoundingClientRect(); return ev.clientX - box.left; }
  function svgY(ev) { var box = svg.getBoundingClientRect(); return ev.clientY - box.top; }
  svg.addEventListener('wheel', function (ev) {
    var x = svgX(ev);
    if (x < X0 || x > X0 + W || !(ev.ctrlKey || svgY(ev) < AXIS_H)) { return; }
    ev.preventDefault();
    var at = T(x), factor = ev.deltaY < 0 ? 1 / 1.5 : 1.5;
    var t0 = at - (at - view[0]) * factor, t1 = at + (view[1] - at) * factor;
    zoomTo(t0, t1);
  }, {passive: false});
  var brush = document.getElementById('brush'), from = null;
  svg.addEventListener('mousedown', function (ev) {
    var x = svgX(ev);
    if (ev.button !== 0 || x < X0 || x > X0 + W) { return; }
    from = x;
    brush.setAttribute('x', x); brush.setAttribute('width', 0); brush.style.display = 'block';
  });
  window.addEventListener('mousemove', function (ev) {
    if (from === null) { return; }
    var x = Math.min(Math.max(svgX(ev), X0), X0 + W);
    brush.setAttribute('x', Math.min(from, x)); brush.setAttribute('width', Math.abs(x - from));
  });
  window.addEventListener('mouseup', function (ev) {
    if (from === null) { return; }
    var x = Math.min(Math.max(svgX(ev), X0), X0 + W), a = Math.min(from, x), b = Math.max(from, x);
    from = null; brush.style.display = 'none';
    if (b - a >= 4) { zoomTo(T(a), T(b)); }
  });
  svg.addEventListener('dblclick', function () { zoomTo(0, END); });
  window.acpTimeline = {zoomTo: zoomTo, view: function () { return view.slice(); }};
})();
"""
