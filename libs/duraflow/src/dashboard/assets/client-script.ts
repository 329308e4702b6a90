/**
 * The dashboard's only script, inlined in every page (allowed by its hash in the
 * Content-Security-Policy). Pages work without it; it shows times in the viewer's time zone
 * (the UTC time on hover), and adds live updates to a task's page:
 * it listens to the task's server-sent events and, when the task's progress changes, fetches
 * the live part of the page again and swaps it in, keeping open expanders and keyboard focus.
 * The server ends the stream once the task is finished (`end`) or found gone (`gone`); the
 * script then closes it (an EventSource would otherwise reconnect).
 */
export const DASHBOARD_CLIENT_SCRIPT = `
(function () {
  'use strict';
  function pad(n, width) { n = String(n); while (n.length < (width || 2)) n = '0' + n; return n; }
  // Times are rendered in UTC; shown in the viewer's time zone, with the UTC time on hover.
  function localize(root) {
    root.querySelectorAll('time[datetime]').forEach(function (element) {
      var date = new Date(element.getAttribute('datetime'));
      if (element.dataset.local || isNaN(date.getTime())) return;
      var text = date.getFullYear() + '-' + pad(date.getMonth() + 1) + '-' + pad(date.getDate()) + ' ' + pad(date.getHours()) + ':' +
        pad(date.getMinutes()) + ':' + pad(date.getSeconds()) + '.' + pad(date.getMilliseconds(), 3);
      element.title = date.toISOString().replace('T', ' ').replace('Z', '') + ' UTC';
      element.textContent = element.textContent.trim().length <= 12 ? text.slice(11) : text;
      element.dataset.local = '1';
    });
  }
  localize(document);
  var live = document.getElementById('live');
  var state = document.getElementById('live-state');
  if (!live || !state || !live.dataset.events || !window.EventSource) return;
  var version = live.dataset.version;
  var loading = false;
  var again = false;

  function say(text) { state.textContent = text; }

  function swap(markup) {
    var open = [];
    live.querySelectorAll('details[open][id]').forEach(function (d) { open.push(d.id); });
    var focused = document.activeElement && live.contains(document.activeElement) ? document.activeElement.id : '';
    live.innerHTML = markup;
    localize(live);
    open.forEach(function (id) { var d = document.getElementById(id); if (d) d.open = true; });
    if (focused) { var f = document.getElementById(focused); if (f) f.focus(); }
  }

  function refresh() {
    if (loading) { again = true; return; }
    loading = true;
    fetch(live.dataset.fragment, { credentials: 'same-origin', headers: { accept: 'text/html' } })
      .then(function (response) {
        if (!response.ok) throw new Error('HTTP ' + response.status);
        return response.text();
      })
      .then(swap)
      .catch(function (error) { say('Live updates failed (' + error.message + '): reload the page.'); })
      .then(function () {
        loading = false;
        if (again) { again = false; refresh(); }
      });
  }

  var source = new EventSource(live.dataset.events);
  source.addEventListener('open', function () { say('Live: this page follows the task.'); });
  source.addEventListener('progress', function (event) {
    var progress = JSON.parse(event.data);
    if (progress.version !== version) { version = progress.version; refresh(); }
  });
  source.addEventListener('end', function () { source.close(); say('The task is finished: live updates stopped.'); });
  source.addEventListener('gone', function () { source.close(); say('This task no longer exists.'); });
  source.addEventListener('error', function () {
    if (source.readyState === EventSource.CLOSED) say('Live updates stopped: reload the page.');
    else say('Reconnecting…');
  });
})();
`;
