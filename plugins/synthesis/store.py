"""The task store: every VeriGen candidate with its validation record, in SQLite.

One file, many writers: the database runs in WAL mode with a busy timeout,
and every write is one short ``BEGIN IMMEDIATE`` transaction, so any number
of worker coroutines (through one connection per process, serialized by a
lock and run off the event loop) and any number of processes can record
candidates at once. A candidate is written when it is proposed and updated
after every validation round, and an acceptance is committed before the
worker moves on, so a crashed worker, environment or process loses no
accepted task.

Tables:

* ``candidates`` — one row per candidate: its latest task JSON, final status
  (``pending`` / ``accepted`` / ``rejected`` / ``error`` / ``duplicate``), the stage where it
  ended, flags and scores of each validator (rule, LLM judge, execution in the
  loop), repairs, tokens, cost and end-to-end latency.
* ``rounds`` — one row per validation round of a candidate (the task version
  it validated, each validator's findings, the repair that followed).

``python -m plugins.synthesis.store export STORE OUT_DIR`` writes accepted
tasks as OSWorld-format JSON files (``OUT_DIR/<domain>/<id>.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

SCHEMA = """
CREATE TABLE IF NOT EXISTS candidates (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    origin TEXT NOT NULL,
    app TEXT NOT NULL DEFAULT '',
    parents TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL,
    stage TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    instruction TEXT NOT NULL DEFAULT '',
    task_json TEXT,
    rule_pass INTEGER,
    judge_pass INTEGER,
    judge_score REAL,
    exec_pass INTEGER,
    executable INTEGER,
    initial_score REAL,
    final_score REAL,
    repairs INTEGER NOT NULL DEFAULT 0,
    validation TEXT NOT NULL DEFAULT '{}',
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    llm_calls INTEGER NOT NULL DEFAULT 0,
    latency_s REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS candidates_run_status ON candidates (run_id, status);
CREATE TABLE IF NOT EXISTS rounds (
    candidate_id TEXT NOT NULL REFERENCES candidates (id),
    round INTEGER NOT NULL,
    task_json TEXT NOT NULL,
    record TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (candidate_id, round)
);
"""

#: ``duplicate``: a candidate whose task id an earlier run already decided (accepted or rejected); it is recorded,
#: never checked again, and an accepted original is exported with this run's tasks
STATUSES = ("pending", "accepted", "rejected", "error", "duplicate")
_COLUMNS = (
    "run_id", "origin", "app", "parents", "status", "stage", "reason", "instruction", "task_json", "rule_pass",
    "judge_pass", "judge_score", "exec_pass", "executable", "initial_score", "final_score", "repairs", "validation",
    "prompt_tokens", "completion_tokens", "cost_usd", "llm_calls", "latency_s",
)
_JSON_COLUMNS = {"parents", "validation", "task_json"}


@dataclass
class CandidateRow:
    """A ``candidates`` row, decoded."""

    id: str
    run_id: str
    origin: str
    status: str
    app: str = ""
    parents: list[str] = field(default_factory=list)
    stage: str = ""
    reason: str = ""
    instruction: str = ""
    task_json: dict[str, Any] | None = None
    rule_pass: bool | None = None
    judge_pass: bool | None = None
    judge_score: float | None = None
    exec_pass: bool | None = None
    executable: bool | None = None
    initial_score: float | None = None
    final_score: float | None = None
    repairs: int = 0
    validation: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    llm_calls: int = 0
    latency_s: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


def _encode(column: str, value: Any) -> Any:
    if column in _JSON_COLUMNS and value is not None:
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool):
        return int(value)
    return value


class TaskStore:
    """A SQLite task store at ``path`` (created on first use)."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit mode: transactions are explicit (BEGIN IMMEDIATE) so writers queue on the file lock
        self._conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise OSError(f"task store {self.path}: SQLite refused WAL mode (got {mode}); use a local filesystem")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._write(lambda c: [c.execute(statement) for statement in _statements(SCHEMA)])

    # -- plumbing ------------------------------------------------------------

    def _write(self, fn: Any) -> Any:
        """Run ``fn(conn)`` in one immediate transaction (caller holds the lock)."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- writes --------------------------------------------------------------

    def insert(self, candidate_id: str, *, run_id: str, origin: str, app: str = "", parents: Sequence[str] = (),
               status: str = "pending", task_json: dict[str, Any] | None = None, **fields: Any) -> None:
        now = time.time()
        values = {"run_id": run_id, "origin": origin, "app": app, "parents": list(parents), "status": status,
                  "task_json": task_json, "instruction": (task_json or {}).get("instruction", ""), **fields}
        self._check(values)
        columns = ["id", *values, "created_at", "updated_at"]
        params = [candidate_id, *(_encode(k, v) for k, v in values.items()), now, now]
        sql = f"INSERT INTO candidates ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        with self._lock:
            self._write(lambda c: c.execute(sql, params))

    def update(self, candidate_id: str, **fields: Any) -> None:
        if "task_json" in fields and fields["task_json"] is not None:
            fields.setdefault("instruction", fields["task_json"].get("instruction", ""))
        self._check(fields)
        assignments = ", ".join(f"{k} = ?" for k in fields)
        params = [*(_encode(k, v) for k, v in fields.items()), time.time(), candidate_id]
        sql = f"UPDATE candidates SET {assignments}, updated_at = ? WHERE id = ?"
        with self._lock:
            changed = self._write(lambda c: c.execute(sql, params).rowcount)
        if not changed:
            raise KeyError(f"task store {self.path}: no candidate {candidate_id!r}")

    def add_round(self, candidate_id: str, round_index: int, task_json: dict[str, Any], record: dict[str, Any]) -> None:
        sql = "INSERT OR REPLACE INTO rounds (candidate_id, round, task_json, record, created_at) VALUES (?, ?, ?, ?, ?)"
        params = (candidate_id, round_index, json.dumps(task_json, sort_keys=True),
                  json.dumps(record, sort_keys=True, default=str), time.time())
        with self._lock:
            self._write(lambda c: c.execute(sql, params))

    @staticmethod
    def _check(values: dict[str, Any]) -> None:
        unknown = set(values) - set(_COLUMNS)
        if unknown:
            raise ValueError(f"task store: unknown columns {sorted(unknown)}; known: {', '.join(_COLUMNS)}")
        if "status" in values and values["status"] not in STATUSES:
            raise ValueError(f"task store: status must be one of {STATUSES}, got {values['status']!r}")

    # -- reads ---------------------------------------------------------------

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    def find(self, candidate_id: str) -> CandidateRow | None:
        """The candidate with this id, or None."""
        rows = self._rows("SELECT * FROM candidates WHERE id = ?", (candidate_id,))
        return _decode(rows[0]) if rows else None

    def get(self, candidate_id: str) -> CandidateRow:
        rows = self._rows("SELECT * FROM candidates WHERE id = ?", (candidate_id,))
        if not rows:
            raise KeyError(f"task store {self.path}: no candidate {candidate_id!r}")
        return _decode(rows[0])

    def candidates(self, *, run_id: str | None = None, status: str | None = None) -> list[CandidateRow]:
        where, params = _filters(run_id, status)
        return [_decode(r) for r in self._rows(f"SELECT * FROM candidates{where} ORDER BY created_at, id", params)]

    def rounds(self, candidate_id: str) -> list[dict[str, Any]]:
        rows = self._rows("SELECT * FROM rounds WHERE candidate_id = ? ORDER BY round", (candidate_id,))
        return [{"round": r["round"], "task": json.loads(r["task_json"]), **json.loads(r["record"])} for r in rows]

    def instructions(self, *, app: str | None = None, limit: int = 50) -> list[str]:
        """Recent accepted instructions (of ``app``), to steer proposers away from duplicates."""
        sql = "SELECT instruction FROM candidates WHERE status = 'accepted'"
        params: list[Any] = []
        if app:
            sql += " AND app = ?"
            params.append(app)
        sql += " ORDER BY updated_at DESC LIMIT ?"
        params.append(limit)
        return [r["instruction"] for r in self._rows(sql, params)]

    def counts(self, *, run_id: str | None = None) -> dict[str, int]:
        where, params = _filters(run_id, None)
        rows = self._rows(f"SELECT status, COUNT(*) AS n FROM candidates{where} GROUP BY status", params)
        counts = {status: 0 for status in STATUSES}
        counts.update({r["status"]: r["n"] for r in rows})
        return counts

    def export(self, out_dir: str | Path, *, run_id: str | None = None) -> list[Path]:
        """Write accepted tasks as OSWorld task files ``out_dir/<domain>/<id>.json`` (``out_dir/<split>/<domain>/``
        for tasks whose ``metadata.split`` names one: a family pool's train, validation, test and heldout
        folders); with ``run_id``, that run's accepted tasks and the accepted originals of its duplicates.
        Returns the paths."""
        out = Path(out_dir)
        written = []
        rows = self.candidates(run_id=run_id, status="accepted")
        if run_id is not None:
            originals = [self.find(p) for d in self.candidates(run_id=run_id, status="duplicate") for p in d.parents]
            rows += [r for r in originals if r is not None and r.status == "accepted"]
        for row in rows:
            task = dict(row.task_json or {})
            domain = task.get("snapshot") or row.app or "synthesized"
            split = (task.get("metadata") or {}).get("split")
            folder = out / safe_name(split) if isinstance(split, str) and split else out
            path = folder / safe_name(domain) / f"{safe_name(task.get('id', row.id))}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps(task, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            tmp.replace(path)
            written.append(path)
        return written

    # -- async wrappers (keep the event loop free while SQLite waits for its lock) --

    async def ainsert(self, candidate_id: str, **kwargs: Any) -> None:
        await asyncio.to_thread(self.insert, candidate_id, **kwargs)

    async def aupdate(self, candidate_id: str, **fields: Any) -> None:
        await asyncio.to_thread(self.update, candidate_id, **fields)

    async def aadd_round(self, candidate_id: str, round_index: int, task_json: dict[str, Any],
                         record: dict[str, Any]) -> None:
        await asyncio.to_thread(self.add_round, candidate_id, round_index, task_json, record)


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def _filters(run_id: str | None, status: str | None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if run_id is not None:
        clauses.append("run_id = ?")
        params.append(run_id)
    if status is not None:
        clauses.append("status = ?")
        params.append(status)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _decode(row: sqlite3.Row) -> CandidateRow:
    data = dict(row)
    for column in _JSON_COLUMNS:
        if data.get(column) is not None:
            data[column] = json.loads(data[column])
    for column in ("rule_pass", "judge_pass", "exec_pass", "executable"):
        if data[column] is not None:
            data[column] = bool(data[column])
    return CandidateRow(**data)


def safe_name(name: str) -> str:
    """``name`` as one path component (anything but letters, digits, ``-_.`` becomes ``_``)."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "_"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m plugins.synthesis.store", description="Inspect or export a task store.")
    sub = parser.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="write accepted tasks as OSWorld JSON files")
    export.add_argument("store")
    export.add_argument("out_dir")
    export.add_argument("--run-id", default=None)
    counts = sub.add_parser("counts", help="candidates per status")
    counts.add_argument("store")
    counts.add_argument("--run-id", default=None)
    args = parser.parse_args(argv)
    if not Path(args.store).is_file():
        print(f"error: task store {args.store} does not exist", file=sys.stderr)
        return 2
    store = TaskStore(args.store)
    try:
        if args.command == "export":
            paths = store.export(args.out_dir, run_id=args.run_id)
            print(json.dumps({"exported": len(paths), "out_dir": str(args.out_dir)}))
        else:
            print(json.dumps(store.counts(run_id=args.run_id)))
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
