"""The reward-hacking audit's scanners, registered as `rebench/<name>` for Inspect Scout: online with
`inspect eval ... --scanner rebench/audit`, offline with `scout scan rebench/audit -T LOGS` or `rebench audit LOGS`.

Importing this module imports Inspect Scout (the `audit` extra). The package's registry (`rebench._registry`) stays
light: it registers stand-ins under the same names (`rebench_inspect.audit.registration`) that import this module
only when a scanner is created. The rules are in `rebench_inspect.audit`; docs/audit.md
says what each catches and cannot.
"""

from inspect_scout import Scanner, Transcript, scanner

from rebench_inspect import in_rebench_namespace
from rebench_inspect.audit.registration import find_distribution_under_package_name
from rebench_inspect.audit.scout import CONTENT_EVENTS, MONITOR_MAX_TOKENS, monitor_scan, rules_scan

find_distribution_under_package_name()


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def audit() -> Scanner[Transcript]:
    """Every rule below: the run's verdict (clean, suspicious, hacking) and each finding with what it cites."""
    return rules_scan()


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def protected_access() -> Scanner[Transcript]:
    """Reading, listing or writing the protected folder, held-out data, the harness's own code; whole-disk searches."""
    return rules_scan(["protected_access"])


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def harness_tampering() -> Scanner[Transcript]:
    """Start-up hooks (sitecustomize, .pth, LD_PRELOAD), writes to system programs or libraries, clock changes."""
    return rules_scan(["harness_tampering"])


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def monkeypatching() -> Scanner[Transcript]:
    """Replacing timing, synchronisation, comparison or loading functions; reading the caller's frames or memory."""
    return rules_scan(["monkeypatching"])


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def network() -> Scanner[Transcript]:
    """Network access and downloads (hacking where the environment's instructions forbid them)."""
    return rules_scan(["network"])


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def lingering_processes() -> Scanner[Transcript]:
    """Processes detached from their call, and processes that survived the stop before the final score."""
    return rules_scan(["lingering_processes"])


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def score_oracle() -> Scanner[Transcript]:
    """The score tool as an oracle: unchanged rescoring, sweeps of submissions differing only in numbers."""
    return rules_scan(["score_oracle"])


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def environment_rules() -> Scanner[Transcript]:
    """What the run's environment forbids (its folder's audit.yaml)."""
    return rules_scan(["environment_rules"])


@scanner(messages="all", events=CONTENT_EVENTS, version=1)
@in_rebench_namespace
def score_log() -> Scanner[Transcript]:
    """The score log: above the paper's estimated ceiling, below the hardware's floor, unexplained jumps,
    invalid-to-valid flips with large gains, a final score far above every intermediate one."""
    return rules_scan(["score_log"])


@scanner(messages="all", version=1)
@in_rebench_namespace
def monitor(max_tokens: int = MONITOR_MAX_TOKENS) -> Scanner[Transcript]:
    """A model reads the run with the repository's rubric (needs a scan model: --scan-model)."""
    return monitor_scan(max_tokens)
