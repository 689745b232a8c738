// The page's build: `vite build web` (root web/, output web/dist). The wasm builds live in
// public/wasm/ and the engine worker loads them at run time, so Vite copies them as they are
// instead of bundling them.
import { defineConfig } from "vite";

// Cross-origin isolation gives the page SharedArrayBuffer, which the threads build needs.
const isolationHeaders = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
};

export default defineConfig({
  base: "./",
  build: { outDir: "dist", emptyOutDir: true, target: "esnext" },
  worker: { format: "es" },
  server: { headers: isolationHeaders },
  preview: { headers: isolationHeaders },
});
