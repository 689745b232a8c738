// Parquet files from the user's disk, picked with the Open button or dropped anywhere on the
// page. The engine reads them by name with range reads, as it reads any source.

/** Calls `open` with the files the user picks or drops. */
export function setUpFileOpening(button: HTMLButtonElement, picker: HTMLInputElement, open: (files: File[]) => void): void {
  button.addEventListener("click", () => picker.click());
  picker.addEventListener("change", () => {
    const files = [...(picker.files ?? [])];
    picker.value = ""; // picking the same file again (edited since) is a change too
    if (files.length > 0) open(files);
  });
  const carriesFiles = (event: DragEvent) => event.dataTransfer?.types.includes("Files") ?? false;
  document.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault(); // lets the drop happen here rather than the browser opening the file
    document.body.classList.add("dropping");
  });
  document.addEventListener("dragleave", (event) => {
    if (event.relatedTarget === null) document.body.classList.remove("dropping");
  });
  document.addEventListener("drop", (event) => {
    document.body.classList.remove("dropping");
    if (!carriesFiles(event)) return;
    event.preventDefault();
    const files = [...(event.dataTransfer?.files ?? [])];
    if (files.length > 0) open(files);
  });
}

/** A missing file named without a scheme: say how a page gets local files. */
export function withFileHint(message: string): string {
  const missingLocal = /^(?![a-z][a-z0-9+.-]*:\/\/)[^\s:]+: no such file or directory/i.test(message);
  return missingLocal ? `${message} (a page reads local files you open or drop on it)` : message;
}
