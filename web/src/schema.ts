// The schema view: the footers of the files a path (or glob) names, through metadata(path).

import type { EngineClient } from "./engine";
import type { FileMetadata } from "./quiver-wasm";
import { element } from "./dom";
import { formatBytes, formatCount, plural } from "./format";

/** Files shown at most for a glob: each is a table of columns. */
const MAX_FILES = 100;

export function setUpSchemaView(root: HTMLElement, engine: EngineClient, initialPath: string): void {
  const form = element("form", "schema-form") as HTMLFormElement;
  const input = document.createElement("input");
  input.id = "schema-path";
  input.type = "text";
  input.value = initialPath;
  input.spellcheck = false;
  input.setAttribute("aria-label", "Parquet path or glob");
  const button = element("button", "", "Read footers") as HTMLButtonElement;
  button.id = "schema-load";
  button.type = "submit";
  form.append(input, button);
  const output = element("div", "schema-files");
  output.id = "schema-files";
  root.replaceChildren(form, output);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    output.replaceChildren(element("p", "muted", "Reading footers…"));
    try {
      const files = await engine.metadata(input.value.trim());
      output.replaceChildren(...describeFiles(files));
    } catch (error) {
      output.replaceChildren(element("p", "error-text", error instanceof Error ? error.message : String(error)));
    } finally {
      button.disabled = false;
    }
  });
}

function describeFiles(files: FileMetadata[]): HTMLElement[] {
  if (files.length === 0) return [element("p", "muted", "No files match this path.")];
  const shown = files.slice(0, MAX_FILES).map(describeFile);
  if (files.length > MAX_FILES) shown.push(element("p", "muted", `${files.length - MAX_FILES} more files not shown.`));
  return shown;
}

function describeFile(file: FileMetadata): HTMLElement {
  const section = element("section", "schema-file");
  const facts = [
    formatBytes(file.size),
    plural(file.rows, "row"),
    plural(file.row_groups, "row group"),
    file.created_by ? `created by ${file.created_by}` : "creator unknown",
  ];
  section.append(element("h3", "", file.path), element("p", "muted", facts.join(" · ")), columnTable(file));
  const pairs = Object.entries(file.key_value);
  if (pairs.length > 0) {
    const details = element("details", "key-value");
    details.append(element("summary", "", `Key-value metadata (${pairs.length})`));
    const list = element("dl", "");
    for (const [key, value] of pairs) list.append(element("dt", "", key), element("dd", "", value));
    details.append(list);
    section.append(details);
  }
  return section;
}

function columnTable(file: FileMetadata): HTMLElement {
  const table = element("table", "schema-columns");
  const head = element("tr", "");
  for (const name of ["column", "type", "compression"]) head.append(element("th", "", name));
  head.append(element("th", "numeric", "compressed"), element("th", "numeric", "uncompressed"));
  table.append(head);
  for (const column of file.columns) {
    const row = element("tr", "");
    row.append(
      element("td", "", column.name),
      element("td", "", column.type + (column.nullable ? "" : " not null")),
      element("td", "", column.compression),
      numberCell(column.compressed_bytes),
      numberCell(column.uncompressed_bytes),
    );
    table.append(row);
  }
  return table;
}

function numberCell(bytes: number): HTMLElement {
  const cell = element("td", "numeric", formatBytes(bytes));
  cell.title = `${formatCount(bytes)} bytes`;
  return cell;
}
