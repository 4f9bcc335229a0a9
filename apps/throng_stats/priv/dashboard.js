// Throng statistics dashboard: loads the last 300 seconds from ./history,
// then polls ./stats every second and redraws. Charts are drawn on <canvas>
// by the small plotter below: no library, nothing fetched from elsewhere.
// After each draw a canvas carries data-points (points plotted) and
// data-ink (pixels painted in its plot area), which tests read.
(function () {
  'use strict';

  var MAX_POINTS = 300;
  var POLL_MS = 1000;
  var data = {};       // chart key -> array of values, oldest first
  var updates = 0;

  var COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e'];

  var CHARTS = [
    {id: 'chart-sessions', fmt: fmtCount, series: [
      {key: 'sessions', label: 'sessions (bound)'}, {key: 'connections', label: 'connections'}]},
    {id: 'chart-logins', fmt: fmtCount, series: [
      {key: 'logins', label: 'logins/s'}, {key: 'auth_failures', label: 'auth failures/s'},
      {key: 'connects', label: 'connects/s'}]},
    {id: 'chart-stanzas', fmt: fmtCount, series: [
      {key: 'stanzas_in', label: 'in/s'}, {key: 'stanzas_out', label: 'out/s'}]},
    {id: 'chart-memory', fmt: fmtBytes, series: [
      {key: 'mem_per_conn', label: 'BEAM/connection'}, {key: 'rss_per_conn', label: 'RSS/connection'}]},
    {id: 'chart-sched', fmt: fmtPct, max: 1, series: [
      {key: 'sched', label: 'normal schedulers'}, {key: 'sched_dirty', label: 'dirty CPU schedulers'}]},
    {id: 'chart-queues', fmt: fmtCount, alarmKey: 'queue_over', series: [
      {key: 'queue_max', label: 'longest queue'}, {key: 'queue_threshold', label: 'alarm threshold', dash: true}]},
    {id: 'chart-latency', fmt: fmtMs, series: [{key: 'latency_ms', label: 'mean ms'}]}
  ];

  // ---- number formatting

  function si(v, units, base, digits) {
    var i = 0;
    while (Math.abs(v) >= base && i < units.length - 1) { v /= base; i++; }
    var s = (i === 0 && Math.round(v) === v) ? String(v) : v.toFixed(digits);
    return s + units[i];
  }
  function fmtCount(v) { return v == null ? '–' : si(v, ['', 'k', 'M', 'G'], 1000, 1); }
  function fmtBytes(v) { return v == null ? '–' : si(Math.round(v), [' B', ' KB', ' MB', ' GB'], 1024, 1); }
  function fmtPct(v) { return v == null ? '–' : (v * 100).toFixed(1) + '%'; }
  function fmtMs(v) { return v == null ? '–' : v.toFixed(v < 10 ? 2 : 0) + ' ms'; }
  function fmtNum(v) {
    if (v == null) return '–';
    if (Math.abs(v) >= 1000) return si(v, ['', 'k', 'M', 'G', 'T'], 1000, 2);
    return Math.round(v) === v ? String(v) : v.toPrecision(4);
  }

  function niceCeil(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }

  // ---- the plotter

  function draw(chart) {
    var canvas = document.getElementById(chart.id);
    if (!canvas) return;
    var dpr = window.devicePixelRatio || 1;
    var w = canvas.clientWidth || 520, h = canvas.clientHeight || 200;
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    var ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);

    var left = 64, right = 10, top = 22, bottom = 20;
    var pw = w - left - right, ph = h - top - bottom;
    var n = (data.t || []).length;

    var ymax = chart.max || 0;
    if (!chart.max) {
      chart.series.forEach(function (s) {
        (data[s.key] || []).forEach(function (v) { if (v != null && v > ymax) ymax = v; });
      });
      ymax = 4 * niceCeil(ymax / 4);   // four grid steps of a round size
    }
    function x(i) { return left + (n <= 1 ? pw : pw * i / (n - 1)); }
    function y(v) { return top + ph - ph * Math.min(v, ymax) / ymax; }

    // Alarm periods shaded red.
    if (chart.alarmKey && data[chart.alarmKey]) {
      ctx.fillStyle = 'rgba(198, 40, 40, 0.18)';
      data[chart.alarmKey].forEach(function (v, i) {
        if (v > 0) {
          var x0 = n <= 1 ? left : x(Math.max(0, i - 0.5)), x1 = n <= 1 ? left + pw : x(Math.min(n - 1, i + 0.5));
          ctx.fillRect(x0, top, Math.max(1, x1 - x0), ph);
        }
      });
    }

    // Grid and labels.
    ctx.strokeStyle = '#e4e4e4'; ctx.lineWidth = 1;
    ctx.fillStyle = '#666'; ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    for (var g = 0; g <= 4; g++) {
      var gv = ymax * g / 4, gy = y(gv);
      ctx.beginPath(); ctx.moveTo(left, gy); ctx.lineTo(left + pw, gy); ctx.stroke();
      ctx.fillText(chart.fmt(gv), left - 6, gy);
    }
    ctx.textAlign = 'left'; ctx.textBaseline = 'top';
    if (n > 1) {
      var span = Math.round((data.t[n - 1] - data.t[0]) / 1000);
      ctx.fillText('-' + span + ' s', left, top + ph + 4);
      ctx.textAlign = 'right'; ctx.fillText('now', left + pw, top + ph + 4);
    }

    // Lines and legend.
    var points = 0, lx = left;
    chart.series.forEach(function (s, si) {
      var color = COLORS[si % COLORS.length];
      var vals = data[s.key] || [];
      ctx.strokeStyle = color; ctx.lineWidth = 1.6;
      ctx.setLineDash(s.dash ? [5, 4] : []);
      ctx.beginPath();
      var started = false;
      vals.forEach(function (v, i) {
        if (v == null) { started = false; return; }
        points++;
        if (!started) { ctx.moveTo(x(i), y(v)); started = true; } else ctx.lineTo(x(i), y(v));
      });
      if (vals.length === 1 && vals[0] != null) { ctx.moveTo(left, y(vals[0])); ctx.lineTo(left + pw, y(vals[0])); }
      ctx.stroke();
      ctx.setLineDash([]);
      var last = vals.length ? vals[vals.length - 1] : null;
      var text = s.label + ' ' + chart.fmt(last);
      ctx.fillStyle = color; ctx.fillRect(lx, 6, 10, 10);
      ctx.fillStyle = '#333'; ctx.textAlign = 'left'; ctx.textBaseline = 'top';
      ctx.fillText(text, lx + 14, 5);
      lx += ctx.measureText(text).width + 30;
    });

    canvas.dataset.points = String(points);
    canvas.dataset.ink = String(ink(ctx, left * dpr, (top - 2) * dpr, pw * dpr, (ph + 4) * dpr));
  }

  // Coloured pixels of the plot area: the series' lines and the alarm
  // shading, not the grey grid and labels (every 2nd pixel of every row).
  function ink(ctx, x0, y0, w, h) {
    try {
      var img = ctx.getImageData(Math.round(x0), Math.round(y0), Math.max(1, Math.round(w)), Math.max(1, Math.round(h)));
      var d = img.data, count = 0;
      for (var i = 0; i < d.length; i += 8) {
        if (d[i + 3] === 0) continue;
        var hi = Math.max(d[i], d[i + 1], d[i + 2]), lo = Math.min(d[i], d[i + 1], d[i + 2]);
        if (hi - lo > 40) count++;
      }
      return count;
    } catch (e) { return -1; }
  }

  function drawAll() { CHARTS.forEach(draw); }

  // ---- data

  function push(point) {
    var keys = Object.keys(point);
    var n = (data.t || []).length;
    if (n > 0 && data.t[n - 1] === point.t) return;
    keys.forEach(function (k) {
      if (!data[k]) data[k] = new Array(n).fill(null);
      data[k].push(point[k]);
      if (data[k].length > MAX_POINTS) data[k].shift();
    });
  }

  function text(id, s) { var el = document.getElementById(id); if (el) el.textContent = s; }

  function tiles(s) {
    var c = s.chart || {};
    text('v-sessions', fmtCount(c.sessions));
    text('v-connections', fmtCount(c.connections));
    text('v-logins', fmtCount(round1(c.logins)));
    text('v-stanzas-in', fmtCount(round1(c.stanzas_in)));
    text('v-stanzas-out', fmtCount(round1(c.stanzas_out)));
    text('v-mem', fmtBytes(c.mem_per_conn));
    text('v-sched', fmtPct(c.sched));
    text('v-cpu', c.cpu == null ? '–' : c.cpu.toFixed(3));
    var p99 = s.latency && s.latency.p99;
    text('v-latency', p99 == null ? '–' : fmtMs(p99 * 1000));
    text('v-queue', fmtCount(c.queue_max));
  }
  function round1(v) { return v == null ? v : Math.round(v * 10) / 10; }

  function alarm(q) {
    var el = document.getElementById('alarm');
    if (q && q.alarm) {
      el.hidden = false;
      el.textContent = 'ALARM: ' + q.over + ' process(es) with a message queue longer than ' +
        q.threshold + ' (longest: ' + q.max + ')';
    } else {
      el.hidden = true; el.textContent = '';
    }
  }

  function rows(tbody, list) {
    while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
    list.forEach(function (cells) {
      var tr = document.createElement('tr');
      cells.forEach(function (c, i) {
        var td = document.createElement('td');
        td.textContent = c;
        if (i === 0 && cells.title) td.title = cells.title;
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    });
  }

  function topTable(q, now) {
    var list = ((q && q.top) || []).map(function (e) {
      return [e.pid, e.name, String(e.len), Math.max(0, Math.round((now - e.since_ms) / 1000)) + ' s'];
    });
    rows(document.querySelector('#top tbody'), list);
  }

  function metricsTable(metrics) {
    var list = [];
    Object.keys(metrics || {}).sort().forEach(function (name) {
      var m = metrics[name];
      m.series.forEach(function (s) {
        var labels = Object.keys(s.labels).map(function (k) { return k + '="' + s.labels[k] + '"'; });
        var row = [name + (labels.length ? '{' + labels.join(',') + '}' : ''),
                   fmtNum(s.now), fmtNum(s.avg1), fmtNum(s.avg10), fmtNum(s.avg100), fmtNum(s.value)];
        row.title = m.help + ' (' + m.type + ', ' + m.unit + ')';
        list.push(row);
      });
    });
    rows(document.querySelector('#metrics tbody'), list);
  }

  function status(state, msg) {
    var el = document.getElementById('status');
    el.dataset.state = state; el.textContent = msg;
  }

  function getJSON(url) {
    return fetch(url, {cache: 'no-store', credentials: 'same-origin'}).then(function (r) {
      if (!r.ok) throw new Error(url + ': HTTP ' + r.status);
      return r.json();
    });
  }

  function poll() {
    getJSON('stats').then(function (s) {
      if (s.chart) push(s.chart);
      text('node', s.node || '');
      tiles(s); alarm(s.queues); topTable(s.queues, s.time_ms); metricsTable(s.metrics);
      drawAll();
      updates++;
      document.body.dataset.updates = String(updates);
      status('live', 'live · ' + new Date(s.time_ms).toLocaleTimeString());
    }).catch(function (e) {
      status('error', String(e.message || e));
    }).then(function () { setTimeout(poll, POLL_MS); });
  }

  window.addEventListener('resize', drawAll);
  getJSON('history').then(function (h) {
    Object.keys(h).forEach(function (k) { data[k] = h[k].slice(-MAX_POINTS); });
    drawAll();
  }).catch(function (e) {
    status('error', String(e.message || e));
  }).then(poll);
})();
