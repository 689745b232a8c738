#!/usr/bin/env node
// Quiver's page against DuckDB-WASM, in the same Chromium, on the same TPC-H files served by
// HTTP. See benches/browser/README.md.
//
//   node benches/browser/run.mjs [--sf 1] [--queries 1,3,5,6,12,14,19] [--reps 3]
//        [--latency MS] [--engines quiver,duckdb-wasm] [--duckdb-wasm auto|project|VERSION]
//        [--duckdb-extensions DIR] [--dist web/dist] [--timeout S] [--no-sizes] [--out DIR]
//
// What it does, in order:
// 1. TPC-H SF (default 1) through scripts/gen_tpch.py into ~/.cache/quiver-data/tpch-sf<SF>
//    (QUIVER_BENCH_DATA moves the folder), and DuckDB's (Python) answers on it (oracle.py).
// 2. tests/servers/range_http.py over it: CORS for the pages' origin, `Cache-Control:
//    no-store` (the browser's HTTP cache never answers a run), `--latency` ms before each
//    answer; it counts the requests and bytes of each run.
// 3. One static server (scripts/serve-web.mjs, cross-origin isolated) for both pages: Quiver's
//    (web/dist, at /) and DuckDB-WASM's (page/duckdb.html, at /bench/, its npm package at
//    /pkg/).
// 4. Per query and engine: a fresh browser context, the page loaded (not timed: its time is
//    the "load" column), then the query once (cold: nothing cached in the engine) and
//    `--reps` more times in the same page (warm: best of them). A run is the views of the
//    tables the query names (CREATE OR REPLACE VIEW ... read_parquet(URL)) plus the query, as
//    one SQL text, timed in the page from the call to the result in JavaScript.
// 5. Checks: Quiver's values against DuckDB's (tests/browser/compare.mjs), DuckDB-WASM's row
//    count against DuckDB's and Quiver's; a differing result is "wrong" and its time dropped.
// 6. The wasm modules' sizes (raw, gzip -9, brotli q11), and the report:
//    benches/results/browser-<date>.md and .json.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, promises as fs, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

import { chromium } from 'playwright-core';

import { startServer } from '../../scripts/serve-web.mjs';
import { difference } from '../../tests/browser/compare.mjs';
import { withTimeout } from '../../tests/browser/timeout.mjs';
import { markdown } from './report.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const DATA_ROOT = process.env.QUIVER_BENCH_DATA ?? path.join(os.homedir(), '.cache', 'quiver-data');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const TABLES = ['region', 'nation', 'supplier', 'customer', 'part', 'partsupp', 'orders', 'lineitem'];
const ENGINES = ['quiver', 'duckdb-wasm'];
// The last DuckDB-WASM release with Parquet built in: from 1.29 on, Parquet is an extension
// fetched from extensions.duckdb.org at run time, which a closed network cannot reach.
const DUCKDB_WASM_BUILTIN_PARQUET = '1.28.0';
const LOAD_TIMEOUT_MS = 300_000;
const PROBE_TIMEOUT_MS = 60_000;

function usage(message) {
  if (message) console.error(`bench:browser: ${message}`);
  console.error(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(3, 7)
    .map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
  process.exit(2);
}

function parseArgs(argv) {
  const args = {
    sf: '1', queries: [1, 3, 5, 6, 12, 14, 19], reps: 3, latency: 0, engines: ENGINES,
    duckdbWasm: 'auto', duckdbExtensions: null, dist: path.join(REPO, 'web', 'dist'),
    timeout: 900, sizes: true, out: path.join(REPO, 'benches', 'results'),
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const value = () => inline ?? argv[++i] ?? usage(`${flag} needs a value`);
    switch (flag) {
      case '--sf': args.sf = value(); break;
      case '--queries': args.queries = value().split(',').map((q) => Number(q.replace(/^q/i, ''))); break;
      case '--reps': args.reps = Number(value()); break;
      case '--latency': args.latency = Number(value()); break;
      case '--engines': args.engines = value().split(','); break;
      case '--duckdb-wasm': args.duckdbWasm = value(); break;
      case '--duckdb-extensions': args.duckdbExtensions = path.resolve(value()); break;
      case '--dist': args.dist = path.resolve(value()); break;
      case '--timeout': args.timeout = Number(value()); break;
      case '--out': args.out = path.resolve(value()); break;
      case '--no-sizes': args.sizes = false; break;
      case '-h': case '--help': usage(); break;
      default: usage(`unknown option ${argv[i]}`);
    }
  }
  if (!/^\d+(\.\d+)?$/.test(args.sf)) usage(`bad --sf ${args.sf}`);
  if (args.queries.some((q) => !Number.isInteger(q) || q < 1 || q > 22)) usage('queries are 1 to 22');
  if (!(args.reps >= 1)) usage('--reps is at least 1');
  if (!(args.latency >= 0)) usage('--latency is milliseconds, 0 or more');
  for (const e of args.engines) if (!ENGINES.includes(e)) usage(`unknown engine ${e} (${ENGINES.join(', ')})`);
  return args;
}

const say = (line) => console.error(`bench:browser: ${line}`);
const qname = (n) => `q${String(n).padStart(2, '0')}`;

// data

function tpchData(sf) {
  const root = path.join(DATA_ROOT, `tpch-sf${sf}`);
  const run = spawnSync('python3', [path.join(REPO, 'scripts', 'gen_tpch.py'), sf, root],
    { stdio: ['ignore', 'inherit', 'inherit'] });
  if (run.status !== 0) throw new Error(`scripts/gen_tpch.py ${sf} ${root} failed`);
  return root;
}

function oracle(root, queries) {
  const run = spawnSync('python3', [path.join(HERE, 'oracle.py'), root, queries.join(',')],
    { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (run.status !== 0) throw new Error(`benches/browser/oracle.py failed:\n${run.stderr}`);
  return JSON.parse(run.stdout);
}

function querySql(n) {
  return readFileSync(path.join(REPO, 'tests', 'tpch', 'queries', `${qname(n)}.sql`), 'utf8');
}

const tablesOf = (sql) => TABLES.filter((t) => new RegExp(`\\b${t}\\b`, 'i').test(sql));
const quote = (text) => `'${text.replaceAll("'", "''")}'`;

/** The SQL text one run sends: views over what the query reads, then the query. */
function runSql(engine, n, dataUrl) {
  const query = querySql(n);
  const views = tablesOf(query).map((t) => {
    // DuckDB-WASM reads a name registered with registerFileURL (its own HTTP file system).
    const source = engine === 'quiver' ? `${dataUrl}/single/${t}.parquet` : `${t}.parquet`;
    return `CREATE OR REPLACE VIEW ${t} AS SELECT * FROM read_parquet(${quote(source)});\n`;
  });
  return views.join('') + query;
}

// processes and servers

const children = [];
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
});

function startDataServer(root, latencyMs) {
  const args = [path.join(REPO, 'tests', 'servers', 'range_http.py'), root, '--port', '0',
    '--cors', '--cache-control', 'no-store', '--delay', String(latencyMs / 1000)];
  const child = spawn('python3', args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      const match = line.match(/ on (http:\/\/127\.0\.0\.1:\d+)/);
      if (match) resolve(match[1]);
    });
    child.on('exit', (code) => reject(new Error(`range_http.py exited (${code})`)));
  });
}

async function serverStats(dataUrl, reset = false) {
  const answer = await fetch(`${dataUrl}/__quiver__/${reset ? 'reset' : 'stats'}`);
  return answer.json();
}

function summarize(stats) {
  const counts = stats.counts ?? {};
  return {
    gets: counts.GetFile ?? 0,
    heads: counts.HeadFile ?? 0,
    preflights: (stats.methods ?? {}).OPTIONS ?? 0,
    bytes: (stats.bytes ?? {}).GetFile ?? 0,
  };
}

// DuckDB-WASM: which package

function findPackage(from, name) {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (dir === path.dirname(dir)) throw new Error(`${name} not found from ${from}`);
  }
}

/** The folders the DuckDB page loads, by URL prefix, for the package under `root`. */
function duckdbMounts(root) {
  const duckdb = findPackage(root, '@duckdb/duckdb-wasm');
  const arrow = findPackage(duckdb, 'apache-arrow');
  return {
    '/pkg/duckdb-wasm/': duckdb,
    '/pkg/apache-arrow/': arrow,
    '/pkg/flatbuffers/': findPackage(arrow, 'flatbuffers'),
    '/pkg/tslib/': findPackage(arrow, 'tslib'),
  };
}

const packageVersion = (dir) => JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')).version;

/** npm installs @duckdb/duckdb-wasm@VERSION (and its apache-arrow) into the data cache. */
function installDuckdbWasm(version) {
  const dir = path.join(DATA_ROOT, `duckdb-wasm-${version}`);
  const installed = path.join(dir, 'node_modules', '@duckdb', 'duckdb-wasm');
  if (existsSync(path.join(installed, 'package.json')) && packageVersion(installed) === version) return dir;
  say(`installing @duckdb/duckdb-wasm@${version} into ${dir} (npm)`);
  mkdirSync(dir, { recursive: true });
  if (!existsSync(path.join(dir, 'package.json'))) {
    writeFileSync(path.join(dir, 'package.json'), '{ "private": true }\n');
  }
  const run = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts',
    '--loglevel=error', `@duckdb/duckdb-wasm@${version}`], { cwd: dir, stdio: 'inherit' });
  if (run.status !== 0) throw new Error(`npm install @duckdb/duckdb-wasm@${version} failed`);
  return dir;
}

async function openDuckdbPage(browser, base, extensions) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const url = `${base}bench/duckdb.html${extensions ? `?extensions=${encodeURIComponent(`${base}duckdb-extensions`)}` : ''}`;
  await page.goto(url);
  return { context, page };
}

/** Can this DuckDB-WASM read Parquet here? {ok, version, bundle, error}. */
async function probeDuckdb(browser, args, root, dataUrl, dist) {
  const mounts = { '/bench/': path.join(HERE, 'page'), ...duckdbMounts(root) };
  if (args.duckdbExtensions) mounts['/duckdb-extensions/'] = args.duckdbExtensions;
  const web = await startServer({ root: dist, mounts });
  const { context, page } = await openDuckdbPage(browser, web.url, args.duckdbExtensions);
  // DuckDB's own errors after a failed extension download say little ("table index is out
  // of bounds"): the failed request says what happened.
  const fetches = [];
  const seen = (r, outcome) => {
    if (r.url().includes('duckdb_extension')) fetches.push(`${r.url()}: ${outcome}`);
  };
  context.on('requestfailed', (r) => seen(r, r.failure()?.errorText ?? 'failed'));
  context.on('requestfinished', async (r) => seen(r, `HTTP ${(await r.response())?.status()}`));
  try {
    const probe = await withTimeout(page.evaluate(async (url) => {
      const info = await window.duckdb.ready;
      try {
        await window.duckdb.register('region.parquet', url);
        const r = await window.duckdb.query("SELECT count(*) AS n FROM read_parquet('region.parquet')");
        return { ok: r.rows === 1, ...info };
      } catch (e) {
        return { ok: false, ...info, error: String(e?.message ?? e).split('\n')[0] };
      }
    }, `${dataUrl}/single/region.parquet`), PROBE_TIMEOUT_MS, 'DuckDB-WASM probe');
    if (!probe.ok && fetches.length) probe.error = `extension download ${fetches.join('; ')} (then: ${probe.error})`;
    return probe;
  } catch (e) {
    const error = e.message.split('\n')[0];
    return { ok: false, error: fetches.length ? `extension download ${fetches.join('; ')} (then: ${error})` : error };
  } finally {
    await context.close().catch(() => {});
    await web.close();
  }
}

async function chooseDuckdb(browser, args, dataUrl, dist) {
  const project = REPO;
  const notes = [];
  const tryRoot = async (root, label) => {
    const probe = await probeDuckdb(browser, args, root, dataUrl, dist);
    const dir = findPackage(root, '@duckdb/duckdb-wasm');
    return { root, dir, package: packageVersion(dir), label, ...probe };
  };
  if (args.duckdbWasm === 'auto' || args.duckdbWasm === 'project') {
    const chosen = await tryRoot(project, 'the project\'s, from package.json');
    if (chosen.ok || args.duckdbWasm === 'project') return { ...chosen, notes };
    notes.push(`DuckDB-WASM ${chosen.package} (the project's) cannot read Parquet here: `
      + `${chosen.error ?? 'its probe failed'}. From 1.29 on, DuckDB-WASM loads Parquet as an `
      + 'extension from extensions.duckdb.org at run time, and this network reaches only package '
      + `registries (a local copy can be given with --duckdb-extensions DIR). Ran ${DUCKDB_WASM_BUILTIN_PARQUET}, `
      + 'the last release with Parquet built in, instead.');
    say(notes[notes.length - 1]);
    const fallback = await tryRoot(installDuckdbWasm(DUCKDB_WASM_BUILTIN_PARQUET),
      'installed by run.mjs: the last release with Parquet built in');
    return { ...fallback, notes };
  }
  const chosen = await tryRoot(installDuckdbWasm(args.duckdbWasm), 'installed by run.mjs (--duckdb-wasm)');
  return { ...chosen, notes };
}

// runs

const HOOK = { quiver: 'quiver', 'duckdb-wasm': 'duckdb' };

/** Loads the engine's page in a fresh context; {context, page, loadMs, info, console}. */
async function openEngine(browser, engine, base, args) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const lines = [];
  page.on('console', (m) => lines.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
  const began = performance.now();
  const goto = { waitUntil: 'domcontentloaded', timeout: LOAD_TIMEOUT_MS };
  if (engine === 'quiver') {
    await page.goto(base, goto);
  } else {
    const extensions = args.duckdbExtensions ? `?extensions=${encodeURIComponent(`${base}duckdb-extensions`)}` : '';
    await page.goto(`${base}bench/duckdb.html${extensions}`, goto);
  }
  const hook = HOOK[engine];
  await page.waitForFunction((h) => window[h]?.ready, hook, { timeout: LOAD_TIMEOUT_MS });
  const info = await withTimeout(page.evaluate((h) => window[h].ready, hook), LOAD_TIMEOUT_MS,
    `${engine} page`);
  return { context, page, loadMs: performance.now() - began, info, console: lines };
}

async function runOnce(open, engine, sql, dataUrl, timeoutMs) {
  await serverStats(dataUrl, true);
  const hook = HOOK[engine];
  let result;
  try {
    result = await withTimeout(open.page.evaluate(async ([h, text]) => {
      const began = performance.now();
      try {
        const r = await window[h].query(text);
        const ms = performance.now() - began;
        return h === 'quiver'
          ? { ms, rows: r.rows, values: r.values, engineMs: r.elapsed_ms,
            engineRequests: r.profile?.requests, engineBytes: r.profile?.bytes_read }
          : { ms, rows: r.rows };
      } catch (e) {
        return { error: String(e?.message ?? e) };
      }
    }, [hook, sql]), timeoutMs, `${engine} query`);
  } catch (e) {
    result = { error: e.message, timedOut: true };
  }
  return { ...result, server: summarize(await serverStats(dataUrl)) };
}

/** What is wrong with a result, or null. */
function check(engine, run, want) {
  if (run.error) return null;
  if (engine === 'quiver') return difference(want.rows, run.values);
  return run.rows === want.rows.length ? null
    : `row count: expected ${want.rows.length}, got ${run.rows}`;
}

async function benchQuery(browser, engine, n, ctx) {
  const { args, base, dataUrl, expected } = ctx;
  const sql = runSql(engine, n, dataUrl);
  const outcome = { engine, query: qname(n), runs: [] };
  let open;
  try {
    open = await openEngine(browser, engine, base, args);
    outcome.loadMs = open.loadMs;
    outcome.info = open.info;
    if (engine === 'duckdb-wasm') {
      for (const t of tablesOf(querySql(n))) {
        await open.page.evaluate(([name, url]) => window.duckdb.register(name, url),
          [`${t}.parquet`, `${dataUrl}/single/${t}.parquet`]);
      }
    }
    for (let i = 0; i <= args.reps; i++) {
      const run = await runOnce(open, engine, sql, dataUrl, args.timeout * 1000);
      const wrong = check(engine, run, expected[qname(n)]);
      delete run.values;
      if (wrong) run.wrong = wrong;
      outcome.runs.push(run);
      if (run.error || run.wrong) break;
    }
  } catch (e) {
    outcome.error = e.message.split('\n')[0];
  } finally {
    if (open && outcome.runs.some((r) => r.error) && open.console.length) {
      outcome.console = open.console.slice(-20);
    }
    await open?.context.close().catch(() => {});
  }
  const [cold, ...warm] = outcome.runs;
  const failed = outcome.error ?? cold?.error ?? outcome.runs.find((r) => r.error)?.error;
  const wrong = outcome.runs.find((r) => r.wrong)?.wrong;
  outcome.status = failed ? 'error' : wrong ? 'wrong' : 'ok';
  if (failed) outcome.message = failed.split('\n')[0];
  if (wrong) outcome.message = wrong.split('\n')[0];
  if (outcome.status === 'ok') {
    outcome.cold = cold.ms;
    outcome.warm = Math.min(...warm.map((r) => r.ms));
    outcome.rows = cold.rows;
  }
  return outcome;
}

// sizes

const SIZE_CACHE = path.join(DATA_ROOT, 'browser-bench-sizes.json');

async function moduleSizes(files) {
  const cache = existsSync(SIZE_CACHE) ? JSON.parse(readFileSync(SIZE_CACHE, 'utf8')) : {};
  const gzip = promisify(zlib.gzip);
  const brotli = promisify(zlib.brotliCompress);
  const sizes = await Promise.all(files.map(async ({ label, file }) => {
    const st = await fs.stat(file).catch(() => null);
    if (!st) return { label, file, missing: true };
    const key = `${file} ${st.size} ${st.mtimeMs}`;
    if (!cache[key]) {
      say(`compressing ${path.relative(REPO, file)} (${(st.size / 1e6).toFixed(1)} MB; brotli q11 takes a minute or two)`);
      const bytes = await fs.readFile(file);
      const [gz, br] = await Promise.all([
        gzip(bytes, { level: 9 }),
        brotli(bytes, { params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: 11,
          [zlib.constants.BROTLI_PARAM_LGWIN]: 24,
          [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
        } }),
      ]);
      cache[key] = { raw: st.size, gzip: gz.length, brotli: br.length };
    }
    return { label, file, ...cache[key] };
  }));
  mkdirSync(path.dirname(SIZE_CACHE), { recursive: true });
  await fs.writeFile(SIZE_CACHE, JSON.stringify(cache, null, 1));
  return sizes;
}

// machine

function machine(browserVersion, load) {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model?.trim() ?? 'unknown CPU',
    cores: cpus.length,
    ramGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    chromium: browserVersion,
    load,
    busy: load > 0.5 * cpus.length,
  };
}

// main

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const started = new Date();
  // Before the oracle, the browser and the runs raise it: the machine as the run found it.
  const [loadAtStart] = os.loadavg();
  const withQuiver = args.engines.includes('quiver');
  const withDuckdb = args.engines.includes('duckdb-wasm');
  if (withQuiver && !existsSync(path.join(args.dist, 'index.html'))) {
    usage(`${args.dist}/index.html is missing: build the page (npm run build), or run --engines duckdb-wasm`);
  }
  if (!existsSync(CHROMIUM)) usage(`no Chromium at ${CHROMIUM} (scripts/setup-web.sh installs it)`);
  const dist = existsSync(args.dist) ? args.dist : await fs.mkdtemp(path.join(os.tmpdir(), 'quiver-no-dist-'));

  const data = tpchData(args.sf);
  say(`DuckDB's answers for ${args.queries.map(qname).join(', ')}`);
  const expected = oracle(data, args.queries);
  const dataUrl = await startDataServer(data, args.latency);
  say(`data on ${dataUrl} (${args.latency} ms before each answer)`);

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new'] });
  const notes = [];
  let duckdb = null;
  const mounts = { '/bench/': path.join(HERE, 'page') };
  if (withDuckdb) {
    duckdb = await chooseDuckdb(browser, args, dataUrl, dist);
    notes.push(...duckdb.notes);
    Object.assign(mounts, duckdbMounts(duckdb.root));
    if (args.duckdbExtensions) mounts['/duckdb-extensions/'] = args.duckdbExtensions;
    say(`DuckDB-WASM ${duckdb.package} (DuckDB ${duckdb.version ?? '?'}, ${duckdb.bundle ?? '?'} bundle)`
      + (duckdb.ok ? '' : `: cannot read Parquet (${duckdb.error})`));
  }
  const web = await startServer({ root: dist, mounts });

  const engines = args.engines.filter((e) => e !== 'duckdb-wasm' || duckdb?.ok);
  const outcomes = [];
  for (const n of args.queries) {
    for (const engine of engines) {
      say(`${qname(n)} on ${engine}`);
      const outcome = await benchQuery(browser, engine, n, { args, base: web.url, dataUrl, expected });
      outcomes.push(outcome);
      say(`  ${outcome.status}${outcome.status === 'ok' ? `: cold ${(outcome.cold / 1000).toFixed(3)} s, warm ${(outcome.warm / 1000).toFixed(3)} s, ${outcome.rows} rows` : `: ${outcome.message}`}`);
    }
    const rows = outcomes.filter((o) => o.query === qname(n) && o.status === 'ok').map((o) => o.rows);
    if (new Set(rows).size > 1) notes.push(`${qname(n)}: the engines gave different row counts (${rows.join(' and ')})`);
  }
  if (withDuckdb && !duckdb.ok) {
    for (const n of args.queries) {
      outcomes.push({ engine: 'duckdb-wasm', query: qname(n), runs: [], status: 'n/a', message: duckdb.error });
    }
  }

  let sizes = [];
  if (args.sizes) {
    const files = [
      { label: 'Quiver, threads build', file: path.join(dist, 'wasm', 'threads', 'quiver_wasm_bg.wasm') },
      { label: 'Quiver, single-thread build', file: path.join(dist, 'wasm', 'single', 'quiver_wasm_bg.wasm') },
    ];
    const packages = new Map();
    if (duckdb) packages.set(duckdb.dir, duckdb.package);
    const projectDuckdb = path.join(REPO, 'node_modules', '@duckdb', 'duckdb-wasm');
    if (existsSync(projectDuckdb)) packages.set(projectDuckdb, packageVersion(projectDuckdb));
    for (const [dir, version] of packages) {
      for (const bundle of ['eh', 'mvp']) {
        files.push({ label: `DuckDB-WASM ${version}, duckdb-${bundle}.wasm`, file: path.join(dir, 'dist', `duckdb-${bundle}.wasm`) });
      }
    }
    sizes = await moduleSizes(files);
  }

  const quiverInfo = outcomes.find((o) => o.engine === 'quiver' && o.info)?.info;
  const report = {
    started: started.toISOString(),
    sf: args.sf,
    queries: args.queries.map(qname),
    reps: args.reps,
    latencyMs: args.latency,
    machine: machine(browser.version(), loadAtStart),
    quiver: withQuiver ? { dist: path.relative(REPO, dist), ...quiverInfo } : null,
    duckdb: duckdb && { package: duckdb.package, from: duckdb.label, version: duckdb.version,
      bundle: duckdb.bundle, ok: duckdb.ok, error: duckdb.error },
    outcomes,
    sizes,
    notes,
  };
  await browser.close();
  await web.close();

  mkdirSync(args.out, { recursive: true });
  const day = started.toISOString().slice(0, 10);
  const base = path.join(args.out, `browser-${day}`);
  await fs.writeFile(`${base}.json`, JSON.stringify(report, null, 1) + '\n');
  const text = markdown(report);
  await fs.writeFile(`${base}.md`, text);
  console.log(text);
  say(`wrote ${path.relative(REPO, base)}.md and .json`);
}

main().then(() => process.exit(0), (error) => {
  console.error(`bench:browser: ${error.stack ?? error.message}`);
  process.exit(1);
});
