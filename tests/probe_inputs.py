"""The probe inputs of the input layer, written into one folder.

One home for tests/data/test_probes_input.py and benchmarks/probe_table.py: a small log with one
critic ``syn`` and, beside it, the adversarial inputs (cost files with unknown keys, booleans, huge
numbers and deep nesting; deep JSON; huge ids; a small HDF5 file declaring a huge array).
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pandas as pd


def write_probe_inputs(d: Path) -> None:
    """Write the probe inputs into the folder ``d``."""
    rng = np.random.default_rng(0)
    rows = []
    for t in range(30):
        for j in range(3):
            y = int(rng.random() < 0.5)
            rows.append(
                {
                    "instance_id": f"T{t}",
                    "patch_id": j,
                    "Y": y,
                    "syn": int(rng.random() < (0.9 if y else 0.3)),
                }
            )
    log = pd.DataFrame(rows)
    log.to_csv(d / "my.csv", index=False)
    big = log.astype({"instance_id": object})
    big.loc[5, "instance_id"] = "x" * 10_000_000
    big.to_csv(d / "bigid.csv", index=False)
    patch = log.astype({"patch_id": object})
    patch.loc[7, "patch_id"] = "9" * 5000
    patch.to_csv(d / "bigpatch.csv", index=False)
    costs = {"c_gen": 10, "c_ver": 30, "reward": 100}
    (d / "costs.json").write_text(json.dumps(costs))
    (d / "costs_syn.json").write_text(json.dumps({**costs, "critic": {"syn": 1}}))
    (d / "costs_critics.json").write_text(json.dumps({**costs, "critics": {"syn": 1}}))
    (d / "costs_csyn.json").write_text(json.dumps({**costs, "c_syn": 1}))
    (d / "costs_bool.json").write_text(json.dumps({**costs, "c_gen": True}))
    (d / "costs_400.json").write_text('{"c_gen": 1' + "0" * 400 + ', "c_ver": 30, "reward": 100}')
    (d / "costs_deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "costs_deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with open(d / "deep.jsonl", "w") as fh:
        for r in rows[:3]:
            fh.write(json.dumps(r) + "\n")
        fh.write(
            '{"instance_id": "T9", "patch_id": 0, "Y": 1, "syn": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
        )
    with h5py.File(d / "big.nc", "w") as fh:
        fh.create_dataset(
            "prior", shape=(16000, 16000), dtype="f8", chunks=(1000, 1000), compression="gzip", fillvalue=0.5
        )
    pd.DataFrame(
        {"benchmark": ["custom"], "generator": ["custom"], "instance_id": ["T1"], "method": ["self_refine"]}
    ).assign(step=0).to_csv(d / "a,b.csv", index=False)
