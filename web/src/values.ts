// Reading Arrow values for display: text for the grid, numbers for the chart. Arrow JS gives
// dates and timestamps as epoch milliseconds, 64-bit integers as bigint and decimals as
// unscaled big numbers, so each column gets a reader chosen once from its type.

import { DataType, DateUnit, type Field } from "apache-arrow";

export function isNumeric(type: DataType): boolean {
  return DataType.isInt(type) || DataType.isFloat(type) || DataType.isDecimal(type);
}

export function isTemporal(type: DataType): boolean {
  return DataType.isDate(type) || DataType.isTimestamp(type);
}

/** Turns a column's non-null values into text. */
export function textReader(field: Field): (value: unknown) => string {
  const type = field.type;
  if (DataType.isDecimal(type)) return (value) => scaleDecimal(String(value), type.scale);
  if (DataType.isFloat(type)) return (value) => formatFloat(value as number);
  if (DataType.isDate(type)) {
    return type.unit === DateUnit.DAY
      ? (value) => new Date(value as number).toISOString().slice(0, 10)
      : (value) => formatTimestamp(value as number);
  }
  if (DataType.isTimestamp(type)) return (value) => formatTimestamp(value as number);
  if (DataType.isBinary(type) || DataType.isFixedSizeBinary(type) || DataType.isLargeBinary(type)) {
    return (value) => formatBinary(value as Uint8Array);
  }
  return (value) => (typeof value === "object" && value !== null ? JSON.stringify(value, bigintAsText) : String(value));
}

/** Turns a column's values into numbers for a chart axis (NaN when there is none). */
export function numberReader(field: Field): (value: unknown) => number {
  const type = field.type;
  if (DataType.isDecimal(type)) {
    return (value) => (value == null ? NaN : Number(scaleDecimal(String(value), type.scale)));
  }
  return (value) => (value == null ? NaN : Number(value));
}

/** "12345" with scale 2 is "123.45". */
export function scaleDecimal(unscaled: string, scale: number): string {
  if (scale <= 0) return unscaled + "0".repeat(-scale);
  const negative = unscaled.startsWith("-");
  const digits = (negative ? unscaled.slice(1) : unscaled).padStart(scale + 1, "0");
  const point = digits.length - scale;
  return `${negative ? "-" : ""}${digits.slice(0, point)}.${digits.slice(point)}`;
}

function formatFloat(value: number): string {
  // 12 significant digits hide binary noise such as 0.30000000000000004.
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(12)));
}

function formatTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").replace(/(\.000)?Z$/, "");
}

function formatBinary(bytes: Uint8Array): string {
  const shown = Array.from(bytes.subarray(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
  return bytes.length > 16 ? `0x${shown}… (${bytes.length} bytes)` : `0x${shown}`;
}

function bigintAsText(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}
