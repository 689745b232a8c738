// Markdown for the browser benchmark's results (run.mjs): times and ratios per query,
// requests, page loads, module sizes, notes, and the machine.

const ENGINES = [['quiver', 'Quiver'], ['duckdb-wasm', 'DuckDB-WASM']];

const seconds = (ms) => (ms / 1000).toFixed(3);
const mb = (bytes) => (bytes / 1e6).toFixed(1);
const ratio = (x) => `${x.toFixed(2)}x`;

function table(header, rows) {
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}

function geomean(values) {
  return Math.exp(values.reduce((s, v) => s + Math.log(v), 0) / values.length);
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function cell(outcome, kind) {
  if (!outcome) return '';
  return outcome.status === 'ok' ? seconds(outcome[kind]) : outcome.status;
}

function requestCell(outcome, run) {
  const r = outcome?.status === 'ok' ? run(outcome) : null;
  if (!r) return '';
  const heads = r.server.heads ? ` + ${r.server.heads} HEAD` : '';
  return `${r.server.gets}${heads} / ${mb(r.server.bytes)}`;
}

export function markdown(report) {
  const { machine: m } = report;
  const byQuery = new Map();
  for (const o of report.outcomes) {
    if (!byQuery.has(o.query)) byQuery.set(o.query, {});
    byQuery.get(o.query)[o.engine] = o;
  }
  const present = ENGINES.filter(([e]) => report.outcomes.some((o) => o.engine === e));
  const both = present.length === 2;
  const lines = [];
  const when = report.started.replace('T', ' ').slice(0, 16);
  lines.push(`# Quiver in the browser against DuckDB-WASM: TPC-H SF ${report.sf} over HTTP`, '');
  lines.push(`Run ${when} UTC: ${report.queries.join(', ')}; cold = the first run in a fresh page, `
    + `warm = the best of ${report.reps} more runs in the same page.`, '');
  lines.push(`- machine: ${m.cpu}, ${m.cores} cores, ${m.ramGiB} GiB RAM, ${m.os}, Node ${m.node}`);
  lines.push(`- browser: Chromium ${m.chromium} (Debian's, headless), driven by playwright-core; `
    + 'one browser context per engine and query');
  if (report.quiver) {
    const q = report.quiver;
    lines.push(`- Quiver: the page in \`${q.dist}\`, ${q.threaded ? 'threads build' : 'single-thread build'}, `
      + `${q.threads ?? '?'} compute thread(s), through \`window.quiver\``);
  }
  if (report.duckdb) {
    const d = report.duckdb;
    lines.push(`- DuckDB-WASM ${d.package} (${d.from}; DuckDB ${d.version ?? '?'}), ${d.bundle ?? '?'} bundle `
      + '(one thread), files registered with `registerFileURL` (HTTP protocol) and read by its own '
      + 'synchronous range requests');
  }
  lines.push(`- data: TPC-H SF ${report.sf}, one file per table (\`single\` layout of scripts/gen_tpch.py), `
    + 'served on loopback by tests/servers/range_http.py with CORS and `Cache-Control: no-store` '
    + `(the browser's HTTP cache never answers), ${report.latencyMs} ms added before each answer`);
  lines.push(`- a run: \`CREATE OR REPLACE VIEW\` for each table the query reads, then the query, `
    + 'as one SQL text; timed in the page, from the call to the result in JavaScript. Quiver\'s '
    + 'values are checked against DuckDB\'s (Python, local files), DuckDB-WASM\'s row counts too');
  lines.push(`- load average at start: ${m.load.toFixed(1)} on ${m.cores} cores`
    + (m.busy ? ' (**other work was running: treat these numbers as unreliable**)' : ''));
  lines.push('');

  const queries = [...byQuery.keys()];
  if (both) {
    lines.push('Ratios are DuckDB-WASM\'s time over Quiver\'s: **above 1x Quiver is faster** '
      + '(the other benchmarks in benches/ write Quiver / peer, the other way round).', '');
  }
  lines.push('### Seconds', '');
  const header = ['query', 'rows'];
  for (const kind of ['cold', 'warm']) {
    for (const [, label] of present) header.push(`${label} ${kind}`);
    if (both) header.push(`DuckDB-WASM / Quiver ${kind}`);
  }
  const ratios = { cold: [], warm: [] };
  const totals = { cold: { quiver: 0, 'duckdb-wasm': 0 }, warm: { quiver: 0, 'duckdb-wasm': 0 } };
  const rows = queries.map((q) => {
    const o = byQuery.get(q);
    const rowCount = present.map(([e]) => o[e]).find((x) => x?.status === 'ok')?.rows ?? '';
    const row = [q, String(rowCount)];
    for (const kind of ['cold', 'warm']) {
      for (const [e] of present) row.push(cell(o[e], kind));
      if (both) {
        const ok = o.quiver?.status === 'ok' && o['duckdb-wasm']?.status === 'ok';
        if (ok) {
          const r = o['duckdb-wasm'][kind] / o.quiver[kind];
          ratios[kind].push(r);
          totals[kind].quiver += o.quiver[kind];
          totals[kind]['duckdb-wasm'] += o['duckdb-wasm'][kind];
          row.push(ratio(r));
        } else {
          row.push('');
        }
      }
    }
    return row;
  });
  if (both && ratios.cold.length) {
    const total = ['**total**', ''];
    const mean = ['**geomean**', ''];
    for (const kind of ['cold', 'warm']) {
      for (const [e] of present) {
        total.push(seconds(totals[kind][e]));
        mean.push('');
      }
      total.push(ratios[kind].length ? ratio(totals[kind]['duckdb-wasm'] / totals[kind].quiver) : '');
      mean.push(ratios[kind].length ? ratio(geomean(ratios[kind])) : '');
    }
    rows.push(total, mean);
    lines.push(table(header, rows), '');
    lines.push(`Totals and geomeans are over the ${ratios.cold.length} queries both engines got right.`, '');
  } else {
    lines.push(table(header, rows), '');
  }

  lines.push('### Requests', '');
  lines.push('GET requests (and HEADs) and MB the data server sent for the cold run, and for the '
    + 'last warm run.', '');
  const reqHeader = ['query'];
  for (const [, label] of present) reqHeader.push(`${label} cold`, `${label} warm`);
  lines.push(table(reqHeader, queries.map((q) => {
    const o = byQuery.get(q);
    const row = [q];
    for (const [e] of present) {
      row.push(requestCell(o[e], (x) => x.runs[0]), requestCell(o[e], (x) => x.runs[x.runs.length - 1]));
    }
    return row;
  })), '');

  const loads = present.map(([e, label]) => {
    const ms = report.outcomes.filter((o) => o.engine === e && o.loadMs).map((o) => o.loadMs);
    return ms.length ? [label, seconds(median(ms)), seconds(Math.min(...ms)), seconds(Math.max(...ms)), String(ms.length)] : null;
  }).filter(Boolean);
  if (loads.length) {
    lines.push('### Page load', '');
    lines.push('From opening the page in a fresh context to its engine being ready (download and '
      + 'compile of the module, worker start), over every page the run opened.', '');
    lines.push(table(['engine', 'median s', 'min s', 'max s', 'pages'], loads), '');
  }

  if (report.sizes.length) {
    lines.push('### Module sizes', '');
    lines.push('MB (10^6 bytes) of each WebAssembly module as built, and compressed by Node\'s '
      + 'zlib: gzip level 9, brotli quality 11 (window 2^24), what a server would send '
      + 'precompressed.', '');
    lines.push(table(['module', 'raw', 'gzip', 'brotli'], report.sizes.map((s) => (s.missing
      ? [s.label, 'missing', '', '']
      : [s.label, mb(s.raw), mb(s.gzip), mb(s.brotli)]))), '');
  }

  const notes = [...report.notes];
  for (const o of report.outcomes) {
    if (o.status === 'error' || o.status === 'wrong') {
      notes.push(`${o.query}, ${o.engine}: **${o.status}**: ${o.message}`);
    }
  }
  if (notes.length) {
    lines.push('### Notes', '');
    for (const n of notes) lines.push(`- ${n}`);
    lines.push('');
  }
  return lines.join('\n');
}
