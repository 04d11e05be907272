"""A stand-in for the Hugging Face hub, for the full-image build rehearsal only (`rebench images rehearse ENV`).

Full-scale preparation downloads models and data sets from the hub at image build. The rehearsal runs that real code
against this small HTTP server instead (`HF_ENDPOINT` pointed at it), which serves tiny generated repositories with
the file names and formats the real ones have, so the download, conversion and preparation code runs end to end
without the network or the gigabytes. A user's build never sees it: `rebench images build` leaves `HF_ENDPOINT`
unset, and a rehearsal's image carries a tag of its own (`images.rehearsal_tag`).

The server answers the hub's HTTP API as the `huggingface_hub` client uses it: repository info
(`/api/{models,datasets}/REPO[/revision/REV]`), file listings (`.../tree/REV[/PATH]`, `.../paths-info/REV`) and
file downloads (`[datasets/]REPO/resolve/REV/PATH`, with HEAD, ETag, commit header and byte ranges). Anything else
is a 404 that is recorded, so a test can say which request the preparation code made that the stand-in lacks.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import json
import re
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..spec.environment import EnvironmentSpec, full_image_module

RepoKind = Literal["model", "dataset"]
# One fixed commit for every repository: the client only needs a 40-hex revision to name its cache folders.
COMMIT = "0" * 39 + "1"


@dataclass(frozen=True)
class HubRepo:
    kind: RepoKind
    repo_id: str
    files: dict[str, bytes]


@dataclass
class HubStandIn:
    """The repositories served, and the requests that found nothing (`missed`)."""

    repos: dict[tuple[RepoKind, str], HubRepo]
    missed: list[str] = field(default_factory=list)
    served: list[str] = field(default_factory=list)

    def repo(self, kind: RepoKind, repo_id: str) -> HubRepo | None:
        return self.repos.get((kind, repo_id))


def _etag(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _tree_entries(repo: HubRepo, folder: str, recursive: bool) -> list[dict[str, object]]:
    """The hub's listing of a folder: files (with size and oid) and the sub-folders on the way to them."""
    prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
    entries: dict[str, dict[str, object]] = {}
    for path, content in sorted(repo.files.items()):
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :].split("/")
        for depth in range(1, len(rest)):
            if depth > 1 and not recursive:
                break
            sub = prefix + "/".join(rest[:depth])
            entries.setdefault(sub, {"type": "directory", "oid": COMMIT, "size": 0, "path": sub})
        if len(rest) == 1 or recursive:
            entries[path] = {
                "type": "file",
                "oid": hashlib.sha1(content).hexdigest(),
                "size": len(content),
                "path": path,
                "lfs": {"oid": _etag(content), "size": len(content), "pointerSize": 134},
            }
    return list(entries.values())


def _info(repo: HubRepo) -> dict[str, object]:
    return {
        "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
        "id": repo.repo_id,
        "author": repo.repo_id.split("/")[0],
        "sha": COMMIT,
        "private": False,
        "gated": False,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "tags": [],
        "cardData": {},
        "lastModified": "2024-01-01T00:00:00.000Z",
        "createdAt": "2024-01-01T00:00:00.000Z",
        "siblings": [{"rfilename": path, "size": len(content)} for path, content in sorted(repo.files.items())],
    }


_API = re.compile(r"^/api/(models|datasets)/(?P<repo>[^/]+/[^/]+|[^/]+)(?P<rest>/.*)?$")
_RESOLVE = re.compile(r"^/(?P<dataset>datasets/)?(?P<repo>[^/]+/[^/]+|[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")


class _Handler(http.server.BaseHTTPRequestHandler):
    hub: HubStandIn  # set on the subclass made per server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self._answer(head=False, body=body)

    def _answer(self, *, head: bool, body: str = "") -> None:
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        query = urllib.parse.parse_qs(url.query)
        api = _API.match(path)
        if api:
            kind: RepoKind = "model" if api.group(1) == "models" else "dataset"
            repo = self.hub.repo(kind, api.group("repo"))
            rest = api.group("rest") or ""
            if repo is not None:
                answer = self._api(repo, rest, query, body)
                if answer is not None:
                    self.hub.served.append(f"{self.command} {self.path}")
                    return self._json(answer, head=head)
            return self._missing(head, "RepoNotFound" if repo is None else "EntryNotFound")
        resolve = _RESOLVE.match(path)
        if resolve:
            kind = "dataset" if resolve.group("dataset") else "model"
            repo = self.hub.repo(kind, resolve.group("repo"))
            content = repo.files.get(resolve.group("path")) if repo else None
            if content is not None:
                self.hub.served.append(f"{self.command} {self.path}")
                return self._file(content, head=head)
            return self._missing(head, "RepoNotFound" if repo is None else "EntryNotFound")
        return self._missing(head, "RepoNotFound")

    def _api(self, repo: HubRepo, rest: str, query: dict[str, list[str]], body: str) -> object | None:
        if rest in ("", "/") or re.fullmatch(r"/revision/[^/]+", rest):
            return _info(repo)
        tree = re.fullmatch(r"/tree/[^/]+(?P<folder>/.*)?", rest)
        if tree:
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            folder = (tree.group("folder") or "").strip("/")
            if folder and folder in repo.files:
                return None
            entries = _tree_entries(repo, folder, recursive)
            return entries if entries or not folder else None
        if re.fullmatch(r"/paths-info/[^/]+", rest):
            form = urllib.parse.parse_qs(body)
            wanted = form.get("paths", [])
            if not wanted and body.startswith("{"):
                wanted = json.loads(body).get("paths", [])
            everything = _tree_entries(repo, "", recursive=True)
            return [entry for entry in everything if entry["path"] in wanted]
        return None

    def _json(self, answer: object, *, head: bool) -> None:
        content = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(content)))
        self.send_header("X-Repo-Commit", COMMIT)
        self.end_headers()
        if not head:
            self.wfile.write(content)

    def _file(self, content: bytes, *, head: bool) -> None:
        start, end = 0, len(content) - 1
        ranged = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if ranged and (ranged.group(1) or ranged.group(2)):
            if ranged.group(1):
                start = int(ranged.group(1))
                end = min(int(ranged.group(2)), end) if ranged.group(2) else end
            else:
                start = max(0, len(content) - int(ranged.group(2)))
        part = content[start : end + 1]
        self.send_response(206 if ranged and part != content else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(part)))
        self.send_header("Accept-Ranges", "bytes")
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{start + len(part) - 1}/{len(content)}")
        self.send_header("ETag", f'"{_etag(content)}"')
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("X-Linked-Etag", f'"{_etag(content)}"')
        self.send_header("X-Linked-Size", str(len(content)))
        self.end_headers()
        if not head:
            self.wfile.write(part)

    def _missing(self, head: bool, code: str) -> None:
        self.hub.missed.append(f"{self.command} {self.path}")
        content = json.dumps({"error": f"{code}: not served by the rehearsal's hub stand-in"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(content)))
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", "not served by the rehearsal's hub stand-in")
        self.end_headers()
        if not head:
            self.wfile.write(content)


@contextlib.contextmanager
def serve_hub(repos: list[HubRepo], host: str = "127.0.0.1", port: int = 0) -> Iterator[tuple[str, HubStandIn]]:
    """Serve `repos` on `host:port` (0: any free port) while the block runs; yields (endpoint URL, the stand-in)."""
    hub = HubStandIn({(repo.kind, repo.repo_id): repo for repo in repos})
    handler = type("HubHandler", (_Handler,), {"hub": hub})
    server = http.server.ThreadingHTTPServer((host, port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}", hub
    finally:
        server.shutdown()
        server.server_close()


# --- tiny assets of the real repositories' formats and file names ---


def generated_documents(count: int, seed: int) -> list[str]:
    """`count` documents of pronounceable pseudo-words (the smoke corpus's generator; a fixed seed: the same text on
    every run). Any text serves: the GPT-2 tokenizer encodes whatever it is given."""
    from rebench.lm_common import corpus

    words = corpus.synthetic_vocabulary(300, seed)
    return corpus.synthetic_documents(count, words, seed + 1, mean_length=60)


def parquet_bytes(columns: dict[str, list[str]]) -> bytes:
    import pyarrow as pa  # the dev extra's datasets brings it; only the rehearsal needs it
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer)
    return buffer.getvalue()


# OpenWebText as the hub serves it since its conversion from a loading script: Parquet shards with one `text` column
# under plain_text/ (80 shards in the real repository; the rehearsal serves 2 of that naming, short documents, more
# than the 4000 that the environments hold out).
OPENWEBTEXT_SHARDS = 80


def openwebtext(repo_id: str = "Skylion007/openwebtext", documents: int = 4400) -> HubRepo:
    texts = generated_documents(documents, seed=2357)
    half = len(texts) // 2
    files = {
        f"plain_text/train-{index:05d}-of-{OPENWEBTEXT_SHARDS:05d}.parquet": parquet_bytes({"text": part})
        for index, part in enumerate((texts[:half], texts[half:]))
    }
    return HubRepo("dataset", repo_id, files)


def tiny_gpt2(repo_id: str, seed: int) -> HubRepo:
    """A GPT-2 model repository (config.json, generation_config.json, model.safetensors, as `save_pretrained` writes
    them) with GPT-2's vocabulary and context but 2 layers of width 32: `GPT2LMHeadModel.from_pretrained` loads it."""
    import torch  # the dev extra's transformers and torch make it
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=1024, vocab_size=50257)
    return HubRepo("model", repo_id, _saved_files(GPT2LMHeadModel(config)))


def _saved_files(model) -> dict[str, bytes]:
    with tempfile.TemporaryDirectory(prefix="rebench-standin-") as folder:
        model.save_pretrained(folder, safe_serialization=True)
        return {path.name: path.read_bytes() for path in sorted(Path(folder).iterdir()) if path.is_file()}


def assets_for(environment: EnvironmentSpec) -> list[HubRepo]:
    """The stand-in repositories `environment`'s full-scale preparation downloads: the `hub_repos()` of its
    `full_image` module (tasks/<env>/full_image.py; none: it downloads nothing from the hub)."""
    module = full_image_module(environment)
    return list(module.hub_repos()) if module is not None and hasattr(module, "hub_repos") else []
