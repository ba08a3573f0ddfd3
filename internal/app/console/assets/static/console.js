// The console's script: follows the feed's Server-Sent Events into #feed,
// marks an indeterminate item settled when its key is resolved, filters the
// feed by kind, and reloads the records table (#records-body) when the feed
// says a record came or went. Everything works without it but the live parts.
(function () {
  'use strict';
  var feed = document.getElementById('feed');
  var status = document.getElementById('status');
  var records = document.getElementById('records-body');
  var filter = document.getElementById('filter');

  if (filter && feed) {
    var apply = document.getElementById('filter-apply');
    if (apply) { apply.hidden = true; }
    var boxes = filter.querySelectorAll('input[name=show]');
    var sync = function () {
      for (var i = 0; i < boxes.length; i++) {
        feed.classList.toggle('hide-' + boxes[i].value, !boxes[i].checked);
      }
    };
    for (var i = 0; i < boxes.length; i++) { boxes[i].addEventListener('change', sync); }
    sync();
  }

  if (!feed || !status) { return; }
  if (!window.EventSource) { status.textContent = 'not live (no EventSource)'; return; }

  var keep = 200;
  var down = false;
  var src = new EventSource('/events?after=' + encodeURIComponent(feed.getAttribute('data-last') || '0'));
  src.onopen = function () {
    status.textContent = 'live'; status.className = 'status live';
    if (down) { reloadRecords(); } // what changed while it was down
    down = false;
  };
  src.onerror = function () {
    // A refused reconnection (the session ended) closes the source for good.
    var closed = src.readyState === EventSource.CLOSED;
    status.textContent = closed ? 'stopped: reload to sign in again' : 'reconnecting…';
    status.className = 'status down';
    down = true;
  };
  src.onmessage = function (m) {
    var it;
    try { it = JSON.parse(m.data); } catch (e) { return; }
    if (feed.querySelector('li[data-id="' + String(Number(it.id)) + '"]')) { return; }
    if (it.kind === 'resolved') { settle(it); }
    var li = item(it);
    if (it.kind === 'indeterminate') { settledBefore(li); }
    li.className += ' fresh';
    feed.insertBefore(li, feed.firstChild);
    while (feed.children.length > keep) { feed.removeChild(feed.lastChild); }
    if (it.kind === 'indeterminate' || it.kind === 'resolved') {
      var t = records && records.getAttribute('data-tenant');
      if (!t || t === it.tenant) { reloadRecords(); }
    }
  };

  // settle replaces the "resolve…" link of the items of the resolved key
  // that came before the resolution (by the events' times: each kind is
  // watched on its own, so they may reach the feed out of order).
  function settle(it) {
    var at = Date.parse(it.time);
    var lis = document.querySelectorAll('li[data-kind=indeterminate]');
    for (var i = 0; i < lis.length; i++) {
      var li = lis[i];
      if (li.getAttribute('data-key') !== it.key || li.getAttribute('data-tenant') !== it.tenant) { continue; }
      if (Number(li.getAttribute('data-time')) > at) { continue; }
      var a = li.querySelector('a.resolve');
      if (a) { li.replaceChild(el('span', 'settled', 'resolved: ' + (it.action || '') + ' by ' + (it.operator || '')), a); }
    }
  }

  // settledBefore settles a new indeterminate item whose resolution reached
  // the feed first.
  function settledBefore(li) {
    var rs = feed.querySelectorAll('li[data-kind=resolved]');
    for (var i = 0; i < rs.length; i++) {
      var r = rs[i];
      if (r.getAttribute('data-key') !== li.getAttribute('data-key') || r.getAttribute('data-tenant') !== li.getAttribute('data-tenant')) { continue; }
      if (Number(r.getAttribute('data-time')) < Number(li.getAttribute('data-time'))) { continue; }
      var a = li.querySelector('a.resolve');
      if (a) { li.replaceChild(el('span', 'settled', 'resolved: ' + r.getAttribute('data-settles')), a); }
    }
  }

  // reloadRecords fetches the table again (soon, once for a burst of events)
  // and merges it: rows that went are removed, new ones added, and the rows
  // that stay are kept as they are, with whatever was typed into them.
  var pending = null;
  function reloadRecords() {
    if (!records || pending) { return; }
    pending = setTimeout(function () {
      pending = null;
      fetch(records.getAttribute('data-src'), { credentials: 'same-origin' }).then(function (r) {
        if (!r.ok) { throw new Error(String(r.status)); }
        return r.text();
      }).then(merge).catch(function () {});
    }, 250);
  }

  function merge(html) {
    var doc = new DOMParser().parseFromString(html, 'text/html');
    var fresh = doc.getElementById('records-body');
    if (!fresh) { return; }
    var oldBody = records.querySelector('tbody');
    var newBody = fresh.querySelector('tbody');
    if (!oldBody || !newBody) {
      var node = document.importNode(fresh, true);
      records.parentNode.replaceChild(node, records);
      records = node;
      return;
    }
    var have = {};
    var rows = oldBody.querySelectorAll('tr[data-key]');
    for (var i = 0; i < rows.length; i++) { have[rows[i].getAttribute('data-key')] = rows[i]; }
    var want = newBody.querySelectorAll('tr[data-key]');
    var seen = {};
    for (var j = 0; j < want.length; j++) {
      var k = want[j].getAttribute('data-key');
      seen[k] = true;
      var row = have[k];
      if (row) {
        var age = want[j].querySelector('td.age');
        var old = row.querySelector('td.age');
        if (age && old) { old.textContent = age.textContent; }
      } else {
        row = document.importNode(want[j], true);
        row.classList.add('fresh');
      }
      oldBody.appendChild(row); // in the new order
    }
    for (var key in have) {
      if (!seen[key]) { oldBody.removeChild(have[key]); }
    }
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function two(n) { return (n < 10 ? '0' : '') + n; }

  // item builds the same markup as the pages' "item" template, with text
  // nodes only: nothing from an event is ever parsed as HTML.
  function item(it) {
    var li = el('li', 'item ' + it.kind);
    li.setAttribute('data-id', String(it.id));
    li.setAttribute('data-kind', it.kind || '');
    li.setAttribute('data-time', String(Date.parse(it.time)));
    li.setAttribute('data-tenant', it.tenant || '');
    if (it.kind === 'resolved') { li.setAttribute('data-settles', (it.action || '') + ' by ' + (it.operator || '')); }
    li.setAttribute('data-call', it.call_id || '');
    li.setAttribute('data-key', it.key || '');
    var t = new Date(it.time);
    var ids = el('span', 'ids', (it.run_id || '') + ' / ' + (it.call_id || ''));
    ids.title = ids.textContent;
    var parts = [
      el('time', '', two(t.getUTCHours()) + ':' + two(t.getUTCMinutes()) + ':' + two(t.getUTCSeconds())),
      el('span', 'kind', it.kind),
      el('span', 'tenant', it.tenant),
      el('span', 'tool', it.tool || ''),
      ids,
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
    if (it.kind === 'failed' || it.kind === 'rejected') { return (it.code || '') + (it.error ? ': ' + it.error : ''); }
    return it.outcome || '';
  }
}());
