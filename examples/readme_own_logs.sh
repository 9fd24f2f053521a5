python make_logs.py
CRITICS="--critic lint=lint:1 --critic unit=unit:2"  # NAME=COLUMN:COST of one call
echo '{"c_gen": 10, "c_ver": 30, "reward": 100}' > costs.json

bpc estimate my_logs.csv $CRITICS --out params.nc   # prior, tpr/fpr per critic, with intervals
bpc replay my_logs.csv $CRITICS --costs costs.json  # every controller on your pools, cross-fitted
