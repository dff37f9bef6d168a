"""The README's walk-through ("Try it"), run with a client that openapi-python-client
generated from the served OpenAPI document (api/tests/it/contract.rs generates it and
runs this script; PYTHONPATH names the generated package `quire_client`).

Every answer must be the status the walk-through expects, parse into the model the
document names for that status, and say exactly what the document says: the parsed
model, written back to JSON, must equal the body the server sent (a field the document
leaves out, renames or types differently fails here), and no model may have caught a
field the document does not declare.

    python walkthrough.py --base-url http://127.0.0.1:8080 --token $TOKEN
"""

import argparse
import datetime
import io
import json
import pathlib
import struct
import sys
import time
import zlib

import attrs

from quire_client import AuthenticatedClient
from quire_client.api.documents import (
    download_content,
    download_thumbnail,
    edit_document,
    get_document,
    list_documents,
    reanalyze_documents,
    restore_document,
    search_documents,
    trash_document,
    upload_document,
)
from quire_client.api.jobs import get_processing_job, list_processing_jobs, retry_processing_job
from quire_client.api.webhooks import (
    create_webhook,
    delete_webhook,
    edit_webhook,
    get_webhook,
    list_webhook_deliveries,
)
from quire_client.models import (
    BulkView,
    CreatedWebhookView,
    DeliveryList,
    DocumentPage,
    DocumentPatch,
    DocumentView,
    EditView,
    EventTypeName,
    JobList,
    JobView,
    NewWebhookBody,
    ProblemView,
    PurgeView,
    ReanalyzeRequest,
    TrashView,
    UploadForm,
    UploadView,
    WebhookPatchBody,
    WebhookView,
)
from quire_client.types import UNSET, File

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"
DEADLINE_SECONDS = 90


def fail(message: str) -> None:
    print(f"walk-through failed: {message}", file=sys.stderr)
    sys.exit(1)


def same(expected: object, sent: object, where: str) -> None:
    """`expected` (the parsed model written back) says what the server `sent`."""
    if isinstance(expected, dict) and isinstance(sent, dict):
        if set(expected) != set(sent):
            fail(
                f"{where}: the document describes the fields {sorted(expected)}, "
                f"the server sent {sorted(sent)}"
            )
        for key in expected:
            same(expected[key], sent[key], f"{where}.{key}")
    elif isinstance(expected, list) and isinstance(sent, list):
        if len(expected) != len(sent):
            fail(f"{where}: {len(expected)} items parsed, {len(sent)} sent")
        for index, (left, right) in enumerate(zip(expected, sent)):
            same(left, right, f"{where}[{index}]")
    elif isinstance(expected, str) and isinstance(sent, str) and expected != sent:
        # A date-time written back in another (equal) spelling: compare the instants.
        try:
            equal = datetime.datetime.fromisoformat(expected) == datetime.datetime.fromisoformat(sent)
        except ValueError:
            equal = False
        if not equal:
            fail(f"{where}: parsed {expected!r}, sent {sent!r}")
    elif type(expected) is not type(sent) and not (
        isinstance(expected, (int, float)) and isinstance(sent, (int, float))
    ):
        fail(f"{where}: parsed {expected!r} ({type(expected).__name__}), sent {sent!r} ({type(sent).__name__})")
    elif expected != sent:
        fail(f"{where}: parsed {expected!r}, sent {sent!r}")


def declared_only(model: object, where: str) -> None:
    """No model (or model inside it) caught a field the document does not declare."""
    if isinstance(model, list):
        for index, item in enumerate(model):
            declared_only(item, f"{where}[{index}]")
        return
    if not attrs.has(type(model)):
        return
    extra = getattr(model, "additional_properties", None)
    if extra:
        fail(f"{where}: the server sent fields the document does not declare: {sorted(extra)}")
    for field in attrs.fields(type(model)):
        if field.name != "additional_properties":
            declared_only(getattr(model, field.name), f"{where}.{field.name}")


def check(response, status: int, model: type, what: str):
    """The answer has `status`, and its body is exactly the `model` the document names."""
    if response.status_code != status:
        fail(f"{what}: expected {status}, got {int(response.status_code)}: {response.content[:500]!r}")
    parsed = response.parsed
    if not isinstance(parsed, model):
        fail(f"{what}: the document names no {model.__name__} for {status} (parsed {type(parsed).__name__})")
    same(parsed.to_dict(), json.loads(response.content), what)
    declared_only(parsed, what)
    print(f"ok  {what}: {status} {model.__name__}")
    return parsed


def wait_for(what: str, probe):
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        time.sleep(0.2)
    fail(f"timed out waiting for {what}")


def job_status(client, document_id, job_id, wanted: str):
    def probe():
        jobs = check(
            list_processing_jobs.sync_detailed(document_id, client=client),
            200,
            JobList,
            "job status",
        )
        job = next(job for job in jobs.jobs if job.id == job_id)
        if job.status == wanted:
            return job
        if job.status in ("SUCCEEDED", "FAILED", "CANCELLED"):
            fail(f"job {job_id} ended {job.status}, expected {wanted}")
        return None

    return wait_for(f"job {job_id} to be {wanted}", probe)


def empty_png() -> bytes:
    """A PNG that claims 0 x 0 pixels: accepted, then refused by the analysis for good."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 0, 0, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


def upload(client, data: bytes, name: str, mime: str, title, key=UNSET, replayed=False) -> UploadView:
    body = UploadForm(file=File(payload=io.BytesIO(data), file_name=name, mime_type=mime), title=title)
    response = upload_document.sync_detailed(client=client, body=body, idempotency_key=key)
    uploaded = check(response, 201, UploadView, f"upload {name}{' again' if replayed else ''}")
    if (response.headers.get("idempotent-replayed") == "true") != replayed:
        fail(f"upload {name}: Idempotent-Replayed is {response.headers.get('idempotent-replayed')!r}")
    location = response.headers.get("location")
    if location != f"/api/documents/{uploaded.document.id}":
        fail(f"upload {name}: Location is {location!r}")
    return uploaded


def main() -> None:
    arguments = argparse.ArgumentParser()
    arguments.add_argument("--base-url", required=True)
    arguments.add_argument("--token", required=True)
    options = arguments.parse_args()
    client = AuthenticatedClient(base_url=options.base_url, token=options.token, timeout=30.0)
    readme = README.read_bytes()

    # Upload: 201 with the document and its analyze-document job.
    uploaded = upload(client, readme, "README.md", "text/markdown", "Readme")
    document_id, job_id = uploaded.document.id, uploaded.job.id
    if uploaded.document.title != "Readme" or uploaded.job.type_ != "analyze-document":
        fail(f"upload: unexpected {uploaded.to_dict()}")

    # Job status: QUEUED → RUNNING → SUCCEEDED; the document PENDING → PROCESSING → READY.
    job_status(client, document_id, job_id, "SUCCEEDED")
    check(get_processing_job.sync_detailed(document_id, job_id, client=client), 200, JobView, "the job")
    document = check(get_document.sync_detailed(document_id, client=client), 200, DocumentView, "the document")
    if document.status != "READY":
        fail(f"the document is {document.status} after its analysis succeeded")

    # Its thumbnail, then find it by a word of its text.
    thumbnail = download_thumbnail.sync_detailed(document_id, client=client)
    if thumbnail.status_code != 200 or not thumbnail.content.startswith(b"\x89PNG"):
        fail(f"thumbnail: {int(thumbnail.status_code)}")
    print("ok  thumbnail: 200 image/png")
    found = check(search_documents.sync_detailed(client=client, q="outbox"), 200, DocumentPage, "search")
    hit = next((hit for hit in found.documents if hit.id == document_id), None)
    if hit is None or hit.search is UNSET or hit.search is None:
        fail("search: the document is not a hit for a word of its text")

    # List (newest first).
    listed = check(list_documents.sync_detailed(client=client, limit=20), 200, DocumentPage, "list")
    if document_id not in [listed_document.id for listed_document in listed.documents]:
        fail("list: the document is missing")

    # Edit: a new title analyzes again.
    patch = DocumentPatch(
        title="Quire readme",
        issued_at=datetime.date(2026, 11, 30),
        tags=["docs"],
        correspondent="Quire",
    )
    edited = check(edit_document.sync_detailed(document_id, client=client, body=patch), 200, EditView, "edit")
    if (edited.document.title, edited.document.tags, edited.document.correspondent) != (
        "Quire readme",
        ["docs"],
        "Quire",
    ) or edited.document.issued_at != datetime.date(2026, 11, 30):
        fail(f"edit: the document shows {edited.document.to_dict()}")
    tagged = check(list_documents.sync_detailed(client=client, tag="docs"), 200, DocumentPage, "list by tag")
    if [tagged_document.id for tagged_document in tagged.documents] != [document_id]:
        fail("list by tag: expected exactly the edited document")

    # Download the bytes.
    content = download_content.sync_detailed(document_id, client=client)
    if content.status_code != 200 or content.content != readme:
        fail(f"content: {int(content.status_code)}, {len(content.content)} bytes")
    if not content.headers.get("content-type", "").startswith("text/plain"):
        fail(f"content: served as {content.headers.get('content-type')!r}")
    print("ok  content: 200, the uploaded bytes")

    # Safe retries: the same upload with the same Idempotency-Key answers the first 201
    # again (Idempotent-Replayed: true) and records nothing; another file with that key
    # is 422 idempotency_key_reused.
    manifest = (README.parent / "Cargo.toml").read_bytes()
    first = upload(client, manifest, "Cargo.toml", "text/plain", "Manifest", key="scan-2026-001")
    again = upload(client, manifest, "Cargo.toml", "text/plain", "Manifest", key="scan-2026-001", replayed=True)
    if again.document.id != first.document.id:
        fail("a replayed upload made another document")
    body = UploadForm(file=File(payload=io.BytesIO(b"other bytes\n"), file_name="other.txt", mime_type="text/plain"))
    reused = check(
        upload_document.sync_detailed(client=client, body=body, idempotency_key="scan-2026-001"),
        422,
        ProblemView,
        "the same key with another file",
    )
    if reused.code != "idempotency_key_reused":
        fail(f"the same key with another file: {reused.to_dict()}")

    # Optimistic concurrency: GET answers an ETag; If-None-Match answers 304 while it
    # holds; If-Match applies a write only at that version (412 once it changed). The
    # edit above analyzes again, which moves the version: read it until it holds still.
    def current_etag():
        response = get_document.sync_detailed(document_id, client=client)
        check(response, 200, DocumentView, "the document with its ETag")
        etag = response.headers.get("etag")
        unchanged = get_document.sync_detailed(document_id, client=client, if_none_match=etag)
        return etag if unchanged.status_code == 304 else None

    etag = wait_for("the document's ETag to hold", current_etag)
    print("ok  If-None-Match: 304")
    stale = check(
        edit_document.sync_detailed(document_id, client=client, body=DocumentPatch(title="Mine"), if_match='"0"'),
        412,
        ProblemView,
        "an edit at a version long gone",
    )
    if stale.code != "precondition_failed":
        fail(f"an edit at a version long gone: {stale.to_dict()}")

    def edit_at_current_version():
        response = edit_document.sync_detailed(
            document_id, client=client, body=DocumentPatch(title="Mine"), if_match=current_etag() or '"0"'
        )
        return None if response.status_code == 412 else response

    mine = check(wait_for("an edit at the current version", edit_at_current_version), 200, EditView, "If-Match")
    if mine.document.title != "Mine":
        fail(f"If-Match: the document shows {mine.document.to_dict()}")

    # Trash (cancels its unfinished jobs), then restore.
    trashed = check(trash_document.sync_detailed(document_id, client=client), 200, TrashView, "trash")
    if trashed.document.trashed_at in (None, UNSET):
        fail("trash: the document has no trashed_at")
    check(get_document.sync_detailed(document_id, client=client), 404, ProblemView, "a trashed document")
    restored = check(restore_document.sync_detailed(document_id, client=client), 200, DocumentView, "restore")
    if restored.trashed_at not in (None, UNSET):
        fail("restore: the document is still trashed")

    # Retry a FAILED job (409 with its current_status otherwise).
    refused = check(
        retry_processing_job.sync_detailed(document_id, job_id, client=client), 409, ProblemView, "retry a succeeded job"
    )
    if refused.code != "job_not_failed" or refused.current_status != "SUCCEEDED":
        fail(f"retry a succeeded job: {refused.to_dict()}")
    broken = upload(client, empty_png(), "empty.png", "image/png", UNSET)
    job_status(client, broken.document.id, broken.job.id, "FAILED")
    retried = check(
        retry_processing_job.sync_detailed(broken.document.id, broken.job.id, client=client), 202, JobView, "retry"
    )
    if retried.status != "QUEUED":
        fail(f"retry: the job is {retried.status}")

    # Analyze several documents again; an analysis already queued is returned.
    bulk = check(
        reanalyze_documents.sync_detailed(client=client, body=ReanalyzeRequest(ids=[document_id])),
        202,
        BulkView,
        "reanalyze",
    )
    if [result.document_id for result in bulk.results] != [document_id]:
        fail(f"reanalyze: {bulk.to_dict()}")

    # A second DELETE purges for good.
    check(trash_document.sync_detailed(broken.document.id, client=client), 200, TrashView, "trash the broken one")
    check(trash_document.sync_detailed(broken.document.id, client=client), 202, PurgeView, "purge")
    # Webhooks: subscribe (the secret shown only now), read its deliveries, turn it on,
    # delete it.
    subscribed = check(
        create_webhook.sync_detailed(
            client=client,
            body=NewWebhookBody(
                url="https://hooks.example.com/quire",
                event_types=[EventTypeName.DOCUMENT_READY, EventTypeName.DOCUMENT_FAILED, EventTypeName.JOB_FAILED],
            ),
        ),
        201,
        CreatedWebhookView,
        "subscribe",
    )
    if not subscribed.secret.startswith("whsec_"):
        fail("subscribe: no whsec_ secret")
    check(list_webhook_deliveries.sync_detailed(subscribed.id, client=client), 200, DeliveryList, "deliveries")
    check(
        edit_webhook.sync_detailed(subscribed.id, client=client, body=WebhookPatchBody(enabled=True)),
        200,
        WebhookView,
        "turn it on",
    )
    check(get_webhook.sync_detailed(subscribed.id, client=client), 200, WebhookView, "the subscription")
    deleted = delete_webhook.sync_detailed(subscribed.id, client=client)
    if deleted.status_code != 204:
        fail(f"delete the subscription: {int(deleted.status_code)}")
    print("walk-through passed")


if __name__ == "__main__":
    main()
