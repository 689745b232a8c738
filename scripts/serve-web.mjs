#!/usr/bin/env node
// A static file server for the web page (web/dist), its browser tests and its benchmark.
// No dependencies; loopback only.
//
//   node scripts/serve-web.mjs DIR [--port P] [--no-isolation]
//
// By default every answer carries `Cross-Origin-Opener-Policy: same-origin` and
// `Cross-Origin-Embedder-Policy: require-corp`, which make the page cross-origin isolated
// (SharedArrayBuffer, so the threaded wasm build), and `Cross-Origin-Resource-Policy:
// cross-origin`. `--no-isolation` leaves COOP/COEP out: the page then falls back to the
// single-thread build. Port 0 (the default) picks a free port; the line
// `serving http://127.0.0.1:PORT/` says which, once listening.
//
// Files are revalidated on every load (`Cache-Control: no-cache` with ETag and
// Last-Modified, answered 304 when unchanged): a rebuilt page is never stale, and an unchanged
// 60 MB wasm module is not sent again (Chromium also keeps its compiled code).
//
// As a module: `startServer({ root, port, isolation, mounts })` serves `root` and each
// `mounts[prefix]` folder under its URL prefix (the benchmark adds DuckDB-WASM's files).

import { createReadStream, promises as fs } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.cjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.md': 'text/markdown; charset=utf-8',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.parquet': 'application/octet-stream',
  '.arrow': 'application/vnd.apache.arrow.stream',
};

function isolationHeaders(isolation) {
  const headers = { 'Cross-Origin-Resource-Policy': 'cross-origin' };
  if (isolation) {
    headers['Cross-Origin-Opener-Policy'] = 'same-origin';
    headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
  }
  return headers;
}

// The file a URL path names under the mounts, or null. `..` cannot climb out of a root.
function resolve(roots, urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  if (decoded.includes('\0')) return null;
  for (const [prefix, root] of roots) {
    if (!decoded.startsWith(prefix)) continue;
    const rest = decoded.slice(prefix.length);
    const full = path.resolve(root, '.' + path.posix.normalize('/' + rest));
    if (full !== root && !full.startsWith(root + path.sep)) return null;
    return full;
  }
  return null;
}

async function answer(req, res, roots, fixed) {
  const send = (status, body, headers = {}) => {
    res.writeHead(status, { ...fixed, 'Content-Type': 'text/plain; charset=utf-8',
      'Content-Length': Buffer.byteLength(body), ...headers });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    send(405, 'method not allowed\n', { Allow: 'GET, HEAD' });
    return;
  }
  const urlPath = new URL(req.url, 'http://localhost').pathname;
  let file = resolve(roots, urlPath);
  if (file === null) {
    send(404, `not found: ${urlPath}\n`);
    return;
  }
  let st = await fs.stat(file).catch(() => null);
  if (st?.isDirectory()) {
    if (!urlPath.endsWith('/')) {
      send(301, '', { Location: urlPath + '/' });
      return;
    }
    file = path.join(file, 'index.html');
    st = await fs.stat(file).catch(() => null);
  }
  if (!st?.isFile()) {
    send(404, `not found: ${urlPath}\n`);
    return;
  }
  const etag = `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
  const headers = {
    ...fixed,
    'Content-Type': MIME[path.extname(file).toLowerCase()] ?? 'application/octet-stream',
    'Content-Length': st.size,
    ETag: etag,
    'Last-Modified': st.mtime.toUTCString(),
    'Cache-Control': 'no-cache',
  };
  if (req.headers['if-none-match'] === etag) {
    delete headers['Content-Length'];
    res.writeHead(304, headers);
    res.end();
    return;
  }
  res.writeHead(200, headers);
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const stream = createReadStream(file);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}

/**
 * Starts serving; resolves once listening.
 * @param {{ root: string, port?: number, isolation?: boolean,
 *           mounts?: Record<string, string>, log?: (line: string) => void }} options
 *   mounts: URL prefix (like "/duckdb/") → folder, looked up before `root`.
 * @returns {Promise<{ url: string, port: number, server: http.Server, close: () => Promise<void> }>}
 */
export async function startServer({ root, port = 0, isolation = true, mounts = {}, log } = {}) {
  const roots = Object.entries(mounts)
    .map(([prefix, folder]) => [prefix.endsWith('/') ? prefix : prefix + '/', path.resolve(folder)])
    .sort((a, b) => b[0].length - a[0].length);
  roots.push(['/', path.resolve(root)]);
  const fixed = isolationHeaders(isolation);
  const server = http.createServer((req, res) => {
    answer(req, res, roots, fixed).catch((error) => {
      log?.(`serve-web: ${req.method} ${req.url}: ${error.message}`);
      if (!res.headersSent) res.writeHead(500, fixed);
      res.end();
    });
  });
  // Keep-alive connections would hold close() until they time out.
  const sockets = new Set();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', fail);
      ok();
    });
  });
  const actual = server.address().port;
  return {
    url: `http://127.0.0.1:${actual}/`,
    port: actual,
    server,
    close: () => new Promise((ok) => {
      server.close(() => ok());
      for (const socket of sockets) socket.destroy();
    }),
  };
}

function usage(message) {
  if (message) console.error(`serve-web: ${message}`);
  console.error('usage: node scripts/serve-web.mjs DIR [--port P] [--no-isolation]');
  process.exit(2);
}

async function main(argv) {
  let root = null;
  let port = 0;
  let isolation = true;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--port') {
      port = Number(argv[++i]);
      if (!Number.isInteger(port) || port < 0 || port > 65535) usage(`bad port ${argv[i]}`);
    } else if (arg.startsWith('--port=')) {
      port = Number(arg.slice('--port='.length));
      if (!Number.isInteger(port) || port < 0 || port > 65535) usage(`bad port ${arg}`);
    } else if (arg === '--no-isolation') {
      isolation = false;
    } else if (arg === '-h' || arg === '--help') {
      usage();
    } else if (arg.startsWith('-')) {
      usage(`unknown option ${arg}`);
    } else if (root === null) {
      root = arg;
    } else {
      usage(`one folder only (got ${root} and ${arg})`);
    }
  }
  if (root === null) usage('no folder given');
  const st = await fs.stat(root).catch(() => null);
  if (!st?.isDirectory()) {
    console.error(`serve-web: ${root} is not a folder${root.includes('dist') ? ' (build the page first: npm run build)' : ''}`);
    process.exit(1);
  }
  const { url, close } = await startServer({
    root, port, isolation, log: (line) => console.error(line),
  });
  if (!isolation) console.error('serve-web: no COOP/COEP: the page is not cross-origin isolated');
  console.log(`serving ${url}`);
  const stop = (signal) => {
    console.error(`serve-web: stopping (${signal})`);
    close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  process.on('SIGHUP', stop);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((error) => {
    console.error(`serve-web: ${error.message}`);
    process.exit(1);
  });
}
