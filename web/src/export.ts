// Export buttons: the worker writes the last result as CSV, Parquet or Arrow IPC, and the
// page hands the file to the browser as a download.

import type { EngineClient } from "./engine";
import type { ExportFormat } from "./protocol";

const FILE_NAMES: Record<ExportFormat, string> = {
  csv: "quiver-result.csv",
  parquet: "quiver-result.parquet",
  arrow: "quiver-result.arrow",
};

export class ResultExports {
  private readonly buttons: [ExportFormat, HTMLButtonElement][];
  private enabled = false;

  constructor(engine: EngineClient, onError: (error: unknown) => void) {
    this.buttons = (Object.keys(FILE_NAMES) as ExportFormat[]).map((format) => [
      format,
      document.getElementById(`export-${format}`) as HTMLButtonElement,
    ]);
    for (const [format, button] of this.buttons) {
      button.addEventListener("click", async () => {
        button.disabled = true;
        try {
          download(await engine.exportResult(format), FILE_NAMES[format]);
        } catch (error) {
          onError(error);
        } finally {
          button.disabled = !this.enabled;
        }
      });
    }
    this.enable(false);
  }

  /** Exports need a result in the current worker: none before a query or after a cancel. */
  enable(on: boolean): void {
    this.enabled = on;
    for (const [, button] of this.buttons) button.disabled = !on;
  }
}

function download(blob: Blob, fileName: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = fileName;
  document.body.append(link);
  link.click();
  link.remove();
  // The download has started from the URL by now; revoking later frees the bytes.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
