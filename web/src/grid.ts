// The results grid. Only the rows in view exist in the DOM (plus a few either side); each
// frame they are repositioned and refilled straight from the Arrow table, so 100k rows
// scroll as smoothly as ten.

import type { Table, Vector } from "apache-arrow";
import { element } from "./dom";
import { isNumeric, textReader } from "./values";

/** Fixed, so that a row's position is its index times this (given to CSS as --row-height). */
const ROW_HEIGHT = 26;
/** Rows drawn beyond each edge of the view, so a fast scroll does not show blanks. */
const OVERSCAN = 10;
/** Rows measured to size the columns: enough to be representative, cheap on 100k rows. */
const ROWS_MEASURED = 200;
/** 13px monospace is about 7.8px a character; cells have 10px padding each side. */
const CHAR_WIDTH = 8;
const CELL_PADDING = 24;
const MIN_COLUMN_WIDTH = 60;
const MIN_INDEX_WIDTH = 40;
const MAX_COLUMN_WIDTH = 360;

interface Column {
  vector: Vector;
  text: (value: unknown) => string;
  numeric: boolean;
}

export class ResultGrid {
  private columns: Column[] = [];
  private rowCount = 0;
  private body: HTMLElement | null = null;
  private rows: HTMLElement[] = [];
  private frameRequested = false;

  constructor(private readonly root: HTMLElement) {
    root.style.setProperty("--row-height", `${ROW_HEIGHT}px`);
    root.setAttribute("role", "grid");
    root.addEventListener("scroll", () => this.requestRender(), { passive: true });
    // Also covers the grid becoming visible when its tab is chosen.
    new ResizeObserver(() => this.requestRender()).observe(root);
  }

  show(table: Table): void {
    this.rowCount = table.numRows;
    this.columns = table.schema.fields.map((field, index) => ({
      vector: table.getChildAt(index)!,
      text: textReader(field),
      numeric: isNumeric(field.type),
    }));
    const names = table.schema.fields.map((field) => field.name);
    const widths = [this.indexWidth(), ...this.columns.map((column, c) => this.columnWidth(names[c], column))];
    this.root.style.setProperty("--grid-columns", widths.map((w) => `${w}px`).join(" "));
    this.root.style.setProperty("--grid-width", `${widths.reduce((a, b) => a + b, 0)}px`);

    this.root.setAttribute("aria-rowcount", String(this.rowCount + 1));
    const header = this.header(table);
    this.body = element("div", "grid-body");
    this.body.style.height = `${this.rowCount * ROW_HEIGHT}px`;
    if (this.rowCount === 0) this.body.append(element("div", "grid-empty", "No rows"));
    this.rows = [];
    this.root.replaceChildren(header, this.body);
    this.root.scrollTo(0, 0);
    this.render();
  }

  // ARIA roles: a virtual grid is still a grid of rows to assistive tools (and to tests).
  private header(table: Table): HTMLElement {
    const header = withRole(element("div", "grid-header"), "row");
    header.append(withRole(element("div", "grid-cell grid-index", "#"), "columnheader"));
    table.schema.fields.forEach((field, c) => {
      const className = `grid-cell${this.columns[c].numeric ? " numeric" : ""}`;
      const cell = withRole(element("div", className, field.name), "columnheader");
      cell.title = `${field.name}: ${field.type}`;
      header.append(cell);
    });
    return header;
  }

  /** Empties the grid, with a line saying why. */
  clear(message: string): void {
    this.root.removeAttribute("aria-rowcount");
    this.columns = [];
    this.rowCount = 0;
    this.body = null;
    this.rows = [];
    this.root.replaceChildren(element("div", "grid-empty", message));
  }

  private requestRender(): void {
    if (this.frameRequested || !this.body) return;
    this.frameRequested = true;
    requestAnimationFrame(() => {
      this.frameRequested = false;
      this.render();
    });
  }

  private render(): void {
    if (!this.body || this.rowCount === 0) return;
    const top = Math.max(0, this.root.scrollTop - this.body.offsetTop);
    // A hidden grid has no height yet: draw a screenful so it is ready when shown.
    const viewHeight = this.root.clientHeight || 800;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(this.rowCount, Math.ceil((top + viewHeight) / ROW_HEIGHT) + OVERSCAN);
    this.ensureRows(last - first);
    this.rows.forEach((row, i) => {
      const index = first + i;
      row.hidden = index >= last;
      if (!row.hidden) this.fillRow(row, index);
    });
  }

  private ensureRows(count: number): void {
    while (this.rows.length < count) {
      const row = withRole(element("div", "grid-row"), "row");
      row.append(withRole(element("div", "grid-cell grid-index"), "rowheader"));
      for (const column of this.columns) {
        row.append(withRole(element("div", `grid-cell${column.numeric ? " numeric" : ""}`), "gridcell"));
      }
      this.rows.push(row);
      this.body!.append(row);
    }
  }

  private fillRow(row: HTMLElement, index: number): void {
    row.style.transform = `translateY(${index * ROW_HEIGHT}px)`;
    row.classList.toggle("odd", index % 2 === 1);
    row.setAttribute("aria-rowindex", String(index + 2)); // the header is row 1
    const cells = row.children;
    cells[0].textContent = String(index + 1);
    this.columns.forEach((column, c) => {
      const value = column.vector.get(index);
      const cell = cells[c + 1];
      cell.textContent = value == null ? "NULL" : column.text(value);
      cell.classList.toggle("null", value == null);
    });
  }

  private indexWidth(): number {
    return Math.max(MIN_INDEX_WIDTH, String(this.rowCount).length * CHAR_WIDTH + CELL_PADDING);
  }

  private columnWidth(name: string, column: Column): number {
    // Later rows may be wider than the measured ones (longer numbers): leave them a little room.
    let chars = name.length + (column.numeric ? 2 : 0);
    const measured = Math.min(this.rowCount, ROWS_MEASURED);
    for (let i = 0; i < measured; i++) {
      const value = column.vector.get(i);
      chars = Math.max(chars, (value == null ? 4 : column.text(value).length) + (column.numeric ? 2 : 0));
    }
    return Math.round(Math.min(MAX_COLUMN_WIDTH, Math.max(MIN_COLUMN_WIDTH, chars * CHAR_WIDTH + CELL_PADDING)));
  }
}

function withRole(node: HTMLElement, role: string): HTMLElement {
  node.setAttribute("role", role);
  return node;
}
