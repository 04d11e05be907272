"""The reference solver and the sandbox check, on the toy environment (start 10 s → 0, reference 5 s → 1)."""

from inspect_ai import eval
from inspect_ai.solver import Generate, TaskState, solver

from rebench_inspect.runtime.reference import install_reference_solution, sandbox_check_task
from rebench_inspect.runtime.task import build_task


def toy_solver(environment, reference: bool):
    @solver
    def install():
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            if reference or state.metadata.get("solution") == "reference":
                await install_reference_solution(environment.at("smoke"))
            return state

        return solve

    return install()


def test_reference_solver_reaches_normalised_one_without_a_model(toy_environment):
    task = build_task(toy_environment.at("smoke"), sandbox="local")
    [log] = eval(task, solver=toy_solver(toy_environment, reference=True), model="none", display="none", log_dir=None)
    assert log.status == "success", log.error
    assert log.samples[0].scores["rebench_scorer"].value["normalised"] == 1.0


def test_sandbox_check_certifies_start_zero_and_reference_one(toy_environment):
    task = sandbox_check_task(
        toy_environment, build_task(toy_environment.at("smoke"), sandbox="local"), toy_solver(toy_environment, False)
    )
    [log] = eval(task, model="none", display="none", log_dir=None)
    assert log.status == "success", log.error
    verdicts = {sample.id: sample.scores["anchors_reproduced"].value for sample in log.samples}
    assert verdicts == {"toy-starting": "C", "toy-reference": "C"}


def test_sandbox_check_fails_when_anchors_are_off(toy_environment):
    from rebench_inspect.spec.environment import Anchors

    wrong = toy_environment.model_copy(
        update={"anchors": {"smoke": Anchors(start=10.0, reference=2.0, provenance="wrong"), "full": toy_environment.anchors["full"]}}
    )
    task = sandbox_check_task(wrong, build_task(wrong.at("smoke"), sandbox="local"), toy_solver(wrong, False))
    [log] = eval(task, model="none", display="none", log_dir=None)
    verdicts = {sample.id: sample.scores["anchors_reproduced"].value for sample in log.samples}
    assert verdicts == {"toy-starting": "C", "toy-reference": "I"}
