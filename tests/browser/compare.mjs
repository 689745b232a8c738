// Compare a result from the page with DuckDB's, by the rules of tests/tpch/compare.py.
//
// A cell is null, a number, or a string (decimals, dates and timestamps come as strings from
// QueryResult.json(), and from fixtures.py's DuckDB results). Cells that both read as numbers
// match within a relative 1e-6, or within one unit in the last place of the less precise one
// when it has 4 or more decimals and the other has more (DataFusion gives avg(decimal(15,2))
// as decimal(19,6), truncated; DuckDB gives a double). Other strings match exactly; null
// matches "". Rows must match in order, or as sorted multisets (ties in ORDER BY).

const REL_TOL = 1e-6;
const ABS_TOL = 1e-9;
const MIN_SCALE_FOR_ULP = 4;
const NUMBER = /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/;

/** A cell as null, a number or a string. */
export function normalize(cell) {
  if (cell === null || cell === undefined || cell === '') return null;
  if (typeof cell === 'boolean') return String(cell);
  if (typeof cell === 'number') return cell;
  if (typeof cell === 'bigint') return Number(cell);
  const text = String(cell);
  return NUMBER.test(text) ? Number(text) : text;
}

/** How many digits a number was written with after the point (null if not known). */
export function decimals(cell) {
  if (typeof cell === 'number' && Number.isInteger(cell)) return null;
  const text = String(cell);
  if (/e/i.test(text) || !text.includes('.')) return null;
  return text.split('.', 2)[1].trim().length;
}

export function cellsEqual(a, b) {
  const x = normalize(a);
  const y = normalize(b);
  if (typeof x === 'number' && typeof y === 'number') {
    let tol = Math.max(REL_TOL * Math.max(Math.abs(x), Math.abs(y)), ABS_TOL);
    const da = decimals(a);
    const db = decimals(b);
    if (da !== null && db !== null && da !== db && Math.min(da, db) >= MIN_SCALE_FOR_ULP) {
      tol = Math.max(tol, 10 ** -Math.min(da, db));
    }
    return Math.abs(x - y) <= tol;
  }
  return x === y;
}

const show = (value) => JSON.stringify(value);

/** null when equal in order, else a message naming the first differing row and cell. */
export function firstDifference(expected, actual) {
  if (expected.length !== actual.length) {
    return `row count: expected ${expected.length}, got ${actual.length}`;
  }
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i];
    const a = actual[i];
    if (e.length !== a.length) return `row ${i}: column count: expected ${e.length}, got ${a.length}`;
    for (let j = 0; j < e.length; j++) {
      if (!cellsEqual(e[j], a[j])) {
        return `row ${i}, column ${j}: expected ${show(e[j])}, got ${show(a[j])}\n`
          + `  expected row: ${show(e)}\n  actual row:   ${show(a)}`;
      }
    }
  }
  return null;
}

function sortKey(cell) {
  const v = normalize(cell);
  if (v === null) return [0, 0, ''];
  return typeof v === 'number' ? [1, v, ''] : [2, 0, v];
}

function compareRows(r, s) {
  for (let i = 0; i < Math.min(r.length, s.length); i++) {
    const a = sortKey(r[i]);
    const b = sortKey(s[i]);
    for (let k = 0; k < 3; k++) {
      if (a[k] < b[k]) return -1;
      if (a[k] > b[k]) return 1;
    }
  }
  return r.length - s.length;
}

/**
 * null when the results match in order, or as sorted multisets (ties in ORDER BY);
 * else a message about the in-order comparison.
 */
export function difference(expected, actual) {
  const message = firstDifference(expected, actual);
  if (message === null) return null;
  if (expected.length === actual.length
      && firstDifference([...expected].sort(compareRows), [...actual].sort(compareRows)) === null) {
    return null;
  }
  return message;
}
