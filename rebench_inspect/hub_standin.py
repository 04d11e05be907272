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
import subprocess
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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
# than the 4000 that restricted_mlm holds out).
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


def alpaca(repo_id: str = "tatsu-lab/alpaca", rows: int = 1200) -> HubRepo:
    """Alpaca's one Parquet file (columns instruction, input, output, text), with generated instructions."""
    documents = generated_documents(rows * 2, seed=52002)
    instructions = [text[:200] for text in documents[:rows]]
    outputs = [text[:300] for text in documents[rows:]]
    inputs = ["" if index % 3 else documents[index][:80] for index in range(rows)]
    texts = [
        f"### Instruction:\n{instruction}\n\n### Input:\n{extra}\n\n### Response:\n{output}"
        for instruction, extra, output in zip(instructions, inputs, outputs, strict=True)
    ]
    columns = {"instruction": instructions, "input": inputs, "output": outputs, "text": texts}
    return HubRepo("dataset", repo_id, {"data/train-00000-of-00001-a09b74b3ef9c3b56.parquet": parquet_bytes(columns)})


# CodeContests' split sizes the preparation relies on: the held-out test split has the paper's 165 problems.
CODE_CONTESTS_SPLITS = {"test": 165, "valid": 12, "train": 60}


def code_contests(repo_id: str = "deepmind/code_contests") -> HubRepo:
    """CodeContests' Parquet layout (data/<split>-NNNNN-of-NNNNN-<hash>.parquet; the hashes are made up) and columns,
    with generated problems: an echo task each, public/private/generated tests, Codeforces and other sources."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tests = pa.struct([("input", pa.list_(pa.string())), ("output", pa.list_(pa.string()))])
    solutions = pa.struct([("language", pa.list_(pa.int64())), ("solution", pa.list_(pa.string()))])
    schema = pa.schema(
        [
            ("name", pa.string()),
            ("description", pa.string()),
            ("public_tests", tests),
            ("private_tests", tests),
            ("generated_tests", tests),
            ("source", pa.int64()),
            ("difficulty", pa.int64()),
            ("solutions", solutions),
            ("incorrect_solutions", solutions),
            ("cf_contest_id", pa.int64()),
            ("cf_index", pa.string()),
            ("cf_points", pa.float32()),
            ("cf_rating", pa.int64()),
            ("cf_tags", pa.list_(pa.string())),
            ("is_description_translated", pa.bool_()),
            ("untranslated_description", pa.string()),
            ("time_limit", pa.struct([("seconds", pa.int64()), ("nanos", pa.int64())])),
            ("memory_limit_bytes", pa.int64()),
            ("input_file", pa.string()),
            ("output_file", pa.string()),
        ]
    )
    files = {}
    for split, count in CODE_CONTESTS_SPLITS.items():
        rows: list[dict[str, object]] = []
        for index in range(count):
            cases = [f"{split} {index} {case}\n" for case in range(3)]
            rows.append(
                {
                    "name": f"{1000 + index}_{split.upper()[0]}. Echo {index}",
                    "description": "Print the line you are given.",
                    "public_tests": {"input": cases[:1], "output": cases[:1]},
                    "private_tests": {"input": cases[1:2], "output": cases[1:2]},
                    "generated_tests": {"input": cases[2:], "output": cases[2:]},
                    "source": 2 if index % 2 else 1,
                    "difficulty": 7 if index % 3 else 1,
                    "solutions": {"language": [2], "solution": ["fn main() {}"]},
                    "incorrect_solutions": {"language": [], "solution": []},
                    "cf_contest_id": 1000 + index,
                    "cf_index": "A",
                    "cf_points": 500.0,
                    "cf_rating": 800 + 100 * (index % 8),
                    "cf_tags": ["implementation"],
                    "is_description_translated": False,
                    "untranslated_description": "",
                    "time_limit": {"seconds": 2, "nanos": 0},
                    "memory_limit_bytes": 256 * 1024 * 1024,
                    "input_file": "",
                    "output_file": "",
                }
            )
        table = pa.Table.from_pylist(rows, schema=schema)
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        digest = hashlib.sha1(split.encode()).hexdigest()[:16]
        files[f"data/{split}-00000-of-00001-{digest}.parquet"] = buffer.getvalue()
    return HubRepo("dataset", repo_id, files)


def tiny_deepseek_coder(repo_id: str = "deepseek-ai/deepseek-coder-1.3b-base") -> HubRepo:
    """deepseek-coder's family at toy size (LlamaForCausalLM, byte-level BPE with its special tokens), made by the
    smoke scale's own code (make_base_model.py in the LLM Foundry venv of this host): the files `save_pretrained`
    writes, which the full scale's `snapshot_download` then fetches by the same patterns."""
    from rebench.environments import ENVIRONMENTS
    from rebench.optimize_llm_foundry.sandbox import prepare as foundry
    from rebench.optimize_llm_foundry.sandbox import stack

    from .staging import sandbox_command, stage_tree

    smoke = foundry.SETTINGS["smoke"]
    with tempfile.TemporaryDirectory(prefix="rebench-standin-") as folder:
        texts, model, code = Path(folder) / "rows.jsonl", Path(folder) / "model", Path(folder) / "code"
        foundry.write_rows(
            texts, foundry.generate_rows(smoke["rows"], smoke["visible_seed"], smoke["functions_per_row"])
        )
        # The stack's Python runs the staged tree, as preparation does in the image.
        stage_tree(ENVIRONMENTS["optimize_llm_foundry"], code)
        arguments = ["tiny", str(model), "--texts", str(texts), "--settings", json.dumps(smoke["base_model"]["make"])]
        command, cwd = sandbox_command(
            f"{foundry.__package__}.make_base_model", arguments, python=str(stack.llm_foundry_python()), code_dir=code
        )
        subprocess.run(command, cwd=cwd, check=True, capture_output=True, timeout=900)
        return HubRepo("model", repo_id, {path.name: path.read_bytes() for path in sorted(model.iterdir())})


# Which stand-in repositories each environment's full-scale preparation downloads (the repositories its
# prepare.py names; optimize_kernel downloads nothing).
ASSETS: dict[str, Callable[[], list[HubRepo]]] = {
    "scaling_law": lambda: [openwebtext()],
    "restricted_mlm": lambda: [openwebtext()],
    "fix_embedding": lambda: [
        openwebtext(),
        tiny_gpt2("openai-community/gpt2-xl", seed=1),
        tiny_gpt2("openai-community/gpt2", seed=2),
    ],
    "finetune_target": lambda: [
        alpaca(),
        tiny_gpt2("openai-community/gpt2-xl", seed=1),
        tiny_gpt2("vicgalle/gpt2-alpaca", seed=3),
    ],
    "rust_codecontests": lambda: [code_contests()],
    "optimize_llm_foundry": lambda: [tiny_deepseek_coder()],
}


def assets_for(environment: str) -> list[HubRepo]:
    """The stand-in repositories for `environment` (empty: its preparation downloads nothing from the hub)."""
    make = ASSETS.get(environment)
    return make() if make else []
