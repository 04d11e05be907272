"""What rebench knows about one environment: the facts of docs/benchmark.md's table and its README, as data.

An `EnvironmentSpec` is pure data: no Inspect objects and no heavy imports, so the registry stays light. The task
builder (`rebench_inspect.runtime.task.build_task`) turns it into an Inspect `Task`.
"""

import importlib
from enum import Enum
from importlib.resources import files
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .anchors import Anchors, load_anchors
from .scales import SCALES, Scale

__all__ = [
    "AGENT_COPY_SOURCES",
    "CONTAINER_LIMITS",
    "SCALES",
    "SMOKE_CPUS",
    "SMOKE_MEMORY_GB",
    "Anchors",
    "ContainerLimits",
    "EnvironmentSpec",
    "FinalRule",
    "ResolvedEnvironment",
    "Resources",
    "Scale",
    "Transform",
]

# The environment folders an agent copy may come from (`EnvironmentSpec.agent_copies`).
AGENT_COPY_SOURCES = ("sandbox", "agent")


class Transform(str, Enum):
    """How a raw metric becomes the transformed score y (docs/benchmark.md, Scores). Natural logarithms."""

    LOG = "log"  # run times: ln(seconds) or ln(milliseconds)
    LOG_LOSS = "log_loss"  # losses: ln(loss - 1.5), 1.5 = irreducible OpenWebText loss
    IDENTITY = "identity"  # win rates, solve fractions, 1 - distance


class FinalRule(str, Enum):
    """Which score-log entry counts at the end (docs/benchmark.md, Scores)."""

    BEST = "best"  # best valid entry
    LAST = "last"  # last valid entry (Scaling Law)


class Resources(BaseModel):
    """What one sample of the full-scale environment needs (the original's hardware: each environment's README)."""

    model_config = ConfigDict(frozen=True)

    gpus: int
    cpus: int
    memory_gb: int
    gpu_kind: str = "H100 80GB"


# Smoke runs on a laptop or a 2-core, 24 GB CI machine: no GPU, and room left for the host.
SMOKE_CPUS = 2
SMOKE_MEMORY_GB = 8


class ContainerLimits(NamedTuple):
    """What one sample's container may use besides its CPUs, memory and GPUs (the same for Docker and k8s)."""

    pids: int  # processes and threads of every user in the container together: a fork bomb stops here
    root_pids: int  # of `pids`, what no other user can take: the harness's commands (the stop, scoring) always start
    temp_gb: int  # each of the sandbox's temporary folders: a tmpfs, so it counts against the memory limit
    shm_gb: int  # /dev/shm
    # System V shared memory of the whole container (its IPC namespace), which no process's memory shows: capped, and
    # freed when no process has it attached (runtime.sandbox.ipc_sysctls)
    sysv_shm_mb: int


CONTAINER_LIMITS: dict[Scale, ContainerLimits] = {
    "smoke": ContainerLimits(pids=512, root_pids=128, temp_gb=1, shm_gb=1, sysv_shm_mb=256),
    # Room for 8-GPU data-parallel training with data-loader workers and their threads; shared memory for those
    # workers (PyTorch's default 64 MB breaks them).
    "full": ContainerLimits(pids=16384, root_pids=2048, temp_gb=16, shm_gb=16, sysv_shm_mb=1024),
}


class EnvironmentSpec(BaseModel):
    """One RE-Bench environment (docs/benchmark.md, The seven environments). Its folder is laid out by where code
    runs: the host part at the root (`task.py`, services), `sandbox/` (root-only in the sandbox: scoring, preparation,
    their data), `agent/workspace/` (the starting workspace), `reference/` (never staged), `tools/` (maintenance
    scripts run by developers)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="registered name: inspect eval rebench/<name>")
    metr_id: str
    paper_name: str
    transform: Transform
    lower_is_better: bool
    raw_unit: str = Field(
        default="",
        description="what a raw score counts, printed after it: a unit (ms, s) or a measure (loss, win rate)",
    )
    anchors: dict[Scale, Anchors]
    final_rule: FinalRule = FinalRule.BEST
    score_visible: bool = Field(default=True, description="False: the agent only ever learns validity")
    resources: Resources
    scoring_timeout_s: dict[Scale, int] = Field(description="upper bound for one run of the scoring program")
    # pydantic's stub cannot see that the lambda's keys are the Scale literals
    setup_timeout_s: dict[Scale, int] = Field(default_factory=lambda: {"smoke": 600, "full": 3600})  # type: ignore[arg-type]
    instruction_fields: dict[Scale, dict[str, str]] = Field(
        default_factory=dict, description="per scale, extra str.format fields of instructions.md"
    )
    sandbox_libraries: tuple[str, ...] = Field(
        default=("sandbox_lib",),
        description="folders of the rebench package staged beside the environment's sandbox/ in the sandbox",
    )
    agent_copies: dict[str, str] = Field(
        default_factory=dict,
        description="workspace path → file under the environment's sandbox/ or agent/ also given to the agent at "
        "setup (e.g. a copy of the evaluator for local validation; the scorer never uses the agent's copy); `{scale}` "
        "in the file's path names the scale's variant",
    )
    agent_runs_setuid: bool = Field(
        default=False,
        description="the agent's tools start a setuid program (e.g. sudo to a trainer user), so its sandbox "
        "may not set no-new-privileges",
    )
    calibration_note: str = Field(
        default="",
        description="what `rebench calibrate` says about the host its measured anchors depend on; `{logical_cpus}` "
        "is the host's count of logical CPUs as seen in the sandbox",
    )
    workspace_ignore: tuple[str, ...] = Field(
        default=(), description="glob patterns of workspace files never copied into a scoring snapshot"
    )
    build_files: str | None = Field(
        default=None,
        description="'module:function' called as function(served_folder) when the environment's image is built: it "
        "adds files its Dockerfile fetches with rebench-build-run (e.g. a toolchain from the build host); imported "
        "only then",
    )
    agent_extra_users: tuple[str, ...] = Field(
        default=(),
        description="users the agent can start processes as besides its own (e.g. through a sudo rule to a "
        "trainer user): their processes count as the agent's, frozen while scoring runs the agent's code "
        "and killed before the final score",
    )
    isolated_scoring: bool = Field(
        default=False,
        description="in Docker and k8s, every scoring run happens in a second service of the sandbox (same image, "
        "no network, none of the agent's files or processes) that gets a root-made copy of the workspace: for "
        "scoring programs that run anything the agent wrote, or load a file whose loading runs code (README, "
        "security model)",
    )
    local_check: str | None = Field(
        default=None,
        description="a script of the environment folder (e.g. `sandbox/stack.py`), run with the host's Python, that "
        "exits non-zero and says what is missing and how to install it when this machine cannot run the environment "
        "on the local sandbox (software the images carry but a plain `pip install rebench` does not)",
    )

    smoke_anchor_runs: int = Field(
        default=0,
        ge=0,
        description="a timed environment: at smoke scale each sample measures its starting and reference solutions "
        "this many times each on the machine it runs on, at setup, and normalises against those (the fixed smoke "
        "anchors would say more about the machine's load than about the solution); 0: the fixed anchors",
    )

    location: Path | None = Field(
        default=None, description="the environment's folder; default: <name>/ inside the installed rebench package"
    )

    @field_validator("agent_copies")
    @classmethod
    def _copies_come_from_sandbox_or_agent(cls, copies: dict[str, str]) -> dict[str, str]:
        # One home per file: what the agent also gets lives with the scorer (sandbox/) or with the agent (agent/),
        # never in the host part, the reference or the maintenance tools.
        outside = sorted(source for source in copies.values() if source.split("/")[0] not in AGENT_COPY_SOURCES)
        if outside:
            raise ValueError(f"agent_copies must come from sandbox/ or agent/, not {', '.join(outside)}")
        return copies

    @property
    def folder(self) -> Path:
        return self.location or Path(str(files("rebench"))) / self.name

    @property
    def instructions_template(self) -> str:
        return (self.folder / "instructions.md").read_text()

    @property
    def workspace_dir(self) -> Path:
        """The starting workspace, copied into the agent's workspace at setup."""
        return self.folder / "agent" / "workspace"

    @property
    def sandbox_dir(self) -> Path:
        """What runs in the sandbox as root (scoring program, preparation, the data they read): staged wholesale."""
        return self.folder / "sandbox"

    @property
    def reference_dir(self) -> Path:
        return self.folder / "reference"

    @property
    def prepare_script(self) -> Path | None:
        path = self.sandbox_dir / "prepare.py"
        return path if path.exists() else None

    def at(self, scale: Scale, anchors_file: str | Path | None = None) -> "ResolvedEnvironment":
        """This environment at `scale`, everything the scale decides looked up once; `anchors_file` (from
        `rebench calibrate`) replaces the scale's anchors. Raises ValueError (an unknown scale, an anchors file made
        for another environment or scale) or OSError (an unreadable file)."""
        if scale not in SCALES:
            raise ValueError(f"scale must be {' or '.join(SCALES)}, not {scale!r}")
        anchors = self.anchors[scale]
        if anchors_file is not None:
            anchors = load_anchors(anchors_file, self.name, scale, anchors)
        smoke = scale == "smoke"
        return ResolvedEnvironment(
            spec=self,
            scale=scale,
            anchors=anchors,
            anchors_file=None if anchors_file is None else str(anchors_file),
            scoring_timeout_s=self.scoring_timeout_s[scale],
            setup_timeout_s=self.setup_timeout_s[scale],
            instruction_fields=self.instruction_fields.get(scale, {}),
            resources=(
                self.resources.model_copy(update={"gpus": 0, "cpus": SMOKE_CPUS, "memory_gb": SMOKE_MEMORY_GB})
                if smoke
                else self.resources
            ),
            container_limits=CONTAINER_LIMITS[scale],
            agent_copies={relative: source.replace("{scale}", scale) for relative, source in self.agent_copies.items()},
        )


class ResolvedEnvironment(BaseModel):
    """One environment at one scale (`EnvironmentSpec.at`): what the scale decides, resolved once per run and handed
    to setup, scoring, staging and the sandbox. What does not depend on the scale stays on `spec`."""

    model_config = ConfigDict(frozen=True)

    spec: EnvironmentSpec
    scale: Scale
    anchors: Anchors = Field(description="the scale's anchors, or a calibration file's, or this sample's measured ones")
    anchors_file: str | None = Field(description="the calibration file the anchors come from (None: built in)")
    scoring_timeout_s: int
    setup_timeout_s: int
    instruction_fields: dict[str, str]
    resources: Resources = Field(description="the sandbox's: at smoke scale a CPU machine's, whatever the spec says")
    container_limits: ContainerLimits
    agent_copies: dict[str, str] = Field(description="workspace path → source, `{scale}` replaced by the scale")

    @property
    def name(self) -> str:
        return self.spec.name

    def with_anchors(self, anchors: Anchors) -> "ResolvedEnvironment":
        """The same environment normalised against other anchors (this sample's measured ones)."""
        return self.model_copy(update={"anchors": anchors})


def full_image_module(environment: EnvironmentSpec) -> ModuleType | None:
    """tasks/<env>/full_image.py: what a full image of the environment needs beyond its Dockerfile (the stand-in
    repositories of a rehearsal, the versions fidelity.md states, the torch releases it holds); None where it has
    none. Its names: `hub_repos()`, `FIDELITY_PINS`, `IMAGE_TORCH`, `OWN_VENV`, `SCORING_HOST_SERVICE`."""
    name = f"rebench.{environment.name}.full_image"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as ex:
        if ex.name != name:
            raise
        return None
