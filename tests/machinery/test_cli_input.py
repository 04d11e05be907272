"""What a newcomer meets first: `rebench --help` at once, `rebench list`, and every bad input as one line on stderr
that names the parameter and what to do, exit status 2, nothing run and nothing written."""

import subprocess
import sys

import pytest

from rebench import environment_names
from rebench_inspect import cli

HEAVY_MODULES = ("inspect_ai", "pydantic", "torch", "rebench.environments")


def test_help_names_every_environment_and_loads_nothing_heavy():
    code = (
        "import sys\nfrom rebench_inspect.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in sys.modules if m.startswith({HEAVY_MODULES!r})))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.splitlines()[-1] == "LOADED []"
    assert len(environment_names()) == 7
    for name in environment_names():
        assert name in shown


def test_every_verb_module_is_assembled_into_the_command():
    import pkgutil

    modules = {info.name for info in pkgutil.iter_modules(cli.__path__)} - {"__main__", "arguments"}
    assert modules == {verb.__name__.rpartition(".")[2] for verb in cli.VERBS}
    assert all(callable(verb.register) for verb in cli.VERBS)


BAD_INPUTS = {
    "misspelt environment": (["demo", "optimise_kernel"], "argument ENV", "did you mean optimize_kernel?"),
    "unknown environment": (["score", "nope"], "argument ENV", "one of: finetune_target, fix_embedding"),
    "misspelt environment to build": (["images", "build", "optimize_kernal"], "argument ENV", "optimize_kernel?"),
    "no runs": (["calibrate", "optimize_kernel", "--runs", "0"], "argument --runs", "at least 1, not '0'"),
    "runs not a number": (["calibrate", "optimize_kernel", "--runs", "two"], "argument --runs", "whole number"),
    "role without model": (["score", "optimize_kernel", "--model-role", "scaffold"], "--model-role", "ROLE=MODEL"),
    "workspace missing": (["score", "optimize_kernel", "no/such/dir"], "argument workspace", "not a directory"),
    "anchors file missing": (["score", "optimize_kernel", "--anchors", "no.json"], "argument --anchors", "not a file"),
    "unknown scale": (["preflight", "optimize_kernel", "--scale", "medium"], "argument --scale", "smoke"),
    "negative k": (["report", "logs", "--max-k", "-1"], "argument --max-k", "at least 1"),
    "unknown command": (["lst"], "argument COMMAND", "list"),
}


@pytest.mark.parametrize("argv, parameter, hint", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_one_line_naming_the_parameter(argv, parameter, hint, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_status:
        cli.main(argv)
    assert exit_status.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert parameter in err and hint in err and "--help" in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written (calibrate's anchors file, report's folder)


def test_a_model_role_the_environment_lacks_is_one_line_with_its_roles(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["score", "rust_codecontests", "--model-role", "scafold=openai/gpt-4o"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "rebench score: --model-role: unknown model role 'scafold': did you mean scaffold? (one of: scaffold)"
    ]
    assert cli.main(["score", "optimize_kernel", "--model-role", "judge=openai/gpt-4o"]) == 2
    assert capsys.readouterr().err == "rebench score: --model-role: optimize_kernel uses no model roles\n"


def test_an_anchors_file_for_something_else_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "anchors.json").write_text('{"kind": "something else"}')
    assert cli.main(["score", "optimize_kernel", "--anchors", "anchors.json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [
        "rebench score: --anchors: rebench/optimize_kernel: anchors file 'anchors.json' unusable: anchors.json is not "
        "a rebench anchors file (made by `rebench calibrate`)"
    ]


def test_the_console_script_prints_no_traceback():
    failed = subprocess.run(
        [sys.executable, "-m", "rebench_inspect.cli", "demo", "optimise_kernel"], capture_output=True, text=True
    )
    assert failed.returncode == 2 and failed.stdout == ""
    assert failed.stderr.startswith("rebench demo: argument ENV: unknown environment 'optimise_kernel'")
    assert "Traceback" not in failed.stderr and len(failed.stderr.splitlines()) == 1


def test_list_shows_every_environment_with_title_scales_gpus_and_status(toy_environment, tmp_path, monkeypatch, capsys):
    from rebench.environments import ENVIRONMENTS

    from .test_cli import with_local_check

    monkeypatch.setitem(ENVIRONMENTS, "toy", with_local_check(toy_environment, tmp_path / "toy", 1))
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:] if line and line.split()[0] in ENVIRONMENTS}
    assert sorted(rows) == sorted(ENVIRONMENTS)
    kernel = rows["optimize_kernel"]
    assert "Optimize a Kernel" in kernel and "smoke, full" in kernel and "1x H100 80GB" in kernel
    assert kernel.endswith("ready for local smoke runs")
    assert "4x H100 80GB" in rows["optimize_llm_foundry"] and "none" in rows["rust_codecontests"].split()
    assert rows["toy"].endswith("not ready for local runs (below)")
    assert "toy: needs the widget stack: run install_widgets.sh" in lines
