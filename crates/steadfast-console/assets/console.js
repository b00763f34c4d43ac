// Live sections: the server sends the sections of this page that changed (HTML it rendered
// and sanitized, with a digest); replace them in place. A section already showing that
// digest is skipped, and one being used (focus inside, or boxes ticked) is left alone.
(function () {
  var body = document.body;
  if (!body.dataset.live) return;
  var base = body.dataset.base || "";
  var here = location.pathname.slice(base.length) + location.search;
  var es = new EventSource(base + "/live?path=" + encodeURIComponent(here));
  es.addEventListener("sections", function (e) {
    var sections = JSON.parse(e.data);
    for (var id in sections) {
      var el = document.getElementById(id), s = sections[id];
      if (!el || el.dataset.h === s.h) continue;
      if (el.contains(document.activeElement) || el.querySelector("input[type=checkbox]:checked")) continue;
      el.innerHTML = s.html;
      el.dataset.h = s.h;
    }
    body.dataset.updated = String(Date.now());
  });
})();
