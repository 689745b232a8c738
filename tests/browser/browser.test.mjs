// The page (web/dist) in Debian's Chromium, driven by playwright-core: threads, TPC-H over
// HTTP (globs too), CSV and JSON, Iceberg tables, and S3 against DuckDB's answers, presigned
// URLs, the single-thread fallback, the UI (editor, run, grid, profile waterfall), files opened from disk or dropped,
// cancel, and errors.
//
//   npm run build && npm run test:browser
//
// Starts tests/browser/fixtures.py (data, MinIO, a CORS range server, DuckDB's results) and
// scripts/serve-web.mjs twice: cross-origin isolated, and --no-isolation for the fallback.
// Environment: QUIVER_WEB_DIST (default web/dist), CHROMIUM (default /usr/bin/chromium),
// QUIVER_BROWSER_QUERY_TIMEOUT (ms per query, default 300000: a debug wasm build is slow).
// Artefacts and logs go to test-results/browser/.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync,
} from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { difference } from './compare.mjs';
import { withTimeout } from './timeout.mjs';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIST = path.resolve(REPO, process.env.QUIVER_WEB_DIST ?? 'web/dist');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ARTEFACTS = path.join(REPO, 'test-results', 'browser');
const QUERY_TIMEOUT = Number(process.env.QUIVER_BROWSER_QUERY_TIMEOUT ?? 300_000);
// Loading and compiling the module: tens of MB of wasm, more for a debug build.
const READY_TIMEOUT = 300_000;
const SETUP_TIMEOUT = 30 * 60_000;
const CONSOLE_LINES_SHOWN = 200;

// What the page is made of (web/). The grid is whatever holds the result rows: a table or an
// ARIA grid under #results or #grid.
const UI = {
  threads: '#threads',
  sql: '#sql',
  run: '#run',
  cancel: '#cancel',
  status: '#status',
  error: '#error',
  profile: '#profile',
  gridRows: ['#results tbody tr', '#grid tbody tr', '#results [role="row"]',
    '#grid [role="row"]'].join(', '),
  waterfall: '#profile svg rect',
};

const TPCH = Array.from({ length: 22 }, (_, i) => `q${String(i + 1).padStart(2, '0')}`);
const S3_TPCH = ['q01', 'q03', 'q06', 'q12', 'q14'];

let fixtures; // the JSON line of fixtures.py
let expected; // {name: {columns, rows}}
let browser;
let isolated; // the page's URL, served cross-origin isolated
let notIsolated; // the same page without COOP/COEP
let mainPage; // one isolated page for the tests that need no fresh one
const children = [];

// processes

function logTo(name) {
  mkdirSync(ARTEFACTS, { recursive: true });
  return createWriteStream(path.join(ARTEFACTS, name));
}

/** Spawns a child whose stdout's first line matching `pattern` is returned (as a match). */
function startChild(label, command, args, pattern, { timeout, keepStdin = false } = {}) {
  const log = logTo(`${label}.log`);
  const child = spawn(command, args, {
    cwd: REPO,
    stdio: [keepStdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  child.stderr.on('data', (chunk) => {
    log.write(chunk);
    if (label === 'fixtures') process.stderr.write(chunk);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(
      `${label} gave no "${pattern}" line in ${timeout / 1000} s; see ${log.path}`)), timeout);
    const lines = readline.createInterface({ input: child.stdout });
    let found = false;
    lines.on('line', (line) => {
      log.write(line + '\n');
      const match = !found && line.match(pattern);
      if (match) {
        found = true;
        clearTimeout(timer);
        resolve({ child, match });
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      log.write(`[${label} exited: ${signal ?? code}, ${new Date().toISOString()}]\n`);
      if (!found) reject(new Error(`${label} exited (${signal ?? code}) before it was ready; see ${log.path}`));
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

function stopChildren() {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.stdin?.end(); // fixtures.py stops (and stops MinIO) when its stdin closes
      child.kill('SIGTERM');
    }
  }
}
process.on('exit', stopChildren);

async function waitForExit(child, ms) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  let timer;
  await Promise.race([
    new Promise((ok) => child.once('exit', ok)),
    new Promise((ok) => { timer = setTimeout(ok, ms); }),
  ]);
  clearTimeout(timer);
}

// pages

/** A page of the app in its own browser context, with its console and uncaught errors. */
class AppPage {
  constructor(label, context, page) {
    this.label = label;
    this.context = context;
    this.page = page;
    this.console = [];
    this.errors = [];
    this.requests = [];
    page.on('console', (m) => this.console.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => {
      this.errors.push(e.stack || e.message);
      this.console.push(`[pageerror] ${e.stack || e.message}`);
    });
    page.on('crash', () => this.console.push('[crash] the page crashed'));
    context.on('request', (r) => this.requests.push(r.url()));
    context.on('requestfailed', (r) => this.console.push(
      `[requestfailed] ${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  }

  static async open(label, url) {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const page = await context.newPage();
    const app = new AppPage(label, context, page);
    // The page's module may download and compile a large (debug) wasm build before `load`.
    await app.whenReady(() => page.goto(url, { waitUntil: 'domcontentloaded', timeout: READY_TIMEOUT }));
    return app;
  }

  /** Reloads the page (a new engine worker; the origin's storage stays) and waits for it. */
  reload() {
    return this.whenReady(() => this.page.reload({ waitUntil: 'domcontentloaded', timeout: READY_TIMEOUT }));
  }

  async whenReady(navigate) {
    try {
      await navigate();
      await this.page.waitForFunction(() => window.quiver && window.quiver.ready, null,
        { timeout: READY_TIMEOUT });
      this.info = await withTimeout(this.page.evaluate(() => window.quiver.ready), READY_TIMEOUT,
        'window.quiver.ready');
    } catch (error) {
      error.message += `\n${this.consoleText()}`;
      throw error;
    }
  }

  consoleText() {
    const lines = this.console.slice(-CONSOLE_LINES_SHOWN);
    const skipped = this.console.length - lines.length;
    return `--- ${this.label}: browser console${skipped ? ` (last ${lines.length} of ${this.console.length} lines)` : ''} ---\n`
      + (lines.join('\n') || '(empty)');
  }

  /** window.quiver.query, as {ok, rows, columns, values, profile, elapsed_ms} or {ok: false, error}. */
  query(sql, timeout = QUERY_TIMEOUT) {
    return withTimeout(this.page.evaluate(async (text) => {
      try {
        const r = await window.quiver.query(text);
        return { ok: true, rows: r.rows, columns: r.columns, values: r.values,
          profile: r.profile, elapsed_ms: r.elapsed_ms };
      } catch (e) {
        return { ok: false, error: String(e?.message ?? e) };
      }
    }, sql), timeout, `query ${sql.slice(0, 80)}`);
  }

  set(key, value) {
    return this.page.evaluate(([k, v]) => window.quiver.set(k, v), [key, value]);
  }

  setCredentials(accessKey, secretKey) {
    return this.page.evaluate(([a, s]) => window.quiver.setCredentials(a, s), [accessKey, secretKey]);
  }

  /** Puts `sql` into the editor, whether it is a textarea, a contenteditable or a wrapper. */
  async typeSql(sql) {
    const editor = this.page.locator(UI.sql);
    const kind = await editor.evaluate((el) => (el.isContentEditable ? 'editable'
      : el.tagName.toLowerCase()));
    if (kind === 'textarea' || kind === 'input' || kind === 'editable') {
      await editor.fill(sql, { timeout: READY_TIMEOUT });
      return;
    }
    const inner = editor.locator('textarea, [contenteditable="true"]').first();
    if (await inner.count()) {
      await inner.fill(sql, { timeout: READY_TIMEOUT });
      return;
    }
    await editor.click();
    await this.page.keyboard.press('ControlOrMeta+A');
    await this.page.keyboard.insertText(sql);
  }

  /** Types `sql`, then clicks Run; texts of #status and #error are recorded from then on. */
  async runInUi(sql) {
    await this.typeSql(sql);
    await this.markTexts([UI.status, UI.error]);
    // After a cancel the page may be starting a new engine: Run waits for it.
    await this.page.locator(UI.run).click({ timeout: READY_TIMEOUT });
  }

  /**
   * Starts recording every text the elements take (a MutationObserver over the document, so
   * a re-rendered element is followed too): waitForText then accepts a text the element had
   * at any moment since, not one left over from an earlier query.
   */
  async markTexts(selectors) {
    await this.page.evaluate((sels) => {
      window.__quiverTest?.observer.disconnect();
      const seen = Object.fromEntries(sels.map((sel) => [sel, []]));
      const record = () => {
        for (const sel of sels) {
          const text = document.querySelector(sel)?.textContent ?? null;
          const list = seen[sel];
          if (text !== null && list[list.length - 1] !== text) list.push(text);
        }
      };
      const observer = new MutationObserver(record);
      observer.observe(document.documentElement,
        { subtree: true, childList: true, characterData: true, attributes: true });
      window.__quiverTest = { observer, seen };
    }, selectors);
  }

  /**
   * Waits until `selector`'s text matches `pattern` (a text recorded since markTexts counts,
   * for a selector it marked); returns the matching text. Says what it saw on timeout.
   */
  async waitForText(selector, pattern, timeout = QUERY_TIMEOUT) {
    let handle;
    try {
      handle = await this.page.waitForFunction(([sel, source, flags]) => {
        const re = new RegExp(source, flags);
        const seen = window.__quiverTest?.seen?.[sel];
        if (seen) return seen.find((text) => re.test(text)) ?? false;
        const text = document.querySelector(sel)?.textContent ?? '';
        return re.test(text) ? text : false;
      }, [selector, pattern.source, pattern.flags], { timeout, polling: 100 });
    } catch (error) {
      const seen = await this.page.evaluate((sel) => ({
        now: document.querySelector(sel)?.textContent ?? '(no such element)',
        since: window.__quiverTest?.seen?.[sel] ?? null,
      }), selector).catch(() => null);
      throw new Error(`${selector} did not come to match ${pattern} in ${timeout / 1000} s; `
        + `it says ${JSON.stringify(seen?.now)}${seen?.since ? `, and said ${JSON.stringify(seen.since)} since the run` : ''}`
        + `\n(${error.message.split('\n')[0]})`);
    }
    return handle.jsonValue();
  }

  assertNoPageErrors() {
    assert.deepEqual(this.errors, [], `uncaught errors in ${this.label}`);
  }

  async close() {
    await this.context.close().catch(() => {});
  }
}

/** Runs `body`; on failure adds the pages' consoles to the test log and a screenshot. */
async function withConsole(t, pages, body) {
  try {
    await body();
  } catch (error) {
    for (const app of pages) {
      if (!app) continue;
      t.diagnostic(app.consoleText());
      const file = path.join(ARTEFACTS, `${t.name.replace(/[^\w.-]+/g, '_')}-${app.label.replace(/\W+/g, '_')}.png`);
      await app.page.screenshot({ path: file, fullPage: true, timeout: 10_000 })
        .then(() => t.diagnostic(`screenshot: ${file}`)).catch(() => {});
    }
    throw error;
  }
}

/** Checks one query's result against DuckDB's. */
function assertMatches(name, result) {
  assert.ok(result.ok, `${name} failed: ${result.error}`);
  const want = expected[name];
  assert.ok(want, `no expected result for ${name}`);
  assert.equal(result.columns.length, want.columns.length,
    `${name}: columns ${JSON.stringify(result.columns)}, DuckDB's ${JSON.stringify(want.columns)}`);
  assert.equal(result.rows, result.values.length, `${name}: rows says ${result.rows}, values hold ${result.values.length}`);
  const message = difference(want.rows, result.values);
  assert.equal(message, null, `${name} differs from DuckDB: ${message}`);
}

// setup

before(async () => {
  mkdirSync(ARTEFACTS, { recursive: true });
  for (const name of readdirSync(ARTEFACTS)) {
    if (name.endsWith('.png')) rmSync(path.join(ARTEFACTS, name)); // a previous run's
  }
  if (!existsSync(path.join(DIST, 'index.html'))) {
    throw new Error(`${DIST}/index.html is missing: build the page first (npm run build)`);
  }
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM} (scripts/setup-web.sh installs Debian's)`);
  }
  const serve = path.join(REPO, 'scripts', 'serve-web.mjs');
  const served = /^serving (http:\/\/\S+)$/;
  const [fx, web, fallback] = await Promise.all([
    startChild('fixtures', 'python3', [path.join(REPO, 'tests', 'browser', 'fixtures.py')],
      /^\{.*\}$/, { timeout: SETUP_TIMEOUT, keepStdin: true }),
    startChild('serve-isolated', process.execPath, [serve, DIST], served, { timeout: 30_000 }),
    startChild('serve-fallback', process.execPath, [serve, DIST, '--no-isolation'], served,
      { timeout: 30_000 }),
  ]);
  fixtures = JSON.parse(fx.match[0]);
  expected = JSON.parse(readFileSync(fixtures.expected_file, 'utf8'));
  isolated = web.match[1];
  notIsolated = fallback.match[1];
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--headless=new'],
  });
  mainPage = await AppPage.open('isolated page', isolated);
}, { timeout: SETUP_TIMEOUT });

after(async () => {
  await mainPage?.close();
  await browser?.close().catch(() => {});
  stopChildren();
  await Promise.all(children.map((c) => waitForExit(c, 60_000)));
});

// a. threads

test('the isolated page runs the threaded build on several threads', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const { page, info } = mainPage;
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), true,
      'serve-web.mjs should make the page cross-origin isolated');
    assert.equal(info.threaded, true, `ready gave ${JSON.stringify(info)}`);
    assert.ok(info.threads >= 2, `ready gave ${JSON.stringify(info)}`);
    const text = await mainPage.waitForText(UI.threads, new RegExp(`\\b${info.threads}\\b`), 30_000);
    t.diagnostic(`#threads: ${text.trim()}`);
    // DataFusion's locks are parking_lot's, whose wasm parker panics on any contended lock
    // unless its `nightly` feature is on (crates/quiver-wasm/Cargo.toml): then the module
    // aborts whenever two threads meet on a lock, which a test hits only by chance.
    const module = readFileSync(path.join(DIST, 'wasm', 'threads', 'quiver_wasm_bg.wasm'));
    assert.equal(module.indexOf('Parking not supported on this platform'), -1,
      'the threads build has the wasm parker that panics: parking_lot_core lacks `nightly`');
    mainPage.assertNoPageErrors();
  });
});

// b. TPC-H over HTTP

test('TPC-H over HTTP gives DuckDB\'s results', { timeout: 22 * QUERY_TIMEOUT }, async (t) => {
  for (const q of TPCH) {
    const name = `http/${q}`;
    await t.test(q, async (st) => {
      await withConsole(st, [mainPage], async () => {
        const result = await mainPage.query(fixtures.queries[name]);
        if (result.ok) st.diagnostic(`${result.rows} rows in ${Math.round(result.elapsed_ms)} ms`);
        assertMatches(name, result);
      });
    });
  }
  mainPage.assertNoPageErrors();
});

test('an HTTP glob is expanded from the server\'s index pages', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const before = mainPage.requests.length;
    assertMatches('http/glob', await mainPage.query(fixtures.queries['http/glob']));
    const folder = `${fixtures.http_base}/tpch/many/lineitem/`;
    assert.ok(mainPage.requests.slice(before).includes(folder),
      `the index page ${folder} was not fetched; requests: ${mainPage.requests.slice(before, before + 10).join(' ')}`);
    mainPage.assertNoPageErrors();
  });
});

test('CSV and a JSON array over HTTP are tables, as DuckDB reads them', async (t) => {
  await withConsole(t, [mainPage], async () => {
    for (const name of ['http/csv', 'http/json']) {
      assertMatches(name, await mainPage.query(fixtures.queries[name]));
    }
    mainPage.assertNoPageErrors();
  });
});

test('Iceberg tables over HTTP read as pyiceberg reads them (deletes, renamed columns)', async (t) => {
  await withConsole(t, [mainPage], async () => {
    for (const name of ['iceberg/posdeletes', 'iceberg/evolved']) {
      assertMatches(name, await mainPage.query(fixtures.queries[name]));
    }
    mainPage.assertNoPageErrors();
  });
});

// d. presigned URL

test('a presigned URL is read as a table', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const before = mainPage.requests.length;
    assertMatches('presigned/nation', await mainPage.query(fixtures.queries['presigned/nation']));
    const signed = mainPage.requests.slice(before).filter((u) => u.includes('X-Amz-Signature='));
    assert.ok(signed.length > 0, 'no request carried the presigned URL\'s signature');
    mainPage.assertNoPageErrors();
  });
});

// c. S3 with SigV4 keys

test('S3: no keys is a clear error; with keys, globs list and TPC-H matches', { timeout: 10 * QUERY_TIMEOUT }, async (t) => {
  const app = await AppPage.open('S3 page', isolated);
  try {
    await withConsole(t, [app], async () => {
      await app.set('quiver.s3_endpoint', fixtures.s3_endpoint);
      await app.set('quiver.s3_region', fixtures.region);

      const noKeys = fixtures.queries['s3/no-keys'];
      const rejected = await app.query(noKeys);
      assert.equal(rejected.ok, false, 'an S3 read without keys succeeded');
      assert.match(rejected.error, /credential/i);
      await app.runInUi(noKeys);
      const shown = await app.waitForText(UI.error, /\S/);
      assert.match(shown, /credential/i, `#error should say that keys are missing; it says ${JSON.stringify(shown)}`);
      assert.ok(await app.page.locator(UI.error).isVisible(), '#error is not visible');
      t.diagnostic(`without keys: ${shown.trim()}`);

      await app.setCredentials(fixtures.access_key, fixtures.secret_key);
      const before = app.requests.length;
      assertMatches('s3/glob', await app.query(fixtures.queries['s3/glob']));
      const listings = app.requests.slice(before).filter((u) => /[?&]list-type=2\b/.test(u));
      assert.ok(listings.some((u) => u.includes(`/${fixtures.bucket}`)),
        `no ListObjectsV2 request to the bucket from the browser; requests: ${app.requests.slice(before, before + 20).join(' ')}`);

      for (const q of S3_TPCH) {
        await t.test(q, async (st) => {
          await withConsole(st, [app], async () => {
            assertMatches(`s3/${q}`, await app.query(fixtures.queries[`s3/${q}`]));
          });
        });
      }
      // The secret stays in the engine worker's memory: not in storage, the URL, the
      // console, or a request URL (SigV4 sends only a signature).
      const kept = await app.page.evaluate(() => JSON.stringify([
        location.href, document.cookie, { ...localStorage }, { ...sessionStorage }]));
      for (const [where, text] of [['page state', kept], ['console', app.console.join('\n')],
        ['requests', app.requests.join('\n')]]) {
        assert.ok(!text.includes(fixtures.secret_key), `the secret key appears in the ${where}`);
      }
      app.assertNoPageErrors();
    });
  } finally {
    await app.close();
  }
});

// A stalled connection: the server sends half a chunk of one GET and then nothing for 60 s.
// The engine hedges the late read with a second GET (a timer on the engine worker), the
// duplicate answers, and the stalled fetch is aborted.
test('with a function URL, a small query runs in the page and one the policy sends runs on the workers; a wrong key is the coordinator\'s 403', { timeout: 6 * QUERY_TIMEOUT }, async (t) => {
  const app = await AppPage.open('Lambda page', isolated);
  try {
    await withConsole(t, [app], async () => {
      await app.set('quiver.s3_endpoint', fixtures.s3_endpoint);
      await app.set('quiver.s3_region', fixtures.region);
      await app.setCredentials(fixtures.access_key, fixtures.secret_key);
      await app.set('quiver.function_url', fixtures.function_url);
      const sql = fixtures.queries['s3/q06'];

      const here = await app.query(sql);
      assertMatches('s3/q06', here);
      assert.match(here.profile.place ?? '', /^place: local \(not lambda: .*under quiver\.lambda_min_bytes/,
        `a small query should stay in the page; profile.place is ${here.profile.place}`);
      assert.equal(here.profile.lambda, null);

      await app.set('quiver.lambda_min_bytes', '0');
      await app.set('quiver.place', 'lambda');
      const there = await app.query(sql);
      assertMatches('s3/q06', there);
      assert.match(there.profile.place ?? '', /^place: lambda \(quiver\.place = 'lambda'; estimates: local .* lambda /);
      assert.ok(there.profile.lambda?.workers?.invocations >= 1,
        `no worker answered: ${JSON.stringify(there.profile.lambda)}`);
      assert.match(there.profile.lambda.cost, /\$/);
      t.diagnostic(`${there.profile.place}; ${there.profile.lambda.cost}`);

      // A view this page made in an earlier run is not the coordinator's: it cannot plan
      // the query, which runs here, saying why.
      await app.query(`CREATE OR REPLACE VIEW page_only AS SELECT * FROM read_parquet('${fixtures.http_base}/tpch/single/nation.parquet')`);
      const pageOnly = await app.query('SELECT sum(n_nationkey) AS s FROM page_only');
      assert.ok(pageOnly.ok, pageOnly.error);
      assert.equal(Number(pageOnly.values[0][0]), 300);
      assert.match(pageOnly.profile.place ?? '', /^place: local \(not lambda: the coordinator answered 400: .*page_only/i,
        `profile.place is ${pageOnly.profile.place}`);

      // The profile view says where it ran.
      await app.runInUi(sql);
      await app.waitForText(UI.status, /row/);
      const shown = await app.page.locator(UI.profile).textContent();
      assert.match(shown, /place: lambda/);
      assert.match(shown, /lambda: \d+ workers?, [\d.]+ GB-seconds/);

      // Over HTTP, so that only the call to the coordinator is signed with the wrong key.
      await app.setCredentials(fixtures.access_key, 'not-the-secret');
      const refused = await app.query(fixtures.queries['http/q06']);
      assert.equal(refused.ok, false, 'a wrongly signed call was answered');
      assert.match(refused.error, /coordinator answered 403: The request signature we calculated does not match/);
      await app.setCredentials(fixtures.access_key, fixtures.secret_key);
      app.assertNoPageErrors();
    });
  } finally {
    await app.close();
  }
});

test('a stalled GET is hedged in the browser, a failed one retried, and the query does not wait for it', { timeout: 3 * QUERY_TIMEOUT }, async (t) => {
  const app = await AppPage.open('stall page', isolated);
  try {
    await withConsole(t, [app], async () => {
      // Footers and lineitem's columns: enough reads to time the server, and cached after.
      assertMatches('http/q01', await app.query(fixtures.queries['http/q01']));
      const control = (what) => fetch(`${fixtures.http_base}/__quiver__/${what}`)
        .then((r) => r.json());
      const taken = (await control('stats')).faults_taken;
      await control('fail?status=stall&count=1&seconds=60');
      // Orders and customer: none of their columns was read yet, so the next GET is theirs.
      const result = await app.query(fixtures.queries['http/q13']);
      assertMatches('http/q13', result);
      assert.equal((await control('stats')).faults_taken, taken + 1, 'no GET was stalled');
      const { hedged_requests: hedged, abandoned_requests: abandoned } = result.profile;
      t.diagnostic(`q13 with a stalled GET: ${Math.round(result.elapsed_ms)} ms, ${hedged} hedged, ${abandoned} abandoned`);
      assert.ok(hedged >= 1 && abandoned >= 1, `hedged ${hedged}, abandoned ${abandoned}`);
      assert.ok(result.elapsed_ms < 30_000, `the query waited for the stalled GET (${result.elapsed_ms} ms)`);
      // A reset connection, then a 503: each request is tried again (object_store's backoff
      // timer panics in wasm, so the engine retries on its own timer there). Q16 reads
      // tables no query here has read; before Q06 the block cache and the lasting one are
      // turned off, so that lineitem is read again.
      // Last, a 503 to the HEAD that a view's URL costs.
      for (const [status, name, kind] of [['reset', 'http/q16', 'GetFile'],
        ['503', 'http/q06', 'GetFile'], ['503', 'http/q01', 'HeadFile']]) {
        if (name === 'http/q06') {
          await app.set('quiver.block_cache_bytes', '0');
          await app.set('quiver.disk_cache_bytes', '0');
        }
        const before = (await control('stats')).faults_taken;
        await control(`fail?status=${status}&count=1&kind=${kind}`);
        assertMatches(name, await app.query(fixtures.queries[name]));
        assert.equal((await control('stats')).faults_taken, before + 1, `no ${kind} got ${status}`);
      }
      app.assertNoPageErrors();
    });
  } finally {
    await app.close();
  }
});

// A query, a reload (a new engine worker, nothing in memory), the same query: its bytes come
// from what the first page kept in the origin private file system, with no GET to the server
// (counted there, and by the engine); the page's cache panel shows the size and empties it.
test('a reloaded page reads what it read before from its lasting cache, with no data GET', { timeout: 3 * QUERY_TIMEOUT }, async (t) => {
  const app = await AppPage.open('lasting cache page', isolated);
  try {
    await withConsole(t, [app], async () => {
      const gets = () => fetch(`${fixtures.http_base}/__quiver__/stats`)
        .then((r) => r.json()).then((stats) => stats.counts.GetFile ?? 0);
      const cacheSize = () => app.page.evaluate(() => window.quiver.cacheSize());
      const name = 'http/q06';
      const first = await app.query(fixtures.queries[name]);
      assertMatches(name, first);
      const kept = await cacheSize();
      assert.ok(kept > 0, `the first page kept ${kept} bytes`);

      await app.reload();
      const before = await gets();
      const second = await app.query(fixtures.queries[name]);
      assertMatches(name, second);
      assert.deepEqual(second.values, first.values);
      assert.equal(await gets() - before, 0, 'data GETs after the reload');
      const { requests, disk_cache_hits: hits, disk_cache_hit_bytes: bytes } = second.profile;
      t.diagnostic(`after the reload: ${requests} requests, ${hits} pieces (${bytes} bytes) from the lasting cache`);
      assert.equal(requests, 0);
      assert.ok(hits > 0 && bytes > 0, `hits ${hits}, bytes ${bytes}`);

      await app.page.locator('#cache-panel summary').click();
      await app.waitForText('#cache-size', /kept/);
      await app.page.locator('#cache-clear').click();
      await app.waitForText('#cache-size', /emptied/);
      assert.equal(await cacheSize(), 0);
      app.assertNoPageErrors();
    });
  } finally {
    await app.close();
  }
});

// e. the single-thread fallback

test('without cross-origin isolation the page falls back to one thread', { timeout: 4 * QUERY_TIMEOUT }, async (t) => {
  const app = await AppPage.open('fallback page', notIsolated);
  try {
    await withConsole(t, [app], async () => {
      assert.equal(await app.page.evaluate(() => self.crossOriginIsolated), false);
      assert.deepEqual({ threads: app.info.threads, threaded: app.info.threaded },
        { threads: 1, threaded: false });
      await app.waitForText(UI.threads, /\b1\b/, 30_000);
      for (const q of ['q01', 'q06']) {
        assertMatches(`http/${q}`, await app.query(fixtures.queries[`http/${q}`]));
      }
      app.assertNoPageErrors();
    });
  } finally {
    await app.close();
  }
});

// f. the UI

test('the UI runs typed SQL, shows the rows and a profile waterfall', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const { page } = mainPage;
    const want = expected['ui/flags'];
    await mainPage.runInUi(fixtures.queries['ui/flags']);
    const status = await mainPage.waitForText(UI.status, /\brows?\b/i);
    t.diagnostic(`#status: ${status.trim()}`);
    // The first row is A, F, 147790, 3774200.00; the count may be shown grouped (147,790).
    const [flag, status_, count] = want.rows[0];
    const firstRow = new RegExp(`${flag}[^]*${status_}[^]*${String(count).replace(/(\d)(?=(\d{3})+$)/g, '$1[\\s,.\u00a0\u202f\']?')}`);
    const rows = page.locator(UI.gridRows);
    try {
      await page.waitForFunction(([sel, source]) => [...document.querySelectorAll(sel)]
        .some((row) => new RegExp(source).test(row.textContent)), [UI.gridRows, firstRow.source],
      { timeout: 30_000, polling: 100 });
    } catch {
      const shown = (await rows.allTextContents()).slice(0, 10).join('\n');
      assert.fail(`no grid row (${UI.gridRows}) shows ${JSON.stringify(want.rows[0])}; rows shown:\n${shown}`);
    }
    // A header row may be among them; a virtual grid may show fewer than all.
    const shown = await rows.count();
    assert.ok(shown >= 1 && shown <= want.rows.length + 1, `the grid shows ${shown} rows for ${want.rows.length}`);
    const rects = page.locator(UI.waterfall);
    await rects.first().waitFor({ state: 'attached', timeout: 30_000 });
    assert.ok(await rects.count() >= 1, 'no waterfall in #profile');
    await page.screenshot({ path: path.join(ARTEFACTS, 'after-query.png'), fullPage: true });
    mainPage.assertNoPageErrors();
  });
});

// a big result

test('100,000 rows: the grid keeps a screenful of row elements and scrolls to the last row', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const { page } = mainPage;
    const url = `${fixtures.http_base}/tpch/single/lineitem.parquet`;
    await mainPage.runInUi(`SELECT l_orderkey, l_partkey, l_shipdate, l_comment FROM '${url}' LIMIT 100000`);
    await mainPage.waitForText(UI.status, /100,?000 rows/);
    const elements = await page.locator('#grid [role="row"]').count();
    assert.ok(elements > 10 && elements < 200, `${elements} row elements for 100,000 rows`);
    await page.evaluate(() => {
      const scroller = [document.getElementById('grid'), ...document.querySelectorAll('#grid *')]
        .find((e) => e.scrollHeight > e.clientHeight + 1000);
      scroller.scrollTop = scroller.scrollHeight;
    });
    await page.waitForFunction(() => [...document.querySelectorAll('#grid [role="rowheader"]')]
      .some((cell) => cell.textContent === '100000' && !cell.parentElement.hidden), null, { timeout: 10_000 });
    mainPage.assertNoPageErrors();
  });
});

// the other views of a result: exports, chart, schema

test('exports, the chart and the schema view work on the last result', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const { page } = mainPage;
    const want = expected['ui/flags'];
    await mainPage.runInUi(fixtures.queries['ui/flags']);
    await mainPage.waitForText(UI.status, /\brows?\b/i);
    const download = async (format) => {
      await page.waitForFunction((id) => !document.getElementById(id).disabled,
        `export-${format}`, { timeout: 30_000 });
      const [file] = await Promise.all([page.waitForEvent('download'),
        page.click(`#export-${format}`)]);
      return readFileSync(await file.path());
    };
    const csv = (await download('csv')).toString('utf8').trim().split('\n');
    assert.deepEqual(csv[0].split(','), want.columns, `CSV header: ${csv[0]}`);
    assert.equal(csv.length, want.rows.length + 1, `CSV:\n${csv.join('\n')}`);
    assert.equal(csv[1].split(',')[0], String(want.rows[0][0]));
    const parquet = await download('parquet');
    assert.equal(parquet.subarray(0, 4).toString('latin1'), 'PAR1');
    assert.equal(parquet.subarray(-4).toString('latin1'), 'PAR1');
    const arrow = await download('arrow');
    assert.equal(arrow.readUInt32LE(0), 0xffffffff, 'an Arrow IPC stream starts with a continuation marker');

    // Bars of n by l_returnflag, one series per l_linestatus: one bar per row.
    await page.click('[data-tab="chart"]');
    await page.selectOption('#chart-x', 'l_returnflag');
    await page.selectOption('#chart-y', 'n');
    await page.selectOption('#chart-series', 'l_linestatus');
    await page.waitForFunction(() => /Bar chart/.test(document.getElementById('chart').textContent));
    const bars = await page.locator('#chart svg rect').count();
    assert.ok(bars >= want.rows.length, `the chart has ${bars} bars for ${want.rows.length} rows`);

    await page.click('[data-tab="schema"]');
    await page.fill('#schema-path', `${fixtures.http_base}/tpch/single/nation.parquet`);
    await page.click('#schema-load');
    const shown = await mainPage.waitForText('#schema-files', /n_nationkey/);
    for (const column of ['n_name', 'n_regionkey', 'n_comment']) {
      assert.ok(shown.includes(column), `the schema view lacks ${column}:\n${shown}`);
    }
    await page.click('[data-tab="results"]');
    mainPage.assertNoPageErrors();
  });
});

// g. cancel

test('a link carries its query and runs it; long lines wrap in the editor', async (t) => {
  const long = 'x'.repeat(400);
  const sql = `SELECT 'from a link' AS answer, '${long}' AS long_text`;
  const app = await AppPage.open('linked page', `${isolated}?sql=${encodeURIComponent(sql)}`);
  try {
    await withConsole(t, [app], async () => {
      const { page } = app;
      assert.equal(await page.locator(UI.sql).inputValue(), sql);
      await app.waitForText(UI.status, /\b1 row\b/);
      await page.waitForFunction((sel) => [...document.querySelectorAll(sel)]
        .some((row) => row.textContent.includes('from a link')), UI.gridRows, { timeout: 30_000 });
      // Long lines wrap: no sideways scrolling, and the highlighted layer under the textarea
      // wraps at the same width, so with text taller than the editor both hold as many lines
      // (the same height less their own paddings).
      await app.typeSql(`${sql}\n${`-- ${'y'.repeat(400)}\n`.repeat(10)}`);
      const sizes = await page.evaluate(() => {
        const area = document.querySelector('#sql');
        const painted = document.querySelector('#sql-highlight');
        const content = (el) => {
          const style = getComputedStyle(el);
          return el.scrollHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
        };
        return { scroll: area.scrollWidth, client: area.clientWidth, height: area.clientHeight,
          area: content(area), painted: content(painted) };
      });
      assert.ok(sizes.scroll <= sizes.client, `the editor scrolls sideways: ${JSON.stringify(sizes)}`);
      assert.ok(sizes.area > sizes.height, `the long lines did not wrap: ${JSON.stringify(sizes)}`);
      assert.ok(Math.abs(sizes.painted - sizes.area) <= 2, `layers differ: ${JSON.stringify(sizes)}`);
      await page.screenshot({ path: path.join(ARTEFACTS, 'linked-query.png'), fullPage: true });
      // Running from the editor puts the query in the URL.
      await app.runInUi('SELECT 7 AS seven');
      await app.waitForText(UI.status, /\b1 row\b/);
      assert.equal(new URL(page.url()).searchParams.get('sql'), 'SELECT 7 AS seven');
      app.assertNoPageErrors();
    });
  } finally {
    await app.close();
  }
});

// Skipped on 2026-11-25: on this machine the long query stays at "0/4 buckets · 0 B read" for
// 120 s with every core since session 7's (a3f6dba, which passed here on 2026-11-25 02:00),
// so something outside the core changed (Chromium from Debian was reinstalled since);
// not found yet. The cancel path itself is unchanged; see the closing note of that day.
test('cancel stops a long query in the worker, which keeps its caches and threads', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const { page } = mainPage;
    assertMatches('after/nation', await mainPage.query(fixtures.queries['after/nation']));
    const cancel = page.locator(UI.cancel);
    // More cancels than compute threads: a merge that kept running after its cancel would
    // hold a thread for hours, and the query after would never finish.
    for (let round = 1; round <= mainPage.info.threads + 1; round += 1) {
      await mainPage.runInUi(fixtures.queries['cancel/long']);
      // Every bucket done: the fragments have answered and the cross join runs in the merge,
      // on a compute thread, while the engine's event loop stays free to hear the cancel.
      await mainPage.waitForText('#progress-text', /^([1-9]\d*)\/\1 buckets/, 120_000);
      await page.waitForTimeout(500);
      await cancel.click();
      await mainPage.waitForText(UI.status, /cancel/i, 60_000);
    }
    t.diagnostic(`cancelled ${mainPage.info.threads + 1} times`);

    await mainPage.runInUi(fixtures.queries['after/nation']);
    await mainPage.waitForText(UI.status, /\brows?\b/i);
    const after = await mainPage.query(fixtures.queries['after/nation']);
    assertMatches('after/nation', after);
    const { requests, footer_requests: footers } = after.profile;
    assert.deepEqual({ requests, footers }, { requests: 0, footers: 0 },
      'nation.parquet was read again: the cancel lost the worker\'s caches');
    mainPage.assertNoPageErrors();
  });
});

test('a Parquet file picked from disk or dropped on the page is a table, read by ranges', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const { page } = mainPage;
    // Picked: the page opens it and shows its first rows.
    const orders = path.join(fixtures.single_root, 'orders.parquet');
    await mainPage.markTexts([UI.status, UI.error]);
    await page.setInputFiles('#file-picker', orders);
    await mainPage.waitForText(UI.status, /\b100 rows\b/);
    assert.match(await page.locator(UI.sql).inputValue(), /FROM 'orders\.parquet'/);
    const grouped = await mainPage.query(fixtures.queries['file/orders']);
    assertMatches('file/orders', grouped);
    // Two columns of nine, by ranges (from the file, or from the block cache that the
    // first rows filled): not the whole file.
    const size = statSync(orders).size;
    const { bytes_read: read, cache_hit_bytes: cached } = grouped.profile;
    assert.ok(read + cached > 0 && read + cached < size / 2,
      `${read} bytes read and ${cached} from the cache of a ${size}-byte file for two columns`);
    t.diagnostic(`orders.parquet: ${read} bytes read, ${cached} from the cache, of ${size}`);

    // Dropped: a File made in the page from the served copy of nation.parquet.
    const nationUrl = `${fixtures.http_base}/tpch/single/nation.parquet`;
    const transfer = await page.evaluateHandle(async (url) => {
      const bytes = await (await fetch(url)).arrayBuffer();
      const dropped = new DataTransfer();
      dropped.items.add(new File([bytes], 'nation.parquet'));
      return dropped;
    }, nationUrl);
    await mainPage.markTexts([UI.status, UI.error]);
    await page.dispatchEvent('body', 'drop', { dataTransfer: transfer });
    await mainPage.waitForText(UI.status, /\b25 rows\b/);
    await page.screenshot({ path: path.join(ARTEFACTS, 'file-dropped.png'), fullPage: true });
    assertMatches('file/nation', await mainPage.query(fixtures.queries['file/nation']));

    // A glob over the page's files; a name the page does not have says how to get one.
    const listed = await mainPage.query(
      "SELECT _file, count(*) AS n FROM '*.parquet' GROUP BY _file ORDER BY _file");
    assert.ok(listed.ok, listed.error);
    assert.deepEqual(listed.values, [['nation.parquet', 25], ['orders.parquet', 150000]]);
    await mainPage.runInUi("SELECT * FROM 'customer.parquet'");
    const error = await mainPage.waitForText(UI.error, /\S/);
    assert.match(error, /customer\.parquet: no such file.*open or drop/, `#error says ${JSON.stringify(error)}`);
    mainPage.assertNoPageErrors();
  });
});

// h. errors

test('a wrong path, bad SQL and a file that aborts the module give clear errors, and nothing uncaught', async (t) => {
  await withConsole(t, [mainPage], async () => {
    const missing = fixtures.queries['error/missing'];
    await mainPage.runInUi(missing);
    let text = await mainPage.waitForText(UI.error, /\S/);
    assert.ok(await mainPage.page.locator(UI.error).isVisible(), '#error is not visible');
    assert.match(text, /no_such_table\.parquet/, `#error should name the file; it says ${JSON.stringify(text)}`);
    assert.match(text, /not found|404|no such|does not exist/i, `#error should say the file is missing; it says ${JSON.stringify(text)}`);
    t.diagnostic(`wrong path: ${text.trim()}`);
    const rejected = await mainPage.query(missing);
    assert.equal(rejected.ok, false);
    assert.match(rejected.error, /no_such_table\.parquet/);

    await mainPage.runInUi(fixtures.queries['error/syntax']);
    text = await mainPage.waitForText(UI.error, /\S/);
    assert.doesNotMatch(text, /no_such_table/, `#error still shows the previous error: ${JSON.stringify(text)}`);
    assert.match(text, /SELEC|syntax|expected|pars/i, `#error should point at the SQL; it says ${JSON.stringify(text)}`);
    t.diagnostic(`bad SQL: ${text.trim()}`);
    assert.equal((await mainPage.query(fixtures.queries['error/syntax'])).ok, false);

    // A file whose ARROW:schema hint makes Arrow panic: natively an error, here an aborted
    // module. The query fails with the panic's message, and the page goes on with a new engine.
    await mainPage.markTexts([UI.status, UI.error]);
    await mainPage.page.setInputFiles('#file-picker',
      path.join(REPO, 'crates/quiver-core/tests/hostile/mutated-footer-4716.parquet'));
    text = await mainPage.waitForText(UI.error, /\S/);
    assert.match(text, /engine stopped: panicked at .*bit width of 65568.*new engine was started/s,
      `#error should give the panic and say the engine restarted; it says ${JSON.stringify(text)}`);
    t.diagnostic(`aborted module: ${text.trim()}`);

    // A sort past the memory limit cannot spill here (no disk): an error naming the limit,
    // not an aborted module.
    const limited = await mainPage.query("SET quiver.memory_limit = '20MB'; " +
      'SELECT i FROM generate_series(1, 4000000) AS t(i) ORDER BY i DESC');
    assert.equal(limited.ok, false, 'a 32 MB sort under a 20 MB limit must fail');
    assert.match(limited.error, /memory_limit/, `the error should name the limit: ${limited.error}`);
    t.diagnostic(`over the memory limit: ${limited.error.slice(0, 300)}`);
    assert.equal((await mainPage.query("SET quiver.memory_limit = 'auto'")).ok, true);

    // and the page still answers
    assertMatches('after/nation', await mainPage.query(fixtures.queries['after/nation']));
    mainPage.assertNoPageErrors();
  });
});
