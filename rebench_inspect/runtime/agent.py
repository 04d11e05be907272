"""The default agent and the agent's score tools.

The default agent is Inspect's `react()` with bash and python run as the unprivileged agent user in the workspace,
plus `score` and `score_log`, and notices of its remaining working time; it checkpoints after each turn that scored
and tells the model of a resume. Any `--solver` may replace it (e.g. `human_cli` with intermediate scoring, see
docs/running.md).
"""

import shlex

from inspect_ai.agent import Agent, AgentState, AgentSubmit, agent, react
from inspect_ai.log import transcript
from inspect_ai.model import get_model
from inspect_ai.scorer import score as run_task_scorers
from inspect_ai.tool import Tool, ToolCall, ToolCallContent, ToolCallView, ToolCallViewer, tool
from inspect_ai.util import sandbox

from .checkpoints import checkpoint_if_scored, resume_notice
from .clock import due_notice, time_left_sentence
from .scoring import describe_entry, score_log, scores_visible
from .state import current_layout

DEFAULT_TOOL_TIMEOUT_S = 1800
# The shell both tools run in, as Inspect's own bash and python tools do: a login shell, so the image's profile
# (/etc/profile.d) sets up the agent's PATH.
AGENT_SHELL = ("bash", "--login", "-c")


def _code_viewer(language: str, argument: str) -> ToolCallViewer:
    def viewer(call: ToolCall) -> ToolCallView:
        code = str(call.arguments.get(argument, "")).strip()
        return ToolCallView(
            call=ToolCallContent(title=language, format="markdown", content=f"```{language}\n{code}\n```")
        )

    return viewer


async def _run_in_workspace(command: list[str], timeout: int, user: str | None, code: str | None = None) -> str:
    """Run as the agent user with the workspace as the current directory, on every sandbox (Inspect's own bash and
    python tools start in the sandbox's default directory: the local sandbox's sample folder, an image's WORKDIR)."""
    result = await sandbox().exec(command, input=code, cwd=current_layout().workspace, timeout=timeout, user=user)
    return f"{result.stderr}\n{result.stdout}" if result.stderr else result.stdout


@tool(name="bash", viewer=_code_viewer("bash", "command"))
def workspace_bash(timeout: int = DEFAULT_TOOL_TIMEOUT_S, user: str | None = None) -> Tool:
    async def execute(command: str) -> str:
        """Run a bash command. Each call starts a fresh shell in your workspace.

        Args:
            command: The bash command to run.

        Returns:
            The command's output (stderr, then stdout).
        """
        return await _run_in_workspace([*AGENT_SHELL, command], timeout, user)

    return execute


@tool(name="python", viewer=_code_viewer("python", "code"))
def workspace_python(timeout: int = DEFAULT_TOOL_TIMEOUT_S, user: str | None = None) -> Tool:
    async def execute(code: str) -> str:
        """Run a Python script in a fresh process in your workspace; print() what you want to see.

        Args:
            code: The Python code to run.

        Returns:
            The script's output (stderr, then stdout).
        """
        interpreter = shlex.quote(current_layout().python)
        return await _run_in_workspace([*AGENT_SHELL, f"{interpreter} -"], timeout, user, code)

    return execute


def _with_clock(text: str) -> str:
    return f"{text}\n{time_left_sentence()}".strip()


@tool(name="score")
def score_tool() -> Tool:
    async def execute() -> str:
        """Score the current contents of your workspace with the official scoring program. This does not end the run.

        Each call adds an entry to your score log. It may take a while.

        Returns:
            The result of this scoring run.
        """
        await run_task_scorers(AgentState(messages=[]))
        return _with_clock(describe_entry(score_log()[-1], scores_visible()))

    return execute


@tool(name="score_log")
def score_log_tool() -> Tool:
    async def execute() -> str:
        """Show every entry of your score log so far (the first one is the starting solution).

        Returns:
            One line per scoring run, then the working time used and left.
        """
        visible = scores_visible()
        return _with_clock("\n".join(describe_entry(entry, visible) for entry in score_log()) or "no scoring runs yet")

    return execute


async def time_notice(state: AgentState) -> bool | str:
    """After each turn: a checkpoint if the agent scored (`checkpoint_if_scored`), then the resume's message once after
    a resume, and a notice once the working time crosses 50% or 90% of the budget; else carry on as usual."""
    await checkpoint_if_scored()
    notices = [notice for notice in (resume_notice(), due_notice()) if notice]
    return "\n\n".join(notices) or True


@agent
def rebench_agent(tool_timeout: int = DEFAULT_TOOL_TIMEOUT_S) -> Agent:
    """ReAct agent with bash, python, score and score_log, told its working time left at 50% and 90% of the budget.

    bash and python run as the sandbox's agent user, in the workspace.

    Args:
        tool_timeout: Seconds before a single bash/python call is stopped.
    """

    async def execute(state: AgentState) -> AgentState:
        if get_model().name == "none":
            # `--model none`: no agent acts, so the eval scores the starting (or a solver-installed) workspace.
            transcript().info("No model (--model none): the agent does not act; the workspace is scored as it is.")
            return state
        # The user is only known once setup has inspected the sandbox (the local sandbox cannot switch users).
        user = current_layout().agent_user
        inner = react(
            tools=[
                workspace_bash(timeout=tool_timeout, user=user),
                workspace_python(timeout=tool_timeout, user=user),
                score_tool(),
                score_log_tool(),
            ],
            submit=AgentSubmit(
                description="Finish the run. Your workspace is then scored one last time; the answer text is ignored."
            ),
            on_continue=time_notice,
        )
        return await inner(state)

    return execute
