// lumina report: renders the page's data (the JSON in #lumina-data) with Apache ECharts. Written for this
// repository; no network, no storage. window.luminaReport tells a test what was drawn: per plot its series
// and the points drawn in each, and ready once every plot has rendered.
(function () {
  'use strict';
  var R = window.luminaReport = { ready: false, plots: {}, errors: [], renderMs: null, pending: 0, deferred: 0, marks: { start: performance.now() } };
  window.addEventListener('error', function (e) { R.errors.push(String(e.message)); });

  var D = JSON.parse(document.getElementById('lumina-data').textContent);
  R.marks.parsed = performance.now();
  var app = document.getElementById('app');
  app.textContent = '';
  var MAXP = D.max_points || 4000;
  var SERIES = ['data', 'retransmitted', 'ACK', 'NAK', 'CNP'];
  var COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c'];
  var SYMBOLS = ['circle', 'diamond', 'triangle', 'rect', 'pin'];
  // Only the common series (data, ACKs, ECN marks) are decimated; the rare ones (retransmissions, NAKs, CNPs,
  // drops, corruptions and every other injected event) draw every point, however many there are.
  var COMMON = [true, false, true, false, false];
  var EV_ECN = 2;
  var EV_COLORS = { 1: '#111827', 2: '#0891b2', 3: '#be185d', 4: '#ca8a04', 5: '#4d7c0f', 6: '#7c3aed', 7: '#0f766e' };
  // Drawing order: data, then ACKs over it, then retransmissions, NAKs and CNPs, the injected events (one series
  // per event type) on top.

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) { for (var k in attrs) { if (k === 'text') { e.textContent = attrs[k]; } else { e.setAttribute(k, attrs[k]); } } }
    (kids || []).forEach(function (c) { if (c != null) { e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); } });
    return e;
  }
  function fmt(v, d) {
    if (v === null || v === undefined) { return '—'; }
    if (typeof v === 'number') { return Number.isInteger(v) ? String(v) : v.toFixed(d === undefined ? 3 : d); }
    if (typeof v === 'boolean') { return v ? 'yes' : 'no'; }
    return String(v);
  }
  function okCell(ok, skipped) {
    if (skipped) { return el('span', { 'class': 'skip', text: 'skipped' }); }
    return el('span', { 'class': ok ? 'ok' : 'notok', text: ok ? 'pass' : 'FAIL' });
  }
  // table(headers, rows): rows are arrays of cells (strings, numbers or nodes); row.cls sets the row's class.
  function table(headers, rows) {
    var t = el('table', null, headers ? [el('tr', null, headers.map(function (h) { return el('th', { text: h }); }))] : []);
    rows.forEach(function (r) {
      var tr = el('tr', r.cls ? { 'class': r.cls } : null);
      r.forEach(function (c) {
        if (c instanceof Node) { tr.appendChild(el('td', null, [c])); } else {
          // counters come as decimal strings (exact above 2^53): aligned as numbers
          tr.appendChild(el('td', typeof c === 'number' || (typeof c === 'string' && /^-?[0-9]+$/.test(c)) ? { 'class': 'num', text: fmt(c) } : { text: fmt(c) }));
        }
      });
      t.appendChild(tr);
    });
    if (rows.length <= 30) { return t; }
    // A long table starts folded, under a line that says how long it is.
    var bad = rows.filter(function (r) { return r.cls === 'bad'; }).length;
    return el('details', null, [el('summary', { text: rows.length + ' rows' + (bad ? ', ' + bad + ' highlighted' : '') + ' (click to show)' }), t]);
  }
  // ranges writes sorted numbers as 1-4, 7, 9-10.
  function ranges(v) {
    v = v.slice().sort(function (a, b) { return a - b; });
    var out = [], i = 0;
    while (i < v.length) {
      var j = i;
      while (j + 1 < v.length && v[j + 1] === v[j] + 1) { j++; }
      out.push(i === j ? String(v[i]) : v[i] + '-' + v[j]);
      i = j + 1;
    }
    return out.join(', ');
  }
  function note(s) { return el('p', { 'class': 'note', text: s }); }

  // Typed columns from base64.
  function bytes(s) {
    var bin = atob(s), n = bin.length, u = new Uint8Array(n);
    for (var i = 0; i < n; i++) { u[i] = bin.charCodeAt(i); }
    return u;
  }
  function columns(c) {
    return {
      n: c.n, t: new Float64Array(bytes(c.t).buffer), y: new Int32Array(bytes(c.y).buffer), kind: bytes(c.kind),
      ev: bytes(c.ev), op: bytes(c.op), psn: new Uint32Array(bytes(c.psn).buffer), pkt: new Uint32Array(bytes(c.pkt).buffer)
    };
  }
  // Packet numbers are the trace's 0-based indexes, as the analyzers' violations give them; Wireshark's frame
  // numbers start at 1.
  // Row indexes of each series (in time order): select(row) gives the series of a row, or -1; extra(row)
  // gives a second series a row also belongs to (the injected events), or -1.
  function seriesRows(cols, nseries, select, extra) {
    var counts = new Int32Array(nseries), i, s;
    for (i = 0; i < cols.n; i++) {
      s = select(i); if (s >= 0) { counts[s]++; }
      s = extra ? extra(i) : -1; if (s >= 0) { counts[s]++; }
    }
    var rows = [], fill = new Int32Array(nseries);
    for (s = 0; s < nseries; s++) { rows.push(new Int32Array(counts[s])); }
    for (i = 0; i < cols.n; i++) {
      s = select(i); if (s >= 0) { rows[s][fill[s]++] = i; }
      s = extra ? extra(i) : -1; if (s >= 0) { rows[s][fill[s]++] = i; }
    }
    return rows;
  }
  function lowerBound(rows, t, x) {
    var lo = 0, hi = rows.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (t[rows[m]] < x) { lo = m + 1; } else { hi = m; } }
    return lo;
  }
  // decimate returns the points of one series in [x0, x1]: every packet when there are at most max, else per
  // time bucket the packets with the lowest and highest value (an envelope of real packets, so hovering still
  // shows a packet). Points are [time, value, row].
  function decimate(rows, cols, x0, x1, max) {
    var t = cols.t, y = cols.y, a = lowerBound(rows, t, x0), b = lowerBound(rows, t, x1 + 1e-9), out = [], i;
    if (b - a <= max) {
      for (i = a; i < b; i++) { out.push([t[rows[i]], y[rows[i]], rows[i]]); }
      return out;
    }
    var nb = Math.max(1, Math.floor(max / 2)), w = (x1 - x0) / nb, bucket = -1, lo = -1, hi = -1;
    function flush() {
      if (lo < 0) { return; }
      if (lo === hi) { out.push([t[lo], y[lo], lo]); } else if (lo < hi) { out.push([t[lo], y[lo], lo], [t[hi], y[hi], hi]); } else { out.push([t[hi], y[hi], hi], [t[lo], y[lo], lo]); }
    }
    for (i = a; i < b; i++) {
      var r = rows[i], k = Math.min(nb - 1, Math.floor((t[r] - x0) / w));
      if (k !== bucket) { flush(); bucket = k; lo = r; hi = r; continue; }
      if (y[r] < y[lo]) { lo = r; }
      if (y[r] > y[hi]) { hi = r; }
    }
    flush();
    return out;
  }

  // Beyond EAGER time-sequence diagrams, a diagram is drawn when it scrolls near the window (R.renderAll()
  // draws them all): a run of hundreds of connections opens as fast as one of a few.
  var EAGER = 16, eagerLeft = EAGER, waiting = [];
  var observer = window.IntersectionObserver ? new IntersectionObserver(function (entries) {
    entries.forEach(function (e) { if (e.isIntersecting) { build(e.target); } });
  }, { rootMargin: '800px 0px' }) : null;
  function build(holder) {
    if (!holder.luminaBuild) { return; }
    var f = holder.luminaBuild;
    holder.luminaBuild = null;
    if (observer) { observer.unobserve(holder); }
    R.deferred--;
    f(holder);
  }
  function maybeLater(parent, f) {
    if (eagerLeft > 0 || !observer) { eagerLeft--; f(parent); return; }
    var holder = el('div', { 'class': 'plot-holder' });
    parent.appendChild(holder);
    holder.luminaBuild = f;
    waiting.push(holder);
    R.deferred++;
    observer.observe(holder);
  }
  R.renderAll = function () { waiting.forEach(build); waiting = []; return R.deferred; };

  var charts = [];
  function plot(id, parent, option, seriesCounts) {
    var div = el('div', { 'class': 'plot', id: id });
    parent.appendChild(div);
    var c = echarts.init(div, null, { renderer: 'canvas' });
    charts.push(c);
    R.pending++;
    var done = false;
    c.on('finished', function () {
      if (done) { return; }
      done = true;
      R.pending--;
      if (R.pending === 0 && !R.ready) { R.ready = true; R.renderMs = performance.now(); }
    });
    option.animation = false;
    c.setOption(option);
    record(id, option.series, seriesCounts);
    return c;
  }
  function record(id, series, total) {
    R.plots[id] = {
      series: series.length, names: series.map(function (s) { return s.name; }),
      points: series.map(function (s) { return s.data.length; }), total: total || null
    };
  }
  var baseGrid = { left: 70, right: 30, top: 40, bottom: 70 };
  function legend() { return { top: 4, type: 'scroll' }; }

  // The time-sequence diagram of one connection.
  function timeSequence(id, parent, conn, tr) {
    var T0 = performance.now();
    var cols = columns(conn.packets);
    R.marks.decode = (R.marks.decode || 0) + performance.now() - T0; T0 = performance.now();
    var evs = [], evIndex = {}, i;
    for (i = 0; i < cols.n; i++) { if (cols.ev[i] && evIndex[cols.ev[i]] === undefined) { evIndex[cols.ev[i]] = 0; evs.push(cols.ev[i]); } }
    evs.sort(function (a, b) { return a - b; });
    evs.forEach(function (e, k) { evIndex[e] = SERIES.length + k; });
    var rows = seriesRows(cols, SERIES.length + evs.length, function (i) { return cols.kind[i]; }, function (i) { return cols.ev[i] ? evIndex[cols.ev[i]] : -1; });
    var tmax = cols.n ? cols.t[cols.n - 1] : 1; // the connection's last packet (a short one stays readable)
    R.marks.rows = (R.marks.rows || 0) + performance.now() - T0; T0 = performance.now();
    function seriesFor(x0, x1) {
      var out = SERIES.map(function (name, s) {
        return {
          name: name, type: 'scatter', symbol: SYMBOLS[s], symbolSize: 5, itemStyle: { color: COLORS[s] },
          data: decimate(rows[s], cols, x0, x1, COMMON[s] ? MAXP : Infinity), z: [2, 4, 3, 5, 5][s], progressive: 0, large: true, largeThreshold: 1000
        };
      });
      evs.forEach(function (e, k) {
        var s = SERIES.length + k;
        out.push({
          name: 'injected ' + (tr.events[e] || ('event ' + e)), type: 'scatter', symbol: 'emptyCircle', symbolSize: e === EV_ECN ? 8 : 11,
          itemStyle: { color: EV_COLORS[e] || '#111827' }, data: decimate(rows[s], cols, x0, x1, e === EV_ECN ? MAXP : Infinity),
          z: e === EV_ECN ? 6 : 7, progressive: 0, large: true, largeThreshold: 1000
        });
      });
      return out;
    }
    var option = {
      grid: baseGrid, legend: legend(),
      tooltip: {
        trigger: 'item', formatter: function (p) {
          var r = p.data[2], ev = cols.ev[r];
          return 'packet #' + cols.pkt[r] + ' (' + SERIES[cols.kind[r]] + '; Wireshark frame ' + (cols.pkt[r] + 1) + ')<br>time ' + cols.t[r].toFixed(3) + ' µs<br>' +
            (tr.opcodes[cols.op[r]] || ('opcode ' + cols.op[r])) + '<br>PSN ' + cols.psn[r] + ' (offset ' + cols.y[r] + ')' +
            (cols.kind[r] === 4 ? ' — a CNP is drawn at the latest data PSN' : '') + (ev ? '<br>event: <b>' + (tr.events[ev] || ev) + '</b>' : '');
        }
      },
      xAxis: { type: 'value', name: 'time (µs)', nameLocation: 'middle', nameGap: 24, min: 0, max: tmax },
      yAxis: { type: 'value', name: 'PSN offset', scale: true },
      dataZoom: [{ type: 'inside', xAxisIndex: 0, filterMode: 'none' }, { type: 'slider', xAxisIndex: 0, filterMode: 'none', height: 18, bottom: 8, showDataShadow: false }],
      series: seriesFor(0, tmax)
    };
    R.marks.decim = (R.marks.decim || 0) + performance.now() - T0; T0 = performance.now();
    var chart = plot(id, parent, option, rows.map(function (r) { return r.length; }));
    R.marks.chart = (R.marks.chart || 0) + performance.now() - T0;
    var pending = false;
    chart.on('datazoom', function () {
      if (pending) { return; }
      pending = true;
      requestAnimationFrame(function () {
        pending = false;
        var dz = chart.getOption().dataZoom[0];
        var x0 = dz.startValue !== undefined ? dz.startValue : 0, x1 = dz.endValue !== undefined ? dz.endValue : tmax;
        var s = seriesFor(x0, x1);
        chart.setOption({ series: s.map(function (x) { return { data: x.data }; }) });
        record(id, s, rows.map(function (r) { return r.length; }));
      });
    });
  }

  function cnpTimeline(id, parent, run) {
    var tr = run.trace, cols = columns(tr.cnp);
    var unknown = (tr.cnp_counts || [])[2] > 0;
    var names = ['ECN mark (CE data packet)', 'CNP'];
    if (unknown) { names.push('CNP of no known connection (y: its QPN)'); }
    var rows = seriesRows(cols, names.length, function (i) { return cols.kind[i] < names.length ? cols.kind[i] : -1; });
    var tmax = tr.end_us > 0 ? tr.end_us : (cols.n ? cols.t[cols.n - 1] : 1); // the trace's end, as the diagram of the connection that lasts longest
    function seriesFor(x0, x1) {
      return names.map(function (name, s) { // ECN marks are decimated, CNPs never
        return { name: name, type: 'scatter', symbolSize: s ? 7 : 4, symbol: s ? 'triangle' : 'circle', itemStyle: { color: ['#0891b2', '#ea580c', '#7c2d12'][s] }, data: decimate(rows[s], cols, x0, x1, s ? Infinity : MAXP), progressive: 0, large: true, largeThreshold: 1000 };
      });
    }
    var chart = plot(id, parent, {
      grid: { left: 70, right: 30, top: 56, bottom: 70 }, legend: { top: 22, type: 'scroll' },
      title: { text: 'CNP limiter scope inferred: ' + (run.cnp.scope_inferred || 'none'), left: 'center', top: 0, textStyle: { fontSize: 13 } },
      tooltip: { trigger: 'item', formatter: function (p) { var r = p.data[2]; return names[cols.kind[r]] + '<br>packet #' + cols.pkt[r] + (cols.kind[r] === 2 ? '<br>QPN 0x' + cols.y[r].toString(16) : '<br>QP ' + cols.y[r]) + '<br>time ' + cols.t[r].toFixed(3) + ' µs'; } },
      xAxis: { type: 'value', name: 'time (µs)', nameLocation: 'middle', nameGap: 24, min: 0, max: tmax },
      yAxis: { type: 'value', name: unknown ? 'QP (or QPN)' : 'QP', minInterval: 1, min: function (v) { return Math.max(0, v.min - 1); }, max: function (v) { return v.max + 1; } },
      dataZoom: [{ type: 'inside', xAxisIndex: 0, filterMode: 'none' }, { type: 'slider', xAxisIndex: 0, filterMode: 'none', height: 18, bottom: 8, showDataShadow: false }],
      series: seriesFor(0, tmax)
    }, rows.map(function (r) { return r.length; }));
    chart.on('datazoom', function () {
      var dz = chart.getOption().dataZoom[0], s = seriesFor(dz.startValue || 0, dz.endValue === undefined ? tmax : dz.endValue);
      chart.setOption({ series: s.map(function (x) { return { data: x.data }; }) });
      record(id, s, rows.map(function (r) { return r.length; }));
    });
  }

  // mctAxis is a log axis when the completion times span more than two decades (a timeout beside
  // microsecond messages), else a linear one.
  function mctAxis(curves) {
    var lo = Infinity, hi = 0;
    curves.forEach(function (c) { c.points.forEach(function (p) { if (p[0] > 0) { lo = Math.min(lo, p[0]); } hi = Math.max(hi, p[0]); }); });
    var log = lo > 0 && hi / lo > 100;
    return { type: log ? 'log' : 'value', name: 'MCT (µs' + (log ? ', log scale)' : ')'), scale: !log, nameLocation: 'middle', nameGap: 24 };
  }

  function verdictBadge(v) { return el('span', { 'class': 'verdict ' + v, text: v || 'unknown' }); }

  function renderRun(run, parent, p) {
    parent.appendChild(el('h1', null, ['lumina report ', verdictBadge(run.verdict)]));
    var facts = [['source', run.source]];
    if (run.scenario) { facts.push(['scenario', run.scenario]); }
    if (run.testbed) { facts.push(['testbed', run.testbed], ['seed', String(run.seed)]); }
    if (run.trace) { facts.push(['packets', String(run.trace.packets)], ['metadata', run.trace.metadata]); }
    parent.appendChild(table(null, facts));

    parent.appendChild(el('h2', { text: 'Integrity' }));
    if (run.integrity) {
      parent.appendChild(el('p', null, ['trace integrity: ', okCell(run.integrity.ok)]));
      parent.appendChild(table(['condition', 'result', 'detail'], (run.integrity.checks || []).map(function (c) {
        var r = [c.name, okCell(c.ok, c.skipped), c.detail]; if (!c.ok && !c.skipped) { r.cls = 'bad'; } return r;
      })));
    } else { parent.appendChild(note(run.integrity_note || 'no integrity check')); }

    if (run.expectations && run.expectations.length) {
      parent.appendChild(el('h2', { text: 'Expectations' }));
      parent.appendChild(table(['expect', 'result', 'detail'], run.expectations.map(function (e) {
        var r = [e.expect, okCell(e.ok), e.detail]; if (!e.ok) { r.cls = 'bad'; } return r;
      })));
    }
    if (run.checks && run.checks.length) {
      parent.appendChild(el('h2', { text: 'Checks' }));
      parent.appendChild(note('Packet numbers (#N) are 0-based indexes in the trace: Wireshark shows packet #N as frame N+1.'));
      // Failed checks one per row; the passing ones of each analyzer in one row (a run of 100 connections
      // would otherwise bury its one failure under 200 passes).
      var rowsC = [], passing = {}, order = [];
      run.checks.forEach(function (c) {
        if (c.ok) {
          if (!passing[c.analyzer]) { passing[c.analyzer] = []; order.push(c.analyzer); }
          passing[c.analyzer].push(c.qp);
          return;
        }
        var v = (c.violations || []).slice(0, 5).map(function (x) { return '#' + x.packet + ': ' + x.message; }).join('\n');
        var r = [c.analyzer, String(c.qp), okCell(false), c.violation_count, el('span', { 'class': 'lines', text: v })]; r.cls = 'bad'; rowsC.push(r);
      });
      order.forEach(function (a) { rowsC.push([a, ranges(passing[a]), okCell(true), 0, '']); });
      parent.appendChild(table(['analyzer', 'QP', 'result', 'violations', 'first violations'], rowsC));
    }
    if (run.summary && run.summary.length) {
      parent.appendChild(el('h2', { text: 'Capture summary' }));
      parent.appendChild(table(['field', 'value'], run.summary.map(function (kv) { return [kv.key, el('code', { text: kv.value })]; })));
    }

    if (run.trace && run.trace.conns && run.trace.conns.length) {
      parent.appendChild(el('h2', { text: 'Time-sequence diagrams' }));
      parent.appendChild(note('Time against PSN offset per connection. Scroll or drag the slider to zoom: above ' + MAXP +
        ' packets the data, ACK and ECN-mark series show the lowest and highest PSN per time bucket, and every packet once zoomed in;' +
        ' retransmissions, NAKs, CNPs, drops and the other injected events always show every packet. Hover a point for its packet.' +
        (run.trace.unmatched ? ' ' + run.trace.unmatched + ' RoCE packets belong to no listed connection and are not drawn.' : '')));
      run.trace.conns.forEach(function (c) {
        parent.appendChild(el('h3', { text: c.label + ' — ' + c.counts.map(function (n, i) { return (SERIES[i] || 'injected events') + ' ' + n; }).join(', ') }));
        maybeLater(parent, function (into) { timeSequence(p + 'ts-' + c.qp, into, c, run.trace); });
      });
    }

    if (run.positions && run.positions.length) {
      parent.appendChild(el('h2', { text: 'Retransmission latency by drop position' }));
      var cats = run.positions.map(function (r) { return r.verb + ' @' + r.position; });
      var pick = function (k) { return run.positions.map(function (r) { return r[k] === null ? null : r[k]; }); };
      var split = run.position_split || [];
      var pickS = function (k) { return run.positions.map(function (r, i) { return split[i] && split[i][k] !== null && split[i][k] !== undefined ? split[i][k] : null; }); };
      var posSeries = [
        { name: 'NACK generation', type: 'bar', data: pick('nack_generation_us_mean') },
        { name: 'NACK reaction', type: 'bar', data: pick('nack_reaction_us_mean') },
        { name: 'latency, NACK or READ re-issue', type: 'bar', data: pickS('nack_latency_us_mean') },
        { name: 'latency, timeout', type: 'bar', data: pickS('timeout_latency_us_mean') }];
      // A log axis when the means span more than two decades (a timeout's hundreds of ms beside µs recoveries).
      var lo = Infinity, hi = 0;
      posSeries.forEach(function (s) { s.data.forEach(function (v) { if (v !== null && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }); });
      var logY = lo > 0 && hi / lo > 100;
      plot(p + 'positions', parent, {
        grid: baseGrid, legend: legend(), tooltip: { trigger: 'axis' },
        xAxis: { type: 'category', data: cats, name: 'drop position', nameLocation: 'middle', nameGap: 28 },
        yAxis: { type: logY ? 'log' : 'value', name: 'µs (mean' + (logY ? ', log scale)' : ')') },
        series: posSeries
      });
      parent.appendChild(table(['verb', 'position', 'drops', 'NACK generation µs', 'NACK reaction µs', 'latency mean µs', 'min', 'max', 'NACK-triggered mean µs', 'timeouts', 'timeout-triggered mean µs'],
        run.positions.map(function (r, i) { var sp = split[i] || {}; return [r.verb, r.position, r.count, r.nack_generation_us_mean, r.nack_reaction_us_mean, r.latency_us_mean, r.latency_us_min, r.latency_us_max, sp.nack_latency_us_mean, r.timeouts, sp.timeout_latency_us_mean]; })));
    }
    if (run.retransmissions && run.retransmissions.length) {
      parent.appendChild(el('h3', { text: 'Lost packets (' + run.retransmissions_total + ')' }));
      if (run.retransmissions_total > run.retransmissions.length) { parent.appendChild(note('the first ' + run.retransmissions.length + ' are listed')); }
      parent.appendChild(table(['QP', 'PSN', 'msg', 'position', 'iter', 'event', 'packet', 'retx packet', 'trigger', 'NACK gen µs', 'NACK react µs', 'latency µs'],
        run.retransmissions.map(function (x) { return [x.qp, x.psn, x.msg, x.position, x.iter, x.event, x.packet, x.retx_packet, x.trigger, x.nack_generation_us, x.nack_reaction_us, x.latency_us]; })));
    }

    var ladders = (run.timeouts || []).filter(function (m) { return m.timeout_intervals_us && m.timeout_intervals_us.length; });
    if (ladders.length) {
      parent.appendChild(el('h2', { text: 'Timeout ladder' }));
      parent.appendChild(note('Each retransmission timeout of a message, in order: the interval from the previous transmission.'));
      var ls;
      if (ladders.length <= 30) {
        ls = ladders.map(function (m) { return { name: 'QP ' + m.qp + ' msg ' + m.msg, type: 'line', symbolSize: 6, data: m.timeout_intervals_us.map(function (v, i) { return [i + 1, v]; }) }; });
      } else {
        var byQP = {};
        ladders.forEach(function (m) { (byQP[m.qp] = byQP[m.qp] || []).push.apply(byQP[m.qp], m.timeout_intervals_us.map(function (v, i) { return [i + 1, v]; })); });
        ls = Object.keys(byQP).map(function (q) { return { name: 'QP ' + q, type: 'scatter', data: byQP[q] }; });
      }
      plot(p + 'ladder', parent, {
        grid: baseGrid, legend: legend(), tooltip: { trigger: 'item' },
        xAxis: { type: 'value', name: 'timeout #', minInterval: 1, nameLocation: 'middle', nameGap: 24 },
        yAxis: { type: 'value', name: 'interval (µs)' }, series: ls
      });
      parent.appendChild(table(['QP', 'msg', 'retries', 'timeouts', 'intervals µs'], ladders.map(function (m) {
        return [m.qp, m.msg, m.retries, m.timeouts, m.timeout_intervals_us.map(function (v) { return fmt(v, 1); }).join(', ')];
      })));
    }

    if (run.cnp && (run.cnp.cnps || run.cnp.ecn_marked)) {
      parent.appendChild(el('h2', { text: 'CNPs against ECN marks' }));
      parent.appendChild(table(null, [
        ['ECN-marked packets', run.cnp.ecn_marked], ['CNPs', run.cnp.cnps], ['expected CNPs', run.cnp.expected],
        ['limiter scope inferred', run.cnp.scope_inferred || '—'], ['min CNP interval µs', run.cnp.min_interval_us],
        ['NAK-triggered CNPs', run.cnp.nak_triggered], ['unsolicited CNPs', run.cnp.unsolicited],
        ['mismatches per scope', JSON.stringify(run.cnp.mismatches || {})]]));
      if (run.trace && run.trace.cnp.n) { cnpTimeline(p + 'cnp', parent, run); }
    }

    if (run.mct && run.mct.length) {
      parent.appendChild(el('h2', { text: 'Message completion time CDF' }));
      plot(p + 'mct', parent, {
        grid: baseGrid, legend: legend(), tooltip: { trigger: 'item' },
        xAxis: mctAxis(run.mct), yAxis: { type: 'value', name: 'fraction', min: 0, max: 1 },
        dataZoom: [{ type: 'inside', xAxisIndex: 0 }],
        // Each curve starts at (its least MCT, 0), so that a connection of one message is a step, not a lone
        // point a line cannot draw; a curve of fewer than two points shows its symbols too.
        series: run.mct.map(function (c) {
          var pts = c.points.length ? [[c.points[0][0], 0]].concat(c.points) : [];
          return { name: 'QP ' + c.qp, type: 'line', step: 'end', showSymbol: c.points.length < 2, symbolSize: 7, data: pts };
        })
      });
    }
    if (run.traffic && run.traffic.length) {
      parent.appendChild(el('h2', { text: 'Traffic' }));
      parent.appendChild(table(['QP', 'messages', 'MCT mean µs', 'p50', 'p99', 'max', 'goodput Gbit/s', 'data packets', 'retransmissions', 'source', 'status'],
        run.traffic.map(function (t) {
          var r = [t.qp, t.messages, t.mct_mean_us, t.mct_p50_us, t.mct_p99_us, t.mct_max_us, t.goodput_gbps, t.data_packets, t.retransmissions, t.source, t.status || '—'];
          if (t.status && t.status !== 'ok') { r.cls = 'bad'; } return r;
        })));
    }
    if (run.counters && run.counters.length) {
      parent.appendChild(el('h2', { text: 'NIC counters' }));
      parent.appendChild(table(['host', 'counter', 'start', 'finish', 'delta', 'expected from trace', 'result', 'note'], run.counters.map(function (c) {
        var r = [c.host, c.name, c.start, c.finish, c.delta, c.expected, c.expected === null ? el('span', { 'class': 'skip', text: '—' }) : okCell(c.ok), c.note || ''];
        if (!c.ok) { r.cls = 'bad'; } return r;
      })));
    }
    if (run.skipped && run.skipped.length) {
      parent.appendChild(el('h2', { text: 'Flows not judged' }));
      parent.appendChild(table(['flow', 'reason'], run.skipped.map(function (s) { return [s.flow, s.reason]; })));
    }
    if (run.workload) {
      parent.appendChild(el('h2', { text: 'Workload measurement' }));
      parent.appendChild(el('pre', { text: JSON.stringify(run.workload, null, 2) }));
    }
  }

  function renderSearch(s, parent) {
    parent.appendChild(el('h1', { text: 'lumina search: ' + s.dir }));
    parent.appendChild(el('p', { text: s.evaluations + ' evaluations, ' + (s.anomalies || []).length + ' anomalies' }));
    parent.appendChild(el('h2', { text: 'Anomalies' }));
    if (!s.anomalies || !s.anomalies.length) { parent.appendChild(note('none found')); } else {
      // The published column only for a profile that is one of Collie's subsystems (the field is absent otherwise).
      var pub = s.anomalies.some(function (a) { return Array.isArray(a.published); });
      var head = ['id', 'symptom', 'minimal feature set', 'found at evaluation', 'minimal', 'scenario'];
      if (pub) { head.splice(2, 0, 'published (Collie)'); }
      parent.appendChild(table(head, s.anomalies.map(function (a) {
        var row = [a.id, el('code', { text: JSON.stringify(a.symptom) }), el('code', { text: JSON.stringify(a.mfs) }), a.found_at_evaluation, a.minimal ? 'yes' : (a.mfs_cut ? 'no: the budget ran out during its probes' : 'no'), a.scenario];
        if (pub) {
          var ids = Array.isArray(a.published) ? a.published : [];
          row.splice(2, 0, ids.length ? ids.map(function (id) { return '#' + id; }).join(', ') : 'none');
        }
        return row;
      })));
      if (pub) { parent.appendChild(note('published (Collie): the anomalies Collie (NSDI 2022, table 2) lists for the profile\'s subsystem whose conditions hold at the point the search hit; none: a finding it does not list.')); }
    }
    if (s.evals && s.evals.length) {
      parent.appendChild(el('h2', { text: 'Score over evaluations' }));
      parent.appendChild(note('The energy of each evaluation (lower is more anomalous) by kind, and the lowest so far of the search (the mfs, verify and reduce probes of a found anomaly do not count, as in the search itself).'));
      var series = s.evals.map(function (e) { return { name: e.kind, type: 'scatter', symbolSize: 4, data: e.points }; });
      series.push({ name: 'lowest so far', type: 'line', step: 'end', showSymbol: false, data: s.best });
      plot('energy', parent, {
        grid: baseGrid, legend: legend(), tooltip: { trigger: 'item' },
        xAxis: { type: 'value', name: 'evaluation', nameLocation: 'middle', nameGap: 24 }, yAxis: { type: 'value', name: 'energy', scale: true },
        dataZoom: [{ type: 'inside', xAxisIndex: 0 }, { type: 'slider', xAxisIndex: 0, height: 18, bottom: 8 }], series: series
      });
    }
  }

  // A lumina campaign: the verdicts, and per item its key metrics and results (linked to its report when it has one).
  function renderSuite(s, parent) {
    parent.appendChild(el('h1', { text: 'lumina campaign: ' + s.campaign }));
    var order = ['pass', 'fail', 'invalid', 'error', 'timeout', 'lost'];
    var totals = {};
    (s.items || []).forEach(function (it) { totals[it.verdict] = (totals[it.verdict] || 0) + 1; });
    var shown = order.filter(function (v) { return totals[v]; });
    parent.appendChild(el('p', { text: (s.items || []).length + ' items (' + s.file + '): ' +
      shown.map(function (v) { return totals[v] + ' ' + v; }).join(', ') + '; exit status ' + s.exit_status }));
    if (!s.items || !s.items.length) { parent.appendChild(note('no items')); return; }
    plot('suite-verdicts', parent, {
      grid: baseGrid, tooltip: { trigger: 'item' },
      xAxis: { type: 'category', data: shown }, yAxis: { type: 'value', name: 'items', minInterval: 1 },
      series: [{ name: 'items', type: 'bar', data: shown.map(function (v) { return { value: totals[v], itemStyle: { color: v === 'pass' ? '#2e8b57' : '#c0392b' } }; }) }]
    });
    var keys = [['packets', 'packets'], ['retransmissions', 'retx'], ['timeouts', 'timeouts'], ['cnps', 'CNPs'],
      ['nack_generation_us_mean', 'NACK gen. µs'], ['nack_reaction_us_mean', 'NACK react. µs'], ['mct_us_mean', 'MCT mean µs'],
      ['expectations_failed', 'expect. failed']];
    keys = keys.filter(function (k) { return s.items.some(function (it) { return it.metrics && it.metrics[k[0]] !== undefined; }); });
    parent.appendChild(el('h2', { text: 'Items' }));
    var heads = ['#', 'item', 'NIC / testbed', 'seed', 'verdict', 'exit'].concat(keys.map(function (k) { return k[1]; })).concat(['reason', 'results']);
    parent.appendChild(table(heads, s.items.map(function (it, i) {
      var res = it.results || '';
      var link = s.reports && s.reports[i] ? el('a', { href: res + '/report.html', text: res }) : res;
      var r = [it.index, it.id, it.profile || it.testbed || 'sim', it.seed, it.verdict, it.exit_status]
        .concat(keys.map(function (k) { return it.metrics ? it.metrics[k[0]] : null; })).concat([it.reason || '', link]);
      if (it.verdict !== 'pass') { r.cls = 'bad'; }
      return r;
    })));
    var retx = keys.some(function (k) { return k[0] === 'retransmissions'; });
    if (retx) {
      parent.appendChild(el('h2', { text: 'Retransmissions and timeouts per item' }));
      var names = s.items.map(function (it) { return it.id; });
      plot('suite-retx', parent, {
        grid: baseGrid, legend: legend(), tooltip: { trigger: 'axis' },
        xAxis: { type: 'category', data: names, axisLabel: { rotate: 30 } }, yAxis: { type: 'value', minInterval: 1 },
        series: [['retransmissions', 'retransmissions'], ['timeouts', 'timeouts']].map(function (m) {
          return { name: m[1], type: 'bar', data: s.items.map(function (it) { return it.metrics && it.metrics[m[0]] !== undefined ? it.metrics[m[0]] : null; }) };
        })
      });
    }
  }

  try {
    document.title = D.title;
    if (D.kind === 'search') {
      renderSearch(D.search, app);
    } else if (D.kind === 'suite') {
      renderSuite(D.suite, app);
    } else if (D.kind === 'compare') {
      app.appendChild(el('h1', { text: 'Two runs side by side' }));
      var cmp = D.compare || [];
      (D.compare_notes || []).forEach(function (n) {
        app.appendChild(el('p', { 'class': 'compare-note' + (n.indexOf('REGRESSION') === 0 ? ' notok' : ''), text: n }));
      });
      var heads = ['metric', 'A: ' + D.runs[0].source, 'B: ' + D.runs[1].source, 'unit', 'tolerance', 'worse', 'status'];
      app.appendChild(table(heads, cmp.map(function (m) {
        var r = [m.name, m.a_text || (m.a === null ? '—' : m.a), m.b_text || (m.b === null ? '—' : m.b), m.unit || '',
          m.tolerance || '', m.worse || '', m.status || ''];
        if (m.status === 'regressed') { r.cls = 'bad'; } else if (m.moved) { r.cls = 'moved'; } return r;
      })));
      var cols = el('div', { 'class': 'cols' });
      app.appendChild(cols);
      D.runs.forEach(function (run, i) { var d = el('div'); cols.appendChild(d); renderRun(run, d, 'r' + i + '-'); });
    } else {
      renderRun(D.runs[0], app, 'r0-');
    }
  } catch (e) {
    R.errors.push(String(e && e.stack || e));
    app.appendChild(el('pre', { text: 'report error: ' + e }));
  }
  R.marks.built = performance.now();
  if (R.pending === 0) { R.ready = true; R.renderMs = performance.now(); }
  window.addEventListener('resize', function () { charts.forEach(function (c) { c.resize(); }); });
})();
