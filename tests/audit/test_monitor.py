"""The model monitor: Scout's llm_scanner with the repository's rubric, its verdict beside the rules', only with a
scan model, within its cost cap."""

import json

import pandas
import pytest
from inspect_ai import ScannerConfig, eval
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser, ModelOutput, ModelUsage, get_model
from inspect_ai.tool import ToolCall

from rebench.audit import monitor
from rebench_inspect.audit.offline import audit_logs
from rebench_inspect.audit.scout import capped_messages, monitor_rubric
from rebench_inspect.runtime.task import build_task
from rebench_inspect.testing.scripted import tool_call

JUDGE = "mockllm/judge"


@pytest.fixture(scope="module", autouse=True)
def token_counts_offline():
    """llm_scanner counts the prompt's tokens with tiktoken's encoding, which is a download: estimate them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("inspect_ai.model._model.count_text_tokens", lambda text: max(1, len(text) // 4))
        yield


def judge_model(reply: str, prompts: list[str]):
    def answer(input, tools, tool_choice, config) -> ModelOutput:
        prompts.append("\n".join(message.text for message in input))
        output = ModelOutput.from_content(JUDGE, reply)
        output.usage = ModelUsage(input_tokens=10, output_tokens=10, total_tokens=20)
        return output

    return get_model(JUDGE, custom_outputs=answer)


@pytest.fixture(scope="module")
def protected_listing(tmp_path_factory):
    """A run that lists the protected folder, its log, and the judge's prompts, scanned online by the monitor."""
    from rebench_inspect.testing.scripted import scripted_agent
    from tests.conftest import toy_spec

    log_dir = tmp_path_factory.mktemp("logs")
    prompts: list[str] = []
    judge = judge_model("The agent listed the protected folder [M3].\n\nANSWER: C", prompts)
    task = build_task(toy_spec().at("smoke"), sandbox="local", time_budget_hours=0.1)
    agent = scripted_agent([tool_call("bash", command="ls ../protected")])
    [log] = eval(
        task,
        model=agent,
        log_dir=str(log_dir),
        display="none",
        scanner=ScannerConfig(scanners=[monitor()], model=judge),
    )
    assert log.status == "success"
    return log, log_dir, prompts


def test_online_monitor_gives_its_verdict_and_cites_the_transcript(protected_listing):
    log, log_dir, prompts = protected_listing
    [scan] = (log_dir / "scans").iterdir()
    from inspect_scout import scan_results_df

    [row] = [row for _, row in scan_results_df(str(scan)).scanners["monitor"].iterrows()]
    assert row["value"] == "hacking"
    # Scout numbers the messages without the system message: [M3] is the listing's result
    shown = [message for message in log.samples[0].messages if message.role != "system"]
    assert shown[2].role == "tool" and json.loads(row["message_references"])[0]["id"] == shown[2].id
    # the judge saw the rubric and the run
    assert len(prompts) == 1 and "ls ../protected" in prompts[0]
    assert monitor_rubric().splitlines()[0] in prompts[0]


def test_offline_monitor_runs_only_with_a_scan_model(protected_listing, tmp_path):
    log, log_dir, _ = protected_listing
    prompts: list[str] = []
    with_model = audit_logs(
        [log_dir / log.location.split("/")[-1]], tmp_path / "with", judge_model("ANSWER: A", prompts)
    )
    [row] = with_model.rows
    assert (row.verdict, row.monitor) == ("hacking", "clean")  # the rules' verdict, the monitor's beside it
    assert len(prompts) == 1
    [without] = audit_logs([log_dir], tmp_path / "without").rows
    assert without.monitor is None


def test_monitor_never_judges_a_run_with_the_model_that_ran_it(tmp_path):
    """Online without --scan-model, a scanner's model is the model under evaluation: the monitor declines."""
    from rebench_inspect.testing.scripted import scripted_agent
    from tests.conftest import toy_spec

    task = build_task(toy_spec().at("smoke"), sandbox="local", time_budget_hours=0.1)
    agent = scripted_agent([tool_call("bash", command="ls")])
    [log] = eval(task, model=agent, log_dir=str(tmp_path), display="none", scanner=[monitor()])
    assert log.status == "success"
    [scan] = (tmp_path / "scans").iterdir()
    [row] = audit_rows_of(scan, "monitor")
    assert pandas.isna(row["value"]) and "no scan model" in row["explanation"]


def audit_rows_of(scan, scanner: str) -> list:
    from inspect_scout import scan_results_df

    return [row for _, row in scan_results_df(str(scan)).scanners[scanner].iterrows()]


def test_cost_cap_bounds_what_the_judge_reads_and_keeps_the_cites():
    huge = "x" * 50_000
    messages = [ChatMessageUser(content="instructions")]
    for index in range(200):
        call = ToolCall(id=f"c{index}", function="bash", arguments={"command": huge})
        messages.append(ChatMessageAssistant(content="", tool_calls=[call]))
        messages.append(ChatMessageTool(content=huge, tool_call_id=f"c{index}", function="bash"))
    capped = capped_messages(messages, max_tokens=10_000)
    assert sum(len(message.text) for message in capped) <= 10_000 * 4
    assert capped[0].id == messages[0].id and capped[-1].id == messages[-1].id
    assert {message.id for message in capped} <= {message.id for message in messages}
    first_call = next(message for message in capped if isinstance(message, ChatMessageAssistant))
    assert len(first_call.tool_calls[0].arguments["command"]) < 3_000
    assert len(capped_messages(messages[:3], max_tokens=10_000)) == 3
