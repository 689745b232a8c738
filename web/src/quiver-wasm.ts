// The wasm module's API and the JSON it returns, as docs/browser.md defines them.
// Types only: the module itself is loaded at run time by the engine worker.

export interface QuiverWasm {
  default(): Promise<unknown>;
  initThreadPool?(threads: number): Promise<void>; // the threads build only
  Engine: new () => Engine;
}

export interface Engine {
  readonly threads: number;
  readonly threaded: boolean;
  set(key: string, value: string): void;
  setCredentials(accessKeyId: string, secretAccessKey: string, sessionToken?: string): void;
  forgetCredentials(): void;
  /** Makes a file the page holds a table by its name; returns the name. */
  openFile(file: File): string;
  query(sql: string): Promise<QueryResult>;
  /** Stops the running query where it next waits; its promise rejects with "cancelled". */
  cancel(): void;
  progress(): string;
  metadata(path: string): Promise<string>;
  /** Bytes the lasting cache (the origin private file system) holds, once queued writes
   * end; null where the browser has none. */
  cacheSize(): Promise<number | null>;
  /** Empties the lasting cache; resolves to the bytes freed. */
  clearCache(): Promise<number>;
}

export interface QueryResult {
  readonly rows: number;
  ipc(): Uint8Array;
  csv(): string;
  json(): string;
  columns(): string;
  parquet(): Uint8Array;
  profile(): string;
  free(): void;
}

/** A query's counters (`MetricsSnapshot` in crates/quiver-core/src/metrics.rs; a Rust test
 * checks that these names match its JSON). */
export interface Metrics {
  rows_out: number;
  files: number;
  files_pruned: number;
  files_index_pruned: number;
  manifests: number;
  manifests_pruned: number;
  row_groups: number;
  row_groups_pruned: number;
  buckets_total: number;
  buckets_done: number;
  requests: number;
  footer_requests: number;
  unplanned_requests: number;
  hedged_requests: number;
  abandoned_requests: number;
  bytes_read: number;
  bytes_planned: number;
  footer_cache_hits: number;
  cache_hit_bytes: number;
  disk_cache_hits: number;
  disk_cache_hit_bytes: number;
  phases: { name: string; ms: number }[];
}

/** The running query's counters so far. */
export type Progress = Metrics;

export interface Span {
  kind: "footer" | "data" | "compute";
  lane: string;
  start_ms: number;
  end_ms: number;
  bytes: number;
}

/** What a finished query did: its counters, its rows and the timeline of requests. */
export interface Profile extends Metrics {
  elapsed_ms: number;
  rows: number;
  spans: Span[];
  /** Where the query ran and why, with both estimates (set with quiver.function_url). */
  place: string | null;
  /** The coordinator's account, when Lambda workers answered. */
  lambda: LambdaMetrics | null;
}

export interface LambdaMetrics {
  elapsed_ms: number;
  /** "cost: … GETs … $…", as `quiver --profile` prints it. */
  cost: string;
  workers: { invocations: number; gb_seconds: number; buckets: number; rows: number };
}

export interface ColumnMetadata {
  name: string;
  type: string;
  nullable: boolean;
  compression: string;
  compressed_bytes: number;
  uncompressed_bytes: number;
}

export interface FileMetadata {
  path: string;
  size: number;
  rows: number;
  row_groups: number;
  created_by: string | null;
  columns: ColumnMetadata[];
  key_value: Record<string, string>;
}
