"""Stage 4 — replay: controllers on recorded pools → per-instance utilities, Δ, bootstrap CIs."""
