# make_logs.py: a log of your agent's runs, one row per generated patch (here simulated: 80 tasks,
# 3 patches each, two critics of your own); yours comes from your harness
import numpy as np
import pandas as pd

rng = np.random.default_rng(0)
rows = []
for task in range(80):
    skill = rng.beta(2, 3)  # tasks differ: the patches of one task share a pass rate
    for patch in range(3):
        y = rng.random() < skill  # the verifier's verdict: the hidden tests pass
        rows.append(
            {
                "instance_id": f"task-{task}",
                "patch_id": patch,
                "Y": int(y),
                "lint": rng.random() < (0.95 if y else 0.70),  # a cheap, weak critic
                "unit": "pass" if rng.random() < (0.90 if y else 0.20) else "fail",  # public tests
            }
        )
pd.DataFrame(rows).to_csv("my_logs.csv", index=False)
