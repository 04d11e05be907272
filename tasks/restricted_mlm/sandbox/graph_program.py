"""Check and run an exported forward pass (TRUSTED: runs in the scorer's process, imports no agent code).

The agent's model arrives as data, written by export_model.py in the agent's own process:
  program.json  {"format", "input", "constants", "nodes": [{"name", "op", "args", "kwargs"}], "output"}
  weights.pt    {constant name: plain tensor}, loaded with `torch.load(weights_only=True)`
Every node calls one ATen operator by name. `load_program` accepts the graph only if every operator is on the
allow-list below (anything else, including names it does not know, is refused: fail closed), every argument is
plain data (numbers, strings, lists, dtypes, references to earlier values) and every constant is a plain dense
tensor. `Program.run` then executes the graph itself, operator by operator, on the held-out token ids, applying
the run-time rules that depend on dtypes (no float-to-integer or float-to-bool conversion; no complex numbers;
dropout only as the identity). See THREAT_MODEL.md for why this design and what it assumes.

Torch only, no project imports: the workspace gets a copy so the agent can check its model locally.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

FORMAT = "rebench-restricted-mlm-graph/1"
MAX_NODES = 200_000
MAX_PROGRAM_BYTES = 64 * 1024 * 1024

# ATen operator packets (the name between "aten." and the overload) the forward pass may call, by what the task's
# rules call them. The rules: Linear and Embedding; matmul, @, einsum, sum; addition and multiplication (also by
# constants); relu as the only nonlinearity; indexing and reshaping; tensors fixed during the forward pass.
# Constructors whose output depends only on shapes and constants, never on the values of their tensor inputs.
SHAPE_ONLY_CONSTRUCTORS = (
    "arange",
    "zeros",
    "ones",
    "full",
    "eye",
    "scalar_tensor",
    "zeros_like",
    "ones_like",
    "full_like",
    "new_zeros",
    "new_ones",
    "new_full",
)
ALLOWED_OPS: dict[str, str] = {
    **dict.fromkeys(("linear", "embedding"), "layer"),
    **dict.fromkeys(
        (
            "matmul",
            "mm",
            "bmm",
            "addmm",
            "baddbmm",
            "addbmm",
            "addmv",
            "mv",
            "dot",
            "einsum",
            "outer",
            "tensordot",
        ),
        "matrix multiplication",
    ),
    **dict.fromkeys(("add", "sub", "rsub", "mul", "neg", "sum"), "addition / multiplication / sum"),
    "relu": "relu",
    **dict.fromkeys(
        (
            "view",
            "_unsafe_view",
            "reshape",
            "unsqueeze",
            "squeeze",
            "flatten",
            "unflatten",
            "permute",
            "transpose",
            "t",
            "expand",
            "repeat",
            "repeat_interleave",
            "as_strided",
            "cat",
            "stack",
            "split",
            "split_with_sizes",
            "chunk",
            "unbind",
            "narrow",
            "select",
            "slice",
            "index",
            "index_select",
            "gather",
            "movedim",
            "flip",
            "roll",
            "constant_pad_nd",
            "diagonal",
            "tril",
            "triu",
            "slice_scatter",
            "select_scatter",
            "index_put",
            "scatter",
            "scatter_add",
            "index_add",
            "contiguous",
            "clone",
            "alias",
            "detach",
            "lift_fresh_copy",
            "copy",
            "_to_copy",
            "to",
            "dropout",
            "_assert_tensor_metadata",
        ),
        "indexing / reshaping",
    ),
    **dict.fromkeys((*SHAPE_ONLY_CONSTRUCTORS, "fill"), "fixed tensor"),
}
# Their output does not depend on the values of their tensor inputs (only shapes), so dtype rules do not apply.
VALUE_INDEPENDENT_OPS = frozenset(
    (
        *SHAPE_ONLY_CONSTRUCTORS,
        "_assert_tensor_metadata",
    )
)  # not `fill`: fill.Tensor copies a value from a tensor, so the dtype rule must see it
FORBIDDEN_OVERLOAD = re.compile(r"(^|_)out$")  # out= variants write into existing tensors
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,200}$")
OP_NAME = re.compile(r"^aten\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$")
SPECIAL_KEYS = {"node", "dtype", "device", "layout", "memory_format"}
DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
    )
}
LAYOUTS = {"strided": torch.strided}
MEMORY_FORMATS = {
    name: getattr(torch, name)
    for name in (
        "contiguous_format",
        "preserve_format",
        "channels_last",
        "channels_last_3d",
    )
}


class Invalid(Exception):
    """The submission breaks a rule or cannot be run; the message is shown to the agent."""


def dtype_rank(dtype: torch.dtype) -> int:
    """bool < integers < floating point: information may only flow up (no comparison or rounding by casting)."""
    if dtype == torch.bool:
        return 0
    return 2 if dtype.is_floating_point else 1


@dataclass
class Node:
    name: str
    op_name: str  # "aten.<packet>.<overload>" or "getitem"
    function: Callable | None  # None for getitem
    args: Any
    kwargs: dict[str, Any]
    frees: list[str] = field(default_factory=list)  # values last used by this node


@dataclass
class Program:
    input_name: str
    constants: dict[str, torch.Tensor]
    nodes: list[Node]
    output: str
    ops_seen: dict[str, int]

    def to(self, device: torch.device) -> Program:
        self.constants = {name: tensor.to(device) for name, tensor in self.constants.items()}
        return self

    @torch.no_grad()
    def run(self, tokens: torch.Tensor) -> torch.Tensor:
        device = tokens.device
        values: dict[str, Any] = {**self.constants, self.input_name: tokens}
        for node in self.nodes:
            args = decode(node.args, values, device)
            kwargs = {key: decode(value, values, device) for key, value in node.kwargs.items()}
            if node.function is None:
                result = getitem(args)
            else:
                check_call(node, args, kwargs)
                result = node.function(*args, **kwargs)
                check_result(node, args, kwargs, result)
            values[node.name] = result
            for name in node.frees:
                values.pop(name, None)
        output = values[self.output]
        if type(output) is not torch.Tensor:
            raise Invalid(f"the forward pass returns a {type(output).__name__}, expected a tensor of logits")
        return output


# ------------------------------------------------------------------------------------------------- arguments
def validate_argument(value, defined: set[str], used: set[str], depth: int = 0) -> None:
    """Plain JSON data of the argument grammar, referring only to values defined earlier."""
    if depth > 8:
        raise Invalid("an operator argument is nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, list):
        for item in value:
            validate_argument(item, defined, used, depth + 1)
        return
    if isinstance(value, dict) and len(value) == 1:
        ((key, item),) = value.items()
        if key == "node" and isinstance(item, str):
            if item not in defined:
                raise Invalid(f"the graph uses the value {item!r} before it is defined")
            used.add(item)
            return
        if key == "dtype" and item in DTYPES or key == "layout" and item in LAYOUTS:
            return
        if key == "memory_format" and item in MEMORY_FORMATS or key == "device" and isinstance(item, str):
            return
    raise Invalid(f"an operator argument is not plain data: {str(value)[:100]}")


def decode(value, values: dict[str, Any], device: torch.device):
    if isinstance(value, list):
        return [decode(item, values, device) for item in value]
    if isinstance(value, dict):
        ((key, item),) = value.items()
        if key == "node":
            return values[item]
        if key == "dtype":
            return DTYPES[item]
        if key == "layout":
            return LAYOUTS[item]
        if key == "memory_format":
            return MEMORY_FORMATS[item]
        return device  # every tensor lives on the scorer's device
    return value


def getitem(args: list):
    container, index = args
    if not isinstance(container, (list, tuple)) or type(index) is not int:
        raise Invalid("getitem is only allowed on the outputs of operators that return several tensors")
    return container[index]


def tensors_in(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(item)]
    return []


def check_call(node: Node, args: list, kwargs: dict) -> None:
    packet = node.op_name.split(".")[1]
    if packet == "dropout":
        train = kwargs.get("train", args[2] if len(args) > 2 else None)
        if train is not False:
            raise Invalid("dropout in the forward pass is only allowed when not training (it must be deterministic)")
    for tensor in tensors_in(args) + tensors_in(kwargs):
        if type(tensor) is not torch.Tensor:
            raise Invalid(f"{node.op_name} received a {type(tensor).__name__}; only plain tensors are allowed")


def check_result(node: Node, args: list, kwargs: dict, result) -> None:
    outputs = tensors_in(result)
    for tensor in outputs:
        if type(tensor) is not torch.Tensor or tensor.is_complex():
            raise Invalid(f"{node.op_name} produced a {type(tensor).__name__} of dtype {tensor.dtype}, not allowed")
    packet = node.op_name.split(".")[1]
    if packet in VALUE_INDEPENDENT_OPS:
        return
    inputs = tensors_in(args) + tensors_in(kwargs)
    highest = max((dtype_rank(t.dtype) for t in inputs), default=0)
    for tensor in outputs:
        if dtype_rank(tensor.dtype) < highest:
            raise Invalid(
                f"{node.op_name} turns {max(inputs, key=lambda t: dtype_rank(t.dtype)).dtype} values into "
                f"{tensor.dtype}: converting to integers or booleans (rounding, comparing) is not allowed"
            )


# --------------------------------------------------------------------------------------------------- loading
def resolve(op_name: str) -> Callable:
    match = OP_NAME.match(op_name)
    if not match or match.group(1) not in ALLOWED_OPS or FORBIDDEN_OVERLOAD.search(match.group(2)):
        raise KeyError(op_name)
    packet = getattr(torch.ops.aten, match.group(1))
    if match.group(2) not in packet.overloads():
        raise KeyError(op_name)
    return getattr(packet, match.group(2))


def parse_program(program: dict, weights: dict) -> Program:
    if not isinstance(program, dict) or program.get("format") != FORMAT:
        raise Invalid(f"program.json is not a {FORMAT} graph")
    input_name, constant_names = program.get("input"), program.get("constants")
    raw_nodes, output = program.get("nodes"), program.get("output")
    if not isinstance(input_name, str) or not NAME.match(input_name):
        raise Invalid("the graph's input is malformed")
    if not isinstance(constant_names, list) or not all(isinstance(n, str) and NAME.match(n) for n in constant_names):
        raise Invalid("the graph's constants are malformed")
    if not isinstance(raw_nodes, list) or len(raw_nodes) > MAX_NODES:
        raise Invalid(f"the graph must be a list of at most {MAX_NODES} operator calls")
    if not isinstance(weights, dict) or set(weights) != set(constant_names):
        raise Invalid("weights.pt does not hold exactly the graph's constants")
    for name, tensor in weights.items():
        if type(tensor) is not torch.Tensor:
            raise Invalid(f"constant {name} is a {type(tensor).__name__}, not a plain tensor")
        if tensor.layout != torch.strided or tensor.is_quantized or tensor.is_meta or tensor.is_complex():
            raise Invalid(f"constant {name} must be a dense real tensor")
        if tensor.dtype not in DTYPES.values():
            raise Invalid(f"constant {name} has dtype {tensor.dtype}, which is not supported")

    defined = {input_name, *constant_names}
    if len(defined) != len(constant_names) + 1:
        raise Invalid("the graph's value names are not unique")
    nodes: list[Node] = []
    forbidden: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    last_use: dict[str, int] = {}
    for index, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict) or not isinstance(raw.get("op"), str) or not isinstance(raw.get("args"), list):
            raise Invalid(f"operator call {index} of the graph is malformed")
        name, op_name, kwargs = raw.get("name"), raw["op"][:200], raw.get("kwargs", {})
        if not isinstance(name, str) or not NAME.match(name) or name in defined:
            raise Invalid(f"operator call {index} has a missing or duplicate name")
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) and NAME.match(k) for k in kwargs):
            raise Invalid(f"operator call {index} ({op_name}) has malformed keyword arguments")
        used: set[str] = set()
        validate_argument(raw["args"], defined, used)
        for value in kwargs.values():
            validate_argument(value, defined, used)
        seen[op_name] += 1
        function: Callable | None = None
        if op_name != "getitem":
            try:
                function = resolve(op_name)
            except (KeyError, AttributeError, RuntimeError):
                forbidden[op_name] += 1
        for value_name in used:
            last_use[value_name] = index
        defined.add(name)
        nodes.append(Node(name, op_name, function, raw["args"], kwargs))
    if forbidden:
        listed = ", ".join(f"{op} (×{n})" if n > 1 else op for op, n in sorted(forbidden.items()))
        error = Invalid(f"the forward pass uses operations that are not allowed: {listed}")
        error.ops_seen = dict(sorted(seen.items()))  # type: ignore[attr-defined]
        raise error
    if not (isinstance(output, dict) and set(output) == {"node"} and output["node"] in defined):
        raise Invalid("the graph's output is malformed")
    last_use[output["node"]] = len(nodes)
    for value_name, index in last_use.items():
        if index < len(nodes) and value_name not in weights and value_name != input_name:
            nodes[index].frees.append(value_name)
    return Program(input_name, dict(weights), nodes, output["node"], dict(sorted(seen.items())))


def load_program(program: Any, weights_path: Path) -> Program:
    """Check the graph (program.json's JSON value, parsed with bounds by the caller) against the tensors of
    weights.pt (already copied out of the agent's reach by the caller)."""
    try:
        weights = torch.load(weights_path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001  (weights-only unpickling refuses code objects, corrupt files)
        first = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        raise Invalid(f"weights.pt cannot be loaded as plain tensors ({type(error).__name__}: {first})") from None
    return parse_program(program, weights)
