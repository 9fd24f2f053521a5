# agent_loop.py: the controller in your loop, calibrated on your logs (params.nc from bpc estimate)
import random

from bpc import Controller

ctrl = Controller.from_params("params.nc", cell=("custom", "custom"), costs="costs.json")


def generate():  # your agent writes a patch (here: right 40 % of the time)
    return {"ok": random.random() < 0.4}


critics = {  # your critics: a verdict on the patch, True = pass
    "lint": lambda patch: patch["ok"] or random.random() < 0.7,
    "unit": lambda patch: patch["ok"] if random.random() < 0.9 else not patch["ok"],
}

patch, episode = generate(), ctrl.episode()
while not episode.done:
    decision = episode.decide()  # the action of highest expected utility, with its Q values
    if decision.action == "verify":  # the expensive oracle: hidden tests, a reviewer, CI
        episode.verified(passed=patch["ok"])
    elif decision.action == "regenerate":
        patch = generate()
        episode.regenerated()
    elif decision.action == "stop":
        episode.stop()
    else:  # a critic: buy more evidence
        episode.observe(decision.action, passed=critics[decision.action](patch))
print(episode.outcome, episode.spent, episode.utility)
