// The live feed: appends the console's Server-Sent Events to #feed.
(function () {
  'use strict';
  var feed = document.getElementById('feed');
  var status = document.getElementById('status');
  if (!feed || !status) { return; }
  if (!window.EventSource) { status.textContent = 'not live (no EventSource)'; return; }

  var keep = 200;
  var src = new EventSource('/events?after=' + encodeURIComponent(feed.getAttribute('data-last') || '0'));
  src.onopen = function () { status.textContent = 'live'; status.className = 'status live'; };
  src.onerror = function () {
    // A refused reconnection (the session ended) closes the source for good.
    var closed = src.readyState === EventSource.CLOSED;
    status.textContent = closed ? 'stopped: reload to sign in again' : 'reconnecting…';
    status.className = 'status down';
  };
  src.onmessage = function (m) {
    var it;
    try { it = JSON.parse(m.data); } catch (e) { return; }
    if (feed.querySelector('li[data-id="' + String(Number(it.id)) + '"]')) { return; }
    var li = item(it);
    li.className += ' fresh';
    feed.insertBefore(li, feed.firstChild);
    while (feed.children.length > keep) { feed.removeChild(feed.lastChild); }
  };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function two(n) { return (n < 10 ? '0' : '') + n; }

  // item builds the same markup as the page's "item" template, with text
  // nodes only: nothing from an event is ever parsed as HTML.
  function item(it) {
    var li = el('li', 'item ' + it.kind);
    li.setAttribute('data-id', String(it.id));
    li.setAttribute('data-kind', it.kind || '');
    li.setAttribute('data-call', it.call_id || '');
    li.setAttribute('data-key', it.key || '');
    var t = new Date(it.time);
    var parts = [
      el('time', '', two(t.getUTCHours()) + ':' + two(t.getUTCMinutes()) + ':' + two(t.getUTCSeconds())),
      el('span', 'kind', it.kind),
      el('span', 'tenant', it.tenant),
      el('span', 'tool', it.tool || ''),
      el('span', 'ids', (it.run_id || '') + ' / ' + (it.call_id || '')),
      el('span', 'detail', detail(it))
    ];
    for (var i = 0; i < parts.length; i++) {
      if (i > 0) { li.appendChild(document.createTextNode(' ')); }
      li.appendChild(parts[i]);
    }
    if (it.kind === 'indeterminate' && it.key) {
      var a = el('a', 'resolve', 'resolve…');
      a.href = '/?tenant=' + encodeURIComponent(it.tenant) + '&key=' + encodeURIComponent(it.key) + '#rec-' + encodeURIComponent(it.key);
      li.appendChild(document.createTextNode(' '));
      li.appendChild(a);
    }
    return li;
  }

  function detail(it) {
    if (it.kind === 'indeterminate') { return (it.reason || '') + (it.body_entered ? ', body entered' : ''); }
    if (it.kind === 'resolved') { return (it.action || '') + ' by ' + (it.operator || '') + (it.outcome ? ': ' + it.outcome : ''); }
    return it.outcome || '';
  }
}());
