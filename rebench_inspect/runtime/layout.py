"""Where things live in a sandbox: the agent's workspace, the root-only protected folder, the interpreter.

Containers (Docker, k8s) use fixed absolute paths and an unprivileged agent user. The local sandbox (smoke runs,
development) cannot switch users, so it uses the sample's temporary directory and the host's interpreter.
"""

import sys

from inspect_ai.util import SandboxEnvironment, sandbox
from pydantic import BaseModel

from .staging import ProgramPaths

CONTAINER_HOME = "/home/agent"
CONTAINER_PROTECTED = "/protected"
# Scoring programs' temporary files: root's (its parent is root's too, so the agent cannot make it first), and not in
# /tmp, /var/tmp or /dev/shm, which the agent can fill to their caps.
CONTAINER_SCORING_SCRATCH = "/var/lib/rebench-scoring"


class SandboxLayout(BaseModel):
    workspace: str
    protected: str
    python: str
    agent_user: str | None
    is_container: bool
    # Which of the sample's sandboxes this layout describes (None: the default one, the agent's).
    sandbox_name: str | None = None
    # The service scoring runs in, apart from the agent (None: scoring runs in this sandbox).
    scoring_service: str | None = None

    @property
    def scoring_layout(self) -> "SandboxLayout":
        """Where scoring runs: the scoring service (the same paths in a container of its own), else here."""
        if self.scoring_service is None:
            return self
        return self.model_copy(update={"sandbox_name": self.scoring_service, "scoring_service": None})

    def sandbox(self) -> SandboxEnvironment:
        return sandbox(self.sandbox_name)

    @property
    def code_dir(self) -> str:
        """Where the staged tree goes (root-only, fresh for each preparation, scoring and process-control run)."""
        return f"{self.protected}/code"

    @property
    def program_paths(self) -> ProgramPaths:
        """Where a program staged in `code_dir` runs (the staging command builders' paths)."""
        return ProgramPaths(
            python=self.python, code_dir=self.code_dir, workspace=self.workspace, protected=self.protected
        )

    @property
    def scoring_scratch(self) -> str | None:
        """Where scoring programs keep temporary files (None: the system's; the local sandbox has no agent user)."""
        return CONTAINER_SCORING_SCRATCH if self.is_container else None


def is_local_sandbox(environment: SandboxEnvironment) -> bool:
    # Inspect exports no public name for its local provider; `as_type` sees through its event-recording proxy.
    from inspect_ai.util._sandbox.local import LocalSandboxEnvironment

    try:
        environment.as_type(LocalSandboxEnvironment)
    except TypeError:
        return False
    return True


async def detect_layout(agent_user: str | None, scoring_service: str | None = None) -> SandboxLayout:
    """Resolve the layout for the current sample's default sandbox (whatever `--sandbox` chose). `scoring_service`:
    the service to score in, where the sandbox is a container (the local sandbox has no second machine)."""
    environment = sandbox()
    if is_local_sandbox(environment):
        result = await environment.exec(["pwd"])
        home = result.stdout.strip()
        return SandboxLayout(
            workspace=f"{home}/workspace",
            protected=f"{home}/protected",
            python=sys.executable,
            agent_user=None,
            is_container=False,
        )
    if scoring_service is not None:
        try:
            sandbox(scoring_service)
        except ValueError:
            raise RuntimeError(
                f"this sandbox has no service {scoring_service!r} to score in apart from the agent: run the task with "
                "the sandbox rebench generates for it (--sandbox docker or k8s without a config of your own)"
            ) from None
    return SandboxLayout(
        workspace=f"{CONTAINER_HOME}/workspace",
        protected=CONTAINER_PROTECTED,
        python="python3",
        agent_user=agent_user,
        is_container=True,
        scoring_service=scoring_service,
    )
