"""Reinforcement learning for the graph walker: policy, reward, rollouts,
losses and the jitted train step. Pure functions; no files, no printing."""
