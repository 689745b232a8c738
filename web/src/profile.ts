// The query profile as a picture: a summary line, then a waterfall with one lane per bucket
// or footer and one bar per request or computation, placed by when it ran.

import type { Profile, Span } from "./quiver-wasm";
import { element, svgElement, svgTitle } from "./dom";
import { formatBytes, formatMs, plural } from "./format";
import { linearScale, ticks } from "./scale";

const KIND_COLORS: Record<Span["kind"], string> = { footer: "#f2a541", data: "#4e79a7", compute: "#59a14f" };
/** Lanes drawn at most: past this the picture is a smear and the SVG slows the page. */
const MAX_LANES = 400;
const WIDTH = 1100;
const LABEL_WIDTH = 260;
/** Room for the last time label, centred on the right edge. */
const RIGHT_MARGIN = 30;
const AXIS_HEIGHT = 22;
const LANE_HEIGHT = 16;
const BAR_HEIGHT = 11;
/** Characters of a lane's name shown in its label; the tooltip has all of it. */
const LABEL_CHARS = 36;

export function showProfile(root: HTMLElement, profile: Profile): void {
  root.replaceChildren(...placed(profile), summary(profile), legend(), waterfall(profile));
}

/** Where the query ran (with a function URL set), and what Lambda's workers spent. */
function placed(p: Profile): HTMLElement[] {
  if (!p.place) return [];
  const lines = [element("p", "profile-place", p.place)];
  if (p.lambda) {
    const w = p.lambda.workers;
    lines.push(element("p", "profile-place",
      `lambda: ${plural(w.invocations, "worker")}, ${w.gb_seconds.toFixed(2)} GB-seconds, ` +
        `${formatMs(p.lambda.elapsed_ms)} at the coordinator; ${p.lambda.cost}`));
  }
  return lines;
}

export function clearProfile(root: HTMLElement, message: string): void {
  root.replaceChildren(element("p", "muted", message));
}

function summary(p: Profile): HTMLElement {
  const phases = p.phases.map((phase) => `${phase.name} ${formatMs(phase.ms)}`).join(", ");
  const parts = [
    `${plural(p.requests, "request")} (${p.footer_requests} for footers)`,
    `${formatBytes(p.bytes_read)} read of ${formatBytes(p.bytes_planned)} planned` +
      fromCaches(p),
    `row groups: ${p.row_groups} read, ${p.row_groups_pruned} pruned`,
    `files: ${p.files} read, ${p.files_pruned} pruned` +
      (p.files_index_pruned ? `, ${p.files_index_pruned} by the index` : ""),
    ...(p.manifests || p.manifests_pruned
      ? [`manifests: ${p.manifests} read, ${p.manifests_pruned} pruned`]
      : []),
    plural(p.buckets_total, "bucket"),
    `${formatMs(p.elapsed_ms)} in all` + (phases ? `: ${phases}` : ""),
  ];
  return element("p", "profile-summary", parts.join(" · "));
}

/** What the caches served instead of the network: memory, and what earlier pages kept. */
function fromCaches(p: Profile): string {
  const parts = [];
  if (p.cache_hit_bytes) parts.push(`${formatBytes(p.cache_hit_bytes)} from memory`);
  if (p.disk_cache_hit_bytes) parts.push(`${formatBytes(p.disk_cache_hit_bytes)} kept by an earlier page`);
  return parts.length ? ` (${parts.join(", ")})` : "";
}

function legend(): HTMLElement {
  const list = element("div", "chart-legend");
  for (const [kind, color] of Object.entries(KIND_COLORS)) {
    const item = element("span", "legend-item", kind);
    item.style.setProperty("--swatch", color);
    list.append(item);
  }
  return list;
}

/** Lanes in the order they first start. */
function lanesOf(spans: Span[]): string[] {
  const firstStart = new Map<string, number>();
  for (const span of spans) firstStart.set(span.lane, Math.min(firstStart.get(span.lane) ?? Infinity, span.start_ms));
  return [...firstStart.keys()].sort((a, b) => firstStart.get(a)! - firstStart.get(b)!);
}

function waterfall(profile: Profile): Element {
  const spans = profile.spans;
  if (spans.length === 0) return element("p", "muted", "No requests or computations: this query read no Parquet file.");
  const lanes = lanesOf(spans);
  const drawn = lanes.slice(0, MAX_LANES);
  const laneIndex = new Map(drawn.map((lane, i) => [lane, i]));
  const end = spans.reduce((latest, span) => Math.max(latest, span.end_ms), profile.elapsed_ms);
  const x = linearScale([0, end || 1], LABEL_WIDTH, WIDTH - RIGHT_MARGIN);
  const height = AXIS_HEIGHT + drawn.length * LANE_HEIGHT + 4;
  const svg = svgElement("svg", { viewBox: `0 0 ${WIDTH} ${height}`, class: "waterfall", role: "img" });

  for (const ms of ticks(x.domain)) {
    const at = x.at(ms);
    svg.append(svgElement("line", { x1: at, x2: at, y1: AXIS_HEIGHT - 4, y2: height, class: "grid-line" }));
    const label = { x: at, y: AXIS_HEIGHT - 8, class: "tick", "text-anchor": "middle" };
    svg.append(svgElement("text", label, `${Number(ms.toPrecision(6))} ms`));
  }
  drawn.forEach((lane, i) => {
    const label = lane.length > LABEL_CHARS ? `…${lane.slice(-(LABEL_CHARS - 1))}` : lane;
    const text = svgElement("text", { x: 4, y: AXIS_HEIGHT + i * LANE_HEIGHT + 11, class: "lane-label" }, label);
    text.append(svgTitle(lane));
    svg.append(text);
  });
  for (const span of spans) {
    const lane = laneIndex.get(span.lane);
    if (lane === undefined) continue;
    const bar = svgElement("rect", {
      x: x.at(span.start_ms),
      y: AXIS_HEIGHT + lane * LANE_HEIGHT + (LANE_HEIGHT - BAR_HEIGHT) / 2,
      width: Math.max(1, x.at(span.end_ms) - x.at(span.start_ms)),
      height: BAR_HEIGHT,
      fill: KIND_COLORS[span.kind] ?? "#999",
      class: `span span-${span.kind}`,
    });
    bar.append(svgTitle(spanTitle(span)));
    svg.append(bar);
  }
  if (lanes.length <= MAX_LANES) return svg;
  const box = element("div", "");
  box.append(svg, element("p", "muted", `${lanes.length - MAX_LANES} more lanes not drawn.`));
  return box;
}

function spanTitle(span: Span): string {
  const duration = formatMs(span.end_ms - span.start_ms);
  const bytes = span.bytes ? `${formatBytes(span.bytes)} in ` : "";
  const when = `${span.start_ms.toFixed(1)}–${span.end_ms.toFixed(1)} ms`;
  return `${span.kind} · ${span.lane}\n${bytes}${duration} (${when})`;
}
