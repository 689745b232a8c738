// The page: wires the editor, the views and the engine client together, runs queries for
// the Run button and for the test hook alike, and sets window.quiver (docs/browser.md).

import "./style.css";
import { tableFromIPC } from "apache-arrow";
import { ResultChart } from "./chart";
import { SqlEditor } from "./editor";
import { CancelledError, EngineClient } from "./engine";
import { dataBaseUrl, examples, showExamples, sqlString } from "./examples";
import { ResultExports } from "./export";
import { setUpFileOpening, withFileHint } from "./files";
import { formatBytes, plural } from "./format";
import { ResultGrid } from "./grid";
import { clearProfile, showProfile } from "./profile";
import type { EngineInfo, QueryReply } from "./protocol";
import type { Profile, Progress } from "./quiver-wasm";
import { setUpSchemaView } from "./schema";
import { setUpCachePanel } from "./cache";
import { setUpS3Settings } from "./settings";

const byId = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

const params = new URLSearchParams(location.search);
const threads = Number.parseInt(params.get("threads") ?? "", 10);
const engine = new EngineClient({
  baseUrl: document.baseURI,
  threads: threads > 0 ? threads : null,
  forceSingle: params.get("single") === "1",
});
const dataBase = dataBaseUrl(params);

const status = byId("status");
const errorText = byId("error");
const progress = byId<HTMLProgressElement>("progress");
const progressText = byId("progress-text");
const runButton = byId<HTMLButtonElement>("run");
const cancelButton = byId<HTMLButtonElement>("cancel");

/** Settings a link carries with its query (keys never: they stay in this page's memory). */
const LINKED_SETTINGS = ["quiver.s3_endpoint", "quiver.s3_region", "quiver.s3_anonymous"];
const linkedSql = params.get("sql");

const editor = new SqlEditor(byId<HTMLTextAreaElement>("sql"), byId("sql-highlight"), () => void runFromEditor());
editor.value = linkedSql ?? examples(dataBase)[0].sql;
showExamples(byId("examples"), dataBase, (sql) => {
  editor.value = sql;
  editor.focus();
});
const grid = new ResultGrid(byId("grid"));
grid.clear("Run a query to see its result.");
const chart = new ResultChart(byId("chart"));
clearProfile(byId("profile"), "Run a query to see where its time went.");
setUpSchemaView(byId("schema"), engine, `${dataBase}/single/lineitem.parquet`);
const exports = new ResultExports(engine, (error) => showError(messageOf(error)));
setUpS3Settings(engine, params);
setUpCachePanel(engine);
setUpFileOpening(byId<HTMLButtonElement>("open-file"), byId<HTMLInputElement>("file-picker"), (files) => void openFiles(files));
setUpTabs();
showEngine();

runButton.addEventListener("click", () => void runFromEditor());
cancelButton.addEventListener("click", () => {
  engine.cancel();
  exports.enable(false);
  showEngine();
});

/** Queries in flight (the Run button and the test hook share the worker). */
let running = 0;

interface Outcome {
  reply: QueryReply;
  elapsedMs: number;
}

async function runFromEditor(): Promise<void> {
  if (running > 0) return;
  rememberInUrl(editor.value);
  // The outcome is already on the page (status, error); nothing more to do with it here.
  await runQuery(editor.value, false).catch(() => {});
}

/** The query and its settings in the page's URL, so that a link reproduces the result. */
function rememberInUrl(sql: string): void {
  const url = new URL(location.href);
  url.searchParams.set("sql", sql);
  for (const key of LINKED_SETTINGS) {
    const value = engine.setting(key);
    if (value) url.searchParams.set(key, value);
    else url.searchParams.delete(key);
  }
  history.replaceState(null, "", url);
}

/** A link's query runs as soon as the page opens, with the link's settings. */
async function runLinkedQuery(): Promise<void> {
  try {
    for (const key of LINKED_SETTINGS) {
      const value = params.get(key);
      if (value) await engine.set(key, value);
    }
  } catch (error) {
    showError(messageOf(error));
    return;
  }
  await runFromEditor();
}

/** Files from the user's disk become tables by their names; the first one is shown. */
async function openFiles(files: File[]): Promise<void> {
  showError("");
  try {
    const names: string[] = [];
    for (const file of files) names.push(await engine.openFile(file));
    status.textContent = `opened ${names.join(", ")}`;
    if (running > 0) return; // the query in the editor is running: leave it be
    editor.value = `SELECT * FROM ${sqlString(names[0])} LIMIT 100;`;
    await runFromEditor();
  } catch (error) {
    if (!(error instanceof CancelledError)) showError(messageOf(error));
  }
}

async function runQuery(sql: string, values: boolean): Promise<Outcome> {
  setRunning(+1);
  status.textContent = "running…";
  showError("");
  progress.removeAttribute("value");
  progressText.textContent = "planning…";
  const started = performance.now();
  try {
    const reply = await engine.query(sql, values, showProgress);
    const elapsedMs = performance.now() - started;
    status.textContent = `${reply.rows} ${reply.rows === 1 ? "row" : "rows"} in ${Math.round(elapsedMs)} ms`;
    showDone(reply.profile);
    showProfile(byId("profile"), reply.profile);
    exports.enable(true);
    showRows(reply);
    return { reply, elapsedMs };
  } catch (error) {
    progress.value = 0;
    progressText.textContent = "";
    if (error instanceof CancelledError) {
      status.textContent = "cancelled";
    } else {
      status.textContent = messageOf(error);
      showError(withFileHint(messageOf(error)));
    }
    throw error;
  } finally {
    setRunning(-1);
  }
}

/** The grid and the chart. The query itself has succeeded: a result that apache-arrow cannot
 * read is the page's problem to show, not a failed query. */
function showRows(reply: QueryReply): void {
  try {
    const table = tableFromIPC(new Uint8Array(reply.ipc));
    grid.show(table);
    chart.show(table);
  } catch (error) {
    const message = `the result could not be shown: apache-arrow cannot read its Arrow IPC (${messageOf(error)})`;
    grid.clear(message);
    showError(message);
  }
}

function showProgress(p: Progress): void {
  if (p.buckets_total > 0) {
    progress.max = p.buckets_total;
    progress.value = p.buckets_done;
  }
  progressText.textContent = `${p.buckets_done}/${p.buckets_total} buckets · ${formatBytes(p.bytes_read)} read`;
}

function showDone(profile: Profile): void {
  progress.max = 1;
  progress.value = 1;
  progressText.textContent = `${profile.buckets_done}/${profile.buckets_total} buckets · ${formatBytes(profile.bytes_read)} read`;
}

function setRunning(change: number): void {
  running += change;
  runButton.disabled = running > 0;
  cancelButton.disabled = running === 0;
}

function showError(message: string): void {
  errorText.textContent = message;
}

function showEngine(): void {
  const threadsText = byId("threads");
  const buildText = byId("build");
  threadsText.textContent = "starting engine…";
  buildText.textContent = "";
  const ready = engine.ready;
  ready.then(
    (info) => {
      if (engine.ready !== ready) return; // a cancel has started another worker since
      threadsText.textContent = describeThreads(info);
      buildText.textContent = `· wasm ${info.build} build`;
    },
    (error) => {
      if (engine.ready !== ready) return;
      threadsText.textContent = "engine failed to start";
      status.textContent = messageOf(error);
      showError(messageOf(error));
    },
  );
}

function describeThreads(info: EngineInfo): string {
  const threads = plural(info.threads, "thread");
  if (info.threaded) return threads;
  return `${threads} (${info.crossOriginIsolated ? "single build requested" : "not cross-origin isolated"})`;
}

function setUpTabs(): void {
  const tabs = [...document.querySelectorAll<HTMLButtonElement>("[data-tab]")];
  for (const tab of tabs) {
    tab.addEventListener("click", () => {
      for (const other of tabs) {
        const chosen = other === tab;
        other.setAttribute("aria-selected", String(chosen));
        byId(`panel-${other.dataset.tab}`).hidden = !chosen;
      }
    });
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

// The test hook: the same worker and the same rendering as the Run button.
interface HookResult {
  rows: number;
  columns: string[];
  values: unknown[][];
  profile: Profile;
  /** From the request to the reply, as the page sees it. */
  elapsed_ms: number;
}

declare global {
  interface Window {
    quiver: {
      readonly ready: Promise<{ threads: number; threaded: boolean }>;
      query(sql: string): Promise<HookResult>;
      set(key: string, value: string): Promise<void>;
      setCredentials(accessKeyId: string, secretAccessKey: string, sessionToken?: string): Promise<void>;
      /** Bytes the lasting cache holds once what queries fetched is written; null without OPFS. */
      cacheSize(): Promise<number | null>;
      clearCache(): Promise<number>;
    };
  }
}

window.quiver = {
  get ready() {
    return engine.ready;
  },
  async query(sql) {
    editor.value = sql;
    const { reply, elapsedMs } = await runQuery(sql, true);
    const values = JSON.parse(reply.json ?? "[]") as unknown[][];
    return { rows: reply.rows, columns: reply.columns, values, profile: reply.profile, elapsed_ms: elapsedMs };
  },
  set: (key, value) => engine.set(key, value),
  setCredentials: (accessKeyId, secretAccessKey, sessionToken) =>
    engine.setCredentials({ accessKeyId, secretAccessKey, sessionToken }),
  cacheSize: () => engine.cacheSize(),
  clearCache: () => engine.clearCache(),
};

// Last, once everything above is initialised: a link's query runs as the page opens.
if (linkedSql !== null) void runLinkedQuery();
