"""ClickBench for scenario `clickbench`: a `hits` table shaped as ClickBench's (its 105 columns
with their types, from ClickBench's duckdb/create.sql), with plausible distributions, sorted as
the original is (CounterID, EventDate, UserID, EventTime, WatchID), written as one file of 23
row groups and as the same rows in 100 files; and ClickBench's 43 queries
(benches/clickbench/queries.sql), each in every engine's spelling.

The real hits.parquet (14 GB, 100M rows) cannot be fetched here; what the queries need of it is
made: a few counters holding most hits (CounterID 62 the largest, which q36-q42 filter on),
users and phrases in Zipf-like popularity, most SearchPhrase, MobilePhoneModel and AdvEngineID
empty or 0, URLs and titles of which about 1-2% name Google, the hashes q40 and q41 look up,
user 435090932899640449 (q19), and EventTime unique to the microsecond, so that an ORDER BY
EventTime LIMIT has one answer. Columns no query reads are filled with plausible values.
"""
import datetime
import os
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benches import data
from benches.measure import NA

QUERIES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clickbench",
                            "queries.sql")
ROWS = {"quick": 1_000_000, "default": 10_000_000, "full": 30_000_000}
ONE_FILE_ROW_GROUPS = 23
FILES = 100
GENERATOR_VERSION = "1"
SEED = 20130701

# (name, type) in ClickBench's order; TEXT columns are nullable there, the rest NOT NULL.
I16, I32, I64, TEXT = pa.int16(), pa.int32(), pa.int64(), pa.string()
TS, DATE = pa.timestamp("us"), pa.date32()
COLUMNS = [
    ("WatchID", I64), ("JavaEnable", I16), ("Title", TEXT), ("GoodEvent", I16),
    ("EventTime", TS), ("EventDate", DATE), ("CounterID", I32), ("ClientIP", I32),
    ("RegionID", I32), ("UserID", I64), ("CounterClass", I16), ("OS", I16), ("UserAgent", I16),
    ("URL", TEXT), ("Referer", TEXT), ("IsRefresh", I16), ("RefererCategoryID", I16),
    ("RefererRegionID", I32), ("URLCategoryID", I16), ("URLRegionID", I32),
    ("ResolutionWidth", I16), ("ResolutionHeight", I16), ("ResolutionDepth", I16),
    ("FlashMajor", I16), ("FlashMinor", I16), ("FlashMinor2", TEXT), ("NetMajor", I16),
    ("NetMinor", I16), ("UserAgentMajor", I16), ("UserAgentMinor", TEXT),
    ("CookieEnable", I16), ("JavascriptEnable", I16), ("IsMobile", I16), ("MobilePhone", I16),
    ("MobilePhoneModel", TEXT), ("Params", TEXT), ("IPNetworkID", I32),
    ("TraficSourceID", I16), ("SearchEngineID", I16), ("SearchPhrase", TEXT),
    ("AdvEngineID", I16), ("IsArtifical", I16), ("WindowClientWidth", I16),
    ("WindowClientHeight", I16), ("ClientTimeZone", I16), ("ClientEventTime", TS),
    ("SilverlightVersion1", I16), ("SilverlightVersion2", I16), ("SilverlightVersion3", I32),
    ("SilverlightVersion4", I16), ("PageCharset", TEXT), ("CodeVersion", I32), ("IsLink", I16),
    ("IsDownload", I16), ("IsNotBounce", I16), ("FUniqID", I64), ("OriginalURL", TEXT),
    ("HID", I32), ("IsOldCounter", I16), ("IsEvent", I16), ("IsParameter", I16),
    ("DontCountHits", I16), ("WithHash", I16), ("HitColor", TEXT), ("LocalEventTime", TS),
    ("Age", I16), ("Sex", I16), ("Income", I16), ("Interests", I16), ("Robotness", I16),
    ("RemoteIP", I32), ("WindowName", I32), ("OpenerName", I32), ("HistoryLength", I16),
    ("BrowserLanguage", TEXT), ("BrowserCountry", TEXT), ("SocialNetwork", TEXT),
    ("SocialAction", TEXT), ("HTTPError", I16), ("SendTiming", I32), ("DNSTiming", I32),
    ("ConnectTiming", I32), ("ResponseStartTiming", I32), ("ResponseEndTiming", I32),
    ("FetchTiming", I32), ("SocialSourceNetworkID", I16), ("SocialSourcePage", TEXT),
    ("ParamPrice", I64), ("ParamOrderID", TEXT), ("ParamCurrency", TEXT),
    ("ParamCurrencyID", I16), ("OpenstatServiceName", TEXT), ("OpenstatCampaignID", TEXT),
    ("OpenstatAdID", TEXT), ("OpenstatSourceID", TEXT), ("UTMSource", TEXT),
    ("UTMMedium", TEXT), ("UTMCampaign", TEXT), ("UTMContent", TEXT), ("UTMTerm", TEXT),
    ("FromTag", TEXT), ("HasGCLID", I16), ("RefererHash", I64), ("URLHash", I64),
    ("CLID", I32),
]
SCHEMA = pa.schema([pa.field(n, t, nullable=(t == TEXT)) for n, t in COLUMNS])
NAMES = [n for n, _ in COLUMNS]

# Values the queries look up, planted where they find rows.
LOOKED_UP_USER = 435090932899640449     # q19
LOOKED_UP_REFERER_HASH = 3594120000172545465   # q40
LOOKED_UP_URL_HASH = 2868770270353813622       # q41
BIG_COUNTER = 62

WORDS = ("auto car dom kupit prodam moskva video film smotret online besplatno igra remont "
         "kvartira rabota vakansii pogoda novosti sport futbol muzyka skachat torrent foto "
         "kak sdelat recept salat cena otzyvy magazin detskie platya obuv telefon samsung "
         "nokia iphone noutbuk planshet kredit bank ipoteka strahovka tur otdyh more hotel "
         "bilet poezd avia raspisanie karta map yandex mail google poisk").split()
DOMAINS = ["yandex.ru", "mail.ru", "vk.com", "odnoklassniki.ru", "avito.ru", "auto.ru",
           "irr.ru", "livejournal.com", "kinopoisk.ru", "rambler.ru", "lenta.ru", "rbc.ru",
           "google.ru", "google.com", "drive2.ru", "hh.ru", "ozon.ru", "market.yandex.ru"]


def queries():
    """{label: {engine: SQL}} for q00..q42 (ClickBench's numbering)."""
    with open(QUERIES_FILE) as f:
        texts = [line.strip() for line in f if line.strip() and not line.startswith("--")]
    assert len(texts) == 43, f"{QUERIES_FILE} holds {len(texts)} queries, not 43"
    return {f"q{i:02d}": spellings(text) for i, text in enumerate(texts)}


def spellings(text):
    """A query as each engine takes it, as ClickBench's own folder for it writes it: DuckDB
    verbatim; chDB with ClickHouse's `length`; DataFusion with its columns quoted (it folds
    unquoted names to lower case) and `octet_length`; Quiver verbatim, as DuckDB (it resolves
    names ignoring case, and knows `STRLEN`)."""
    quoted = re.sub(r"\b(" + "|".join(sorted(NAMES, key=len, reverse=True)) + r")\b",
                    r'"\1"', text)
    return {
        "duckdb": text,
        "chdb": text.replace("STRLEN(", "length("),
        "datafusion": quoted.replace("STRLEN(", "octet_length("),
        "quiver": text,
        "quiver-fragments": text,
        "*": NA("no spelling for this engine"),
    }


# The columns checked where a LIMIT may keep either of tied groups: the ORDER BY's counts
# (q17 has no ORDER BY: any 10 groups are right, so only its row count is checked).
KEYS = {
    "q08": [1], "q09": [2], "q10": [1], "q11": [2], "q12": [1], "q13": [1], "q14": [2],
    "q15": [1], "q16": [2], "q17": [], "q18": [3], "q21": [2], "q22": [3], "q30": [2],
    "q31": [2], "q32": [2], "q33": [1], "q34": [2], "q35": [4], "q36": [1], "q37": [1],
    "q38": [1], "q39": [5], "q40": [2], "q41": [2],
}


def hits(mode):
    """The folder holding `one/hits.parquet` and `many/hits_NN.parquet` for `mode`."""
    rows = ROWS[mode]
    return data.generate(f"clickbench-{rows}", f"{GENERATOR_VERSION} {rows}",
                         lambda out: _write(rows, out))


def hits_glob(root, layout):
    """The files of `layout` ("one" or "many") under `root` (from `hits`), as a glob."""
    name = "hits.parquet" if layout == "one" else "hits_*.parquet"
    return os.path.join(root, layout, name)


def _write(rows, out):
    rng = np.random.default_rng(SEED)
    world = _World(rng)
    keys = world.sorted_keys(rows)
    os.makedirs(os.path.join(out, "one"))
    os.makedirs(os.path.join(out, "many"))
    one = pq.ParquetWriter(os.path.join(out, "one", "hits.parquet"), SCHEMA,
                           compression="snappy")
    per_group = -(-rows // ONE_FILE_ROW_GROUPS)
    per_file = -(-rows // FILES)
    pending = []  # rows of the one file's next row group
    for start in range(0, rows, per_file):
        end = min(start + per_file, rows)
        table = world.rows(keys, start, end)
        name = f"hits_{start // per_file:02d}.parquet"
        pq.write_table(table, os.path.join(out, "many", name), compression="snappy")
        pending.append(table)
        while sum(t.num_rows for t in pending) >= per_group:
            group = pa.concat_tables(pending)
            one.write_table(group.slice(0, per_group), row_group_size=per_group)
            pending = [group.slice(per_group)]
    if pending and sum(t.num_rows for t in pending):
        one.write_table(pa.concat_tables(pending), row_group_size=per_group)
    one.close()


class _World:
    """The pools rows are drawn from: counters, users, URLs, titles, referers, phrases."""

    def __init__(self, rng):
        self.rng = rng
        self.counters = rng.choice(np.arange(1, 300_000, dtype=np.int32), 8_000, replace=False)
        self.counters[0] = BIG_COUNTER
        users = 2_000_000
        self.user_ids = rng.integers(1, 2**62, users, dtype=np.int64)
        self.user_ids[123] = LOOKED_UP_USER
        self.user = {  # per-user attributes
            "ClientIP": rng.integers(-2**31, 2**31 - 1, users, dtype=np.int32),
            "RegionID": _zipf(rng, 9_000, users, 1.1).astype(np.int32) + 1,
            "OS": rng.integers(0, 60, users).astype(np.int16),
            "UserAgent": rng.integers(0, 120, users).astype(np.int16),
            "resolution": rng.integers(0, 12, users),
            "IsMobile": (rng.random(users) < 0.12).astype(np.int16),
            "MobilePhone": rng.integers(0, 40, users).astype(np.int16),
            "model": np.where(rng.random(users) < 0.08, rng.integers(1, 200, users), 0),
            "Age": rng.integers(0, 6, users).astype(np.int16),
            "Sex": rng.integers(0, 3, users).astype(np.int16),
            "Income": rng.integers(0, 5, users).astype(np.int16),
            "language": rng.integers(0, 6, users),
            "ClientTimeZone": rng.integers(-12, 13, users).astype(np.int16),
        }
        self.models = pa.array([""] + [f"{m} {i}" for i, m in enumerate(
            ["iPad", "iPhone", "GT-I9300", "Lumia", "HTC One", "Galaxy S"] * 34)][:199])
        self.resolutions = np.array([[1366, 768], [1920, 1080], [1280, 1024], [1440, 900],
                                     [1600, 900], [1024, 768], [1280, 800], [1680, 1050],
                                     [360, 640], [768, 1024], [320, 568], [2560, 1440]],
                                    dtype=np.int16)
        self.urls, self.url_hashes = self._pages(400_000, 0.02, "http")
        self.url_hashes[1] = LOOKED_UP_URL_HASH
        self.referers, self.referer_hashes = self._pages(200_000, 0.10, "https")
        self.referer_hashes[2] = LOOKED_UP_REFERER_HASH
        self.titles = pa.array([self._title(i) for i in range(150_000)])
        self.phrases = pa.array([" ".join(rng.choice(WORDS, int(rng.integers(1, 5))))
                                 + f" {i % 97}" for i in range(300_000)])

    def _pages(self, count, google, scheme):
        rng = self.rng
        domains = rng.choice(DOMAINS, count)
        google_rows = rng.random(count) < google
        domains = np.where(google_rows, rng.choice(["www.google.ru", "google.com",
                                                    "news.google.com"], count), domains)
        pages = [f"{scheme}://{d}/{'/'.join(rng.choice(WORDS, 2))}?id={i}&{'&'.join(rng.choice(WORDS, int(rng.integers(0, 4))))}"
                 for i, d in enumerate(domains)]
        return pa.array(pages), rng.integers(-2**62, 2**62, count, dtype=np.int64)

    def _title(self, i):
        words = " ".join(self.rng.choice(WORDS, int(self.rng.integers(2, 9)))).capitalize()
        return words + (" - Google Search" if i % 83 == 0 else f" — {i}")

    def sorted_keys(self, rows):
        """The sort key columns of every row, sorted as ClickBench's hits is."""
        rng = self.rng
        counter = self.counters[_zipf(rng, len(self.counters), rows, 1.35)]
        day = rng.integers(0, 31, rows).astype(np.int32)
        user = _zipf(rng, len(self.user_ids), rows, 1.08)
        micros = rng.integers(0, 86_400_000_000, rows, dtype=np.int64)
        watch = rng.integers(1, 2**63 - 1, rows, dtype=np.int64)
        order = np.lexsort((watch, micros, self.user_ids[user], day, counter))
        return {"counter": counter[order], "day": day[order], "user": user[order],
                "micros": micros[order], "watch": watch[order]}

    def rows(self, keys, start, end):
        """Rows `start..end` of the sorted table."""
        rng, n = self.rng, end - start
        k = {name: values[start:end] for name, values in keys.items()}
        user = k["user"]
        u = {name: values[user] for name, values in self.user.items()}
        date0 = (datetime.date(2013, 7, 1) - datetime.date(1970, 1, 1)).days
        event_us = (date0 + k["day"]).astype(np.int64) * 86_400_000_000 + k["micros"]
        phrase = np.where(rng.random(n) < 0.13, _zipf(rng, len(self.phrases), n, 1.05), -1)
        has_phrase = phrase >= 0
        url = _zipf(rng, len(self.urls), n, 1.0)
        referer = np.where(rng.random(n) < 0.65, _zipf(rng, len(self.referers), n, 1.0), -1)
        resolution = self.resolutions[u["resolution"]]
        zeros16 = np.zeros(n, np.int16)
        small = lambda high, share: np.where(rng.random(n) < share,  # noqa: E731
                                             rng.integers(1, high, n), 0).astype(np.int16)
        columns = {
            "WatchID": k["watch"], "JavaEnable": (rng.random(n) < 0.6).astype(np.int16),
            "Title": self.titles.take(_zipf(rng, len(self.titles), n, 1.0)),
            "GoodEvent": np.ones(n, np.int16),
            "EventTime": pa.array(event_us, TS),
            "EventDate": pa.array((date0 + k["day"]).astype(np.int32), DATE),
            "CounterID": k["counter"], "ClientIP": u["ClientIP"], "RegionID": u["RegionID"],
            "UserID": self.user_ids[user], "CounterClass": small(3, 0.3), "OS": u["OS"],
            "UserAgent": u["UserAgent"], "URL": self.urls.take(url),
            "Referer": _optional(self.referers, referer),
            "IsRefresh": (rng.random(n) < 0.08).astype(np.int16),
            "RefererCategoryID": small(20, 0.4), "RefererRegionID": u["RegionID"],
            "URLCategoryID": small(20, 0.5), "URLRegionID": u["RegionID"],
            "ResolutionWidth": resolution[:, 0], "ResolutionHeight": resolution[:, 1],
            "ResolutionDepth": np.full(n, 24, np.int16), "FlashMajor": small(12, 0.7),
            "FlashMinor": small(9, 0.5), "FlashMinor2": _constant("", n),
            "NetMajor": small(4, 0.2), "NetMinor": small(9, 0.2),
            "UserAgentMajor": small(30, 0.9), "UserAgentMinor": _constant("0", n),
            "CookieEnable": np.ones(n, np.int16), "JavascriptEnable": np.ones(n, np.int16),
            "IsMobile": u["IsMobile"], "MobilePhone": np.where(u["model"] > 0, u["MobilePhone"], 0).astype(np.int16),
            "MobilePhoneModel": self.models.take(u["model"]), "Params": _constant("", n),
            "IPNetworkID": (u["ClientIP"] >> 8).astype(np.int32),
            "TraficSourceID": np.where(has_phrase, 2, rng.choice([-1, 0, 1, 3, 5, 6], n)).astype(np.int16),
            "SearchEngineID": np.where(has_phrase, rng.choice([2, 3, 1, 13], n), 0).astype(np.int16),
            "SearchPhrase": _optional(self.phrases, phrase),
            "AdvEngineID": np.where(rng.random(n) < 0.025, _zipf(rng, 60, n, 1.3) + 1, 0).astype(np.int16),
            "IsArtifical": zeros16,
            "WindowClientWidth": (resolution[:, 0] - rng.integers(0, 40, n)).astype(np.int16),
            "WindowClientHeight": (resolution[:, 1] - rng.integers(60, 200, n)).astype(np.int16),
            "ClientTimeZone": u["ClientTimeZone"], "ClientEventTime": pa.array(event_us, TS),
            "SilverlightVersion1": small(6, 0.3), "SilverlightVersion2": zeros16,
            "SilverlightVersion3": np.zeros(n, np.int32), "SilverlightVersion4": zeros16,
            "PageCharset": _constant("utf-8", n), "CodeVersion": np.full(n, 302, np.int32),
            "IsLink": (rng.random(n) < 0.03).astype(np.int16),
            "IsDownload": (rng.random(n) < 0.01).astype(np.int16),
            "IsNotBounce": (rng.random(n) < 0.5).astype(np.int16),
            "FUniqID": self.user_ids[user] ^ 0x5DEECE66D, "OriginalURL": _constant("", n),
            "HID": rng.integers(0, 2**31 - 1, n, dtype=np.int32), "IsOldCounter": zeros16,
            "IsEvent": small(2, 0.05), "IsParameter": small(2, 0.02),
            "DontCountHits": (rng.random(n) < 0.05).astype(np.int16), "WithHash": zeros16,
            "HitColor": _constant("E", n), "LocalEventTime": pa.array(event_us, TS),
            "Age": u["Age"], "Sex": u["Sex"], "Income": u["Income"], "Interests": small(900, 0.4),
            "Robotness": zeros16, "RemoteIP": u["ClientIP"],
            "WindowName": rng.integers(-1, 100, n).astype(np.int32),
            "OpenerName": rng.integers(-1, 100, n).astype(np.int32),
            "HistoryLength": small(20, 0.6),
            "BrowserLanguage": pa.array(["ru", "en", "uk", "de", "tr", "kk"]).take(u["language"]),
            "BrowserCountry": pa.array(["ru", "us", "ua", "de", "tr", "kz"]).take(u["language"]),
            "SocialNetwork": _constant("", n), "SocialAction": _constant("", n),
            "HTTPError": zeros16, "SendTiming": rng.integers(0, 2000, n).astype(np.int32),
            "DNSTiming": rng.integers(0, 500, n).astype(np.int32),
            "ConnectTiming": rng.integers(0, 800, n).astype(np.int32),
            "ResponseStartTiming": rng.integers(0, 3000, n).astype(np.int32),
            "ResponseEndTiming": rng.integers(0, 5000, n).astype(np.int32),
            "FetchTiming": rng.integers(0, 5000, n).astype(np.int32),
            "SocialSourceNetworkID": zeros16, "SocialSourcePage": _constant("", n),
            "ParamPrice": np.zeros(n, np.int64), "ParamOrderID": _constant("", n),
            "ParamCurrency": _constant("", n), "ParamCurrencyID": zeros16,
            "OpenstatServiceName": _constant("", n), "OpenstatCampaignID": _constant("", n),
            "OpenstatAdID": _constant("", n), "OpenstatSourceID": _constant("", n),
            "UTMSource": _constant("", n), "UTMMedium": _constant("", n),
            "UTMCampaign": _constant("", n), "UTMContent": _constant("", n),
            "UTMTerm": _constant("", n), "FromTag": _constant("", n),
            "HasGCLID": zeros16, "RefererHash": np.where(referer >= 0, self.referer_hashes[referer], 0),
            "URLHash": self.url_hashes[url], "CLID": np.zeros(n, np.int32),
        }
        return pa.table([pa.array(columns[name], type) if not isinstance(columns[name], pa.Array)
                         else columns[name].cast(type) for name, type in COLUMNS], schema=SCHEMA)


def _zipf(rng, size, n, a):
    """`n` ranks in [0, size) drawn with Zipf-like popularity of exponent `a` (0 the most
    popular), by inverting the continuous power law."""
    u = rng.random(n)
    if abs(a - 1.0) < 1e-9:
        ranks = np.exp(u * np.log(size + 1)) - 1
    else:
        ranks = ((size + 1) ** (1 - a) - 1) * u + 1
        ranks = ranks ** (1 / (1 - a)) - 1
    return np.minimum(ranks.astype(np.int64), size - 1)


def _optional(pool, index):
    """Pool values where `index` >= 0, empty strings elsewhere."""
    values = pool.take(np.maximum(index, 0))
    return pc.if_else(pa.array(index >= 0), values, "")


def _constant(text, n):
    return pa.array([text], TEXT).take(np.zeros(n, np.int64))
