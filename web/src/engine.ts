// The page's side of the engine worker: requests as Promises, progress callbacks, and
// cancel, which stops the running query inside the worker (caches, settings and opened files
// stay), or, when the worker does not stop it in time, ends the worker and starts a fresh
// one with the same settings, files and, if the page still holds them, the same keys. A
// module that aborts (a panic) is replaced the same way, its request failing with the cause.

import type { FileMetadata, Progress } from "./quiver-wasm";
import type {
  Credentials,
  EngineInfo,
  ExportFormat,
  QueryReply,
  RequestType,
  Requests,
  StartOptions,
  WorkerMessage,
} from "./protocol";

/** How long a cancelled query may take to stop before its worker is ended instead: the
 * single-thread build computes on the worker itself, which then hears the cancel late. */
const CANCEL_GRACE_MS = 3_000;

export class CancelledError extends Error {
  constructor() {
    super("cancelled");
    this.name = "CancelledError";
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(error: Error): void;
  onProgress?: (progress: Progress) => void;
}

export class EngineClient {
  /** The current worker's engine; replaced when a cancel starts a new worker. */
  ready!: Promise<EngineInfo>;
  private worker!: Worker;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  /** Settings applied so far, re-sent to a fresh worker. */
  private settings = new Map<string, string>();
  /** Kept in this page's memory only (never stored), so that a cancel does not lose them. */
  private credentials: Credentials | null = null;
  /** Files opened on the page, by name, re-opened in a fresh worker. */
  private files = new Map<string, File>();
  /** Until a cancel has stopped the query (or ended its worker), new requests wait. */
  private settling: Promise<void> = Promise.resolve();
  /** Whether the current worker's engine has started (a fatal error restarts only those). */
  private started = false;

  constructor(private readonly options: StartOptions) {
    this.start();
  }

  query(sql: string, values: boolean, onProgress?: (progress: Progress) => void): Promise<QueryReply> {
    return this.request("query", { sql, values }, onProgress);
  }

  async set(key: string, value: string): Promise<void> {
    await this.request("set", { key, value });
    this.settings.set(key, value);
  }

  async setCredentials(credentials: Credentials): Promise<void> {
    this.credentials = credentials;
    await this.request("credentials", credentials);
  }

  async forgetCredentials(): Promise<void> {
    this.credentials = null;
    await this.request("forget-credentials", {});
  }

  /** The value this page last set for a key, if any. */
  setting(key: string): string | undefined {
    return this.settings.get(key);
  }

  get hasCredentials(): boolean {
    return this.credentials !== null;
  }

  /** Makes `file` a table by its name (`SELECT * FROM 'name.parquet'`); returns the name. */
  async openFile(file: File): Promise<string> {
    const name = await this.request("open-file", { file });
    this.files.set(name, file);
    return name;
  }

  metadata(path: string): Promise<FileMetadata[]> {
    return this.request("metadata", { path });
  }

  /** Bytes the lasting cache holds, for a reload or another tab to read instead of the network. */
  cacheSize(): Promise<number | null> {
    return this.request("cache-size", {});
  }

  /** Empties the lasting cache; resolves to the bytes freed. */
  clearCache(): Promise<number> {
    return this.request("cache-clear", {});
  }

  /** The last result of the current worker (none after a cancel). */
  exportResult(format: ExportFormat): Promise<Blob> {
    return this.request("export", { format });
  }

  /** Stops whatever runs: its requests reject with CancelledError at once. */
  cancel(): void {
    this.failAll(new CancelledError());
    const stopped = this.post("cancel", {}).then(
      () => true,
      () => false,
    );
    const late = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), CANCEL_GRACE_MS));
    this.settling = Promise.race([stopped, late]).then((inTime) => {
      if (!inTime) this.restart();
    });
  }

  /** Ends the worker and starts a fresh one; what it was doing rejects with CancelledError. */
  private restart(): void {
    this.worker.terminate();
    this.failAll(new CancelledError());
    this.start();
  }

  private start(): void {
    this.worker = new Worker(new URL("./engine.worker.ts", import.meta.url), { type: "module", name: "quiver-engine" });
    const worker = this.worker;
    // Only the current worker is heard: an ended one may have queued a message or two.
    worker.onmessage = (event: MessageEvent<WorkerMessage>) => {
      if (this.worker === worker) this.receive(event.data);
    };
    this.worker.onerror = (event) => {
      this.failAll(new Error(`the engine worker failed: ${event.message || "could not start"}`));
    };
    this.started = false;
    this.ready = this.post("init", this.options);
    this.ready.then(
      () => {
        if (this.worker === worker) this.started = true;
      },
      // Whoever awaits ready sees a failure; this only keeps it from counting as unhandled.
      () => {},
    );
    // Requests run in order in the worker, so these apply before anything sent later. They
    // were accepted by the previous worker; a failure here shows in the next query's error.
    for (const [key, value] of this.settings) this.post("set", { key, value }).catch(() => {});
    if (this.credentials) this.post("credentials", this.credentials).catch(() => {});
    for (const file of this.files.values()) this.post("open-file", { file }).catch(() => {});
  }

  /** Sends a request once a cancel in progress has settled. */
  private async request<K extends RequestType>(
    type: K,
    args: Requests[K]["args"],
    onProgress?: (progress: Progress) => void,
  ): Promise<Requests[K]["reply"]> {
    await this.settling;
    return this.post(type, args, onProgress);
  }

  private post<K extends RequestType>(
    type: K,
    args: Requests[K]["args"],
    onProgress?: (progress: Progress) => void,
  ): Promise<Requests[K]["reply"]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, onProgress });
      this.worker.postMessage({ ...args, id, type });
    });
  }

  private receive(message: WorkerMessage): void {
    if (message.type === "fatal") {
      // The module aborted and answers nothing more: its requests fail with the cause, and
      // the next request goes to a fresh worker (cold caches, the same settings and files).
      // One that never started is not started again: its error answers every request.
      if (!this.started) {
        this.failAll(new Error(message.message));
        return;
      }
      this.worker.terminate();
      this.failAll(new Error(`${message.message} (a new engine was started; its caches are cold)`));
      this.start();
      return;
    }
    const pending = this.pending.get(message.id);
    if (!pending) return;
    if (message.type === "progress") {
      pending.onProgress?.(message.progress);
      return;
    }
    this.pending.delete(message.id);
    if (message.type === "reply") pending.resolve(message.value);
    else pending.reject(new Error(message.message));
  }

  private failAll(error: Error): void {
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const request of pending) request.reject(error);
  }
}
