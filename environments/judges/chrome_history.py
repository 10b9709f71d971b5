"""Chrome's ``History`` database in the desktop user's profile: where OSWorld's ``update_browse_history`` setup
step writes visits and the ``history`` getter reads them (times in Chrome's epoch: microseconds since
1601-01-01 UTC)."""

from __future__ import annotations

import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any, Mapping, Sequence

HISTORY = "~/.config/google-chrome/Default/History"
#: seconds from Chrome's epoch (1601-01-01 UTC) to the Unix epoch (Chrome counts microseconds from its own)
CHROME_EPOCH_S = 11_644_473_600

#: the tables a fresh ``History`` starts with (Chrome 156's schema, version 70); Chrome adds the rest itself
HISTORY_SCHEMA = """
CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
INSERT INTO meta VALUES ('version', '70'), ('last_compatible_version', '16');
CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT,url LONGVARCHAR,title LONGVARCHAR,visit_count INTEGER DEFAULT 0
 NOT NULL,typed_count INTEGER DEFAULT 0 NOT NULL,last_visit_time INTEGER NOT NULL,hidden INTEGER DEFAULT 0 NOT NULL);
CREATE INDEX urls_url_index ON urls (url);
CREATE TABLE visits(id INTEGER PRIMARY KEY AUTOINCREMENT,url INTEGER NOT NULL,visit_time INTEGER NOT NULL,from_visit
 INTEGER,external_referrer_url TEXT,transition INTEGER DEFAULT 0 NOT NULL,segment_id INTEGER,visit_duration INTEGER
 DEFAULT 0 NOT NULL,incremented_omnibox_typed_score BOOLEAN DEFAULT FALSE NOT NULL,opener_visit INTEGER,
 originator_cache_guid TEXT,originator_visit_id INTEGER,originator_from_visit INTEGER,originator_opener_visit INTEGER,
 is_known_to_sync BOOLEAN DEFAULT FALSE NOT NULL,consider_for_ntp_most_visited BOOLEAN DEFAULT FALSE NOT NULL,
 visited_link_id INTEGER DEFAULT 0 NOT NULL,app_id TEXT);
CREATE INDEX visits_url_index ON visits (url);
CREATE INDEX visits_from_index ON visits (from_visit);
CREATE INDEX visits_time_index ON visits (visit_time);
CREATE INDEX visits_originator_id_index ON visits (originator_visit_id);
"""
#: a link clicked (``PAGE_TRANSITION_LINK``) that began and ended its redirect chain, as upstream records visits
VISIT_TRANSITION = 805306368


def write_browse_history(template: bytes | None, entries: Sequence[Mapping[str, Any]], now: float) -> bytes:
    """A ``History`` holding only ``entries`` (``url``, ``title``, ``visit_time_from_now_in_seconds`` before
    ``now``, Unix seconds): the profile's own ``History`` (``template``) emptied, so its schema is the installed
    browser's, or :data:`HISTORY_SCHEMA` when there is none. Each entry is one ``urls`` row (visited once,
    never typed) and one ``visits`` row, as OSWorld's ``update_browse_history`` writes them."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "History"
        tables: set[str] = set()
        if template:
            path.write_bytes(template)
            try:
                with closing(sqlite3.connect(path)) as db:
                    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            except sqlite3.DatabaseError:
                tables = set()
        if not {"meta", "urls", "visits"} <= tables:  # no History yet, or not Chrome's: a fresh one
            path.unlink(missing_ok=True)
            with closing(sqlite3.connect(path)) as db:
                db.executescript(HISTORY_SCHEMA)
            tables = set()
        with closing(sqlite3.connect(path)) as db:
            for table in sorted(tables - {"meta"}):
                db.execute(f'DELETE FROM "{table}"')
            for entry in entries:
                when = (CHROME_EPOCH_S * 1_000_000 + round(now * 1_000_000)
                        - round(float(entry["visit_time_from_now_in_seconds"]) * 1_000_000))
                cursor = db.execute("INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time, hidden)"
                                    " VALUES (?, ?, 1, 0, ?, 0)", (entry["url"], entry["title"], when))
                db.execute("INSERT INTO visits (url, visit_time, from_visit, transition, segment_id, visit_duration)"
                           " VALUES (?, ?, 0, ?, 0, 0)", (cursor.lastrowid, when, VISIT_TRANSITION))
            db.commit()
        return path.read_bytes()
