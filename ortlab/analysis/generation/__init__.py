"""An LLM decoder as people run it: ``generate`` (the greedy loop, its per-step times, the KV
cache and the profiled generation by phase and layer)."""
