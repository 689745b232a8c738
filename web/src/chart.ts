// The chart of a result, in SVG: a line per series when x is a number or a date, grouped
// bars otherwise. Large results are sampled so that the picture stays cheap to draw.

import type { Field, Table } from "apache-arrow";
import { element, svgElement, svgTitle } from "./dom";
import { extent, linearScale, niceDomain, ticks, type Scale } from "./scale";
import { isNumeric, isTemporal, numberReader, textReader } from "./values";

/** Rows drawn on a line chart at most: more points than pixels adds nothing. */
const MAX_POINTS = 2000;
/** Bars drawn at most: beyond this labels no longer fit. */
const MAX_CATEGORIES = 60;
const MAX_SERIES = 10;
/** Tableau 10: distinct at a glance, calm on a light page. */
const COLORS = [
  "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
];
const WIDTH = 1000;
const HEIGHT = 380;
const MARGIN = { left: 70, right: 16, top: 16, bottom: 60 };
const NO_SERIES = "";

interface Point {
  x: number;
  y: number;
}

export class ResultChart {
  private table: Table | null = null;
  private readonly xSelect = document.createElement("select");
  private readonly ySelect = document.createElement("select");
  private readonly seriesSelect = document.createElement("select");
  private readonly plot = element("div", "chart-plot");
  private readonly note = element("div", "chart-note");

  constructor(root: HTMLElement) {
    const controls = element("div", "chart-controls");
    for (const [label, select, id] of [
      ["x", this.xSelect, "chart-x"],
      ["y", this.ySelect, "chart-y"],
      ["series", this.seriesSelect, "chart-series"],
    ] as const) {
      select.id = id;
      select.addEventListener("change", () => this.draw());
      const wrapper = element("label", "", `${label} `);
      wrapper.append(select);
      controls.append(wrapper);
    }
    root.replaceChildren(controls, this.plot, this.note);
    this.note.textContent = "Run a query to chart its result.";
  }

  show(table: Table): void {
    this.table = table;
    const fields = table.schema.fields;
    const numeric = fields.filter((field) => isNumeric(field.type));
    const categorical = fields.find((field) => !isNumeric(field.type));
    const x = categorical ?? fields[0];
    const y = numeric.find((field) => field !== x) ?? numeric[0];
    fillSelect(this.xSelect, fields, x?.name);
    fillSelect(this.ySelect, numeric, y?.name);
    fillSelect(this.seriesSelect, fields, NO_SERIES, "(none)");
    this.draw();
  }

  private draw(): void {
    const table = this.table;
    const fields = table?.schema.fields ?? [];
    const x = fields.find((field) => field.name === this.xSelect.value);
    const y = fields.find((field) => field.name === this.ySelect.value);
    const series = fields.find((field) => field.name === this.seriesSelect.value);
    if (!table || !x || !y || table.numRows === 0) {
      this.plot.replaceChildren();
      this.note.textContent = !table || table.numRows === 0 ? "No rows to chart." : "No numeric column to chart.";
      return;
    }
    const svg = svgElement("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart-svg", role: "img" });
    const line = isNumeric(x.type) || isTemporal(x.type);
    const notes = line ? drawLines(svg, table, x, y, series) : drawBars(svg, table, x, y, series);
    this.plot.replaceChildren(svg, legend(notes.series));
    this.note.textContent = notes.text;
  }
}

function fillSelect(select: HTMLSelectElement, fields: Field[], chosen: string | undefined, noneLabel?: string): void {
  const options = fields.map((field) => new Option(field.name, field.name));
  if (noneLabel !== undefined) options.unshift(new Option(noneLabel, NO_SERIES));
  select.replaceChildren(...options);
  select.value = chosen ?? "";
}

interface DrawNotes {
  series: string[];
  text: string;
}

/** Values of the series column in first-seen order, capped; rows of other series are skipped. */
function seriesOf(table: Table, series: Field | undefined): { keyAt: (row: number) => string; keys: string[] } {
  if (!series) return { keyAt: () => NO_SERIES, keys: [NO_SERIES] };
  const vector = table.getChild(series.name)!;
  const text = textReader(series);
  const keyAt = (row: number) => {
    const value = vector.get(row);
    return value == null ? "NULL" : text(value);
  };
  const keys: string[] = [];
  for (let row = 0; row < table.numRows && keys.length < MAX_SERIES; row++) {
    const key = keyAt(row);
    if (!keys.includes(key)) keys.push(key);
  }
  return { keyAt, keys };
}

function drawLines(svg: SVGElement, table: Table, x: Field, y: Field, series: Field | undefined): DrawNotes {
  const xs = table.getChild(x.name)!;
  const ys = table.getChild(y.name)!;
  const xNumber = numberReader(x);
  const yNumber = numberReader(y);
  const { keyAt, keys } = seriesOf(table, series);
  const stride = Math.ceil(table.numRows / MAX_POINTS);
  const lines = new Map<string, Point[]>(keys.map((key) => [key, []]));
  for (let row = 0; row < table.numRows; row += stride) {
    const point = { x: xNumber(xs.get(row)), y: yNumber(ys.get(row)) };
    if (Number.isFinite(point.x) && Number.isFinite(point.y)) lines.get(keyAt(row))?.push(point);
  }
  const points = [...lines.values()].flat();
  if (points.length === 0) return { series: [], text: "No numeric values to chart." };
  const xScale = linearScale(extent(points.map((p) => p.x)), MARGIN.left, WIDTH - MARGIN.right);
  const yScale = linearScale(niceDomain(extent(points.map((p) => p.y))), HEIGHT - MARGIN.bottom, MARGIN.top);
  const xLabel = isTemporal(x.type) ? dateLabel(xScale.domain) : numberLabel;
  drawAxes(svg, yScale, x.name, y.name);
  drawXTicks(svg, xScale, xLabel);
  keys.forEach((key, i) => {
    const line = lines.get(key)!.sort((a, b) => a.x - b.x);
    const at = (p: Point) => `${xScale.at(p.x).toFixed(1)},${yScale.at(p.y).toFixed(1)}`;
    const path = line.map((p, j) => `${j ? "L" : "M"}${at(p)}`).join("");
    const shape = svgElement("path", { d: path, fill: "none", stroke: COLORS[i], "stroke-width": 1.5 });
    shape.append(svgTitle(key || y.name));
    svg.append(shape);
  });
  const sampled = stride > 1 ? `every ${stride}th row of ${table.numRows} drawn` : `${points.length} points`;
  return { series: series ? keys : [], text: `Line chart, ${sampled}.` };
}

function drawBars(svg: SVGElement, table: Table, x: Field, y: Field, series: Field | undefined): DrawNotes {
  const xs = table.getChild(x.name)!;
  const ys = table.getChild(y.name)!;
  const xText = textReader(x);
  const yNumber = numberReader(y);
  const { keyAt, keys } = seriesOf(table, series);
  const categories: string[] = [];
  // "category\0series": the sum of its rows, as a bar chart of a GROUP BY of fewer columns.
  const values = new Map<string, number>();
  for (let row = 0; row < table.numRows; row++) {
    const value = xs.get(row);
    const category = value == null ? "NULL" : xText(value);
    if (!categories.includes(category)) {
      if (categories.length === MAX_CATEGORIES) break;
      categories.push(category);
    }
    const cell = `${category}\0${keyAt(row)}`;
    const number = yNumber(ys.get(row));
    if (Number.isFinite(number)) values.set(cell, (values.get(cell) ?? 0) + number);
  }
  const yScale = linearScale(niceDomain(extent([0, ...values.values()])), HEIGHT - MARGIN.bottom, MARGIN.top);
  const band = (WIDTH - MARGIN.left - MARGIN.right) / categories.length;
  const barWidth = (band * 0.8) / keys.length;
  const labelEvery = Math.ceil(categories.length / 20);
  // Labels turn when they would not fit under their bars side by side.
  const longest = Math.max(...categories.map((c) => Math.min(c.length, 14)));
  const turned = longest * 7 > band * labelEvery;
  drawAxes(svg, yScale, x.name, y.name);
  categories.forEach((category, c) => {
    if (c % labelEvery === 0) {
      const at = MARGIN.left + band * (c + 0.5);
      const label = category.length > 14 ? `${category.slice(0, 13)}…` : category;
      const y = HEIGHT - MARGIN.bottom + (turned ? 8 : 16);
      const placement: Record<string, string> = turned
        ? { transform: `rotate(35 ${at} ${y})` }
        : { "text-anchor": "middle" };
      svg.append(svgElement("text", { x: at, y, class: "tick", ...placement }, label));
    }
    keys.forEach((key, s) => {
      const value = values.get(`${category}\0${key}`);
      if (value === undefined) return;
      const top = yScale.at(Math.max(0, value));
      const bar = svgElement("rect", {
        x: MARGIN.left + band * c + band * 0.1 + barWidth * s,
        y: top,
        width: Math.max(1, barWidth - 1),
        height: Math.max(0, Math.abs(yScale.at(value) - yScale.at(0))),
        fill: COLORS[s],
      });
      bar.append(svgTitle(`${category}${key ? ` · ${key}` : ""}: ${value}`));
      svg.append(bar);
    });
  });
  const groups = keys.length > 1 ? "groups of bars" : "bars";
  const capped =
    categories.length === MAX_CATEGORIES
      ? `the first ${MAX_CATEGORIES} values of ${x.name} drawn`
      : `${categories.length} ${groups}`;
  return { series: series ? keys : [], text: `Bar chart, ${capped}.` };
}

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 2 });
function numberLabel(value: number): string {
  return compact.format(value);
}

function dateLabel([low, high]: [number, number]): (value: number) => string {
  const days = (high - low) / 86_400_000;
  return (value) => new Date(value).toISOString().slice(0, days > 2 ? 10 : 16).replace("T", " ");
}

/** The y grid with its labels, the baseline, and both axis names. */
function drawAxes(svg: SVGElement, y: Scale, xName: string, yName: string): void {
  const [left, right, bottom] = [MARGIN.left, WIDTH - MARGIN.right, HEIGHT - MARGIN.bottom];
  for (const value of ticks(y.domain)) {
    const at = y.at(value);
    svg.append(svgElement("line", { x1: left, x2: right, y1: at, y2: at, class: "grid-line" }));
    const label = { x: left - 6, y: at + 4, class: "tick", "text-anchor": "end" };
    svg.append(svgElement("text", label, numberLabel(value)));
  }
  svg.append(svgElement("line", { x1: left, x2: right, y1: bottom, y2: bottom, class: "axis" }));
  const xTitle = { x: (left + right) / 2, y: HEIGHT - 6, class: "axis-name", "text-anchor": "middle" };
  svg.append(svgElement("text", xTitle, xName));
  const turn = `rotate(-90 12 ${MARGIN.top})`;
  const yTitle = { x: 12, y: MARGIN.top, class: "axis-name", transform: turn, "text-anchor": "end" };
  svg.append(svgElement("text", yTitle, yName));
}

function drawXTicks(svg: SVGElement, x: Scale, label: (value: number) => string): void {
  for (const value of ticks(x.domain)) {
    const at = { x: x.at(value), y: HEIGHT - MARGIN.bottom + 16, class: "tick", "text-anchor": "middle" };
    svg.append(svgElement("text", at, label(value)));
  }
}

function legend(keys: string[]): HTMLElement {
  const list = element("div", "chart-legend");
  keys.forEach((key, i) => {
    const item = element("span", "legend-item", key);
    item.style.setProperty("--swatch", COLORS[i]);
    list.append(item);
  });
  return list;
}
