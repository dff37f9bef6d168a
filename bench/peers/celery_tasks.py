"""Celery app + task for the 'integrity' workload (broker and database from PEERS_BROKER, PEERS_DSN)."""
import hashlib
import os
import threading
from datetime import datetime, timezone

from celery import Celery
from psycopg_pool import ConnectionPool

DSN = os.environ.get("PEERS_DSN", "postgresql://postgres@127.0.0.1:55440/peers")
app = Celery("integrity", broker=os.environ.get("PEERS_BROKER", "redis://127.0.0.1:56390/0"))
app.conf.update(
    task_acks_late=True,          # ack after the task body ran
    task_ignore_result=True,      # no result backend: the outcome lives in the documents table
    broker_connection_retry_on_startup=True,
    # kombu's Redis pool defaults to 10 connections; gevent/threads pools with more concurrent
    # acks (acks_late) hit "MaxConnectionsError: Too many connections" and stall, so size it.
    broker_transport_options={"max_connections": 10 + int(os.environ.get("PEERS_CONCURRENCY", 0))},
)

_pool, _pool_pid, _lock = None, None, threading.Lock()


def db():
    """Per-process connection pool, created after fork: prefork children use one connection,
    threads/gevent pools up to their concurrency (gevent runs each task in a fresh greenlet,
    so thread-local connections would reconnect for every task)."""
    global _pool, _pool_pid
    with _lock:
        if _pool_pid != os.getpid():
            size = max(1, int(os.environ.get("PEERS_CONCURRENCY", 1)))
            _pool = ConnectionPool(DSN, min_size=1, max_size=size, kwargs={"autocommit": True})
            _pool_pid = os.getpid()
    return _pool.connection()


@app.task(name="integrity.verify")
def verify(doc_id):
    started_at = datetime.now(timezone.utc)
    with db() as conn:
        path, size, sha = conn.execute(
            "SELECT path, size, sha256 FROM documents WHERE id = %s", (doc_id,)).fetchone()
        h, n = hashlib.sha256(), 0
        with open(path, "rb") as f:
            while chunk := f.read(65536):
                h.update(chunk)
                n += len(chunk)
        status = "verified" if n == size and h.hexdigest() == sha else "corrupt"
        conn.execute(
            "UPDATE documents SET status = %s, started_at = %s, finished_at = clock_timestamp() WHERE id = %s",
            (status, started_at, doc_id))
