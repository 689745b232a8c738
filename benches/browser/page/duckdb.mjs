// DuckDB-WASM for the browser benchmark (benches/browser/run.mjs): the npm package's own
// bundles, served by run.mjs under /pkg/duckdb-wasm/, behind a hook like the Quiver page's:
//
//   window.duckdb = {
//     ready: Promise<{ bundle: 'eh' | 'mvp', version: string, ms: number }>,
//     register(name, url): Promise<void>,   // name → an HTTP URL, read by ranges
//     query(sql, { values }): Promise<{ rows: number, columns: string[], ms: number, values? }>,
//   }
//
// `?extensions=URL` on the page's address makes DuckDB load its extensions (Parquet, from
// DuckDB-WASM 1.29 on) from that repository instead of extensions.duckdb.org.
//
// selectBundle picks `eh` (wasm exceptions) where the browser has them, else `mvp`. Both run
// DuckDB on the one worker thread (the threaded `coi` bundle is left out: the package calls it
// experimental). HTTP files are read by the worker's synchronous XMLHttpRequests: a HEAD (or a
// `Range: bytes=0-` probe) for the size, then ranged GETs; a cross-origin server must expose
// Content-Length and Content-Range.

import * as duckdb from '/pkg/duckdb-wasm/dist/duckdb-browser.mjs';

const DIST = new URL('/pkg/duckdb-wasm/dist/', location.href).href;
const EXTENSIONS = new URLSearchParams(location.search).get('extensions');
const BUNDLES = {
  mvp: { mainModule: `${DIST}duckdb-mvp.wasm`, mainWorker: `${DIST}duckdb-browser-mvp.worker.js` },
  eh: { mainModule: `${DIST}duckdb-eh.wasm`, mainWorker: `${DIST}duckdb-browser-eh.worker.js` },
};

const status = (text) => { document.querySelector('#status').textContent = text; };

let db;
let conn;

async function start() {
  const began = performance.now();
  const bundle = await duckdb.selectBundle(BUNDLES);
  const worker = new Worker(bundle.mainWorker);
  db = new duckdb.AsyncDuckDB(new duckdb.VoidLogger(), worker);
  await db.instantiate(bundle.mainModule, bundle.pthreadWorker);
  await db.open({ query: { castBigIntToDouble: false, castDecimalToDouble: false } });
  conn = await db.connect();
  if (EXTENSIONS) {
    await conn.query(`SET custom_extension_repository = '${EXTENSIONS.replaceAll("'", "''")}'`);
  }
  const version = await db.getVersion();
  const name = bundle.mainModule === BUNDLES.eh.mainModule ? 'eh' : 'mvp';
  const ms = performance.now() - began;
  status(`DuckDB-WASM ${version}, ${name} bundle, ready in ${Math.round(ms)} ms`);
  return { bundle: name, version, ms };
}

const ready = start();
ready.catch((error) => status(`DuckDB-WASM failed to start: ${error.message}`));

window.duckdb = {
  ready,
  async register(name, url) {
    await ready;
    await db.registerFileURL(name, url, duckdb.DuckDBDataProtocol.HTTP, false);
  },
  // values: also the rows, as JSON-safe objects (for looking at results, not timed).
  async query(sql, { values = false } = {}) {
    await ready;
    const began = performance.now();
    const table = await conn.query(sql);
    const ms = performance.now() - began;
    const result = { rows: table.numRows, columns: table.schema.fields.map((f) => f.name), ms };
    if (values) {
      result.values = JSON.parse(JSON.stringify(table.toArray().map((row) => row.toJSON()),
        (_, v) => (typeof v === 'bigint' ? Number(v) : v)));
    }
    return result;
  },
};
