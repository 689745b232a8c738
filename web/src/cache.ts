// The cache panel: what this browser keeps of remote files for the pages after this one (a
// reload, another tab) in its origin private file system, measured as the page starts and
// when the panel opens (not after each query: the engine answers in turn, and the next
// query should not wait for a measurement), and a button that empties it.

import type { EngineClient } from "./engine";
import { formatBytes } from "./format";

export function setUpCachePanel(engine: EngineClient): void {
  const panel = document.getElementById("cache-panel") as HTMLDetailsElement;
  const size = document.getElementById("cache-size")!;
  const clear = document.getElementById("cache-clear") as HTMLButtonElement;
  const show = (text: string) => {
    size.textContent = `· ${text}`;
  };

  const measure = async () => {
    show("measuring…");
    try {
      const bytes = await engine.cacheSize();
      show(bytes === null ? "not available in this browser" : `${formatBytes(bytes)} kept`);
      clear.disabled = bytes === null;
    } catch (error) {
      show(error instanceof Error ? error.message : String(error));
    }
  };

  void engine.ready.then(measure, () => {});
  panel.addEventListener("toggle", () => {
    if (panel.open) void measure();
  });
  clear.addEventListener("click", async () => {
    clear.disabled = true;
    try {
      show(`emptied (${formatBytes(await engine.clearCache())} freed)`);
    } catch (error) {
      show(error instanceof Error ? error.message : String(error));
    } finally {
      clear.disabled = false;
    }
  });
}
