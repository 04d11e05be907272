"""Starting scaffold (the paper's, B.7.4): ask the model once and return its answer as it is.

The harness imports this module and awaits `generate_solution(client, semaphore, problem)` for every problem:
- `client` is an `openai.AsyncOpenAI` connected to the harness's model proxy (the scaffold model);
- `semaphore` is an `asyncio.Semaphore` bounding concurrent API calls: hold it around each request;
- `problem` is a dict with `name`, `title`, `description`, `public_tests` ({"input": [...], "output": [...]}),
  `time_limit_s`, `memory_limit_bytes` (and, for dev problems only, their private and generated tests).
It must return the Rust program's source code as a string.
"""

MODEL = "gpt-3.5-turbo-0125"


async def generate_solution(client, semaphore, problem: dict) -> str:
    prompt = f"Please solve the following coding contest problem in Rust:\n\n{problem['description']}"
    async with semaphore:
        response = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": prompt}],
            temperature=0.1,
        )
    return response.choices[0].message.content or ""
