// compare.mjs follows tests/tpch/compare.py: the cases that decide a TPC-H result.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { cellsEqual, decimals, difference, normalize } from './compare.mjs';

test('cells: numbers, decimal strings, dates, nulls', () => {
  assert.equal(normalize('3774200.00'), 3774200);
  assert.equal(normalize('1995-03-15'), '1995-03-15');
  assert.equal(normalize(''), null);
  assert.ok(cellsEqual('5320753880.69', 5320753880.69));
  assert.ok(cellsEqual(147790, '147790'));
  assert.ok(cellsEqual(null, ''));
  assert.ok(!cellsEqual('A', 'F'));
  assert.ok(!cellsEqual(1, 2));
  // relative 1e-6
  assert.ok(cellsEqual(1_000_000, 1_000_000.5));
  assert.ok(!cellsEqual(1_000, 1_000.01));
});

test('a truncated decimal matches within its last place', () => {
  // DataFusion: avg(decimal(15,2)) as decimal(19,6), truncated; DuckDB: a double
  assert.equal(decimals('0.049994'), 6);
  assert.equal(decimals(0.04999437984146911), 17);
  assert.equal(decimals(147790), null);
  assert.ok(cellsEqual(0.04999437984146911, '0.049994'));
  assert.ok(!cellsEqual(0.04999437984146911, '0.049990'));
  // fewer than 4 decimals: no such allowance
  assert.ok(!cellsEqual(0.0451, '0.04'));
});

test('rows: in order, or the same multiset when ORDER BY ties', () => {
  const expected = [['a', 1], ['b', 1], ['c', 2]];
  assert.equal(difference(expected, [['a', 1], ['b', 1], ['c', 2]]), null);
  assert.equal(difference(expected, [['b', 1], ['a', 1], ['c', 2]]), null);
  assert.match(difference(expected, [['a', 1], ['b', 1]]), /row count: expected 3, got 2/);
  assert.match(difference(expected, [['a', 1], ['b', 1], ['c', 3]]), /row 2, column 1: expected 2, got 3/);
});
