// The messages between the page (engine.ts) and the engine worker (engine.worker.ts).
// Every request carries an id; the worker answers it with one "reply" or one "error", and
// sends "progress" for it while a query runs.

import type { FileMetadata, Profile, Progress } from "./quiver-wasm";

export type Build = "threads" | "single";

export interface EngineInfo {
  threads: number;
  threaded: boolean;
  build: Build;
  crossOriginIsolated: boolean;
}

export interface StartOptions {
  /** Resolves wasm/<build>/quiver_wasm.js: the page's base URL, not the worker's. */
  baseUrl: string;
  /** ?threads=N on the page; null means navigator.hardwareConcurrency. */
  threads: number | null;
  /** ?single=1 on the page. */
  forceSingle: boolean;
}

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export type ExportFormat = "csv" | "parquet" | "arrow";

export interface QueryReply {
  /** Arrow IPC stream, transferred rather than copied. */
  ipc: ArrayBuffer;
  rows: number;
  columns: string[];
  /** QueryResult.json() text, when the request asked for values. */
  json: string | null;
  profile: Profile;
}

/** What each request type sends and what its reply holds. */
export interface Requests {
  init: { args: StartOptions; reply: EngineInfo };
  query: { args: { sql: string; values: boolean }; reply: QueryReply };
  set: { args: { key: string; value: string }; reply: null };
  credentials: { args: Credentials; reply: null };
  "forget-credentials": { args: Record<string, never>; reply: null };
  metadata: { args: { path: string }; reply: FileMetadata[] };
  /** A file dropped on the page or picked from disk, readable by its name from now on. */
  "open-file": { args: { file: File }; reply: string };
  /** Answered out of turn: stops the running query, and replies once it has stopped. */
  cancel: { args: Record<string, never>; reply: null };
  /** Bytes the lasting cache holds (the origin private file system, shared by the tabs). */
  "cache-size": { args: Record<string, never>; reply: number | null };
  /** Empties it; the reply is the bytes freed. */
  "cache-clear": { args: Record<string, never>; reply: number };
  /** The last result of this worker, as a file. */
  export: { args: { format: ExportFormat }; reply: Blob };
}

export type RequestType = keyof Requests;

export type Request = {
  [K in RequestType]: { id: number; type: K } & Requests[K]["args"];
}[RequestType];

export type WorkerMessage =
  | { id: number; type: "reply"; value: unknown }
  | { id: number; type: "error"; message: string }
  | { id: number; type: "progress"; progress: Progress }
  // The module aborted (a panic is a trap in wasm): nothing more will be answered.
  | { id: 0; type: "fatal"; message: string };
