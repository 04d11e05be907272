"""The default agent works in its workspace and knows its working time left (issue 16), on the local sandbox."""

from inspect_ai import eval

from rebench_inspect.runtime.clock import duration
from rebench_inspect.runtime.task import build_task
from rebench_inspect.testing.scripted import tool_call


def tool_results(log, *functions: str) -> list[str]:
    [sample] = log.samples
    return [m.text for m in sample.messages if m.role == "tool" and (not functions or m.function in functions)]


def test_a_solution_written_in_the_current_directory_is_scored(toy_environment, agent_script):
    # bash and python both start in the workspace: the protected folder is not in the agent's working tree
    model = agent_script(
        [
            tool_call("bash", command="pwd; ls"),
            tool_call("python", code="import os; print(sorted(os.listdir('.')))"),
            tool_call("python", code="open('answer.txt', 'w').write('5')"),
            tool_call("score"),
        ]
    )
    task = build_task(toy_environment.at("smoke"), sandbox="local", time_budget_hours=0.1)
    [log] = eval(task, model=model, display="none", log_dir=None)
    assert log.status == "success", log.error
    pwd_and_ls, python_listing, _, score = tool_results(log)
    assert pwd_and_ls.splitlines()[0].endswith("/workspace")
    assert "protected" not in pwd_and_ls and "protected" not in python_listing
    assert "answer.txt" in python_listing
    assert "normalised score=1.000" in score
    assert log.samples[0].scores["rebench_scorer"].value["normalised"] == 1.0


def test_score_results_end_with_the_working_time_used_and_left(toy_environment, agent_script):
    task = build_task(toy_environment.at("smoke"), sandbox="local", time_budget_hours=0.5)
    [log] = eval(task, model=agent_script([tool_call("score"), tool_call("score_log")]), display="none", log_dir=None)
    results = tool_results(log, "score", "score_log")
    assert len(results) == 2
    for text in results:
        last = text.splitlines()[-1]
        assert last.startswith("Working time used: ") and f"of {duration(1800)};" in last and last.endswith(" left.")


def test_a_notice_tells_the_agent_when_half_its_budget_is_used(toy_environment, agent_script):
    # a 9-second budget: a 5-second command crosses 50% (and, on a slow machine, perhaps 90%)
    task = build_task(toy_environment.at("smoke"), sandbox="local", time_budget_hours=0.0025)
    [log] = eval(task, model=agent_script([tool_call("bash", command="sleep 5")]), display="none", log_dir=None)
    [sample] = log.samples
    notices = [m.text for m in sample.messages if m.role == "user" and m.text.startswith("Time notice:")]
    assert len(notices) == 1, [m.text for m in sample.messages]
    assert "% of your working time is used" in notices[0] and "left." in notices[0]


def test_duration_text():
    assert [duration(s) for s in (42, 723, 3900, 28800)] == ["42s", "12m 03s", "1h 05m", "8h 00m"]


def test_preparation_and_the_start_scoring_say_what_they_do_in_the_transcript(toy_environment, tmp_path):
    import shutil

    folder = shutil.copytree(toy_environment.folder, tmp_path / "toy")
    (folder / "sandbox" / "prepare.py").write_text("print('prepared')\n")
    environment = toy_environment.model_copy(update={"location": folder})
    [log] = eval(
        build_task(environment.at("smoke"), sandbox="local", time_budget_hours=0.1),
        model="none",
        display="none",
        log_dir=None,
    )
    assert log.status == "success", log.error
    infos = [str(event.data) for event in log.samples[0].events if event.event == "info"]
    assert infos[0].startswith("Preparing toy at smoke scale")
    assert infos[1].startswith("Prepared toy in ")
    assert infos[2].startswith("Scoring the starting solution")
