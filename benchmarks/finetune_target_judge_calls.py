"""How many judge calls the agent's comparisons cost through Inspect's agent bridge, and how long they take.

    python benchmarks/finetune_target_judge_calls.py [--sandbox docker|local] [--comparisons 96] [--in-flight 48]

One smoke eval of finetune_target (its smoke image for `docker`: `rebench images build finetune_target --scale smoke`)
whose scripted agent asks the judge for COMPARISONS comparisons through the workspace's `evaluation.py`, IN_FLIGHT at
a time. Prints one JSON object: the comparisons asked, the judge calls the harness's ledger charged to the agent (a
client retry after a timeout is a call of its own), the seconds the agent's comparisons took (null when they did not
finish within the eval's 15 minutes) and the eval's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from timing import machine

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.testing.fixtures import fixed_smoke_anchors
from rebench_inspect.testing.scripted import scripted_agent, tool_call

ENVIRONMENT = "finetune_target"


def comparisons_command(comparisons: int, in_flight: int, python: str) -> str:
    code = (
        "from evaluation import Judge; import time; "
        f"judge = Judge(concurrency={in_flight}); started = time.time(); "
        f"judge.compare_many([('Say hello.', 'Hello.', 'Hi.')] * {comparisons}); "
        "print('SECONDS', round(time.time() - started, 1))"
    )
    return f'timeout 900 {python} -c "{code}" 2>&1 | tail -n 3'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", choices=["docker", "local"], default="docker")
    parser.add_argument("--comparisons", type=int, default=96)
    parser.add_argument("--in-flight", type=int, default=48)
    args = parser.parse_args()

    from inspect_ai import eval as inspect_eval

    task = TASKS[ENVIRONMENT](
        scale="smoke",
        sandbox=args.sandbox,
        time_budget_hours=0.5,
        anchors=fixed_smoke_anchors(ENVIRONMENTS[ENVIRONMENT]),
        **({"agent_user": None} if args.sandbox == "local" else {}),
    )
    # The image's shells find its venv's python; the local sandbox's, the system's: this interpreter instead.
    python = "python" if args.sandbox == "docker" else sys.executable
    agent = scripted_agent([tool_call("bash", command=comparisons_command(args.comparisons, args.in_flight, python))])
    started = time.monotonic()
    [log] = inspect_eval(task, model=agent, display="none", log_dir=None)
    eval_seconds = time.monotonic() - started
    [sample] = log.samples or [None]
    output = next((m.text for m in sample.messages if m.role == "tool"), "") if sample else ""
    seconds = [line.split()[1] for line in output.splitlines() if line.startswith("SECONDS ")]
    ledger = sample.store.get("rebench:model_proxy:judge", {}) if sample else {}
    print(
        json.dumps(
            {
                "machine": machine(),
                "sandbox": args.sandbox,
                "comparisons": args.comparisons,
                "in_flight": args.in_flight,
                "agent_judge_calls": ledger.get("agent", {}).get("requests"),
                "comparisons_s": float(seconds[0]) if seconds else None,
                "eval_s": round(eval_seconds, 1),
                "eval_status": log.status,
            }
        )
    )


if __name__ == "__main__":
    main()
