// tinyspec show: pan and zoom for every graph picture on the page (.tinyspec-view), a
// tooltip with a box's hover text, and "find node N". No network, no libraries.
(function () {
  "use strict";
  var tip = document.getElementById("tinyspec-tip");
  if (!tip) {
    tip = document.createElement("div");
    tip.id = "tinyspec-tip";
    tip.hidden = true;
    document.body.appendChild(tip);
  }

  function moveTitlesToData(svg) {
    // the hover text is the element's <title>; keep it as data so the browser's own slow
    // tooltip does not show over ours
    var titled = svg.querySelectorAll("g.node, g.edge, g.cluster");
    for (var i = 0; i < titled.length; i++) {
      var t = titled[i].querySelector(":scope > title");
      if (t) { titled[i].setAttribute("data-tip", t.textContent); titled[i].removeChild(t); }
    }
  }

  function setUp(view) {
    var svg = view.querySelector("svg");
    if (!svg) return;
    moveTitlesToData(svg);
    var base = svg.viewBox.baseVal;
    var full = { x: base.x, y: base.y, w: base.width, h: base.height };
    var box = { x: full.x, y: full.y, w: full.w, h: full.h };
    svg.removeAttribute("width");
    svg.removeAttribute("height");

    function apply() { svg.setAttribute("viewBox", box.x + " " + box.y + " " + box.w + " " + box.h); }
    function fit() { box = { x: full.x, y: full.y, w: full.w, h: full.h }; apply(); }
    function toSvg(cx, cy) {
      var r = svg.getBoundingClientRect();
      var s = Math.max(box.w / r.width, box.h / r.height);   // preserveAspectRatio: meet
      var ox = (r.width * s - box.w) / 2, oy = (r.height * s - box.h) / 2;
      return { x: box.x - ox + (cx - r.left) * s, y: box.y - oy + (cy - r.top) * s, s: s };
    }
    function zoom(f, cx, cy) {
      var p = toSvg(cx, cy);
      var w = box.w * f, h = box.h * f;
      if (w < 20 || w > full.w * 20) return;
      box = { x: p.x - (p.x - box.x) * f, y: p.y - (p.y - box.y) * f, w: w, h: h };
      apply();
    }
    function center(x, y, w) {
      box = { x: x - w / 2, y: y - w * (box.h / box.w) / 2, w: w, h: w * (box.h / box.w) };
      apply();
    }

    svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      zoom(ev.deltaY > 0 ? 1.2 : 1 / 1.2, ev.clientX, ev.clientY);
    }, { passive: false });
    var drag = null;
    svg.addEventListener("pointerdown", function (ev) {
      drag = { x: ev.clientX, y: ev.clientY, b: { x: box.x, y: box.y, w: box.w, h: box.h } };
      svg.setPointerCapture(ev.pointerId);
    });
    svg.addEventListener("pointermove", function (ev) {
      if (drag) {
        var s = toSvg(0, 0).s;
        box.x = drag.b.x - (ev.clientX - drag.x) * s;
        box.y = drag.b.y - (ev.clientY - drag.y) * s;
        apply();
      }
      var g = ev.target.closest ? ev.target.closest("[data-tip]") : null;
      if (g && !drag) {
        tip.textContent = g.getAttribute("data-tip");
        tip.hidden = false;
        tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 4) + "px";
        tip.style.top = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + "px";
      } else tip.hidden = true;
    });
    svg.addEventListener("pointerup", function () { drag = null; });
    svg.addEventListener("pointerleave", function () { tip.hidden = true; });

    function centreOf(g) {   // a box's centre in the svg's own units (through the panels' transforms)
      var b = g.getBBox(), p = svg.createSVGPoint();
      p.x = b.x + b.width / 2; p.y = b.y + b.height / 2;
      return p.matrixTransform(svg.getScreenCTM().inverse().multiply(g.getScreenCTM()));
    }
    function mid() { var r = svg.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }
    var bar = view.querySelector(".tinyspec-bar");
    if (bar) {
      var fitButton = bar.querySelector(".fit"), inButton = bar.querySelector(".zin"), outButton = bar.querySelector(".zout");
      var find = bar.querySelector(".find"), said = bar.querySelector(".said");
      if (fitButton) fitButton.addEventListener("click", fit);
      if (inButton) inButton.addEventListener("click", function () { var m = mid(); zoom(1 / 1.5, m[0], m[1]); });
      if (outButton) outButton.addEventListener("click", function () { var m = mid(); zoom(1.5, m[0], m[1]); });
      if (find) find.addEventListener("change", function () {
        var n = parseInt(find.value, 10), hit = null;
        var nodes = svg.querySelectorAll("g.node");
        for (var i = 0; i < nodes.length && !hit; i++) {
          var one = nodes[i].getAttribute("data-node"), run = nodes[i].getAttribute("data-nodes");
          if (one !== null && parseInt(one, 10) === n) hit = nodes[i];
          if (run !== null) {   // "2-41 2382 4763-4765"
            var parts = run.split(" ");
            for (var q = 0; q < parts.length && !hit; q++) {
              var ab = parts[q].split("-"), lo = parseInt(ab[0], 10), hi = parseInt(ab[ab.length - 1], 10);
              if (n >= lo && n <= hi) hit = nodes[i];
            }
          }
        }
        var old = svg.querySelectorAll(".found");
        for (var k = 0; k < old.length; k++) old[k].classList.remove("found");
        if (!hit) { if (said) said.textContent = "node " + find.value + " is not drawn"; return; }
        if (said) said.textContent = "";
        hit.classList.add("found");
        var p = centreOf(hit);
        center(p.x, p.y, 900);
      });
    }
    // a picture too big to read when fit to the view starts at a readable scale, at its
    // (last) root, low in the view: what the graph computes; "fit" shows it all
    var r0 = svg.getBoundingClientRect();
    var fitScale = Math.min(r0.width / full.w, r0.height / full.h);
    if (fitScale >= 0.4 || !(r0.width > 0 && r0.height > 0)) fit();
    else {
      var w = r0.width / 0.8, h = r0.height / 0.8;
      var roots = svg.querySelectorAll("g.node.root");
      var at = roots.length ? centreOf(roots[roots.length - 1]) : { x: full.x + w / 2, y: full.y + h / 2 };
      box = { x: at.x - w / 2, y: at.y - h * 0.75, w: w, h: h };
      apply();
    }
  }

  var views = document.querySelectorAll(".tinyspec-view");
  for (var i = 0; i < views.length; i++) setUp(views[i]);
})();
