"""rust_codecontests's full image, for the build rehearsal (`rebench images rehearse rust_codecontests`,
rebench_inspect/tools/rehearsal.py): preparation downloads CodeContests' three splits; scoring
calls the scaffold model's proxy, which the task opens on the host for each scoring run.
"""

import hashlib
import io

from rebench_inspect import HubRepo

# A bare container has no proxy: the scoring program must stop with this sentence (sandbox/score.py, NO_PROXY).
SCORING_HOST_SERVICE = "no scoring model proxy was opened"


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


def hub_repos() -> list[HubRepo]:
    return [code_contests()]
