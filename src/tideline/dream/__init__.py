"""DREAM: LLM consolidation (solidify, comb, wander, dream)."""
