"""An inspect-ai eval whose retries are run by bpc: scorers as critics, the task's scorer as the oracle.

Run from a clone: pip install -e '.[inspect]', then python examples/inspect_attempts.py
The mock model answers 5, then 4, and makes it run offline; pass model="openai/gpt-4o" (say) for a real one.
"""

import tempfile

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, match, scorer
from inspect_ai.solver import TaskState

from bpc import Controller
from bpc.adapters.inspect_ai import episode_attempts


@scorer(metrics=[accuracy()])
def is_number():  # a cheap critic: the answer is a number (it says nothing about which)
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=CORRECT if state.output.completion.strip().isdigit() else INCORRECT)

    return score


@scorer(metrics=[accuracy()])
def is_even():  # a noisier critic: an even answer
    async def score(state: TaskState, target: Target) -> Score:
        text = state.output.completion.strip()
        return Score(value=CORRECT if text.isdigit() and int(text) % 2 == 0 else INCORRECT)

    return score


# critic = (P(pass | correct), P(pass | wrong), cost); or Controller.from_params("params.nc", cell=...)
ctrl = Controller(
    prior=0.3,
    critics={"number": (0.99, 0.8, 1.0), "even": (0.95, 0.4, 2.0)},
    costs={"c_gen": 10, "c_ver": 30, "reward": 100},
)
task = Task(
    dataset=[Sample(input="What is 2 + 2? Answer with the number only.", target="4")],
    solver=episode_attempts(ctrl, {"number": is_number(), "even": is_even()}),
    scorer=match(),  # the task's own scorer: bpc's verifier
)
answers = [ModelOutput.from_content("mockllm/model", a) for a in ("5", "4")]
for answer in answers:  # token counts given, so the mock model needs no tokenizer download
    answer.usage = ModelUsage(input_tokens=20, output_tokens=1, total_tokens=21)
model = get_model("mockllm/model", custom_outputs=answers)
log = eval(task, model=model, display="none", log_dir=tempfile.mkdtemp())[0]
episode = log.samples[0].metadata["bpc"]
print(f"{log.status}: {episode['outcome']} after {len(episode['moves'])} moves, spent {episode['spent']:g}")
