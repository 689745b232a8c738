"""Compare two query results cell by cell, whatever engine they came from.

A result is a list of rows; a cell is None, a number, a Decimal, a date or a string (CSV gives
strings). Cells that both read as numbers match within a relative tolerance, or within one
unit in the last place of the less precise one when it has 4 or more decimals and the other has
more (DataFusion gives avg(decimal(15,2)) as decimal(19,6), truncated; DuckDB gives a double).
Dates compare as ISO strings; None matches "" (CSV writes NULL as an empty field); other strings
match exactly.
"""
import datetime
import decimal

REL_TOL = 1e-6
ABS_TOL = 1e-9
MIN_SCALE_FOR_ULP = 4


def normalize(cell):
    """A cell as None, float or str."""
    if cell is None or cell == "":
        return None
    if isinstance(cell, bool):
        return str(cell).lower()
    if isinstance(cell, (int, float, decimal.Decimal)):
        return float(cell)
    if isinstance(cell, (datetime.date, datetime.datetime)):
        return cell.isoformat()
    text = str(cell)
    try:
        return float(text)
    except ValueError:
        return text


def decimals(cell):
    """How many digits a number was written with after the point (None if not known)."""
    text = repr(cell) if isinstance(cell, float) else str(cell)
    if isinstance(cell, (int, bool)) or "e" in text.lower() or "." not in text:
        return None
    return len(text.split(".", 1)[1])


def cells_equal(a, b):
    x, y = normalize(a), normalize(b)
    if isinstance(x, float) and isinstance(y, float):
        tol = max(REL_TOL * max(abs(x), abs(y)), ABS_TOL)
        da, db = decimals(a), decimals(b)
        if da is not None and db is not None and da != db and min(da, db) >= MIN_SCALE_FOR_ULP:
            tol = max(tol, 10.0 ** -min(da, db))
        return abs(x - y) <= tol
    return x == y


def first_difference(expected, actual):
    """None when equal in order, else a message naming the first differing row and cell."""
    if len(expected) != len(actual):
        return f"row count: expected {len(expected)}, got {len(actual)}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        if len(e) != len(a):
            return f"column count: expected {len(e)}, got {len(a)}"
        for j, (x, y) in enumerate(zip(e, a)):
            if not cells_equal(x, y):
                return (f"row {i}, column {j}: expected {x!r}, got {y!r}\n"
                        f"  expected row: {list(e)!r}\n  actual row:   {list(a)!r}")
    return None


def _sort_key(row):
    key = []
    for cell in row:
        v = normalize(cell)
        key.append((0, 0.0, "") if v is None else (1, v, "") if isinstance(v, float) else (2, 0.0, v))
    return key


def difference(expected, actual):
    """None when the results match in order, or as sorted multisets (ties in ORDER BY);
    else a message about the in-order comparison."""
    message = first_difference(expected, actual)
    if message is None:
        return None
    if len(expected) == len(actual) and first_difference(
            sorted(expected, key=_sort_key), sorted(actual, key=_sort_key)) is None:
        return None
    return message
