"""Deterministic offline model for smoke runs: `rebench_smoke/scaffold` (`rebench_inspect.runtime.smoke` serves it).

It plays the weak scaffold model of this environment on the project's ten smoke problems (it recognises a
problem by its title in the prompt), without any network:

- the i-th choice of a call (`n` / `num_choices`) is a correct Rust program only when i >= the problem's
  "difficulty" below; earlier choices are wrong in assorted ways (compile error, wrong answer, crash);
- two problems are never solved: their candidates pass the public tests but fail private ones (a slow
  trial division that times out, a bracket check that only counts brackets);
- a prompt asking it to pick among candidates ("Answer with the number ...") gets "1".

So a one-shot scaffold (the starting solution) solves exactly the difficulty-0 problems, and a scaffold that asks
for several completions and keeps those passing the public tests (the reference) solves more.

Importing this module registers it, as the fallback: any other `rebench_smoke/<name>` not registered by another
environment answers the same.
"""

from rebench_inspect import register_smoke_model, smoke_custom_outputs

CHOICE_PROMPT_MARKER = "Answer with the number"

_READ_ALL = """use std::io::{self, Read, Write};

fn main() {
    let mut input = String::new();
    io::stdin().read_to_string(&mut input).unwrap();
    let out = io::stdout();
    let mut out = io::BufWriter::new(out.lock());
"""

SOLUTIONS: dict[str, str] = {
    "Sum of Pairs": _READ_ALL
    + """    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let t = it.next().unwrap();
    for _ in 0..t {
        let a = it.next().unwrap();
        let b = it.next().unwrap();
        writeln!(out, "{}", a + b).unwrap();
    }
}
""",
    "Largest Element": _READ_ALL
    + """    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let best = it.take(n).max().unwrap();
    writeln!(out, "{}", best).unwrap();
}
""",
    "Smallest Element": _READ_ALL
    + """    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let best = it.take(n).min().unwrap();
    writeln!(out, "{}", best).unwrap();
}
""",
    "Vowel Counter": _READ_ALL
    + """    let count = input.trim().chars().filter(|c| "aeiou".contains(*c)).count();
    writeln!(out, "{}", count).unwrap();
}
""",
    "Word Reversal": _READ_ALL
    + """    let words: Vec<&str> = input.split_whitespace().rev().collect();
    writeln!(out, "{}", words.join(" ")).unwrap();
}
""",
    "Fibonacci Remainder": _READ_ALL
    + """    let n: u64 = input.trim().parse().unwrap();
    let m: u64 = 1_000_000_007;
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        let c = (a + b) % m;
        a = b;
        b = c;
    }
    writeln!(out, "{}", a).unwrap();
}
""",
    "Staircase Ways": _READ_ALL
    + """    let n: usize = input.trim().parse().unwrap();
    let (mut a, mut b) = (1u64, 1u64);
    for _ in 1..n {
        let c = a + b;
        a = b;
        b = c;
    }
    writeln!(out, "{}", b).unwrap();
}
""",
    "Digit Sum": _READ_ALL
    + """    let s: u32 = input.trim().chars().map(|c| c.to_digit(10).unwrap()).sum();
    writeln!(out, "{}", s).unwrap();
}
""",
}

# Near misses: pass the public tests, fail private or generated ones.
NEAR_MISSES: dict[str, str] = {
    "Prime Queries": _READ_ALL
    + """    let mut it = input.split_ascii_whitespace().map(|x| x.parse::<u64>().unwrap());
    let q = it.next().unwrap();
    for _ in 0..q {
        let n = it.next().unwrap();
        let mut prime = n >= 2;
        let mut d = 2u64;
        while d < n {
            if n % d == 0 { prime = false; break; }
            d += 1;
        }
        writeln!(out, "{}", if prime { "YES" } else { "NO" }).unwrap();
    }
}
""",
    "Bracket Balance": _READ_ALL
    + """    let mut depth: i64 = 0;
    let mut ok = true;
    for c in input.trim().chars() {
        if "([{".contains(c) { depth += 1; } else { depth -= 1; }
        if depth < 0 { ok = false; }
    }
    writeln!(out, "{}", if ok && depth == 0 { "YES" } else { "NO" }).unwrap();
}
""",
}

# Index of the first correct choice within one call (None: never solved).
DIFFICULTY: dict[str, int | None] = {
    "Sum of Pairs": 0,
    "Fibonacci Remainder": 0,
    "Largest Element": 1,
    "Vowel Counter": 2,
    "Word Reversal": 3,
    "Staircase Ways": 5,
    "Prime Queries": None,
    "Bracket Balance": None,
    "Smallest Element": 0,
    "Digit Sum": 2,
}

WRONG: list[str] = [
    # compile error
    'fn main() {\n    let x: i64 = ;\n    println!("{}", x)\n}\n',
    # wrong answer
    _READ_ALL + '    let _ = input;\n    writeln!(out, "0").unwrap();\n}\n',
    # runtime error
    'fn main() {\n    let v: Vec<i64> = Vec::new();\n    println!("{}", v[3]);\n}\n',
]


def _fence(code: str) -> str:
    return f"Here is a Rust solution.\n\n```rust\n{code}```\n"


def find_problem(prompt: str) -> str | None:
    hits = [title for title in DIFFICULTY if title in prompt]
    # The longest title wins (no title is a substring of another today; stay safe anyway).
    return max(hits, key=len) if hits else None


def smoke_answers(prompt: str, n: int = 1) -> list[str]:
    """The `n` completions the smoke scaffold model gives for `prompt` (deterministic)."""
    n = max(1, int(n or 1))
    if CHOICE_PROMPT_MARKER in prompt:
        return ["1"] * n
    title = find_problem(prompt)
    if title is None:
        return [_fence(WRONG[i % len(WRONG)]) for i in range(n)]
    difficulty = DIFFICULTY[title]
    answers = []
    for i in range(n):
        if difficulty is None:
            answers.append(_fence(NEAR_MISSES[title]) if i % 2 == 0 else _fence(WRONG[i % len(WRONG)]))
        elif i >= difficulty:
            answers.append(_fence(SOLUTIONS[title]))
        else:
            answers.append(_fence(WRONG[i % len(WRONG)]))
    return answers


SMOKE_SCAFFOLD_MODEL = register_smoke_model("scaffold", smoke_answers, fallback=True)
# The same model as a `mockllm/model` `custom_outputs` callable.
scaffold_custom_outputs = smoke_custom_outputs("scaffold")
