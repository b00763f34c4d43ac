// Live sections: the server sends each section of this page again (as HTML it rendered and
// sanitized) when it changed; replace them in place. A section being used (focus inside, or
// boxes ticked for a bulk action) is left alone until it is not.
(function () {
  var body = document.body;
  if (!body.dataset.live) return;
  var base = body.dataset.base || "";
  var here = location.pathname.slice(base.length) + location.search;
  var es = new EventSource(base + "/live?path=" + encodeURIComponent(here));
  es.addEventListener("sections", function (e) {
    var sections = JSON.parse(e.data);
    for (var id in sections) {
      var el = document.getElementById(id);
      if (!el || el.contains(document.activeElement) || el.querySelector("input[type=checkbox]:checked")) continue;
      el.innerHTML = sections[id];
    }
    body.dataset.updated = String(Date.now());
  });
})();
