"""Selection bias made visible: re-score the counted (best) submission on a second, disjoint held-out set.

Scoring many times and keeping the best overfits the judge's noise (the paper's best agent fell from 0.88 to 0.69
on re-scoring). With `-T rescore_best=true` every scoring run keeps a root-only copy of the best submission so far
(`REBENCH_FT_KEEP_BEST=1`), and after the final scoring pass this scorer runs the scoring program once more on that
copy with the second held-out set, reporting both numbers. The official score is unchanged.
"""

import math
from collections.abc import Sequence

from inspect_ai.scorer import Score, Scorer, Target, mean, scorer
from inspect_ai.solver import TaskState

from rebench_inspect import (
    ResolvedEnvironment,
    SandboxService,
    current_layout,
    final_entry,
    run_scoring_program,
    score_entry,
    score_log,
)

from .judge_service import env_service

RESCORE_SCORER = "finetune_target_rescore"


@scorer(metrics={"selected": [mean()], "rescored": [mean()]}, name=RESCORE_SCORER)
def rescore_best(environment: ResolvedEnvironment, services: Sequence[SandboxService] = ()) -> Scorer:
    """After the final pass: the counted entry's win rate (set 1) and the same submission's on held-out set 2."""

    async def score(state: TaskState, target: Target) -> Score | None:
        if not state.completed:
            return None  # intermediate scoring runs: nothing to add
        counted = final_entry(score_log(), environment.spec.final_rule)
        if counted is None:
            return Score(
                value={"selected": math.nan, "rescored": math.nan}, explanation="no valid score-log entry to re-score"
            )
        sha = counted.details.get("checkpoint_sha256")
        extra = env_service({"REBENCH_FT_HELDOUT": "second", "REBENCH_FT_CHECKPOINT": str(sha)})
        result = await run_scoring_program(environment, current_layout(), [*services, extra])
        again = score_entry(
            environment,
            index=counted.index,
            label="rescored",
            wall_time_s=0.0,
            working_time_s=None,
            valid=result.valid,
            raw=result.raw,
            message=result.message,
            details=result.details,
        )
        rescored = again.raw if again.valid and again.raw is not None else math.nan
        return Score(
            value={"selected": counted.raw if counted.raw is not None else math.nan, "rescored": rescored},
            answer=f"entry {counted.index} ({counted.label})",
            explanation=(
                f"entry {counted.index}: win rate {counted.raw:.3f} on held-out set 1 (where it was selected), "
                + (
                    f"{rescored:.3f} on the disjoint held-out set 2"
                    if again.valid
                    else f"re-scoring invalid: {result.message}"
                )
            ),
            metadata={
                "selected": counted.model_dump(),
                "rescored": again.model_dump(),
                "selected_stderr": counted.details.get("stderr"),
                "rescored_stderr": result.details.get("stderr"),
            },
        )

    return score
