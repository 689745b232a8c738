// A page call that may never settle (a hung wasm module, a lost worker) fails with a message
// instead of hanging the run; shared by browser.test.mjs and benches/browser/run.mjs.

/** `promise`, or a rejection naming `what` after `ms` milliseconds. */
export function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms / 1000} s`)), ms);
    }),
  ]);
}
