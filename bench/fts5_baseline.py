#!/usr/bin/env python3
"""SQLite FTS5 baseline for mibyan_store_bench (same messages, same queries).

Usage: fts5_baseline.py CORPUS QUERIES DBFILE
CORPUS: one message per line. QUERIES: one query per line, in the syntax
both engines share (bare words = AND, "quoted phrase").
Prints one JSON line: insert seconds, index bytes (fts5 shadow tables
without the content table, from dbstat), total file bytes, and per-query
milliseconds (count of matches + top 10 by bm25 with a snippet).
"""
import json
import os
import sqlite3
import sys
import time


def main():
    corpus, queries, db = sys.argv[1:4]
    if os.path.exists(db):
        os.unlink(db)
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    start = time.perf_counter()
    with open(corpus, encoding="utf-8") as f:
        batch = []
        for line in f:
            batch.append((line.rstrip("\n"),))
            if len(batch) == 10000:
                con.executemany("INSERT INTO t(body) VALUES (?)", batch)
                batch.clear()
        if batch:
            con.executemany("INSERT INTO t(body) VALUES (?)", batch)
    con.commit()
    con.execute("INSERT INTO t(t) VALUES ('optimize')")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    insert_s = time.perf_counter() - start
    sizes = {}
    try:
        for name, size in con.execute(
                "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            sizes[name] = size
    except sqlite3.OperationalError:
        sizes = {}
    index_bytes = sum(v for k, v in sizes.items()
                      if k.startswith("t_") and k != "t_content")
    ms = []
    with open(queries, encoding="utf-8") as f:
        qs = [q.rstrip("\n") for q in f if q.strip()]
    for q in qs:
        t = time.perf_counter()
        try:
            (count,) = con.execute(
                "SELECT count(*) FROM t WHERE t MATCH ?", (q,)).fetchone()
            rows = con.execute(
                "SELECT rowid, snippet(t, 0, '>>>', '<<<', '...', 20) "
                "FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10",
                (q,)).fetchall()
        except sqlite3.OperationalError:
            count, rows = 0, []
        ms.append((time.perf_counter() - t) * 1000)
    con.close()
    print(json.dumps({"insert_s": insert_s, "index_bytes": index_bytes,
                      "file_bytes": os.path.getsize(db), "query_ms": ms,
                      "tables": sizes}))


if __name__ == "__main__":
    main()
