"""Regenerate `sandbox/smoke_problems.json`: ten tiny stdin/stdout problems written for this project.

Expected outputs come from the small Python oracles below; the problem records carry no solution fields.
Run: python tasks/rust_codecontests/tools/build_smoke_data.py  (deterministic; the JSON is committed).
"""

import json
import random
from pathlib import Path


def sum_pairs(inp: str) -> str:
    lines = inp.split("\n")
    t = int(lines[0])
    return "\n".join(str(sum(map(int, lines[1 + i].split()))) for i in range(t)) + "\n"


def largest(inp: str) -> str:
    _, *xs = inp.split()
    return f"{max(map(int, xs))}\n"


def smallest(inp: str) -> str:
    _, *xs = inp.split()
    return f"{min(map(int, xs))}\n"


def vowels(inp: str) -> str:
    return f"{sum(c in 'aeiou' for c in inp.strip())}\n"


def reverse_words(inp: str) -> str:
    return " ".join(reversed(inp.split())) + "\n"


def fib_mod(inp: str) -> str:
    n = int(inp)
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % 1_000_000_007
    return f"{a}\n"


def staircase(inp: str) -> str:
    n = int(inp)
    a, b = 1, 1
    for _ in range(n - 1):
        a, b = b, a + b
    return f"{b if n >= 1 else 1}\n"


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def prime_queries(inp: str) -> str:
    q, *ns = inp.split()
    return "".join("YES\n" if is_prime(int(n)) else "NO\n" for n in ns[: int(q)])


def brackets(inp: str) -> str:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for c in inp.strip():
        if c in "([{":
            stack.append(c)
        elif not stack or stack.pop() != pairs[c]:
            return "NO\n"
    return "YES\n" if not stack else "NO\n"


def digit_sum(inp: str) -> str:
    return f"{sum(int(c) for c in inp.strip())}\n"


def make(rng: random.Random) -> list[dict]:
    def tests(oracle, inputs):
        return {"input": inputs, "output": [oracle(i) for i in inputs]}

    def ints(n, lo, hi):
        return " ".join(str(rng.randint(lo, hi)) for _ in range(n))

    def word(n, alphabet="abcdefghijklmnopqrstuvwxyz"):
        return "".join(rng.choice(alphabet) for _ in range(n))

    problems = [
        dict(
            name="smoke_sum_of_pairs",
            title="Sum of Pairs",
            split="test",
            description=(
                "Sum of Pairs\n\nYou are given t pairs of integers. For each pair (a, b) print a + b.\n\n"
                "Input\nThe first line contains t (1 <= t <= 1000). Each of the next t lines contains two integers "
                "a and b (-10^9 <= a, b <= 10^9).\n\nOutput\n"
                "Print t lines, the i-th containing the sum of the i-th pair."
            ),
            oracle=sum_pairs,
            public=["2\n1 2\n10 -3\n"],
            private=["1\n-5 5\n", "3\n1000000000 1000000000\n-1000000000 -1000000000\n7 8\n"],
            generated=[f"{t}\n" + "".join(f"{ints(2, -(10**9), 10**9)}\n" for _ in range(t)) for t in (5, 50, 1000)],
        ),
        dict(
            name="smoke_largest_element",
            title="Largest Element",
            split="test",
            description=(
                "Largest Element\n\nGiven a list of n integers, print the largest one.\n\nInput\nThe first line "
                "contains n (1 <= n <= 2*10^5). The second line contains n integers, each between -10^18 and 10^18."
                "\n\nOutput\nPrint the maximum."
            ),
            oracle=largest,
            public=["3\n4 9 2\n"],
            private=["1\n-7\n", "4\n-1000000000000000000 -3 -2 -5\n"],
            generated=[f"{n}\n{ints(n, -(10**18), 10**18)}\n" for n in (10, 1000, 20000)],
        ),
        dict(
            name="smoke_vowel_counter",
            title="Vowel Counter",
            split="test",
            description=(
                "Vowel Counter\n\nCount the vowels (a, e, i, o, u) in a word.\n\nInput\nOne line with a word of "
                "1 to 10^5 lowercase Latin letters.\n\nOutput\nPrint the number of vowels in the word."
            ),
            oracle=vowels,
            public=["programming\n"],
            private=["rhythm\n", "aeiou\n"],
            generated=[f"{word(n)}\n" for n in (1, 30, 20000)],
        ),
        dict(
            name="smoke_word_reversal",
            title="Word Reversal",
            split="test",
            description=(
                "Word Reversal\n\nPrint the words of a sentence in reverse order.\n\nInput\nOne line with 1 to 10^4 "
                "words of lowercase letters separated by single spaces.\n\nOutput\nThe same words in reverse order, "
                "separated by single spaces."
            ),
            oracle=reverse_words,
            public=["hello big world\n"],
            private=["single\n", "a b c d e f\n"],
            generated=[" ".join(word(rng.randint(1, 8)) for _ in range(n)) + "\n" for n in (3, 100, 3000)],
        ),
        dict(
            name="smoke_fibonacci_remainder",
            title="Fibonacci Remainder",
            split="test",
            description=(
                "Fibonacci Remainder\n\nF(0) = 0, F(1) = 1 and F(k) = F(k-1) + F(k-2). Print F(n) modulo "
                "1000000007.\n\nInput\nOne integer n (0 <= n <= 10^6).\n\nOutput\nF(n) mod 1000000007."
            ),
            oracle=fib_mod,
            public=["10\n"],
            private=["0\n", "1\n", "100\n"],
            generated=["1000000\n", "999999\n", f"{rng.randint(2, 10**6)}\n"],
        ),
        dict(
            name="smoke_staircase_ways",
            title="Staircase Ways",
            split="test",
            description=(
                "Staircase Ways\n\nA staircase has n steps. Each move climbs one or two steps. In how many "
                "different ways can you reach the top?\n\nInput\nOne integer n (1 <= n <= 80).\n\nOutput\nThe "
                "number of ways."
            ),
            oracle=staircase,
            public=["3\n"],
            private=["1\n", "2\n", "10\n"],
            generated=["80\n", "45\n", "64\n"],
        ),
        dict(
            name="smoke_prime_queries",
            title="Prime Queries",
            split="test",
            description=(
                "Prime Queries\n\nFor each of q numbers say whether it is prime.\n\nInput\nThe first line contains "
                "q (1 <= q <= 10). Each of the next q lines contains an integer n (1 <= n <= 10^12).\n\nOutput\n"
                "For each n print YES if it is prime and NO otherwise."
            ),
            oracle=prime_queries,
            public=["3\n2\n9\n13\n"],
            private=["2\n1\n4\n", "2\n999999000001\n1000000007\n"],
            generated=["3\n999999999989\n999999999959\n1000000000000\n"],
        ),
        dict(
            name="smoke_bracket_balance",
            title="Bracket Balance",
            split="test",
            description=(
                "Bracket Balance\n\nA string consists of the characters ()[]{}. Is it a balanced bracket sequence?"
                "\n\nInput\nOne line with 1 to 10^5 bracket characters.\n\nOutput\nYES or NO."
            ),
            oracle=brackets,
            public=["([]{})\n", "(()\n"],
            private=["([)]\n", "]\n", "{[()()]}\n"],
            generated=["(" * 50000 + ")" * 50000 + "\n", "([" * 1000 + "])" * 1000 + "\n"],
        ),
        dict(
            name="smoke_smallest_element",
            title="Smallest Element",
            split="dev",
            description=(
                "Smallest Element\n\nGiven a list of n integers, print the smallest one.\n\nInput\nThe first line "
                "contains n (1 <= n <= 2*10^5). The second line contains n integers, each between -10^9 and 10^9."
                "\n\nOutput\nPrint the minimum."
            ),
            oracle=smallest,
            public=["3\n4 9 2\n"],
            private=["1\n5\n", "3\n-1 -9 0\n"],
            generated=[f"{n}\n{ints(n, -(10**9), 10**9)}\n" for n in (10, 20000)],
        ),
        dict(
            name="smoke_digit_sum",
            title="Digit Sum",
            split="dev",
            description=(
                "Digit Sum\n\nPrint the sum of the decimal digits of a (possibly very long) number.\n\nInput\nOne "
                "line with a number of 1 to 1000 digits.\n\nOutput\nThe sum of its digits."
            ),
            oracle=digit_sum,
            public=["12345\n"],
            private=["0\n", "99999999999999999999\n"],
            generated=[word(1000, "0123456789") + "\n"],
        ),
    ]
    records = []
    for p in problems:
        oracle = p.pop("oracle")
        records.append(
            {
                "name": p["name"],
                "title": p["title"],
                "split": p["split"],
                "description": p["description"],
                "public_tests": tests(oracle, p["public"]),
                "private_tests": tests(oracle, p["private"]),
                "generated_tests": tests(oracle, p["generated"]),
                "time_limit_s": 2.0,
                "memory_limit_bytes": 256 * 1024 * 1024,
                "source": "rebench smoke (written for this project)",
            }
        )
    return records


if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "sandbox" / "smoke_problems.json"
    out.write_text(json.dumps(make(random.Random(20261130)), indent=1) + "\n")
    print(f"wrote {out}")
