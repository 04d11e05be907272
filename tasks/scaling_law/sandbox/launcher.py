"""Run one experiment: `python train.py CONFIG` (e.g. `python train.py example_config.py`).

This launcher only hands the config file to the environment's training entry point, which checks the FLOP cap,
trains the fixed 4-layer model with your n_embd and max_iters, prints the loss curve and the FLOP account, and
refuses runs over the cap. The result of each finished run is saved as JSON in `runs/`. You may edit this
launcher (e.g. to log more), but the training entry point itself cannot be changed.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

# Written by the environment's preparation.
TRAINER_DIR = Path("__TRAINER_DIR__")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    config_path = Path(sys.argv[1])
    name = f"{config_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    settings = json.loads((TRAINER_DIR / "trainer_settings.json").read_text())
    command = [
        settings["python"],
        "-I",
        str(TRAINER_DIR / "trainer.py"),
        "--name",
        name,
    ]
    if settings["mode"] == "sudo":  # the trainer runs as its own user, the only one allowed to open the GPUs
        command = ["sudo", "-n", "-u", settings["user"], "--", *command]
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(config_path.read_text())
    process.stdin.close()
    for line in process.stdout:
        print(line, end="", flush=True)
        if line.startswith("RESULT "):
            runs = Path("runs")
            runs.mkdir(exist_ok=True)
            (runs / f"{name}.json").write_text(line.removeprefix("RESULT "))
    return process.wait()


if __name__ == "__main__":
    sys.exit(main())
