// The engine worker: owns the wasm module, its thread pool and the last query result.
// Requests run one at a time, in the order they came; only progress is read alongside, and
// a cancel is answered out of turn.

import type { Engine, QueryResult, QuiverWasm } from "./quiver-wasm";
import type { Build, EngineInfo, ExportFormat, QueryReply, Request, StartOptions, WorkerMessage } from "./protocol";

/** How often a running query's progress goes to the page. */
const PROGRESS_INTERVAL_MS = 100;

// The DOM typings describe a window; this is the little of a worker's scope we use.
interface WorkerScope {
  crossOriginIsolated: boolean;
  postMessage(message: WorkerMessage, transfer?: Transferable[]): void;
  onmessage: ((event: MessageEvent<Request>) => void) | null;
}
const scope = self as unknown as WorkerScope;

let engine: Promise<Engine> | null = null;
let lastResult: QueryResult | null = null;
let queue: Promise<void> = Promise.resolve();

// A Rust panic aborts the module: a trap, after the panic hook has written the message to
// the console. What was waiting on the module is never answered, so the page is told (and
// starts a new worker). The trap surfaces as an uncaught error (a rayon thread's should
// too, as its nested worker's error propagates here) or, inside a future's poll, as an
// unhandled rejection.
let lastPanic = "";
const consoleError = console.error.bind(console);
console.error = (...args: unknown[]) => {
  const text = args.map(String).join(" ");
  if (text.startsWith("panicked at")) lastPanic = text.split("\n\nStack:")[0];
  consoleError(...args);
};
function fatal(what: string): void {
  const message = `the engine stopped: ${lastPanic || what}`;
  scope.postMessage({ id: 0, type: "fatal", message });
}
self.addEventListener("error", (event) => {
  fatal(event.message);
  event.preventDefault();
});
self.addEventListener("unhandledrejection", (event) => {
  if (event.reason instanceof WebAssembly.RuntimeError) {
    fatal(String(event.reason));
    event.preventDefault();
  }
});

scope.onmessage = (event) => {
  const request = event.data;
  if (request.type === "cancel") {
    void answer(request);
    return;
  }
  queue = queue.then(() => answer(request));
};

async function answer(request: Request): Promise<void> {
  try {
    const [value, transfer] = await handle(request);
    scope.postMessage({ id: request.id, type: "reply", value }, transfer);
  } catch (error) {
    scope.postMessage({ id: request.id, type: "error", message: messageOf(error) });
  }
}

async function handle(request: Request): Promise<[unknown, Transferable[]]> {
  if (request.type === "init") {
    engine = start(request);
    return [info(await engine, request), []];
  }
  if (!engine) throw new Error("the engine has not been started");
  const ready = await engine;
  switch (request.type) {
    case "query":
      return runQuery(ready, request.id, request.sql, request.values);
    case "set":
      ready.set(request.key, request.value);
      return [null, []];
    case "credentials":
      ready.setCredentials(request.accessKeyId, request.secretAccessKey, request.sessionToken || undefined);
      return [null, []];
    case "forget-credentials":
      ready.forgetCredentials();
      return [null, []];
    case "metadata":
      return [JSON.parse(await ready.metadata(request.path)), []];
    case "cache-size":
      return [await ready.cacheSize(), []];
    case "cache-clear":
      return [await ready.clearCache(), []];
    case "export":
      return [exportLast(request.format), []];
    case "open-file":
      return [ready.openFile(request.file), []];
    case "cancel": {
      // Replies once what runs now has stopped (the page ends the worker if that takes long).
      const running = queue;
      ready.cancel();
      await running;
      return [null, []];
    }
  }
}

function chooseBuild(options: StartOptions): Build {
  return scope.crossOriginIsolated && !options.forceSingle ? "threads" : "single";
}

async function start(options: StartOptions): Promise<Engine> {
  const build = chooseBuild(options);
  const url = new URL(`wasm/${build}/quiver_wasm.js`, options.baseUrl).href;
  let mod: QuiverWasm;
  try {
    mod = (await import(/* @vite-ignore */ url)) as QuiverWasm;
  } catch (error) {
    throw new Error(`could not load ${url} (${messageOf(error)}); build it with \`npm run build:wasm\``);
  }
  await mod.default();
  if (build === "threads") {
    if (!mod.initThreadPool) throw new Error(`${url} has no initThreadPool: is it the threads build?`);
    await mod.initThreadPool(options.threads ?? navigator.hardwareConcurrency);
  }
  return new mod.Engine();
}

function info(ready: Engine, options: StartOptions): EngineInfo {
  return {
    threads: ready.threads,
    threaded: ready.threaded,
    build: chooseBuild(options),
    crossOriginIsolated: scope.crossOriginIsolated,
  };
}

async function runQuery(
  ready: Engine,
  id: number,
  sql: string,
  values: boolean,
): Promise<[QueryReply, Transferable[]]> {
  const timer = setInterval(() => {
    try {
      scope.postMessage({ id, type: "progress", progress: JSON.parse(ready.progress()) });
    } catch (error) {
      // The query goes on without a progress bar; say why once instead of every 100 ms.
      clearInterval(timer);
      console.warn(`quiver: progress unavailable: ${messageOf(error)}`);
    }
  }, PROGRESS_INTERVAL_MS);
  try {
    const result = await ready.query(sql);
    // Kept for export until the next result replaces it.
    lastResult?.free();
    lastResult = result;
    const ipc = ownedBuffer(result.ipc());
    const reply: QueryReply = {
      ipc,
      rows: result.rows,
      columns: JSON.parse(result.columns()),
      json: values ? result.json() : null,
      profile: JSON.parse(result.profile()),
    };
    return [reply, [ipc]];
  } finally {
    clearInterval(timer);
  }
}

const EXPORT_TYPES: Record<ExportFormat, string> = {
  csv: "text/csv",
  parquet: "application/vnd.apache.parquet",
  arrow: "application/vnd.apache.arrow.stream",
};

function exportLast(format: ExportFormat): Blob {
  if (!lastResult) throw new Error("no result to export: run a query first");
  const content = format === "csv" ? lastResult.csv() : format === "parquet" ? lastResult.parquet() : lastResult.ipc();
  const part = typeof content === "string" ? content : ownedBuffer(content);
  return new Blob([part], { type: EXPORT_TYPES[format] });
}

/** A plain ArrayBuffer holding exactly these bytes: one that can be transferred (not a view
 * into wasm memory, which may be a SharedArrayBuffer). */
function ownedBuffer(bytes: Uint8Array): ArrayBuffer {
  const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  if (whole && bytes.buffer instanceof ArrayBuffer) return bytes.buffer;
  return bytes.slice().buffer as ArrayBuffer;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
