// The page's side of the engine worker: requests as Promises, progress callbacks, and
// cancel, which ends the worker (a running wasm query cannot be interrupted) and starts a
// fresh one with the same settings and, if the page still holds them, the same keys.

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

  metadata(path: string): Promise<FileMetadata[]> {
    return this.request("metadata", { path });
  }

  /** The last result of the current worker (none after a cancel). */
  exportResult(format: ExportFormat): Promise<Blob> {
    return this.request("export", { format });
  }

  /** Stops whatever runs: its requests reject with CancelledError. */
  cancel(): void {
    this.worker.terminate();
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const request of pending) request.reject(new CancelledError());
    this.start();
  }

  private start(): void {
    this.worker = new Worker(new URL("./engine.worker.ts", import.meta.url), { type: "module", name: "quiver-engine" });
    this.worker.onmessage = (event: MessageEvent<WorkerMessage>) => this.receive(event.data);
    this.worker.onerror = (event) => {
      this.failAll(new Error(`the engine worker failed: ${event.message || "could not start"}`));
    };
    this.ready = this.request("init", this.options);
    // Whoever awaits ready sees a failure; this only keeps it from counting as unhandled.
    this.ready.catch(() => {});
    // Requests run in order in the worker, so these apply before anything sent later. They
    // were accepted by the previous worker; a failure here shows in the next query's error.
    for (const [key, value] of this.settings) this.request("set", { key, value }).catch(() => {});
    if (this.credentials) this.request("credentials", this.credentials).catch(() => {});
  }

  private request<K extends RequestType>(
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
